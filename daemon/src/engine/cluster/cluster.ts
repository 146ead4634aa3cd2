/**
 * Swarm mode on this node: init, join, leave, the swarm's inspect and update, the node's state for /info and
 * /_ping, and its return into the swarm when the daemon starts again. A manager runs an etcd member (through
 * the host), keeps the store in memory, campaigns for leadership (the leader runs the orchestrator), serves
 * the dispatcher on the swarm port, and runs its own tasks through its agent; a worker runs only its agent,
 * fed by a manager's dispatcher.
 */
import { randomBytes } from 'node:crypto';
import net from 'node:net';
import type { Etcd3, IOptions } from 'etcd3';
import { InvalidParameter, NotInSwarm, Unavailable } from '../../errors.js';
import type { EventBus } from '../events.js';
import { log } from '../../util/log.js';
import { Agent, type AgentSource, type TaskContainers } from './agent.js';
import type { ClusterHost, EtcdMember, ManagerKeys, NodeCertificates, NodeState } from '../../host/cluster.js';
import { newDataKey, sealer, type Sealer } from './crypt.js';
import { ClusterObjects } from './objects.js';
import { Orchestrator } from './orchestrator.js';
import { ClusterStore, key, type Fence } from './store.js';
import { caDigest, newJoinToken, newUnlockKey } from './tokens.js';
import { defaultSwarmSpec, newObjectId, now, swarmSpecDefaults, type Obj } from './types.js';
import { applyTaskStatus, heartbeatSeconds } from './status.js';
import { DispatcherServer, WorkerSession, fetchRemoteCA, requestCertificate, requestJoin, type JoinAnswer } from './dispatcher.js';

/**
 * etcd's client (grpc-js and its protobufs) and cockatiel, loaded at the first connection to a swarm's store:
 * they took a few hundred ms to load here, and a daemon outside a swarm never uses them.
 */
let etcdClient: Promise<[typeof import('etcd3'), typeof import('cockatiel')]> | undefined;
const loadEtcdClient = () => (etcdClient ??= Promise.all([import('etcd3'), import('cockatiel')]));

export const NOT_A_MANAGER = 'This node is not a swarm manager. Use "docker swarm init" or "docker swarm join" to connect this node to swarm and try again.';
export const NOT_IN_SWARM = 'This node is not part of a swarm';
export const WORKER_NOT_MANAGER = 'This node is not a swarm manager. Worker nodes can\'t be used to view or modify cluster state. Please run this command on a manager node or promote the current node to a manager.';
const ALREADY_IN_SWARM = 'This node is already part of a swarm. Use "docker swarm leave" to leave this swarm and join another one.';

export const ETCD_CLIENT_PORT = 2379;
export const ETCD_PEER_PORT = 2380;
const DEFAULT_SWARM_PORT = 2377;
const LEADER_TTL = 2;

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

const isObject = (v: unknown): v is Obj => v !== null && typeof v === 'object' && !Array.isArray(v);

/** Splits "host:port" (or "[v6]:port", or a bare host) with a default port. */
export function splitHostPort(value: string, defaultPort: number): { host: string; port: number } {
  const v6 = /^\[([^\]]+)\](?::(\d+))?$/.exec(value);
  if (v6) return { host: v6[1]!, port: v6[2] ? Number(v6[2]) : defaultPort };
  const i = value.lastIndexOf(':');
  if (i >= 0 && value.indexOf(':') === i) {
    const port = value.slice(i + 1);
    if (!/^\d{1,5}$/.test(port) || Number(port) < 1 || Number(port) > 65535) throw new InvalidParameter(`invalid port in address ${JSON.stringify(value)}`);
    return { host: value.slice(0, i), port: Number(port) };
  }
  return { host: value, port: defaultPort };
}

const joinHostPort = (host: string, port: number) => (host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`);

/** A manager's running parts. */
interface ManagerParts {
  etcd: EtcdMember;
  store: ClusterStore;
  objects: ClusterObjects;
  session?: { revoke(): Promise<void> };
  orchestrator?: Orchestrator;
  leaderStop?: () => Promise<void>;
}

export class ClusterService {
  private state?: NodeState;
  private certs?: NodeCertificates & ManagerKeys;
  private manager?: ManagerParts;
  private worker?: WorkerSession;
  private agent?: Agent;
  private dispatcher?: DispatcherServer;
  private phase: 'inactive' | 'pending' | 'active' | 'error' = 'inactive';
  private error = '';
  private leaderId?: string;
  private promoting = false;
  private demoting = false;
  /** One lifecycle operation (init, join, leave, update) at a time. */
  private queue: Promise<unknown> = Promise.resolve();

  constructor(private readonly deps: ClusterDeps) {}

  private serial<T>(fn: () => Promise<T>): Promise<T> {
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

  // -- guards for the API --

  /** The manager's objects; throws "not a swarm manager" elsewhere. */
  objects(): ClusterObjects {
    if (this.manager) return this.manager.objects;
    if (this.state) throw new NotInSwarm(WORKER_NOT_MANAGER);
    throw new NotInSwarm(NOT_A_MANAGER);
  }

  requireMember(): void {
    if (!this.state) throw new NotInSwarm(NOT_IN_SWARM);
  }

  get nodeId(): string | undefined {
    return this.state?.nodeId;
  }

  // -- the swarm object --

  private clusterEntry() {
    return this.manager?.store.get('cluster', 'default');
  }

  private clusterView(c: Obj, version: number): Obj {
    return {
      ID: c.ID,
      Version: { Index: version },
      CreatedAt: c.CreatedAt,
      UpdatedAt: c.UpdatedAt,
      Spec: c.Spec,
      TLSInfo: c.TLSInfo,
      RootRotationInProgress: false,
      DataPathPort: c.DataPathPort ?? 4789,
      DefaultAddrPool: c.DefaultAddrPool ?? ['10.0.0.0/8'],
      SubnetSize: c.SubnetSize ?? 24,
    };
  }

  inspect(): Obj {
    this.objects();
    const e = this.clusterEntry();
    if (!e) throw new Unavailable('the swarm\'s store has no cluster object yet');
    return { ...this.clusterView(e.obj, e.modRev), JoinTokens: e.obj.JoinTokens };
  }

  unlockKey(): Obj {
    this.objects();
    const e = this.clusterEntry();
    return { UnlockKey: e?.obj.Spec?.EncryptionConfig?.AutoLockManagers ? e.obj.UnlockKey ?? '' : '' };
  }

  async update(version: string | undefined, body: unknown, flags: { worker: boolean; manager: boolean; unlockKey: boolean }): Promise<void> {
    const store = this.objects() && this.manager!.store;
    if (version === undefined || !/^\d+$/.test(version)) throw new InvalidParameter(`invalid swarm version: ${JSON.stringify(version ?? '')}`);
    if (!isObject(body)) throw new InvalidParameter('swarm spec must be a JSON object');
    const e = this.clusterEntry()!;
    const c = structuredClone(e.obj);
    c.Spec = mergeSwarmSpec(c.Spec, body);
    if (body.EncryptionConfig?.AutoLockManagers) throw new InvalidParameter('autolock is not supported by this engine yet');
    if (flags.worker) c.JoinTokens.Worker = newJoinToken(c.TLSInfo.TrustRoot);
    if (flags.manager) c.JoinTokens.Manager = newJoinToken(c.TLSInfo.TrustRoot);
    if (flags.unlockKey) c.UnlockKey = newUnlockKey();
    c.UpdatedAt = now();
    await store.update('cluster', 'default', Number(version), c);
  }

  // -- init --

  async init(body: unknown): Promise<string> {
    return this.serial(async () => {
      const req = isObject(body) ? body : {};
      if (this.state && req.ForceNewCluster === true && this.state.role === 'manager') return this.forceNewCluster();
      if (this.state) throw new NotInSwarm(ALREADY_IN_SWARM);
      if (req.ForceNewCluster) throw new InvalidParameter('ForceNewCluster needs a node that is a manager of a swarm');
      if (req.AutoLockManagers || req.Spec?.EncryptionConfig?.AutoLockManagers) throw new InvalidParameter('autolock is not supported by this engine yet');
      const { listen, advertise } = this.addresses(req);
      const nodeId = newObjectId(randomBytes(16));
      const clusterId = newObjectId(randomBytes(16));
      const host = this.deps.host;
      this.phase = 'pending';
      try {
        const ca = await host.createRootCA();
        const { key: nodeKey, csr } = await host.createKeyAndRequest();
        const cert = await host.signNodeCertificate(ca, csr, { nodeId, clusterId, role: 'manager', ips: [advertise.host] });
        this.certs = { ca: ca.cert, cert, key: nodeKey, caKey: ca.key, dataKey: newDataKey() };
        await host.saveCertificates(this.certs);
        const state: NodeState = {
          nodeId,
          clusterId,
          role: 'manager',
          listenAddr: joinHostPort(listen.host, listen.port),
          advertiseAddr: advertise.host,
          swarmPort: advertise.port,
          managers: [joinHostPort(advertise.host, advertise.port)],
          etcdEndpoints: [`https://${joinHostPort(advertise.host, ETCD_CLIENT_PORT)}`],
        };
        const etcd = host.startEtcd({
          name: nodeId,
          address: advertise.host,
          clientPort: ETCD_CLIENT_PORT,
          peerPort: ETCD_PEER_PORT,
          initialState: 'new',
          initialCluster: `${nodeId}=https://${joinHostPort(advertise.host, ETCD_PEER_PORT)}`,
          clusterToken: clusterId,
        });
        await etcd.ready();
        const store = await this.connect(state.etcdEndpoints);
        const t = now();
        const spec = swarmSpecDefaults(mergeSwarmSpec(defaultSwarmSpec(), isObject(req.Spec) ? req.Spec : {}));
        const cluster: Obj = {
          ID: clusterId,
          CreatedAt: t,
          UpdatedAt: t,
          Spec: spec,
          TLSInfo: tlsInfo(ca.cert),
          JoinTokens: { Worker: newJoinToken(ca.cert), Manager: newJoinToken(ca.cert) },
          RootCA: { Cert: ca.cert, Key: sealer(this.certs.dataKey).seal(Buffer.from(ca.key)) },
          DataPathPort: Number(req.DataPathPort) || 4789,
          DefaultAddrPool: Array.isArray(req.DefaultAddrPool) && req.DefaultAddrPool.length ? req.DefaultAddrPool : ['10.0.0.0/8'],
          SubnetSize: Number(req.SubnetSize) || 24,
        };
        await store.create('cluster', 'default', cluster);
        await store.create('nodes', nodeId, await this.nodeObject(nodeId, 'manager', state, req.Availability));
        this.state = state;
        await host.saveState(state);
        await this.startManager(store, etcd);
        this.phase = 'active';
        this.error = '';
        this.deps.events.publish('node', 'create', nodeId, { name: (await this.deps.describe()).hostname });
        return nodeId;
      } catch (err) {
        log.warn('swarm init failed', { error: err instanceof Error ? err.message : String(err) });
        await this.teardown();
        await host.wipe().catch(() => undefined);
        this.state = undefined;
        this.phase = 'inactive';
        throw err instanceof InvalidParameter || err instanceof Unavailable ? err : new Unavailable(`swarm init failed: ${err instanceof Error ? err.message : String(err)}`);
      }
    });
  }

  /**
   * `swarm init --force-new-cluster` on a manager whose swarm lost its quorum: its etcd member starts again as
   * the only member, with the data it has; the other managers are demoted in the store (they must join again).
   */
  private async forceNewCluster(): Promise<string> {
    const state = this.state!;
    log.warn('swarm: forcing a new cluster from this manager\'s data');
    await this.teardown({ keepSession: true });
    const etcd = this.deps.host.startEtcd({
      name: state.nodeId,
      address: state.advertiseAddr,
      clientPort: ETCD_CLIENT_PORT,
      peerPort: ETCD_PEER_PORT,
      initialState: 'existing',
      initialCluster: `${state.nodeId}=https://${joinHostPort(state.advertiseAddr, ETCD_PEER_PORT)}`,
      clusterToken: state.clusterId,
      forceNewCluster: true,
    });
    try {
      await etcd.ready();
      state.etcdEndpoints = [`https://${joinHostPort(state.advertiseAddr, ETCD_CLIENT_PORT)}`];
      state.managers = [joinHostPort(state.advertiseAddr, state.swarmPort)];
      await this.deps.host.saveState(state);
      const store = await this.connect(state.etcdEndpoints);
      for (const n of store.list('nodes')) {
        if (n.obj.ID === state.nodeId || !n.obj.ManagerStatus) continue;
        await store.mutate('nodes', n.obj.ID, (o) => {
          const next: Obj = { ...o, Spec: { ...o.Spec, Role: 'worker' }, UpdatedAt: now() };
          delete next.ManagerStatus;
          return next;
        });
      }
      await this.startManager(store, etcd);
      this.phase = 'active';
      this.error = '';
      return state.nodeId;
    } catch (err) {
      await etcd.stop();
      this.phase = 'error';
      this.error = err instanceof Error ? err.message : String(err);
      throw new Unavailable(`could not force a new cluster: ${this.error}`);
    }
  }

  /** ListenAddr and AdvertiseAddr by the spec's rules (an advertise address is needed when listening on all). */
  private addresses(req: Obj): { listen: { host: string; port: number }; advertise: { host: string; port: number } } {
    if (req.ListenAddr !== undefined && typeof req.ListenAddr !== 'string') throw new InvalidParameter('ListenAddr must be a string');
    if (req.AdvertiseAddr !== undefined && typeof req.AdvertiseAddr !== 'string') throw new InvalidParameter('AdvertiseAddr must be a string');
    const listen = splitHostPort(req.ListenAddr || '0.0.0.0:2377', DEFAULT_SWARM_PORT);
    if (listen.host !== '' && net.isIP(listen.host) === 0) throw new InvalidParameter(`invalid ListenAddr ${JSON.stringify(req.ListenAddr)}: interface names are not supported by this engine, give an IP address`);
    if (listen.host === '') listen.host = '0.0.0.0';
    let advertise: { host: string; port: number };
    if (req.AdvertiseAddr) {
      advertise = splitHostPort(req.AdvertiseAddr, listen.port);
      if (net.isIP(advertise.host) === 0) throw new InvalidParameter(`invalid AdvertiseAddr ${JSON.stringify(req.AdvertiseAddr)}: interface names are not supported by this engine, give an IP address`);
    } else if (listen.host !== '0.0.0.0' && listen.host !== '::') {
      advertise = { host: listen.host, port: listen.port };
    } else {
      const found = this.deps.host.defaultAdvertiseAddr();
      if (!found) throw new InvalidParameter('could not choose an IP address to advertise since this system has no usable address: specify one with --advertise-addr');
      advertise = { host: found, port: listen.port };
    }
    if (advertise.host === '0.0.0.0' || advertise.host === '::') throw new InvalidParameter(`advertise address must be a non-zero IP address`);
    if (!this.deps.host.isLocalAddress(advertise.host)) throw new InvalidParameter(`advertise address ${advertise.host} is not an address of this machine`);
    return { listen, advertise };
  }

  private async nodeObject(nodeId: string, role: 'manager' | 'worker', state: NodeState, availability: unknown): Promise<Obj> {
    const d = await this.deps.describe();
    const t = now();
    const node: Obj = {
      ID: nodeId,
      CreatedAt: t,
      UpdatedAt: t,
      Spec: { Labels: {}, Role: role, Availability: availability === 'drain' || availability === 'pause' ? availability : 'active', Membership: 'accepted' },
      Description: {
        Hostname: d.hostname,
        Platform: { Architecture: d.arch, OS: d.os },
        Resources: { NanoCPUs: d.ncpu * 1e9, MemoryBytes: d.memTotal },
        Engine: { EngineVersion: d.engineVersion, Labels: d.engineLabels, Plugins: [{ Type: 'Log', Name: 'json-file' }, { Type: 'Network', Name: 'bridge' }, { Type: 'Network', Name: 'host' }, { Type: 'Network', Name: 'null' }, { Type: 'Volume', Name: 'local' }] },
        TLSInfo: this.certs ? tlsInfo(this.certs.ca) : undefined,
      },
      Status: { State: 'ready', Addr: state.advertiseAddr },
    };
    if (role === 'manager') node.ManagerStatus = { Reachability: 'reachable', Addr: joinHostPort(state.advertiseAddr, state.swarmPort) };
    return node;
  }

  private async connect(endpoints: string[]): Promise<ClusterStore> {
    const client = await this.client(endpoints);
    const store = new ClusterStore(client);
    await store.start();
    return store;
  }

  /**
   * An etcd client: mutual TLS with the node's certificate, and a member that fails is left aside for a second
   * only (the client's default of 5 s would stall a manager whose only member had a hiccup).
   */
  private async client(endpoints: string[]): Promise<Etcd3> {
    const [{ Etcd3, isRecoverableError }, { circuitBreaker, ConsecutiveBreaker, handleWhen }] = await loadEtcdClient();
    const options: IOptions = {
      hosts: endpoints,
      credentials: { rootCertificate: Buffer.from(this.certs!.ca), privateKey: Buffer.from(this.certs!.key), certChain: Buffer.from(this.certs!.cert) },
      dialTimeout: 5000,
      // A call that cannot finish (no quorum) fails within seconds, as an error the API answers with.
      defaultCallOptions: (context) => (context.isStream ? {} : { deadline: Date.now() + 8000 }),
      faultHandling: {
        host: () => circuitBreaker(handleWhen(isRecoverableError), { halfOpenAfter: 1000, breaker: new ConsecutiveBreaker(5) }),
      },
    };
    return new Etcd3(options);
  }

  /** A manager's parts once its store is reachable: session, leadership, dispatcher and agent. */
  private async startManager(store: ClusterStore, etcd: EtcdMember): Promise<void> {
    const state = this.state!;
    const seal = sealer(this.certs!.dataKey);
    const objects = new ClusterObjects(store, this.deps.events, () => this.leaderId, seal);
    const parts: ManagerParts = { etcd, store, objects };
    this.manager = parts;
    store.onChange((kind, id, entry) => {
      if (kind === 'leader' && id === 'current') this.leaderChanged(store, entry?.obj?.NodeID);
      if (kind === 'nodes' && id === state.nodeId && entry?.obj?.Spec?.Role === 'worker' && this.manager === parts) this.demote();
    });
    this.leaderId = store.get('leader', 'current')?.obj?.NodeID;
    // This node's own session: its node is ready while the lease lives.
    parts.session = await this.holdSession(store, state.nodeId, state.advertiseAddr);
    parts.leaderStop = this.campaign(parts);
    this.dispatcher = new DispatcherServer({
      store,
      certs: this.certs!,
      seal,
      listen: splitHostPort(state.listenAddr, DEFAULT_SWARM_PORT),
      host: this.deps.host,
      heartbeatSeconds: () => heartbeatSeconds(store),
      managerJoined: async () => undefined,
    });
    await this.dispatcher.listen();
    this.agent = new Agent(state.nodeId, this.localSource(store, state.nodeId, seal), this.deps.containers, this.deps.host);
    this.agent.start();
  }

  private async holdSession(store: ClusterStore, nodeId: string, addr: string): Promise<{ revoke(): Promise<void> }> {
    const lease = store.client.lease(Math.max(3, 3 * heartbeatSeconds(store)), { autoKeepAlive: true });
    lease.on('lost', (err) => {
      log.warn('swarm: this node\'s session was lost; opening a new one', { error: err.message });
      if (this.manager?.store === store) {
        void this.holdSession(store, nodeId, addr).then((s) => {
          if (this.manager?.store === store) this.manager.session = s;
          else void s.revoke();
        }).catch(() => undefined);
      }
    });
    await lease.put(key('sessions', nodeId)).value(JSON.stringify({ NodeID: nodeId, Addr: addr }));
    return { revoke: () => within(2000, lease.revoke()) };
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

  /** Campaigns for leadership until stopped: the leader key lives on a short lease; the leader runs the orchestrator. */
  private campaign(parts: ManagerParts): () => Promise<void> {
    const state = this.state!;
    const store = parts.store;
    let stopped = false;
    let lease: ReturnType<Etcd3['lease']> | undefined;
    const leaderKey = key('leader', 'current');
    const stepDown = () => {
      parts.orchestrator?.stop();
      parts.orchestrator = undefined;
    };
    const attempt = async (): Promise<void> => {
      if (stopped) return;
      try {
        if (!lease || lease.revoked()) {
          lease = store.client.lease(LEADER_TTL, { autoKeepAlive: true });
          const mine = lease;
          mine.on('lost', () => {
            if (lease === mine) {
              log.warn('swarm: leadership lease lost');
              stepDown();
              lease = undefined;
              setTimeout(() => void attempt(), 100 + Math.random() * 200).unref();
            }
          });
          await mine.grant();
        }
        const leaseId = await lease.grant();
        const res = await store.client
          .if(leaderKey, 'Create', '==', 0)
          .then(store.client.put(leaderKey).value(JSON.stringify({ NodeID: state.nodeId })).lease(leaseId))
          .commit();
        if (res.succeeded && !stopped) {
          const fence: Fence = { key: leaderKey, revision: Number(res.header.revision) };
          log.info('swarm: this node leads the swarm', { node: state.nodeId });
          parts.orchestrator = new Orchestrator(store, fence);
          parts.orchestrator.start();
        }
      } catch (err) {
        if (!stopped) log.warn('swarm: campaign failed; trying again', { error: err instanceof Error ? err.message : String(err) });
        if (!stopped) setTimeout(() => void attempt(), 1000).unref();
      }
    };
    const unsubscribe = store.onChange((kind, id, entry) => {
      if (kind === 'leader' && id === 'current' && !entry && !stopped) {
        stepDown();
        void attempt();
      }
    });
    void attempt();
    return async () => {
      stopped = true;
      unsubscribe();
      stepDown();
      await within(2000, lease?.revoke());
    };
  }

  /** The agent's source on a manager: the store itself. */
  private localSource(store: ClusterStore, nodeId: string, seal: Sealer): AgentSource {
    return {
      ready: () => true,
      tasks: () => store.list('tasks').map((e) => e.obj).filter((t) => t.NodeID === nodeId),
      secret: (id) => {
        const s = store.get('secrets', id)?.obj;
        return s && { ...s, Spec: { ...s.Spec, Data: seal.open(s.Spec.Data ?? '').toString('base64') } };
      },
      config: (id) => store.get('configs', id)?.obj,
      onChange: (fn) => store.onChange((kind) => {
        if (kind === 'tasks' || kind === 'secrets' || kind === 'configs') fn();
      }),
      report: async (taskId, status) => {
        await applyTaskStatus(store, taskId, status);
      },
    };
  }

  // -- join (see dispatcher.ts for the manager's side) --

  async join(body: unknown): Promise<void> {
    return this.serial(async () => {
      if (this.state) throw new NotInSwarm(ALREADY_IN_SWARM);
      const req = isObject(body) ? body : {};
      if (typeof req.JoinToken !== 'string' || req.JoinToken === '') throw new InvalidParameter('invalid join token: a join token must be given');
      if (!Array.isArray(req.RemoteAddrs) || req.RemoteAddrs.length === 0 || req.RemoteAddrs.some((a: unknown) => typeof a !== 'string')) {
        throw new InvalidParameter('at least 1 RemoteAddr is required to join');
      }
      const { listen, advertise } = this.addresses(req);
      const host = this.deps.host;
      this.phase = 'pending';
      try {
        let lastErr: unknown;
        for (const remote of req.RemoteAddrs as string[]) {
          const addr = splitHostPort(remote, DEFAULT_SWARM_PORT);
          try {
            const ca = await fetchRemoteCA(addr, req.JoinToken);
            const { key: nodeKey, csr } = await host.createKeyAndRequest();
            const d = await this.deps.describe();
            const answer = await requestJoin(addr, ca, {
              token: req.JoinToken,
              csr,
              advertiseAddr: advertise.host,
              swarmPort: advertise.port,
              availability: req.Availability,
              description: d,
            });
            this.certs = { ca, cert: answer.cert, key: nodeKey, dataKey: answer.dataKey };
            await host.saveCertificates(this.certs);
            const state: NodeState = {
              nodeId: answer.nodeId,
              clusterId: answer.clusterId,
              role: answer.role,
              listenAddr: joinHostPort(listen.host, listen.port),
              advertiseAddr: advertise.host,
              swarmPort: advertise.port,
              managers: answer.managers,
              etcdEndpoints: answer.etcdEndpoints,
            };
            this.state = state;
            if (answer.role === 'manager') {
              await this.becomeManager(answer);
            } else {
              await host.saveState(state);
              this.startWorker();
            }
            this.phase = 'active';
            this.error = '';
            return;
          } catch (err) {
            lastErr = err;
            if (err instanceof InvalidParameter) throw err;
          }
        }
        throw lastErr;
      } catch (err) {
        await this.teardown();
        await host.wipe().catch(() => undefined);
        this.state = undefined;
        this.phase = 'inactive';
        if (err instanceof InvalidParameter || err instanceof Unavailable) throw err;
        throw new Unavailable(`could not join the swarm: ${err instanceof Error ? err.message : String(err)}`);
      }
    });
  }

  /**
   * Starts this node's etcd member as a new member of the cluster (added by the manager that answered), waits
   * until it is promoted from learner, and runs the manager's parts.
   */
  private async becomeManager(answer: JoinAnswer): Promise<void> {
    const state = this.state!;
    const host = this.deps.host;
    await host.wipeEtcd();
    const etcd = host.startEtcd({
      name: state.nodeId,
      address: state.advertiseAddr,
      clientPort: ETCD_CLIENT_PORT,
      peerPort: ETCD_PEER_PORT,
      initialState: 'existing',
      initialCluster: answer.initialCluster!,
      clusterToken: state.clusterId,
    });
    try {
      await etcd.ready();
      await this.waitPromoted(answer.etcdEndpoints, state.nodeId);
      state.role = 'manager';
      state.etcdEndpoints = [`https://${joinHostPort(state.advertiseAddr, ETCD_CLIENT_PORT)}`, ...answer.etcdEndpoints];
      state.managers = [joinHostPort(state.advertiseAddr, state.swarmPort), ...answer.managers];
      const store = await this.connect(state.etcdEndpoints);
      await host.saveState(state);
      await this.startManager(store, etcd);
    } catch (err) {
      await etcd.stop();
      throw err;
    }
  }

  /** Waits until this node's etcd member is a voting member (the manager promotes it once it caught up). */
  private async waitPromoted(endpoints: string[], nodeId: string): Promise<void> {
    const client = await this.client(endpoints);
    try {
      const deadline = Date.now() + 60_000;
      for (;;) {
        const list = await client.cluster.memberList({}).catch(() => undefined);
        const me = list?.members?.find((m) => m.name === nodeId);
        if (me && !me.isLearner) return;
        if (Date.now() > deadline) throw new Unavailable('this node\'s etcd member was not promoted in time');
        await new Promise((r) => setTimeout(r, 300));
      }
    } finally {
      client.close();
    }
  }

  /** A worker whose node was promoted: a manager certificate and an etcd member, then the manager's parts. */
  private promote(): void {
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
      worker.stop();
      this.worker = undefined;
      const previous = this.certs!;
      // The etcd member reads the certificate files: the manager's certificate is on disk before it starts.
      this.certs = { ca: previous.ca, cert: answer.cert, key: nodeKey, dataKey: answer.dataKey };
      try {
        await this.deps.host.saveCertificates(this.certs);
        await this.becomeManager(answer);
        log.info('swarm: this node is now a manager');
      } catch (err) {
        this.certs = previous;
        await this.deps.host.saveCertificates(previous).catch(() => undefined);
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
  private demote(): void {
    if (this.demoting || this.state?.role !== 'manager' || !this.manager) return;
    this.demoting = true;
    void this.serial(async () => {
      const m = this.manager;
      const state = this.state;
      if (!m || !state || state.role !== 'manager') return;
      const others = m.store.list('nodes').filter((n) => n.obj.ManagerStatus && n.obj.ID !== state.nodeId).map((n) => n.obj.ManagerStatus.Addr as string);
      if (others.length === 0) return;
      // Out of etcd's membership first (the member stops then), while the others keep their quorum.
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
      await m.session?.revoke();
      await m.store.close().catch(() => undefined);
      await m.etcd.stop();
      await this.deps.host.wipeEtcd();
      this.certs = { ca: this.certs!.ca, cert: answer.cert, key: nodeKey };
      await this.deps.host.saveCertificates(this.certs);
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

  private startWorker(): void {
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
    });
    this.worker.start();
    this.agent = new Agent(state.nodeId, this.worker, this.deps.containers, this.deps.host);
    this.agent.start();
  }

  // -- leave --

  async leave(force: boolean): Promise<void> {
    return this.serial(async () => {
      if (!this.state) throw new NotInSwarm(NOT_IN_SWARM);
      if (this.state.role === 'manager' && !force) {
        const managers = this.manager?.store.list('nodes').filter((n) => n.obj.Spec?.Role === 'manager').length ?? 1;
        let msg = 'You are attempting to leave the swarm on a node that is participating as a manager. ';
        if (managers <= 1) msg += 'Removing the last manager erases all current state of the swarm. Use `--force` to ignore this message. ';
        else msg += `Removing this node leaves ${managers - 1} managers out of ${managers}. Use \`--force\` to ignore this message. `;
        throw new Unavailable(msg.trim());
      }
      const nodeId = this.state.nodeId;
      // A manager of a swarm that goes on takes its etcd member out of the membership first (the others keep
      // their quorum), and its node is demoted in the store.
      const m = this.manager;
      if (m && m.store.list('nodes').some((n) => n.obj.ManagerStatus && n.obj.ID !== nodeId)) {
        await m.store
          .mutate('nodes', nodeId, (n) => {
            const next: Obj = { ...n, Spec: { ...n.Spec, Role: 'worker' }, UpdatedAt: now() };
            delete next.ManagerStatus;
            return next;
          })
          .catch((err: unknown) => log.warn('swarm: could not demote this node before it leaves', { error: String(err) }));
        await removeMember(m.store.client, nodeId).catch((err: unknown) => log.warn('swarm: could not remove this node\'s etcd member', { error: String(err) }));
      }
      await this.agent?.removeAll().catch(() => undefined);
      await this.teardown();
      await this.deps.host.wipe();
      this.state = undefined;
      this.certs = undefined;
      this.phase = 'inactive';
      this.deps.events.publish('node', 'remove', nodeId, {});
    });
  }

  /** Stops every running part of swarm mode on this node (its state stays on disk). */
  private async teardown(opts: { keepSession?: boolean } = {}): Promise<void> {
    this.agent?.stop();
    this.agent = undefined;
    this.worker?.stop();
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

  /**
   * After a node's role changed in the store: a demoted manager's etcd member is removed (its node then
   * turns into a worker when it sees its spec); a promoted worker asks for its manager certificate and etcd
   * member itself, through its session.
   */
  async roleChanged(node: Obj, role: string): Promise<void> {
    // A node that runs removes its own member when it sees its new role (see demote); one that is down cannot.
    if (role !== 'worker' || !this.manager || this.manager.store.get('sessions', node.ID)) return;
    await removeMember(this.manager.store.client, node.ID);
  }

  // -- daemon start and stop --

  /** At daemon start: a node that was in a swarm goes back into it. */
  async restore(): Promise<void> {
    const state = await this.deps.host.loadState();
    if (!state) return;
    const certs = await this.deps.host.loadCertificates();
    if (!certs) {
      log.warn('swarm: the node\'s certificates are missing; leaving the swarm state aside');
      return;
    }
    this.state = state;
    this.certs = certs;
    this.phase = 'pending';
    const run = async () => {
      if (state.role === 'manager') {
        const etcd = this.deps.host.startEtcd({
          name: state.nodeId,
          address: state.advertiseAddr,
          clientPort: ETCD_CLIENT_PORT,
          peerPort: ETCD_PEER_PORT,
          initialState: 'existing',
          initialCluster: `${state.nodeId}=https://${joinHostPort(state.advertiseAddr, ETCD_PEER_PORT)}`,
          clusterToken: state.clusterId,
        });
        await etcd.ready();
        const store = await this.connect(state.etcdEndpoints);
        await this.startManager(store, etcd);
      } else {
        this.startWorker();
      }
      this.phase = 'active';
    };
    // The daemon serves its API meanwhile: the swarm comes back in the background.
    void this.serial(run).catch((err: unknown) => {
      this.phase = 'error';
      this.error = err instanceof Error ? err.message : String(err);
      log.warn('swarm: could not rejoin the swarm', { error: this.error });
    });
  }

  async close(): Promise<void> {
    await this.queue.catch(() => undefined);
    await this.teardown({ keepSession: true });
  }
}

/** Waits for `work` (its failure ignored), at most `ms`: a store out of reach must not hold up a stop. */
function within(ms: number, work: Promise<unknown> | undefined): Promise<void> {
  if (!work) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    work.then(
      () => (clearTimeout(timer), resolve()),
      () => (clearTimeout(timer), resolve()),
    );
  });
}

/**
 * Removes a node's etcd member (none: nothing to do). etcd refuses while a member started recently is not yet
 * connected for long ("unhealthy cluster"): tried again for a while then.
 */
async function removeMember(client: Etcd3, nodeId: string): Promise<void> {
  for (let attempt = 0; ; attempt++) {
    try {
      const members = await client.cluster.memberList({});
      const member = members.members?.find((m) => m.name === nodeId);
      if (!member) return;
      await client.cluster.memberRemove({ ID: member.ID });
      return;
    } catch (err) {
      if (attempt >= 40 || !/unhealthy cluster/.test(String(err))) {
        throw new Unavailable(`can't remove member from the raft: ${err instanceof Error ? err.message : String(err)}`);
      }
      await new Promise((r) => setTimeout(r, 500));
    }
  }
}

function tlsInfo(caPem: string): Obj {
  return { TrustRoot: caPem, CertIssuerSubject: Buffer.from('swarm-ca').toString('base64'), CertIssuerPublicKey: '' };
}

/** The swarm spec after an update: the fields given replace the old ones (the CLI sends the whole spec). */
function mergeSwarmSpec(old: Obj, given: Obj): Obj {
  const spec = structuredClone(old);
  for (const k of ['Name', 'Labels', 'Orchestration', 'Raft', 'Dispatcher', 'CAConfig', 'EncryptionConfig', 'TaskDefaults']) {
    if (given[k] === undefined || given[k] === null) continue;
    if (k === 'Labels' && (!isObject(given[k]) || Object.values(given[k]).some((v) => typeof v !== 'string'))) throw new InvalidParameter('swarm spec: Labels must be a map of strings');
    if (k === 'Name' && typeof given[k] !== 'string') throw new InvalidParameter('swarm spec: Name must be a string');
    if (k === 'Name' || k === 'Labels') spec[k] = given[k];
    else if (isObject(given[k])) spec[k] = { ...spec[k], ...given[k] };
    else throw new InvalidParameter(`swarm spec: ${k} must be an object`);
  }
  if (spec.Dispatcher.HeartbeatPeriod !== undefined && (typeof spec.Dispatcher.HeartbeatPeriod !== 'number' || spec.Dispatcher.HeartbeatPeriod < 0)) {
    throw new InvalidParameter('Dispatcher.HeartbeatPeriod must be a duration of at least 0');
  }
  if (spec.Orchestration.TaskHistoryRetentionLimit !== undefined && (!Number.isInteger(spec.Orchestration.TaskHistoryRetentionLimit) || spec.Orchestration.TaskHistoryRetentionLimit < 0)) {
    throw new InvalidParameter('Orchestration.TaskHistoryRetentionLimit must be a number of at least 0');
  }
  return spec;
}

export { caDigest };
