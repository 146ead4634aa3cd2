/**
 * The routing mesh: a port published in `ingress` mode answers on every node. The swarm's `ingress` overlay
 * network (made with the first service that publishes such a port) joins those services' tasks, and every
 * node has an endpoint of its own on it (its address kept in the network object, NodeAddrs by node id, given
 * by the leader). A node forwards connections to its published ports into the ingress network's sandbox,
 * which spreads them over the service's running tasks, from its own endpoint's address (so that replies come
 * back through it).
 */
import { randomBytes } from 'node:crypto';
import { InvalidParameter } from '../../../errors.js';
import type { ClusterStore, Fence } from '../store.js';
import { newObjectId, now, type Obj } from '../types.js';
import { allocateSubnet, allocateVni, defaultGateway } from './allocator.js';
import { OVERLAY_MTU } from './networks.js';

export const INGRESS_NAME = 'ingress';
const FIRST_DYNAMIC_PORT = 30000;
const LAST_DYNAMIC_PORT = 32767;

/** The service's ports published through the routing mesh. */
export function ingressPorts(service: Obj): Obj[] {
  return (service.Endpoint?.Ports ?? []).filter((p: Obj) => (p.PublishMode ?? 'ingress') === 'ingress' && p.PublishedPort);
}

export function ingressNetwork(store: ClusterStore): Obj | undefined {
  return store.list('networks').map((e) => e.obj).find((n) => n.Ingress);
}

/**
 * Gives ingress ports without a published port one from 30000-32767 (as swarmkit), and refuses a published
 * port another service holds already.
 */
export function assignIngressPorts(store: ClusterStore, service: Obj): void {
  const held = new Map<string, string>();
  for (const e of store.list('services')) {
    if (e.obj.ID === service.ID) continue;
    for (const p of ingressPorts(e.obj)) held.set(`${p.Protocol ?? 'tcp'}/${p.PublishedPort}`, e.obj.Spec.Name);
  }
  for (const p of service.Endpoint?.Ports ?? []) {
    if ((p.PublishMode ?? 'ingress') !== 'ingress') continue;
    const proto = p.Protocol ?? 'tcp';
    if (!p.PublishedPort) {
      let port = FIRST_DYNAMIC_PORT;
      while (held.has(`${proto}/${port}`) && port <= LAST_DYNAMIC_PORT) port++;
      if (port > LAST_DYNAMIC_PORT) throw new InvalidParameter('no published port left in 30000-32767');
      p.PublishedPort = port;
    }
    const owner = held.get(`${proto}/${p.PublishedPort}`);
    if (owner !== undefined) throw new InvalidParameter(`rpc error: code = InvalidArgument desc = port '${p.PublishedPort}' is already in use by service '${owner}'`);
    held.set(`${proto}/${p.PublishedPort}`, service.Spec?.Name ?? '');
  }
}

/** Makes the ingress network when there is none (swarmkit makes it at init; here with its first user). */
export async function ensureIngress(store: ClusterStore, pools: { pools: string[]; size: number }): Promise<void> {
  if (ingressNetwork(store)) return;
  const taken = store.list('networks').map((e) => e.obj.Subnet as string);
  const subnet = allocateSubnet(pools.pools, pools.size, taken);
  const id = newObjectId(randomBytes(16));
  const network: Obj = {
    ID: id,
    Name: INGRESS_NAME,
    Created: now(),
    Labels: {},
    Options: {},
    Internal: false,
    Attachable: false,
    Ingress: true,
    Subnet: subnet,
    Gateway: defaultGateway(subnet),
    VNI: allocateVni(store.list('networks').map((e) => e.obj.VNI as number)),
    MTU: OVERLAY_MTU,
    NodeAddrs: {},
  };
  await store.create('networks', id, network, { name: INGRESS_NAME }).catch((err: unknown) => {
    // Another manager made it meanwhile.
    if (!ingressNetwork(store)) throw err;
  });
}

/** On the leader: an ingress endpoint address for every node that has none, and none for nodes that are gone. */
export async function ensureIngressEndpoints(store: ClusterStore, fence: Fence, take: (network: Obj) => string): Promise<void> {
  const n = ingressNetwork(store);
  if (!n) return;
  const nodes = new Set(store.list('nodes').map((e) => e.obj.ID as string));
  const have: Record<string, string> = n.NodeAddrs ?? {};
  const missing = [...nodes].filter((id) => !have[id]);
  const gone = Object.keys(have).filter((id) => !nodes.has(id));
  if (missing.length === 0 && gone.length === 0) return;
  const given = Object.fromEntries(missing.map((id) => [id, take(n)]));
  await store.mutate('networks', n.ID, (obj) => {
    const addrs: Record<string, string> = { ...(obj.NodeAddrs ?? {}), ...given };
    for (const id of gone) delete addrs[id];
    return { ...obj, NodeAddrs: addrs };
  }, fence);
}
