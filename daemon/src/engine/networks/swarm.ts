/**
 * Swarm overlay networks on this node for standalone containers (`docker run --network <attachable overlay>`,
 * `network connect`): the swarm's managers give the container an address of the network (an attachment,
 * engine/cluster/network/attachable.ts), this node builds the network's sandbox, and the container gets an
 * interface in it. The network has a local record here while one of this node's containers is on it (driver
 * `overlay`, scope `swarm`; the network list and inspect show the swarm's view of it, with these containers),
 * kept in the network store so that a daemon restart finds the containers that run on.
 */
import { errorMessage, InvalidParameter } from '../../errors.js';
import { newId } from '../../util/ids.js';
import { log } from '../../util/log.js';
import { macFromIPv4, parseIPv4 } from './ipv4.js';
import type { NetworkEntry } from './store.js';
import type { EndpointRecord, EndpointRequest, NetworkRecord } from './types.js';
import type { NetworkContext } from './context.js';

/** What the swarm's node part gives the network service (engine/cluster's ClusterService). */
export interface SwarmAttacher {
  /** Whether this node is in a swarm: a network name unknown here may be a swarm network. */
  active(): boolean;
  /** An address of the network `ref` (id, name or id prefix) for the container, from the managers. */
  attach(ref: string, containerId: string, names: string[]): Promise<SwarmAttachment>;
  /** The container's interface on the network (the node builds the network's sandbox first). */
  plug(spec: { networkId: string; pid: number; ifname: string; address: string; prefixLen: number; macAddress: string }): Promise<void>;
  /** Removes the container's interface on an overlay network. */
  unplug(pid: number, ifname: string): Promise<void>;
  /** Gives the attachment's address back. */
  detach(attachmentId: string): Promise<void>;
  /** What the embedded DNS answers a container on the swarm networks `networkIds` (services, tasks, attached containers). */
  lookup(networkIds: readonly string[], name: string): string[] | undefined;
}

export interface SwarmAttachment {
  ID: string;
  Network: { ID: string; Name: string; Subnet: string; Gateway: string; VNI: number; MTU: number; Internal: boolean };
  /** `a.b.c.d/n`. */
  Address: string;
}

export const isSwarmEntry = (entry: NetworkEntry | undefined): boolean => entry?.network.Driver === 'overlay';

/** Whether `ref`, unknown here, may name a swarm network. */
export const mayBeSwarm = (ctx: NetworkContext): boolean => ctx.swarm?.active() === true;

/** A stand-in for a swarm network not known here yet, against which a container's endpoint config is checked. */
export function placeholder(ref: string): NetworkEntry {
  return { network: overlayRecord({ ID: '', Name: ref, Subnet: '', Gateway: '', VNI: 0, MTU: 0, Internal: false }), endpoints: new Map() };
}

function overlayRecord(n: SwarmAttachment['Network']): NetworkRecord {
  return {
    Name: n.Name,
    Id: n.ID,
    Created: new Date().toISOString(),
    Scope: 'swarm',
    Driver: 'overlay',
    EnableIPv4: true,
    EnableIPv6: false,
    IPAM: { Driver: 'default', Options: null, Config: n.Subnet ? [{ Subnet: n.Subnet, Gateway: n.Gateway }] : [] },
    Internal: n.Internal,
    Attachable: true,
    Ingress: false,
    ConfigFrom: { Network: '' },
    ConfigOnly: false,
    Options: { 'com.docker.network.driver.overlay.vxlanid_list': String(n.VNI), 'com.docker.network.driver.mtu': String(n.MTU) },
    Labels: {},
  };
}

/** Why a sandbox (a container with a network policy) cannot join a swarm network: its policy would not hold there. */
export function sandboxOnSwarm(name: string): string {
  return `a container with a network policy cannot join the swarm network ${name}: the policy is not enforced on swarm networks yet`;
}

/** Refuses ports on an internal swarm network (its containers have no way out to publish them through). */
export function checkSwarmPorts(name: string, internal: boolean, ports: number): void {
  if (ports > 0 && internal) throw new InvalidParameter(`ports cannot be published on network ${name}: it is an internal network`);
}

/**
 * The way out of a container whose first network is a swarm network: an endpoint on the default bridge
 * (`eth<index>`, with the default route), where its ports are published, as Docker's docker_gwbridge. None on
 * an internal network.
 */
export async function joinGateway(
  ctx: NetworkContext,
  first: NetworkEntry,
  containerId: string,
  join: (entry: NetworkEntry) => Promise<EndpointRecord>,
): Promise<{ entry: NetworkEntry; endpoint: EndpointRecord } | undefined> {
  const bridge = ctx.byName('bridge');
  if (first.network.Internal || !bridge || bridge.endpoints.has(containerId)) return undefined;
  const endpoint = await join(bridge);
  endpoint.gateway = true;
  await ctx.saveEndpoints(bridge);
  return { entry: bridge, endpoint };
}

/** A container's attachment to a swarm network and its interface there, not yet in the network's record. */
export interface PreparedSwarm {
  att: SwarmAttachment;
  endpoint: EndpointRecord;
}

/**
 * The container's first steps onto the swarm network `ref` as `eth<index>`, outside the context's lock (they
 * wait for the managers and for the sandbox): an attachment from the managers, then the interface. Undone
 * when a step fails.
 */
export async function prepareSwarm(
  ctx: NetworkContext,
  ref: string,
  container: { id: string; name: string },
  request: EndpointRequest,
  pid: number,
  index: number,
): Promise<PreparedSwarm> {
  const swarm = ctx.swarm;
  if (!swarm?.active()) throw new InvalidParameter(`network ${ref} is a swarm network and this node is not in a swarm`);
  if (request.ipv4Address || request.ipv6Address) throw new InvalidParameter(`a static address cannot be given on the swarm network ${ref}`);
  const containerName = container.name.replace(/^\//, '');
  const att = await swarm.attach(ref, container.id, [containerName, ...(request.aliases ?? [])]);
  const [address, prefix] = att.Address.split('/');
  const endpoint: EndpointRecord = {
    containerId: container.id, containerName, endpointId: newId(), ipv4: address!, prefixLen: Number(prefix), macAddress: macFromIPv4(parseIPv4(address!)!),
    containerInterface: `eth${index}`, pid, swarmAttachment: att.ID,
  };
  if (request.aliases) endpoint.aliases = [...request.aliases];
  if (request.driverOpts) endpoint.driverOpts = { ...request.driverOpts };
  try {
    await swarm.plug({ networkId: att.Network.ID, pid, ifname: endpoint.containerInterface!, address: endpoint.ipv4, prefixLen: endpoint.prefixLen, macAddress: endpoint.macAddress });
  } catch (err) {
    await swarm.detach(att.ID).catch(() => undefined);
    throw new Error(`cannot connect container ${containerName} to network ${att.Network.Name}: ${errorMessage(err)}`, { cause: err });
  }
  return { att, endpoint };
}

/** Records a prepared join in the network's local record (made with the first container here). Under the context's lock. */
export async function recordSwarm(ctx: NetworkContext, p: PreparedSwarm): Promise<{ entry: NetworkEntry; endpoint: EndpointRecord }> {
  let entry = ctx.entries.get(p.att.Network.ID);
  if (!entry) ctx.entries.set(p.att.Network.ID, (entry = { network: overlayRecord(p.att.Network), endpoints: new Map() }));
  entry.endpoints.set(p.endpoint.containerId, p.endpoint);
  try {
    await ctx.store.save(entry);
  } catch (err) {
    entry.endpoints.delete(p.endpoint.containerId);
    await dropUnused(ctx, entry);
    throw err;
  }
  return { entry, endpoint: p.endpoint };
}

/** Undoes a prepared join that was not recorded: its interface and its attachment. */
export async function abandonSwarm(ctx: NetworkContext, p: PreparedSwarm): Promise<void> {
  await ctx.swarm?.unplug(p.endpoint.pid!, p.endpoint.containerInterface!).catch(() => undefined);
  await ctx.swarm?.detach(p.att.ID).catch(() => undefined);
}

/**
 * The container left a swarm network (its endpoint already out of the record): its interface removed when
 * `unplug` (it runs on), its address given back; the network's local record goes with its last container.
 * With `wait` false the managers are told in the background (a container's exit does not wait for them).
 */
export async function leaveSwarm(ctx: NetworkContext, entry: NetworkEntry, ep: EndpointRecord, opts: { unplug: boolean; wait: boolean }): Promise<void> {
  const swarm = ctx.swarm;
  if (opts.unplug && ep.pid && ep.containerInterface) {
    await swarm?.unplug(ep.pid, ep.containerInterface).catch((err) => log.warn('cannot remove a container interface of a swarm network', { network: entry.network.Name, error: errorMessage(err) }));
  }
  if (ep.swarmAttachment && swarm) {
    const released = swarm.detach(ep.swarmAttachment).catch((err) => log.warn('cannot release an address of a swarm network', { network: entry.network.Name, error: errorMessage(err) }));
    if (opts.wait) await released;
  }
  await dropUnused(ctx, entry);
}

/** Forgets the local record of a swarm network none of this node's containers is on any more. */
export async function dropUnused(ctx: NetworkContext, entry: NetworkEntry): Promise<void> {
  if (!isSwarmEntry(entry) || entry.endpoints.size > 0 || ctx.entries.get(entry.network.Id) !== entry) return;
  ctx.entries.delete(entry.network.Id);
  await ctx.store.remove(entry.network.Id).catch((err) => log.warn('cannot remove the record of a swarm network', { network: entry.network.Name, error: errorMessage(err) }));
}
