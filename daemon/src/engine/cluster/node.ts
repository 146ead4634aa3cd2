/**
 * The running parts of swarm mode on this node. A manager runs an etcd member (through the host), keeps the
 * store in memory, holds its session and campaigns for leadership (leadership.ts), serves the dispatcher on the
 * swarm port, and runs its own tasks through its agent; a worker runs only its agent, fed by a manager's
 * dispatcher through its WorkerSession. A node whose role changes in the store turns into the other kind.
 * ClusterService (cluster.ts) drives these parts from the API.
 */
import type { EventBus } from '../events.js';
import { log } from '../../util/log.js';
import { Agent, type AgentSource, type TaskContainers } from './agent.js';
import type { ClusterHost, EtcdMember, ManagerKeys, NodeCertificates, NodeState } from '../../host/cluster.js';
import { DEFAULT_SWARM_PORT, ETCD_CLIENT_PORT, joinHostPort, localEtcdEndpoint, splitHostPort } from './addresses.js';
import { lockKeys, type SwarmKeys } from './autolock.js';
import { sealer, type Sealer } from './crypt.js';
import { DispatcherServer, WorkerSession, requestCertificate, type JoinAnswer } from './dispatcher.js';
import { connectStore, memberOptions, removeMember, waitPromoted } from './etcd.js';
import { bridgeSession, campaign, holdSession, type ManagerParts } from './leadership.js';
import { LogRequests, LogShipper, type LogReadOptions, type LogRecord } from './remotelogs.js';
import { ClusterObjects } from './objects.js';
import { ClusterNetworks } from './network/networks.js';
import { addressPools, nodeNetworks } from './network/attachments.js';
import { withNetworkKeys } from './network/keys.js';
import { applyTaskStatus, heartbeatSeconds } from './status.js';
import { clusterTLSInfo, needsRenewal, rotationInProgress } from './certs.js';
import { completeRotation } from './rootca.js';
import { certValidity, newCertificate, RenewalSchedule, renewOnManager, type Validity } from './renewal.js';
import type { ClusterStore } from './store.js';
import type { Obj } from './types.js';

export interface NodeDescription {
  hostname: string;
  os: string;
  arch: string;
  ncpu: number;
  memTotal: number;
  engineVersion: string;
  engineLabels: Record<string, string>;
}

export interface ClusterDeps {
  host: ClusterHost;
  containers: TaskContainers;
  events: EventBus;
  describe(): Promise<NodeDescription>;
}

/** The local node's swarm state, as /info and /_ping report it. */
export interface LocalSwarmStatus {
  NodeID: string;
  NodeAddr: string;
  LocalNodeState: 'inactive' | 'pending' | 'active' | 'error' | 'locked';
  ControlAvailable: boolean;
  Error: string;
  RemoteManagers: Array<{ NodeID: string; Addr: string }> | null;
  [key: string]: unknown;
}

export class SwarmNode {
  protected state?: NodeState;
  protected certs?: NodeCertificates & ManagerKeys;
  protected manager?: ManagerParts;
  protected worker?: WorkerSession;
  protected agent?: Agent;
  protected dispatcher?: DispatcherServer;
  protected phase: 'inactive' | 'pending' | 'active' | 'error' | 'locked' = 'inactive';
  protected error = '';
  protected leaderId?: string;
  /** The swarm's unlock key while autolock is on: this manager's keys are written sealed under it. */
  protected currentUnlockKey?: string;
  private keysSaved: Promise<unknown> = Promise.resolve();
  private promoting = false;
  private demoting = false;
  /** One lifecycle operation (init, join, leave, update, a certificate's renewal) at a time. */
  protected queue: Promise<unknown> = Promise.resolve();
  protected readonly renewal = new RenewalSchedule(() => this.renewCertificate(), undefined, undefined, () => (this.manager ? needsRenewal(this.manager.store, this.state!.nodeId) : !!this.worker?.renewRequested));

  constructor(protected readonly deps: ClusterDeps) {}

  protected serial<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.queue.then(fn, fn);
    this.queue = run.catch(() => undefined);
    return run;
  }

  // -- state for /info and /_ping --

  status(): LocalSwarmStatus {
    if (!this.state) return { NodeID: '', NodeAddr: '', LocalNodeState: this.phase === 'pending' ? 'pending' : 'inactive', ControlAvailable: false, Error: this.error, RemoteManagers: null };
    const s: LocalSwarmStatus = {
      NodeID: this.state.nodeId,
      NodeAddr: this.state.advertiseAddr,
      LocalNodeState: this.phase === 'inactive' ? 'pending' : this.phase,
      ControlAvailable: this.state.role === 'manager' && !!this.manager,
      Error: this.error,
      RemoteManagers: this.remoteManagers(),
    };
    if (this.manager) {
      const nodes = this.manager.store.list('nodes');
      s.Nodes = nodes.length;
      s.Managers = nodes.filter((n) => n.obj.Spec?.Role === 'manager').length;
      const cluster = this.clusterEntry();
      if (cluster) s.Cluster = this.clusterView(cluster.obj, cluster.modRev);
      if (s.Managers === 2) s.Warnings = ['WARNING: Running Swarm in a two-manager configuration. This configuration provides no fault tolerance, and poses a high risk to lose control over the cluster. Refer to https://docs.docker.com/engine/swarm/admin_guide/ to configure the Swarm for fault-tolerance.'];
    }
    return s;
  }

  private remoteManagers(): Array<{ NodeID: string; Addr: string }> {
    if (this.manager) {
      return this.manager.store
        .list('nodes')
        .filter((n) => n.obj.ManagerStatus)
        .map((n) => ({ NodeID: n.obj.ID, Addr: n.obj.ManagerStatus.Addr }));
    }
    return this.worker?.managers() ?? this.state!.managers.map((Addr) => ({ NodeID: '', Addr }));
  }

  protected clusterEntry() {
    return this.manager?.store.get('cluster', 'default');
  }

  protected clusterView(c: Obj, version: number): Obj {
    return {
      ID: c.ID,
      Version: { Index: version },
      CreatedAt: c.CreatedAt,
      UpdatedAt: c.UpdatedAt,
      Spec: c.Spec,
      TLSInfo: clusterTLSInfo(c),
      RootRotationInProgress: this.manager ? rotationInProgress(this.manager.store) : false,
      DataPathPort: c.DataPathPort ?? 4789,
      DefaultAddrPool: c.DefaultAddrPool ?? ['10.0.0.0/8'],
      SubnetSize: c.SubnetSize ?? 24,
    };
  }

  /** The log of a task on another node, streamed to this manager's dispatcher (undefined off a manager). */
  remoteLogs(task: Obj, opts: LogReadOptions): AsyncIterable<LogRecord[]> | undefined {
    return this.manager?.logs.read(task, opts);
  }

  private logShipper(): LogShipper {
    return new LogShipper(() => this.certs!, this.deps.containers.readLog);
  }

  /** A new certificate for this node, put in use by every part that runs, and written to disk. */
  private renewCertificate(): Promise<Validity> {
    return this.serial(async () => {
      await this.useCertificates(await newCertificate({ host: this.deps.host, state: this.state!, certs: this.certs!, manager: this.manager, worker: this.worker }));
      return certValidity(this.certs!.cert);
    });
  }

  /** The swarm's new root after a rotation (rootca.ts): the node trusts it from now on. */
  protected adoptRoot(root: string): void {
    const adopt = async () => {
      // The first root's key some managers kept on disk goes: the store holds the swarm's root key.
      if (this.certs && this.certs.ca !== root) await this.useCertificates({ ...this.certs, ca: root, caKey: undefined });
    };
    if (this.certs && this.certs.ca !== root) void this.serial(adopt).catch((err: unknown) => log.warn('swarm: could not take the swarm\'s new root CA', { error: String(err) }));
  }

  private async useCertificates(next: SwarmKeys): Promise<void> {
    await this.saveCerts(next);
    this.certs = next;
    this.dispatcher?.setCertificates(next);
    this.worker?.setCertificates(next);
    if (this.manager) await renewOnManager(this.manager, next);
  }

  /** Writes the node's keys, sealed under the unlock key while autolock is on (managers only). */
  protected saveCerts(certs: SwarmKeys): Promise<void> {
    const key = this.currentUnlockKey;
    const save = () => this.deps.host.saveCertificates(key && certs.dataKey ? lockKeys(certs, key) : certs);
    const run = this.keysSaved.then(save, save);
    this.keysSaved = run.catch(() => undefined);
    return run;
  }

  /** Follows the swarm's autolock setting and unlock key: this manager's keys on disk are written again. */
  private followAutolock(store: ClusterStore, seal: Sealer): void {
    const c = store.get('cluster', 'default')?.obj;
    if (!c) return;
    let key: string | undefined;
    try {
      key = c.Spec?.EncryptionConfig?.AutoLockManagers && c.UnlockKey ? seal.open(c.UnlockKey).toString() : undefined;
    } catch (err) {
      log.warn('swarm: the unlock key in the store cannot be opened', { error: String(err) });
      return;
    }
    if (key === this.currentUnlockKey) return;
    this.currentUnlockKey = key;
    const certs = this.certs;
    if (certs) void this.saveCerts(certs).catch((err: unknown) => log.warn('swarm: could not write this node\'s keys', { error: String(err) }));
  }

  /** A manager's parts once its store is reachable: session, leadership, dispatcher and agent. */
  protected async startManager(store: ClusterStore, etcd: EtcdMember): Promise<void> {
    const state = this.state!;
    const seal = sealer(this.certs!.dataKey);
    const objects = new ClusterObjects(store, this.deps.events, () => this.leaderId, seal);
    const networks = new ClusterNetworks(store, () => addressPools(store));
    const parts: ManagerParts = { etcd, store, objects, networks, seal, logs: new LogRequests(store, joinHostPort(state.advertiseAddr, state.swarmPort)) };
    this.manager = parts;
    const nodeStates = new Map(store.list('nodes').map((e) => [e.obj.ID as string, e.obj.Status?.State as string | undefined]));
    const updateStates = new Map(store.list('services').map((e) => [e.obj.ID as string, e.obj.UpdateStatus?.State as string | undefined]));
    store.onChange((kind, id, entry) => {
      if (kind === 'leader' && id === 'current') this.leaderChanged(store, entry?.obj?.NodeID);
      if (kind === 'nodes') this.nodeStateChanged(nodeStates, id, entry?.obj);
      if (kind === 'services') this.updateStateChanged(updateStates, id, entry?.obj);
      if (kind === 'nodes' && id === state.nodeId && entry?.obj?.Spec?.Role === 'worker' && this.manager === parts) this.demote();
      if (kind === 'cluster' && this.manager === parts) this.followAutolock(store, seal);
      if (kind === 'cluster' && this.manager === parts && entry?.obj.TLSInfo?.TrustRoot) this.adoptRoot(entry.obj.TLSInfo.TrustRoot);
      // A rotation that waited for a node that went down ends without it (the leader sees to it).
      if (kind === 'nodes' && this.manager === parts && this.leaderId === state.nodeId) void completeRotation(store).catch(() => undefined);
      if ((kind === 'cluster' || (kind === 'certs' && id === state.nodeId)) && this.manager === parts && needsRenewal(store, state.nodeId)) this.renewal.now();
    });
    this.leaderId = store.get('leader', 'current')?.obj?.NodeID;
    this.followAutolock(store, seal);
    // This node's own session: its node is ready while the lease lives.
    parts.session = await holdSession(store, state.nodeId, state.advertiseAddr, () => this.manager);
    parts.leaderStop = campaign(parts, state.nodeId);
    this.dispatcher = new DispatcherServer({
      store,
      certs: this.certs!,
      seal,
      listen: splitHostPort(state.listenAddr, DEFAULT_SWARM_PORT),
      host: this.deps.host,
      heartbeatSeconds: () => heartbeatSeconds(store),
      logs: parts.logs,
      managerJoined: async () => undefined,
    });
    await this.dispatcher.listen();
    this.agent = new Agent(state.nodeId, { ...this.localSource(store, state.nodeId, seal), ...this.dispatcher.localAttachments(state.nodeId) }, this.deps.containers, this.deps.host, this.logShipper());
    this.agent.start();
    this.renewal.plan(certValidity(this.certs!.cert));
    if (needsRenewal(store, state.nodeId)) this.renewal.now();
    const root = store.get('cluster', 'default')?.obj.TLSInfo?.TrustRoot;
    if (root) this.adoptRoot(root);
  }

  /** A node whose state changed (ready, down: the leader follows the sessions): a node update event with `state.old`/`state.new`, as dockerd sends it. */
  private nodeStateChanged(states: Map<string, string | undefined>, id: string, node: { Status?: { State?: string }; Description?: { Hostname?: string } } | undefined): void {
    if (!node) return void states.delete(id);
    const before = states.get(id);
    const state = node.Status?.State;
    states.set(id, state);
    if (before && state && before !== state) this.deps.events.publish('node', 'update', id, { name: node.Description?.Hostname ?? '', 'state.new': state, 'state.old': before });
  }

  /**
   * A service whose rolling update changed state (updating, completed, paused, rollback_started...): a service
   * update event with `updatestate.old`/`updatestate.new`, as dockerd sends it.
   */
  private updateStateChanged(states: Map<string, string | undefined>, id: string, service: { UpdateStatus?: { State?: string }; Spec?: { Name?: string } } | undefined): void {
    if (!service) return void states.delete(id);
    const before = states.get(id);
    const state = service.UpdateStatus?.State;
    states.set(id, state);
    if (state && before !== state) this.deps.events.publish('service', 'update', id, { name: service.Spec?.Name ?? '', 'updatestate.new': state, 'updatestate.old': before ?? '' });
  }

  /** A new leader (or none): node update events with `leader.old`/`leader.new`, as dockerd sends them. */
  private leaderChanged(store: ClusterStore, leader: string | undefined): void {
    const before = this.leaderId;
    this.leaderId = leader;
    if (before === leader) return;
    const name = (nodeId: string) => store.get('nodes', nodeId)?.obj?.Description?.Hostname ?? '';
    if (before) this.deps.events.publish('node', 'update', before, { 'leader.new': 'false', 'leader.old': 'true', name: name(before) });
    if (leader) this.deps.events.publish('node', 'update', leader, { 'leader.new': 'true', 'leader.old': 'false', name: name(leader) });
  }

  /** The agent's source on a manager: the store itself. */
  protected localSource(store: ClusterStore, nodeId: string, seal: Sealer): AgentSource {
    return {
      ready: () => true,
      tasks: () => store.list('tasks').map((e) => e.obj).filter((t) => t.NodeID === nodeId),
      secret: (id) => {
        const s = store.get('secrets', id)?.obj;
        return s && { ...s, Spec: { ...s.Spec, Data: seal.open(s.Spec.Data ?? '').toString('base64') } };
      },
      config: (id) => store.get('configs', id)?.obj,
      onChange: (fn) => store.onChange((kind) => {
        if (kind === 'tasks' || kind === 'secrets' || kind === 'configs' || kind === 'networks' || kind === 'netkeys' || kind === 'attachments') fn();
      }),
      report: async (taskId, status) => {
        await applyTaskStatus(store, taskId, status);
      },
      logRequests: () => store.list('logs').map((e) => e.obj).filter((r) => r.NodeID === nodeId),
      networks: () => withNetworkKeys(nodeNetworks(store, nodeId), store, seal),
    };
  }

  /**
   * Starts this node's etcd member as a new member of the cluster (added by the manager that answered), waits
   * until it is promoted from learner, and runs the manager's parts.
   */
  protected async becomeManager(answer: JoinAnswer): Promise<void> {
    const state = this.state!;
    const host = this.deps.host;
    await host.wipeEtcd();
    const etcd = host.startEtcd(memberOptions(state, this.certs!.key, { initialState: 'existing', initialCluster: answer.initialCluster! }));
    try {
      await etcd.ready();
      await waitPromoted(answer.etcdEndpoints, state.nodeId, this.certs!);
      state.role = 'manager';
      state.etcdEndpoints = [`https://${joinHostPort(state.advertiseAddr, ETCD_CLIENT_PORT)}`, ...answer.etcdEndpoints];
      state.managers = [joinHostPort(state.advertiseAddr, state.swarmPort), ...answer.managers];
      const store = await connectStore(localEtcdEndpoint(state.advertiseAddr), this.certs!);
      await host.saveState(state);
      await this.startManager(store, etcd);
    } catch (err) {
      await etcd.stop();
      throw err;
    }
  }

  /** A worker whose node was promoted: a manager certificate and an etcd member, then the manager's parts. */
  protected promote(): void {
    if (this.promoting || this.state?.role !== 'worker' || !this.worker) return;
    this.promoting = true;
    void this.serial(async () => {
      const worker = this.worker;
      if (!this.state || this.state.role !== 'worker' || !worker) return;
      const { key: nodeKey, csr } = await this.deps.host.createKeyAndRequest();
      const answer = await worker.requestCertificate(csr, this.state.swarmPort);
      if (answer.role !== 'manager') return;
      this.agent?.stop();
      this.agent = undefined;
      await worker.stop({ announce: true }); // its session lives out its lease through the promotion
      this.worker = undefined;
      const previous = this.certs!;
      // The etcd member reads the certificate files: the manager's certificate is on disk before it starts.
      this.certs = { ca: previous.ca, cert: answer.cert, key: nodeKey, dataKey: answer.dataKey };
      try {
        await this.saveCerts(this.certs);
        await this.becomeManager(answer);
        log.info('swarm: this node is now a manager');
      } catch (err) {
        this.certs = previous;
        await this.saveCerts(previous).catch(() => undefined);
        this.startWorker();
        throw err;
      }
    })
      .catch((err: unknown) => {
        log.warn('swarm: promotion failed; trying again', { error: err instanceof Error ? err.message : String(err) });
        setTimeout(() => this.promote(), 2000).unref();
      })
      .finally(() => {
        this.promoting = false;
      });
  }

  /** A manager whose node was demoted: its etcd member goes, a worker certificate comes, and it runs as worker. */
  protected demote(): void {
    if (this.demoting || this.state?.role !== 'manager' || !this.manager) return;
    this.demoting = true;
    void this.serial(async () => {
      const m = this.manager;
      const state = this.state;
      if (!m || !state || state.role !== 'manager') return;
      const others = m.store.list('nodes').filter((n) => n.obj.ManagerStatus && n.obj.ID !== state.nodeId).map((n) => n.obj.ManagerStatus.Addr as string);
      if (others.length === 0) return;
      // Out of etcd's membership first (the member stops then), while the others keep their quorum (see bridgeSession).
      await bridgeSession(m.store, state.nodeId, state.advertiseAddr, Math.max(10, 3 * heartbeatSeconds(m.store)));
      await removeMember(m.store.client, state.nodeId);
      const { key: nodeKey, csr } = await this.deps.host.createKeyAndRequest();
      let answer: JoinAnswer | undefined;
      for (const addr of others) {
        answer = await requestCertificate(splitHostPort(addr, DEFAULT_SWARM_PORT), this.certs!, csr, state.swarmPort).catch(() => undefined);
        if (answer) break;
      }
      if (!answer || answer.role !== 'worker') throw new Error('no manager gave this node a worker certificate');
      this.agent?.stop();
      this.agent = undefined;
      await this.dispatcher?.close();
      this.dispatcher = undefined;
      this.manager = undefined;
      await m.leaderStop?.();
      await m.store.close().catch(() => undefined);
      await m.etcd.stop();
      await this.deps.host.wipeEtcd();
      this.certs = { ca: this.certs!.ca, cert: answer.cert, key: nodeKey };
      this.currentUnlockKey = undefined;
      await this.saveCerts(this.certs);
      state.role = 'worker';
      state.managers = others;
      state.etcdEndpoints = [];
      await this.deps.host.saveState(state);
      this.startWorker();
      log.info('swarm: this node is now a worker');
    })
      .catch((err: unknown) => {
        log.warn('swarm: demotion failed; trying again', { error: err instanceof Error ? err.message : String(err) });
        setTimeout(() => this.demote(), 2000).unref();
      })
      .finally(() => {
        this.demoting = false;
      });
  }

  protected startWorker(): void {
    const state = this.state!;
    this.worker = new WorkerSession({
      nodeId: state.nodeId,
      managers: () => this.state?.managers ?? [],
      certs: this.certs!,
      advertiseAddr: state.advertiseAddr,
      onManagers: (managers) => {
        if (!this.state || managers.length === 0) return;
        if (JSON.stringify(managers) === JSON.stringify(this.state.managers)) return;
        this.state.managers = managers;
        void this.deps.host.saveState(this.state).catch(() => undefined);
      },
      onRole: (role) => {
        if (role === 'manager') this.promote();
      },
      onRenew: () => this.renewal.now(),
      onTrustRoot: (root) => this.adoptRoot(root),
    });
    this.worker.start();
    this.agent = new Agent(state.nodeId, this.worker, this.deps.containers, this.deps.host, this.logShipper());
    this.agent.start();
    this.renewal.plan(certValidity(this.certs!.cert));
  }

  /** Stops every running part of swarm mode on this node (its state stays on disk). */
  protected async teardown(opts: { keepSession?: boolean } = {}): Promise<void> {
    this.renewal.stop();
    await this.agent?.halt();
    this.agent = undefined;
    // A daemon that only stops tells its manager, so that its node is not taken for dead before its lease ends.
    await this.worker?.stop({ announce: opts.keepSession });
    this.worker = undefined;
    await this.dispatcher?.close();
    this.dispatcher = undefined;
    const m = this.manager;
    this.manager = undefined;
    if (m) {
      // Leadership is handed over at once; the node's session is kept when the daemon only stops (it lives out
      // its lease: a daemon back within the heartbeat window finds its node ready and its tasks in place).
      await m.leaderStop?.();
      if (!opts.keepSession) await m.session?.revoke();
      await m.store.close().catch(() => undefined);
      await m.etcd.stop();
    }
  }
}
