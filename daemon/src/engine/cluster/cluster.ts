/**
 * Swarm mode on this node: init, join, leave, the swarm's inspect and update, the node's state for /info and
 * /_ping, and its return into the swarm when the daemon starts again. The parts that run meanwhile (etcd
 * member, store, leadership, dispatcher, agent; a worker's session) are SwarmNode's, in node.ts.
 */
import { randomBytes } from 'node:crypto';
import { Conflict, InvalidParameter, NotInSwarm, Unavailable } from '../../errors.js';
import { log } from '../../util/log.js';
import type { NodeState } from '../../host/cluster.js';
import { addresses, dataPathAddr, dataPathPort, DEFAULT_SWARM_PORT, ETCD_CLIENT_PORT, ETCD_PEER_PORT, joinHostPort, localEtcdEndpoint, splitHostPort } from './addresses.js';
import { isLocked, SWARM_LOCKED, unlockKeys, type SwarmKeys } from './autolock.js';
import { newDataKey, sealer } from './crypt.js';
import { fetchRemoteCA, requestJoin } from './dispatcher.js';
import { connectStore, memberOptions, removeMember } from './etcd.js';
import { SwarmNode } from './node.js';
import type { ClusterObjects } from './objects.js';
import type { ClusterNetworks } from './network/networks.js';
import type { NodeNetwork } from './network/attachments.js';
import type { SwarmAttacher } from '../networks/swarm.js';
import { mergeSwarmSpec, nodeObject, tlsInfo } from './swarmspec.js';
import { certExpirySeconds, forceRotate, recordCertificate } from './certs.js';
import { certValidity } from './renewal.js';
import { newRootRotation } from './rootca.js';
import { caDigest, newJoinToken, newUnlockKey } from './tokens.js';
import { defaultSwarmSpec, newObjectId, now, swarmSpecDefaults, type Obj } from './types.js';

export { ETCD_CLIENT_PORT, ETCD_PEER_PORT, splitHostPort };
export type { ClusterDeps, LocalSwarmStatus, NodeDescription } from './node.js';
export { withSwarmNetworks } from './network/backend.js';

export const NOT_A_MANAGER = 'This node is not a swarm manager. Use "docker swarm init" or "docker swarm join" to connect this node to swarm and try again.';
export const NOT_IN_SWARM = 'This node is not part of a swarm';
export const WORKER_NOT_MANAGER = 'This node is not a swarm manager. Worker nodes can\'t be used to view or modify cluster state. Please run this command on a manager node or promote the current node to a manager.';
const ALREADY_IN_SWARM = 'This node is already part of a swarm. Use "docker swarm leave" to leave this swarm and join another one.';

const isObject = (v: unknown): v is Obj => v !== null && typeof v === 'object' && !Array.isArray(v);

/** The API's side of swarm mode: the lifecycle operations and the guards; the running parts are SwarmNode's. */
export class ClusterService extends SwarmNode {
  /** A locked manager's keys as read from disk, sealed under the unlock key. */
  private lockedCerts?: SwarmKeys;

  // -- guards for the API --

  /** The swarm's networks on a manager; undefined elsewhere. */
  clusterNetworks(): ClusterNetworks | undefined {
    return this.manager?.networks;
  }

  /** On a worker, the swarm networks its tasks use, as its managers describe them. */
  workerNetworks(): NodeNetwork[] {
    return this.worker?.networks()?.Networks ?? [];
  }

  private readonly leaveHooks: Array<() => Promise<void>> = [];

  /** Runs `fn` when this node leaves its swarm, before its swarm networks go. */
  onLeave(fn: () => Promise<void>): void {
    this.leaveHooks.push(fn);
  }

  /**
   * Attachable swarm networks for this node's standalone containers (the network service's SwarmAttacher):
   * addresses from the managers, interfaces in the sandboxes this node's agent builds.
   */
  swarmAttacher(): SwarmAttacher {
    const agent = () => {
      if (!this.agent) throw new Unavailable('this node\'s swarm agent is not running yet: try again in a moment');
      return this.agent;
    };
    return {
      active: () => !!this.state,
      attach: async (ref, containerId, names) => agent().attach({ Network: ref, ContainerID: containerId, Names: names }),
      plug: async (spec) => agent().plug(spec),
      unplug: async (pid, ifname) => agent().unplug(pid, ifname),
      detach: async (id) => agent().detach(id),
      lookup: (ids, name) => this.agent?.lookup(ids, name),
    };
  }

  /** This node's role in its swarm; undefined outside one. */
  swarmRole(): 'manager' | 'worker' | undefined {
    return this.state?.role;
  }

  /** The manager's objects; throws "not a swarm manager" elsewhere. */
  objects(): ClusterObjects {
    if (this.manager) return this.manager.objects;
    if (this.phase === 'locked') throw new Unavailable(SWARM_LOCKED);
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

  inspect(): Obj {
    this.objects();
    const e = this.clusterEntry();
    if (!e) throw new Unavailable('the swarm\'s store has no cluster object yet');
    return { ...this.clusterView(e.obj, e.modRev), JoinTokens: e.obj.JoinTokens };
  }

  unlockKey(): Obj {
    this.objects();
    const e = this.clusterEntry();
    const sealed = e?.obj.Spec?.EncryptionConfig?.AutoLockManagers ? e.obj.UnlockKey : undefined;
    return { UnlockKey: sealed ? sealer(this.certs!.dataKey).open(sealed).toString() : '' };
  }

  async update(version: string | undefined, body: unknown, flags: { worker: boolean; manager: boolean; unlockKey: boolean }): Promise<void> {
    const store = this.objects() && this.manager!.store;
    if (version === undefined || !/^\d+$/.test(version)) throw new InvalidParameter(`invalid swarm version: ${JSON.stringify(version ?? '')}`);
    if (!isObject(body)) throw new InvalidParameter('swarm spec must be a JSON object');
    const e = this.clusterEntry()!;
    const c = structuredClone(e.obj);
    c.Spec = mergeSwarmSpec(c.Spec, body);
    // A new ForceRotate (`swarm ca --rotate`) rotates the root CA: see rootca.ts.
    if (forceRotate(c) !== forceRotate(e.obj)) c.RootRotation = await newRootRotation(this.deps.host, sealer(this.certs!.dataKey), c);
    if (flags.worker) c.JoinTokens.Worker = newJoinToken(c.TLSInfo.TrustRoot);
    if (flags.manager) c.JoinTokens.Manager = newJoinToken(c.TLSInfo.TrustRoot);
    // The unlock key is kept while autolock is on (a new one when asked), sealed under the data key.
    if (!c.Spec.EncryptionConfig?.AutoLockManagers) delete c.UnlockKey;
    else if (!c.UnlockKey || flags.unlockKey) c.UnlockKey = sealer(this.certs!.dataKey).seal(Buffer.from(newUnlockKey()));
    c.UpdatedAt = now();
    await store.update('cluster', 'default', Number(version), c);
  }

  // -- init --

  async init(body: unknown): Promise<string> {
    return this.serial(async () => {
      const req = isObject(body) ? body : {};
      if (this.phase === 'locked' && req.ForceNewCluster === true) throw new Unavailable(SWARM_LOCKED);
      if (this.state && req.ForceNewCluster === true && this.state.role === 'manager') return this.forceNewCluster();
      if (this.state) throw new NotInSwarm(ALREADY_IN_SWARM);
      if (req.ForceNewCluster) throw new InvalidParameter('ForceNewCluster needs a node that is a manager of a swarm');
      const { listen, advertise } = addresses(req, this.deps.host);
      const dataAddr = dataPathAddr(req, this.deps.host);
      const dataPort = dataPathPort(req);
      const nodeId = newObjectId(randomBytes(16));
      const clusterId = newObjectId(randomBytes(16));
      const host = this.deps.host;
      this.phase = 'pending';
      try {
        const spec = swarmSpecDefaults(mergeSwarmSpec(defaultSwarmSpec(), isObject(req.Spec) ? req.Spec : {}));
        const ca = await host.createRootCA();
        const { key: nodeKey, csr } = await host.createKeyAndRequest();
        const expirySeconds = certExpirySeconds({ Spec: spec });
        const cert = await host.signNodeCertificate(ca, csr, { nodeId, clusterId, role: 'manager', ips: [advertise.host], expirySeconds });
        this.certs = { ca: ca.cert, cert, key: nodeKey, caKey: ca.key, dataKey: newDataKey() };
        await this.saveCerts(this.certs);
        const state: NodeState = {
          nodeId,
          clusterId,
          role: 'manager',
          listenAddr: joinHostPort(listen.host, listen.port),
          advertiseAddr: advertise.host,
          swarmPort: advertise.port,
          ...(dataAddr ? { dataPathAddr: dataAddr } : {}),
          managers: [joinHostPort(advertise.host, advertise.port)],
          etcdEndpoints: [`https://${joinHostPort(advertise.host, ETCD_CLIENT_PORT)}`],
        };
        const etcd = host.startEtcd(memberOptions(state, nodeKey, { initialState: 'new' }));
        await etcd.ready();
        const store = await connectStore(localEtcdEndpoint(state.advertiseAddr), this.certs!);
        const t = now();
        if (req.AutoLockManagers === true) spec.EncryptionConfig = { ...spec.EncryptionConfig, AutoLockManagers: true };
        const cluster: Obj = {
          ID: clusterId,
          CreatedAt: t,
          UpdatedAt: t,
          Spec: spec,
          TLSInfo: tlsInfo(ca.cert),
          JoinTokens: { Worker: newJoinToken(ca.cert), Manager: newJoinToken(ca.cert) },
          RootCA: { Cert: ca.cert, Key: sealer(this.certs.dataKey).seal(Buffer.from(ca.key)) },
          DataPathPort: dataPort,
          DefaultAddrPool: Array.isArray(req.DefaultAddrPool) && req.DefaultAddrPool.length ? req.DefaultAddrPool : ['10.0.0.0/8'],
          SubnetSize: Number(req.SubnetSize) || 24,
          ...(spec.EncryptionConfig?.AutoLockManagers ? { UnlockKey: sealer(this.certs.dataKey).seal(Buffer.from(newUnlockKey())) } : {}),
        };
        await store.create('cluster', 'default', cluster);
        await recordCertificate(store, nodeId, cert, 'manager', forceRotate(cluster), ca.cert);
        await store.create('nodes', nodeId, nodeObject(await this.deps.describe(), this.certs?.ca, nodeId, 'manager', state, req.Availability));
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
    const etcd = this.deps.host.startEtcd(memberOptions(state, this.certs!.key, { initialState: 'existing', forceNewCluster: true }));
    try {
      await etcd.ready();
      state.etcdEndpoints = [`https://${joinHostPort(state.advertiseAddr, ETCD_CLIENT_PORT)}`];
      state.managers = [joinHostPort(state.advertiseAddr, state.swarmPort)];
      await this.deps.host.saveState(state);
      const store = await connectStore(localEtcdEndpoint(state.advertiseAddr), this.certs!);
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

  // -- join (see dispatcher.ts for the manager's side) --

  async join(body: unknown): Promise<void> {
    return this.serial(async () => {
      if (this.state) throw new NotInSwarm(ALREADY_IN_SWARM);
      const req = isObject(body) ? body : {};
      if (typeof req.JoinToken !== 'string' || req.JoinToken === '') throw new InvalidParameter('invalid join token: a join token must be given');
      if (!Array.isArray(req.RemoteAddrs) || req.RemoteAddrs.length === 0 || req.RemoteAddrs.some((a: unknown) => typeof a !== 'string')) {
        throw new InvalidParameter('at least 1 RemoteAddr is required to join');
      }
      const { listen, advertise } = addresses(req, this.deps.host);
      const dataAddr = dataPathAddr(req, this.deps.host);
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
              ...(dataAddr ? { dataPathAddr: dataAddr } : {}),
              availability: req.Availability,
              description: d,
            });
            this.certs = { ca, cert: answer.cert, key: nodeKey, dataKey: answer.dataKey };
            await this.saveCerts(this.certs);
            const state: NodeState = {
              nodeId: answer.nodeId,
              clusterId: answer.clusterId,
              role: answer.role,
              listenAddr: joinHostPort(listen.host, listen.port),
              advertiseAddr: advertise.host,
              swarmPort: advertise.port,
              ...(dataAddr ? { dataPathAddr: dataAddr } : {}),
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
      for (const fn of this.leaveHooks) await fn().catch((err: unknown) => log.warn('swarm: a step of leaving failed', { error: String(err) }));
      await this.agent?.removeAll().catch(() => undefined);
      await this.teardown();
      await this.deps.host.wipe();
      this.state = undefined;
      this.certs = undefined;
      this.lockedCerts = undefined;
      this.currentUnlockKey = undefined;
      this.phase = 'inactive';
      this.deps.events.publish('node', 'remove', nodeId, {});
    });
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
    if (state.role === 'manager' && isLocked(certs)) {
      // Autolock: the keys stay sealed until the unlock key comes (POST /swarm/unlock).
      this.lockedCerts = certs;
      this.phase = 'locked';
      log.info('swarm: this manager is locked; unlock it with "docker swarm unlock"');
      return;
    }
    this.certs = certs;
    this.rejoin(state);
  }

  /** The node goes back into its swarm, in the background: the daemon serves its API meanwhile. */
  private rejoin(state: NodeState): void {
    this.phase = 'pending';
    const run = async () => {
      // An expired certificate opens no connection: neither the managers nor etcd's peers take it.
      const expiry = certValidity(this.certs!.cert).to;
      if (expiry <= Date.now()) throw new Unavailable(`this node's certificate expired at ${new Date(expiry).toISOString()}: leave the swarm and join it again`);
      if (state.role === 'manager') {
        const etcd = this.deps.host.startEtcd(memberOptions(state, this.certs!.key, { initialState: 'existing' }));
        await etcd.ready();
        const store = await connectStore(localEtcdEndpoint(state.advertiseAddr), this.certs!);
        await this.startManager(store, etcd);
      } else {
        this.startWorker();
      }
      this.phase = 'active';
    };
    void this.serial(run).catch((err: unknown) => {
      this.phase = 'error';
      this.error = err instanceof Error ? err.message : String(err);
      log.warn('swarm: could not rejoin the swarm', { error: this.error });
    });
  }

  /** `POST /swarm/unlock`: a locked manager's keys opened with the unlock key, and the node back in its swarm. */
  async unlock(body: unknown): Promise<void> {
    if (this.phase !== 'locked' || !this.lockedCerts || !this.state) {
      if (!this.state) throw new NotInSwarm(NOT_IN_SWARM);
      throw new Conflict('swarm is not locked');
    }
    const key = isObject(body) ? body.UnlockKey : undefined;
    if (typeof key !== 'string') throw new InvalidParameter('invalid key string');
    this.certs = unlockKeys(this.lockedCerts, key);
    this.lockedCerts = undefined;
    this.currentUnlockKey = key.trim();
    this.rejoin(this.state);
  }

  async close(): Promise<void> {
    await this.queue.catch(() => undefined);
    await this.teardown({ keepSession: true });
  }
}

export { caDigest };
