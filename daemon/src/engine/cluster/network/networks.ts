/**
 * Swarm-scoped networks (driver `overlay`) in the cluster store, under `networks/<id>`: created, listed,
 * inspected and removed through a manager. The leader's managers choose the subnet (from the swarm's
 * DefaultAddrPool in blocks of SubnetSize unless the client gave one) and the VXLAN id when the network is
 * made; the data plane is built on a node only when a task there needs the network.
 *
 * Stored shape (version 1): { ID, Name, Created, Labels, Options, Internal, Attachable, Ingress, Subnet,
 * Gateway, IPRange?, VNI, MTU }.
 */
import { randomBytes } from 'node:crypto';
import { Conflict, Forbidden, InvalidParameter, NotFound, NotImplemented } from '../../../errors.js';
import { parseCreateRequest } from '../../networks/create.js';
import { formatIPv4, formatSubnet } from '../../networks/ipv4.js';
import type { ClusterStore, Entry } from '../store.js';
import { lookup } from '../specs.js';
import { newObjectId, now, type Obj } from '../types.js';
import { allocateSubnet, allocateVni, defaultGateway } from './allocator.js';
import { ingressPorts } from './ingress.js';

/** The underlay address of a node's VXLAN tunnels: its data path address, or else its advertise address. */
export const tunnelAddr = (node: Obj | undefined): string | undefined => (node?.DataPathAddr as string | undefined) || (node?.Status?.Addr as string | undefined) || undefined;

/** VXLAN costs 50 bytes of the underlay's 1500. */
export const OVERLAY_MTU = 1450;
/** An encrypted network's VXLAN packets travel as ESP in UDP, up to 45 bytes more: 1400 keeps them within 1500. */
export const ENCRYPTED_MTU = 1400;
export const VXLAN_OPTION = 'com.docker.network.driver.overlay.vxlanid_list';

/** The network as the Engine API's network list and inspect show it. */
export function networkResource(n: Obj): Obj {
  return {
    Name: n.Name,
    Id: n.ID,
    Created: n.Created,
    Scope: 'swarm',
    Driver: 'overlay',
    EnableIPv4: true,
    EnableIPv6: false,
    IPAM: { Driver: 'default', Options: null, Config: [{ Subnet: n.Subnet, Gateway: n.Gateway, ...(n.IPRange ? { IPRange: n.IPRange } : {}) }] },
    Internal: !!n.Internal,
    Attachable: !!n.Attachable,
    Ingress: !!n.Ingress,
    ConfigFrom: { Network: '' },
    ConfigOnly: false,
    Containers: {},
    Options: { ...(n.Options ?? {}), [VXLAN_OPTION]: String(n.VNI) },
    Labels: n.Labels ?? {},
    Peers: null,
  };
}

/** The network as swarm objects carry it (a task's NetworksAttachments[].Network). */
export function swarmNetwork(n: Obj, version: number): Obj {
  return {
    ID: n.ID,
    Version: { Index: version },
    CreatedAt: n.Created,
    UpdatedAt: n.Created,
    Spec: {
      Name: n.Name,
      Labels: n.Labels ?? {},
      DriverConfiguration: { Name: 'overlay', ...(n.Options && Object.keys(n.Options).length ? { Options: n.Options } : {}) },
      Internal: !!n.Internal,
      Attachable: !!n.Attachable,
      Ingress: !!n.Ingress,
      IPAMOptions: { Driver: { Name: 'default' }, Configs: [{ Subnet: n.Subnet, Gateway: n.Gateway }] },
      Scope: 'swarm',
    },
    DriverState: { Name: 'overlay', Options: { [VXLAN_OPTION]: String(n.VNI) } },
    IPAMOptions: { Driver: { Name: 'default' }, Configs: [{ Subnet: n.Subnet, Gateway: n.Gateway }] },
  };
}

export class ClusterNetworks {
  private queue: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly store: ClusterStore,
    /** The swarm's address pools and block size (the cluster object's DefaultAddrPool and SubnetSize). */
    private readonly pools: () => { pools: string[]; size: number },
  ) {}

  entry(ref: string): Entry {
    return lookup(this.store, 'networks', ref, (o) => o.Name, 'network');
  }

  find(ref: string): Entry | undefined {
    try {
      return this.entry(ref);
    } catch {
      return undefined;
    }
  }

  all(): Obj[] {
    return this.store.list('networks').map((e) => e.obj);
  }

  /**
   * Creates an overlay network from a network create body (Driver `overlay`); a subnet it chooses keeps clear
   * of `localSubnets` (those of the manager's own networks).
   */
  create(body: unknown, localSubnets: string[] = []): Promise<{ Id: string; Warning: string }> {
    const b = (body ?? {}) as Obj;
    if (b.EnableIPv6 === true) throw new NotImplemented('IPv6 on overlay networks is not supported yet');
    const ingress = b.Ingress === true;
    if (b.Scope !== undefined && b.Scope !== '' && b.Scope !== 'swarm') throw new InvalidParameter(`invalid Scope ${JSON.stringify(b.Scope)}: an overlay network is swarm-scoped`);
    // The same checks as a bridge network's (name, labels, options, IPAM), then what only overlays have.
    const spec = parseCreateRequest({ ...b, Driver: 'bridge', Scope: undefined, Ingress: false, EnableIPv6: false });
    if (spec.ipamDriver) throw new NotFound(`plugin "${spec.ipamDriver}" not found`);
    const encrypted = spec.options.encrypted !== undefined;
    const run = this.queue.then(async () => {
      if (this.find(spec.name)?.obj.Name === spec.name) throw new Conflict(`network with name ${spec.name} already exists`);
      const otherIngress = this.all().find((n) => n.Ingress);
      if (ingress && otherIngress) throw new Conflict(`ingress network already exists: ${otherIngress.Name}`);
      const taken = this.all().map((n) => n.Subnet as string);
      let subnet: string;
      let gateway: string;
      let ipRange: string | undefined;
      if (spec.pool) {
        subnet = formatSubnet(spec.pool.subnet);
        if (taken.some((t) => t === subnet)) throw new Forbidden(`the subnet ${subnet} is used by another swarm network`);
        gateway = formatIPv4(spec.pool.gateway);
        ipRange = spec.pool.ipRange ? formatSubnet(spec.pool.ipRange) : undefined;
      } else {
        const { pools, size } = this.pools();
        subnet = allocateSubnet(pools, size, [...taken, ...localSubnets]);
        gateway = defaultGateway(subnet);
      }
      const id = newObjectId(randomBytes(16));
      const network: Obj = {
        ID: id,
        Name: spec.name,
        Created: now(),
        Labels: spec.labels,
        Options: spec.options,
        Internal: spec.internal,
        Attachable: spec.attachable,
        Ingress: ingress,
        ...(ingress ? { NodeAddrs: {} } : {}),
        Subnet: subnet,
        Gateway: gateway,
        ...(ipRange ? { IPRange: ipRange } : {}),
        VNI: allocateVni(this.all().map((n) => n.VNI as number)),
        MTU: spec.mtu ?? (encrypted ? ENCRYPTED_MTU : OVERLAY_MTU),
      };
      await this.store.create('networks', id, network, { name: spec.name });
      return { Id: id, Warning: '' };
    });
    this.queue = run.catch(() => undefined);
    return run;
  }

  /**
   * The network as `network inspect --verbose` shows it: with its Peers (the nodes whose tasks are on it:
   * hostname and address) and Services (VIP, published ports, and each task's endpoint and node).
   */
  verbose(n: Obj): Obj {
    const nodes = new Map(this.store.list('nodes').map((e) => [e.obj.ID as string, e.obj]));
    const services: Obj = {};
    const peers = new Map<string, Obj>();
    const tasks = this.store.list('tasks').map((e) => e.obj).filter((t) => t.Status?.State === 'running' && t.DesiredState === 'running');
    for (const e of this.store.list('services')) {
      const s = e.obj;
      const mine = tasks.filter((t) => t.ServiceID === s.ID && (t.NetworksAttachments ?? []).some((a: Obj) => a.Network?.ID === n.ID));
      if (mine.length === 0 && !serviceNetworks(s.Spec).some((r) => r.Target === n.ID)) continue;
      const vip = (s.Endpoint?.VirtualIPs ?? []).find((v: Obj) => v.NetworkID === n.ID);
      services[s.Spec.Name] = {
        VIP: vip ? String(vip.Addr).split('/')[0] : '',
        Ports: (s.Endpoint?.Ports ?? []).map((p: Obj) => `Target: ${p.TargetPort}, Publish: ${p.PublishedPort ?? 0}`),
        LocalLBIndex: 0,
        Tasks: mine.map((t) => {
          const node = nodes.get(t.NodeID);
          const address = (t.NetworksAttachments as Obj[]).find((a) => a.Network?.ID === n.ID)!.Addresses[0];
          if (node) peers.set(node.ID, { Name: node.Description?.Hostname ?? node.ID, IP: node.Status?.Addr ?? '' });
          return { Name: `${s.Spec.Name}.${t.Slot ?? t.NodeID}.${t.ID}`, EndpointID: t.ID, EndpointIP: String(address).split('/')[0], Info: { 'Host IP': tunnelAddr(node) ?? '' } };
        }),
      };
    }
    // Nodes with standalone containers on the network are its peers too.
    for (const a of this.store.list('attachments').map((e) => e.obj).filter((x) => x.NetworkID === n.ID)) {
      const node = nodes.get(a.NodeID);
      if (node) peers.set(node.ID, { Name: node.Description?.Hostname ?? node.ID, IP: node.Status?.Addr ?? '' });
    }
    return { ...networkResource(n), Peers: [...peers.values()], Services: services };
  }

  /** Removes the network; refused while a service uses it. */
  async remove(ref: string): Promise<void> {
    const e = this.entry(ref);
    const users = this.store.list('services').filter((s) => serviceNetworks(s.obj.Spec).some((n) => n.Target === e.obj.ID));
    const meshUser = e.obj.Ingress ? this.store.list('services').find((s) => ingressPorts(s.obj).length > 0) : undefined;
    if (meshUser) throw new Conflict(`ingress network cannot be removed because service ${meshUser.obj.ID} depends on it`);
    const attachment = this.store.list('attachments').find((a) => a.obj.NetworkID === e.obj.ID);
    if (attachment) throw new Conflict(`rpc error: code = FailedPrecondition desc = network ${e.obj.Name} is in use by task ${attachment.obj.ID}`);
    if (users.length > 0) {
      throw new Conflict(`rpc error: code = FailedPrecondition desc = network ${e.obj.Name} is in use by service ${users[0]!.obj.ID}`);
    }
    await this.store.remove('networks', e.obj.ID, { name: e.obj.Name });
  }
}

/** A service's network attachments (TaskTemplate.Networks, or the older top-level Networks). */
export function serviceNetworks(spec: Obj | undefined): Array<{ Target: string; Aliases?: string[] }> {
  return spec?.TaskTemplate?.Networks ?? spec?.Networks ?? [];
}

/**
 * Checks a service spec's networks and names them by id, as swarmkit stores them: the older top-level
 * Networks move into TaskTemplate.Networks; each Target (an id, a name or an id prefix) must be a swarm
 * network of the store.
 */
export function resolveServiceNetworks(store: ClusterStore, spec: Obj): void {
  const tt = spec.TaskTemplate;
  const refs = [...(Array.isArray(tt.Networks) ? tt.Networks : []), ...(Array.isArray(spec.Networks) ? spec.Networks : [])];
  delete spec.Networks;
  if (refs.length === 0) {
    delete tt.Networks;
    return;
  }
  const seen = new Set<string>();
  tt.Networks = refs.map((ref: unknown) => {
    const r = ref as Obj;
    if (r === null || typeof r !== 'object' || typeof r.Target !== 'string' || r.Target === '') throw new InvalidParameter('each network attachment must be an object with a Target');
    if (r.Aliases !== undefined && (!Array.isArray(r.Aliases) || r.Aliases.some((a: unknown) => typeof a !== 'string'))) throw new InvalidParameter('network Aliases must be a list of strings');
    let e: Entry;
    try {
      e = lookup(store, 'networks', r.Target, (o) => o.Name, 'network');
    } catch (err) {
      if (err instanceof NotFound) throw new NotFound(`network ${r.Target} not found`);
      throw err;
    }
    if (seen.has(e.obj.ID)) throw new InvalidParameter(`rpc error: code = InvalidArgument desc = service cannot have multiple attachments to the same network ${e.obj.Name}`);
    seen.add(e.obj.ID);
    return { Target: e.obj.ID, ...(r.Aliases?.length ? { Aliases: r.Aliases } : {}), ...(r.DriverOpts ? { DriverOpts: r.DriverOpts } : {}) };
  });
}
