/**
 * A manager's presence in the store: its node's session (a key on a lease the manager keeps alive) and its
 * campaign for leadership (the leader key on a short lease, created only when absent; its create revision is
 * the fence of the leader's writes). The leader keeps etcd's leader on another member where it can.
 */
import type { Etcd3 } from 'etcd3';
import type { EtcdMember } from '../../host/cluster.js';
import { log } from '../../util/log.js';
import { moveEtcdLeaderAway, within } from './etcd.js';
import type { ClusterObjects } from './objects.js';
import type { Sealer } from './crypt.js';
import type { LogRequests } from './remotelogs.js';
import type { ClusterNetworks } from './network/networks.js';
import { Orchestrator } from './orchestrator.js';
import { heartbeatSeconds } from './status.js';
import { key, type ClusterStore, type Fence } from './store.js';

/**
 * The leader key's lease (seconds). A leader that dies is replaced once it expires: at most this long after its
 * last keepalive (sent every third of it), plus etcd's check of expired leases (every 500 ms). etcd's own
 * minimum here is 1 s (1.5 election timeouts of 500 ms, rounded up); 2 leaves a busy daemon room for pauses.
 */
const LEADER_TTL = 2;
const ETCD_LEADER_CHECK_MS = 1000;

/** A manager's running parts. */
export interface ManagerParts {
  etcd: EtcdMember;
  store: ClusterStore;
  objects: ClusterObjects;
  /** The task logs this manager asked other nodes for. */
  logs: LogRequests;
  networks: ClusterNetworks;
  /** Seals and opens with the swarm's data key (the keys of encrypted networks). */
  seal?: Sealer;
  session?: { revoke(): Promise<void> };
  orchestrator?: Orchestrator;
  leaderStop?: () => Promise<void>;
}

/**
 * A manager's own session: its node is ready while the lease lives. A lost lease is replaced while `owner()` still
 * answers the parts on this store.
 */
export async function holdSession(store: ClusterStore, nodeId: string, addr: string, owner: () => ManagerParts | undefined): Promise<{ revoke(): Promise<void> }> {
  const lease = store.client.lease(Math.max(3, 3 * heartbeatSeconds(store)), { autoKeepAlive: true });
  lease.on('lost', (err) => {
    log.warn('swarm: this node\'s session was lost; opening a new one', { error: err.message });
    if (owner()?.store === store) {
      void holdSession(store, nodeId, addr, owner).then((s) => {
        const parts = owner();
        if (parts?.store === store) parts.session = s;
        else void s.revoke();
      }).catch(() => undefined);
    }
  });
  await lease.put(key('sessions', nodeId)).value(JSON.stringify({ NodeID: nodeId, Addr: addr }));
  return { revoke: () => within(2000, lease.revoke()) };
}

/**
 * Moves a manager's session key to a lease of `seconds` that nothing renews, before its etcd member leaves the
 * cluster (a demotion) and its own lease with it: the node stays ready until its worker session, on a
 * dispatcher's lease, takes the key over.
 */
export async function bridgeSession(store: ClusterStore, nodeId: string, addr: string, seconds: number): Promise<void> {
  const lease = store.client.lease(seconds, { autoKeepAlive: false });
  await lease.put(key('sessions', nodeId)).value(JSON.stringify({ NodeID: nodeId, Addr: addr }));
}

/** Campaigns for leadership until stopped: the leader key lives on a short lease; the leader runs the orchestrator. */
export function campaign(parts: ManagerParts, nodeId: string): () => Promise<void> {
  const store = parts.store;
  let stopped = false;
  let lease: ReturnType<Etcd3['lease']> | undefined;
  const leaderKey = key('leader', 'current');
  let etcdLeaderCheck: NodeJS.Timeout | undefined;
  const stepDown = () => {
    parts.orchestrator?.stop();
    parts.orchestrator = undefined;
    clearInterval(etcdLeaderCheck);
    etcdLeaderCheck = undefined;
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
        .then(store.client.put(leaderKey).value(JSON.stringify({ NodeID: nodeId })).lease(leaseId))
        .commit();
      if (res.succeeded && !stopped) {
        const fence: Fence = { key: leaderKey, revision: Number(res.header.revision) };
        log.info('swarm: this node leads the swarm', { node: nodeId });
        parts.orchestrator = new Orchestrator(store, fence, parts.seal);
        parts.orchestrator.start();
        // etcd's leader is kept on another manager's member: the death of one host then costs either an etcd
        // election (while this node's lease is renewed through the others) or this node's lease, never both.
        etcdLeaderCheck = setInterval(() => {
          moveEtcdLeaderAway(store.client).catch((err: unknown) => log.debug('swarm: could not move etcd\'s leader', { error: String(err) }));
        }, ETCD_LEADER_CHECK_MS);
        etcdLeaderCheck.unref();
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
