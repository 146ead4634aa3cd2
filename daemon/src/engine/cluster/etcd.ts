/**
 * The manager's link to the swarm's etcd: its client (loaded at the first use), a store on it, and the changes
 * of etcd's membership a manager waits for or makes.
 */
import type { Etcd3, IOptions } from 'etcd3';
import { Unavailable } from '../../errors.js';
import { log } from '../../util/log.js';
import type { EtcdMemberOptions, NodeCertificates, NodeState } from '../../host/cluster.js';
import { ETCD_CLIENT_PORT, ETCD_PEER_PORT, joinHostPort } from './addresses.js';
import { ClusterStore } from './store.js';
import type { Obj } from './types.js';

/**
 * etcd's client (grpc-js and its protobufs) and cockatiel, loaded at the first connection to a swarm's store:
 * they took a few hundred ms to load here, and a daemon outside a swarm never uses them.
 */
let etcdModules: Promise<[typeof import('etcd3'), typeof import('cockatiel')]> | undefined;
const loadEtcdClient = () => (etcdModules ??= Promise.all([import('etcd3'), import('cockatiel')]));

/**
 * An etcd client: mutual TLS with the node's certificate, and a member that fails is left aside for a second
 * only (the client's default of 5 s would stall a manager whose only member had a hiccup).
 */
export async function etcdClient(endpoints: string[], certs: NodeCertificates): Promise<Etcd3> {
  const [{ Etcd3, isRecoverableError }, { circuitBreaker, ConsecutiveBreaker, handleWhen }] = await loadEtcdClient();
  const options: IOptions = {
    hosts: endpoints,
    credentials: { rootCertificate: Buffer.from(certs.ca), privateKey: Buffer.from(certs.key), certChain: Buffer.from(certs.cert) },
    dialTimeout: 5000,
    // A call that cannot finish (no quorum) fails within seconds, as an error the API answers with.
    defaultCallOptions: (context) => (context.isStream ? {} : { deadline: Date.now() + 8000 }),
    faultHandling: {
      host: () => circuitBreaker(handleWhen(isRecoverableError), { halfOpenAfter: 1000, breaker: new ConsecutiveBreaker(5) }),
    },
  };
  return new Etcd3(options);
}

/**
 * Gives an etcd client a renewed certificate for its next connections. etcd3 builds its gRPC credentials
 * once, from PEM given at construction: the TLS context they hold (node's SecureContext, which every new
 * connection of the client's channels is made from) gets the new certificate and key in place. The
 * connections open now stay as they are (TLS checks certificates at the handshake only). Answers false when
 * the client is not made as expected (then the client keeps its first certificate).
 */
export function renewClientCertificate(client: Etcd3, certs: NodeCertificates): boolean {
  // etcd3's connection pool, its hosts, and grpc-js's secure credentials: not part of their typed API.
  const hosts = (client as unknown as { pool?: { hosts?: Array<{ channelCredentials?: { secureContext?: { context?: Obj } } }> } }).pool?.hosts;
  const contexts = (hosts ?? []).map((h) => h.channelCredentials?.secureContext?.context);
  if (contexts.length === 0 || contexts.some((c) => typeof c?.setCert !== 'function' || typeof c?.setKey !== 'function')) {
    log.warn('swarm: the store client\'s certificate cannot be renewed in place; it keeps its first one');
    return false;
  }
  // The certificate first: OpenSSL drops a key that no longer matches it, and the new key follows.
  for (const c of new Set(contexts)) {
    c!.setCert(certs.cert);
    c!.setKey(certs.key, undefined);
  }
  return true;
}

/**
 * A manager's store, on its own etcd member only (reads and writes reach the quorum through it). Its watch
 * and leases then never ride on another host's member: when a host dies, the survivors' watches go on and see
 * its keys expire at once, instead of first reconnecting, with backoff, from the dead member to another.
 */
export async function connectStore(localEndpoint: string, certs: NodeCertificates): Promise<ClusterStore> {
  const client = await etcdClient([localEndpoint], certs);
  const store = new ClusterStore(client);
  await store.start();
  return store;
}

/** Waits until this node's etcd member is a voting member (the manager promotes it once it caught up). */
export async function waitPromoted(endpoints: string[], nodeId: string, certs: NodeCertificates): Promise<void> {
  const client = await etcdClient(endpoints, certs);
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

/**
 * Removes a node's etcd member (none: nothing to do). etcd refuses while a member started recently is not yet
 * connected for long ("unhealthy cluster"): tried again for a while then.
 */
export async function removeMember(client: Etcd3, nodeId: string): Promise<void> {
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

/** Waits for `work` (its failure ignored), at most `ms`: a store out of reach must not hold up a stop. */
export function within(ms: number, work: Promise<unknown> | undefined): Promise<void> {
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
 * When the member `client` talks to leads etcd, hands etcd's leadership to another voting member that runs
 * (one with a name and client URLs: a member added but not started has neither).
 */
export async function moveEtcdLeaderAway(client: Etcd3): Promise<void> {
  const status = await client.maintenance.status();
  const self = String(status.header.member_id);
  if (String(status.leader) !== self) return;
  const { members } = await client.cluster.memberList({});
  const target = members.find((m) => String(m.ID) !== self && !m.isLearner && m.name && m.clientURLs?.length);
  if (!target) return;
  await client.maintenance.moveLeader({ targetID: target.ID });
  log.info('swarm: etcd\'s leadership moved to another manager\'s member', { member: target.name });
}

/**
 * The options of a node's own etcd member: its URLs on the node's advertise address, the swarm's cluster token
 * and the node's TLS key; the member alone in its cluster unless `initialCluster` names the others.
 */
export function memberOptions(
  state: Pick<NodeState, 'nodeId' | 'advertiseAddr' | 'clusterId'>,
  tlsKey: string,
  opts: { initialState: 'new' | 'existing'; initialCluster?: string; forceNewCluster?: boolean },
): EtcdMemberOptions {
  return {
    name: state.nodeId,
    address: state.advertiseAddr,
    clientPort: ETCD_CLIENT_PORT,
    peerPort: ETCD_PEER_PORT,
    initialState: opts.initialState,
    initialCluster: opts.initialCluster ?? `${state.nodeId}=https://${joinHostPort(state.advertiseAddr, ETCD_PEER_PORT)}`,
    clusterToken: state.clusterId,
    ...(opts.forceNewCluster ? { forceNewCluster: true } : {}),
    tlsKey,
  };
}
