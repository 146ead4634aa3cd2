/**
 * Addresses on swarm networks for tasks and services, and what each node must build of those networks.
 *
 * The leader gives a new task one address on each network of its service (Task.NetworksAttachments, as
 * swarmkit's: the network object and `a.b.c.d/n`), and a service in endpoint mode `vip` one virtual IP on
 * each (Endpoint.VirtualIPs). An address is held while its task has not ended (observed past running) and
 * while the service holds its VIP; one just given stays reserved a little while, until the store's watch
 * brings the task back.
 *
 * A node builds the networks its own tasks use, with every other node's endpoints of those networks as
 * peers (nodeNetworks): the dispatcher sends that to workers with their assignments.
 */
import type { ClusterStore, Fence } from '../store.js';
import { isTerminal, stateRank, type Obj } from '../types.js';
import { allocateAddress, macOf } from './allocator.js';
import { serviceNetworks, swarmNetwork, tunnelAddr } from './networks.js';
import { ingressNetwork, ingressPorts } from './ingress.js';
import { isEncrypted } from './keys.js';

const RESERVATION_MS = 30_000;

export class NetworkAllocator {
  private readonly reserved = new Map<string, Map<string, number>>();

  constructor(private readonly store: ClusterStore) {}

  private used(networkId: string): Set<string> {
    const used = new Set<string>();
    for (const e of this.store.list('tasks')) {
      const t = e.obj;
      if (isTerminal(t.Status?.State ?? 'new')) continue;
      for (const a of t.NetworksAttachments ?? []) if (a.Network?.ID === networkId) for (const addr of a.Addresses ?? []) used.add(String(addr).split('/')[0]!);
    }
    for (const e of this.store.list('services')) {
      for (const v of e.obj.Endpoint?.VirtualIPs ?? []) if (v.NetworkID === networkId) used.add(String(v.Addr).split('/')[0]!);
    }
    for (const a of Object.values(this.store.get('networks', networkId)?.obj.NodeAddrs ?? {})) used.add(String(a));
    // Standalone containers' attachments (attachable.ts).
    for (const e of this.store.list('attachments')) if (e.obj.NetworkID === networkId) for (const addr of e.obj.Addresses ?? []) used.add(String(addr).split('/')[0]!);
    const held = this.reserved.get(networkId);
    const t = Date.now();
    for (const [addr, until] of held ?? []) {
      if (until < t) held!.delete(addr);
      else used.add(addr);
    }
    return used;
  }

  /** A free address of network `n` (`a.b.c.d/n`), reserved a while. */
  take(n: Obj): string {
    const address = allocateAddress(n.Subnet, n.Gateway, this.used(n.ID), n.IPRange);
    let held = this.reserved.get(n.ID);
    if (!held) this.reserved.set(n.ID, (held = new Map()));
    held.set(address, Date.now() + RESERVATION_MS);
    return `${address}/${String(n.Subnet).split('/')[1]}`;
  }

  /** NetworksAttachments for a new task of `service` (none when the service has no networks). */
  taskAttachments(service: Obj): Obj[] {
    const out: Obj[] = [];
    const refs: Array<{ Target: string; Aliases?: string[] }> = [...serviceNetworks(service.Spec)];
    // Tasks of a service publishing ports through the routing mesh join the ingress network too.
    const ingress = ingressPorts(service).length ? ingressNetwork(this.store) : undefined;
    if (ingress && !refs.some((r) => r.Target === ingress.ID)) refs.unshift({ Target: ingress.ID });
    for (const ref of refs) {
      const e = this.store.get('networks', ref.Target);
      if (!e) continue;
      out.push({ Network: swarmNetwork(e.obj, e.modRev), Addresses: [this.take(e.obj)], ...(ref.Aliases?.length ? { Aliases: ref.Aliases } : {}) });
    }
    return out;
  }

  /**
   * The service's VirtualIPs for its spec: those it holds on networks it keeps, new ones on networks it
   * joins; none in endpoint mode dnsrr.
   */
  serviceVips(service: Obj, previous: Obj[] = []): Obj[] {
    if ((service.Spec?.EndpointSpec?.Mode ?? 'vip') !== 'vip') return [];
    const out: Obj[] = [];
    for (const ref of serviceNetworks(service.Spec)) {
      const kept = previous.find((v) => v.NetworkID === ref.Target);
      if (kept) {
        out.push(kept);
        continue;
      }
      const e = this.store.get('networks', ref.Target);
      if (e) out.push({ NetworkID: e.obj.ID, Addr: this.take(e.obj) });
    }
    return out;
  }
}

/** A task's container runs (or is about to) on its node: its endpoints are live. */
function live(t: Obj): boolean {
  const observed = t.Status?.State ?? 'new';
  return !isTerminal(observed) && stateRank(observed) >= stateRank('assigned') && !!t.NodeID;
}

/** The routing mesh as one node serves it: its endpoint on the ingress network and every published port's tasks. */
export interface NodeIngress {
  NetworkID: string;
  Address: string;
  PrefixLen: number;
  Ports: Array<{ Protocol: string; PublishedPort: number; TargetPort: number; Backends: string[] }>;
}

/** One network as a node builds it, with the other nodes' endpoints on it. */
export interface NodeNetwork {
  ID: string;
  Name: string;
  VNI: number;
  Subnet: string;
  Gateway: string;
  MTU: number;
  Internal: boolean;
  /** Whether standalone containers may join it (absent: not attachable). */
  Attachable?: boolean;
  /** `--opt encrypted`: VXLAN to other nodes is carried encrypted under the swarm's network keys. */
  Encrypted?: boolean;
  Peers: Array<{ address: string; mac: string; node: string }>;
  /** The services on the network: their names and aliases, VIP (endpoint mode vip) and running tasks' addresses. */
  Services: NetworkService[];
  /** Standalone containers attached to the network on any node: their names and address (absent when none). */
  Attached?: Array<{ Names: string[]; Address: string }>;
}

export interface NetworkService {
  ID: string;
  Name: string;
  Aliases: string[];
  VIP?: string;
  Tasks: string[];
}

const addressOn = (t: Obj, networkId: string): string[] =>
  (t.NetworksAttachments ?? []).filter((a: Obj) => a.Network?.ID === networkId).flatMap((a: Obj) => (a.Addresses ?? []).map((x: string) => String(x).split('/')[0]!));

/** The services attached to a network, with the addresses of their tasks that run (and are meant to). */
function networkServices(store: ClusterStore, networkId: string): NetworkService[] {
  const out: NetworkService[] = [];
  const running = store.list('tasks').map((e) => e.obj).filter((t) => t.Status?.State === 'running' && t.DesiredState === 'running');
  for (const e of store.list('services')) {
    const s = e.obj;
    const ref = serviceNetworks(s.Spec).find((r) => r.Target === networkId);
    if (!ref) continue;
    const vip = (s.Endpoint?.VirtualIPs ?? []).find((v: Obj) => v.NetworkID === networkId);
    const tasks = running.filter((t) => t.ServiceID === s.ID).flatMap((t) => addressOn(t, networkId)).sort();
    out.push({ ID: s.ID, Name: s.Spec.Name, Aliases: ref.Aliases ?? [], ...(vip ? { VIP: String(vip.Addr).split('/')[0] } : {}), Tasks: tasks });
  }
  return out.sort((a, b) => a.Name.localeCompare(b.Name));
}

/** What node `nodeId` must build: the networks of its live tasks, their peers on other nodes, and where VXLAN goes. */
export function nodeNetworks(store: ClusterStore, nodeId: string): { DataPathPort: number; LocalAddr: string; Networks: NodeNetwork[]; Ingress?: NodeIngress } {
  const addrs = new Map(store.list('nodes').map((e) => [e.obj.ID as string, tunnelAddr(e.obj)]));
  const cluster = store.get('cluster', 'default')?.obj;
  const tasks = store.list('tasks').map((e) => e.obj).filter(live);
  const needed = new Set<string>();
  for (const t of tasks) if (t.NodeID === nodeId) for (const a of t.NetworksAttachments ?? []) needed.add(a.Network?.ID);
  const attached = store.list('attachments').map((e) => e.obj);
  for (const a of attached) if (a.NodeID === nodeId) needed.add(a.NetworkID);
  // Every node serves the routing mesh while a service publishes through it, from its own ingress endpoint.
  const ingress = ingressNetwork(store);
  const meshServices = store.list('services').map((e) => e.obj).filter((s) => ingressPorts(s).length > 0);
  const ingressAddr: string | undefined = ingress?.NodeAddrs?.[nodeId];
  if (ingress && meshServices.length > 0 && ingressAddr) needed.add(ingress.ID);
  else if (ingress) needed.delete(ingress.ID);
  const networks: NodeNetwork[] = [];
  for (const id of [...needed].sort()) {
    const n = store.get('networks', id)?.obj;
    if (!n) continue;
    const peers: NodeNetwork['Peers'] = [];
    for (const t of tasks) {
      if (t.NodeID === nodeId) continue;
      const node = addrs.get(t.NodeID);
      if (!node) continue;
      for (const a of t.NetworksAttachments ?? []) {
        if (a.Network?.ID !== id) continue;
        for (const addr of a.Addresses ?? []) {
          const address = String(addr).split('/')[0]!;
          peers.push({ address, mac: macOf(address), node });
        }
      }
    }
    for (const a of attached) {
      const node = addrs.get(a.NodeID);
      if (a.NetworkID !== id || a.NodeID === nodeId || !node) continue;
      for (const addr of a.Addresses ?? []) {
        const address = String(addr).split('/')[0]!;
        peers.push({ address, mac: macOf(address), node });
      }
    }
    if (n.Ingress) {
      for (const [other, address] of Object.entries(n.NodeAddrs ?? {})) {
        const node = addrs.get(other);
        if (other !== nodeId && node) peers.push({ address: String(address), mac: macOf(String(address)), node });
      }
    }
    peers.sort((x, y) => x.address.localeCompare(y.address));
    // In the ingress network's sandbox the bridge holds the node's own endpoint, not the (shared) gateway.
    const gateway = n.Ingress ? ingressAddr! : n.Gateway;
    const names = attached.filter((a) => a.NetworkID === id).map((a) => ({ Names: a.Names ?? [], Address: String(a.Addresses?.[0] ?? '').split('/')[0]! }));
    networks.push({
      ID: n.ID, Name: n.Name, VNI: n.VNI, Subnet: n.Subnet, Gateway: gateway, MTU: n.MTU, Internal: !!n.Internal, ...(isEncrypted(n) ? { Encrypted: true } : {}), Peers: peers,
      Services: n.Ingress ? [] : networkServices(store, id), ...(names.length ? { Attached: names } : {}), ...(n.Attachable ? { Attachable: true } : {}),
    });
  }
  const out = { DataPathPort: cluster?.DataPathPort ?? 4789, LocalAddr: addrs.get(nodeId) ?? '', Networks: networks };
  if (!ingress || !needed.has(ingress.ID)) return out;
  const running = store.list('tasks').map((e) => e.obj).filter((t) => t.Status?.State === 'running' && t.DesiredState === 'running');
  const ports: NodeIngress['Ports'] = [];
  for (const s of meshServices) {
    const backends = running.filter((t) => t.ServiceID === s.ID).flatMap((t) => addressOn(t, ingress.ID)).sort();
    for (const p of ingressPorts(s)) ports.push({ Protocol: p.Protocol ?? 'tcp', PublishedPort: p.PublishedPort, TargetPort: p.TargetPort, Backends: backends });
  }
  return { ...out, Ingress: { NetworkID: ingress.ID, Address: ingressAddr!, PrefixLen: Number(String(ingress.Subnet).split('/')[1]), Ports: ports } };
}

/** The swarm's DefaultAddrPool and SubnetSize (swarmkit's defaults when the cluster object has none). */
export function addressPools(store: ClusterStore): { pools: string[]; size: number } {
  const c = store.get('cluster', 'default')?.obj;
  return { pools: c?.DefaultAddrPool?.length ? c.DefaultAddrPool : ['10.0.0.0/8'], size: c?.SubnetSize || 24 };
}

/** The VIPs of `previous` a service keeps under its (new) spec: on networks it still joins, in endpoint mode vip. */
export function keptVips(service: Obj, previous: Obj[] = []): Obj[] {
  if ((service.Spec?.EndpointSpec?.Mode ?? 'vip') !== 'vip') return [];
  const targets = new Set(serviceNetworks(service.Spec).map((r) => r.Target));
  return previous.filter((v) => targets.has(v.NetworkID));
}

/**
 * On the leader, with the allocator that gives tasks their addresses (so that a VIP and a task never get the
 * same one): each service's VirtualIPs brought to its spec.
 */
export async function assignServiceVips(store: ClusterStore, fence: Fence, allocator: NetworkAllocator): Promise<void> {
  for (const e of store.list('services')) {
    const s = e.obj;
    const have: Obj[] = s.Endpoint?.VirtualIPs ?? [];
    const want = allocator.serviceVips(s, have);
    if (JSON.stringify(want) === JSON.stringify(have)) continue;
    await store.mutate('services', s.ID, (o) => {
      const { VirtualIPs: _old, ...endpoint } = o.Endpoint ?? {};
      return { ...o, Endpoint: { ...endpoint, ...(want.length ? { VirtualIPs: want } : {}) } };
    }, fence);
  }
}
