/**
 * Endpoints: a container's place on one network (its addresses allocated, its veth plugged into the bridge,
 * or a record alone on host and none), and their settings as inspect shows them.
 */
import { Conflict, errorMessage } from '../../errors.js';
import { newId } from '../../util/ids.js';
import { log } from '../../util/log.js';
import { formatIPv4, macFromIPv4, parseCIDR, parseIPv4, type Subnet } from './ipv4.js';
import { formatIPv6, parseCIDR6, parseIPv6, type Subnet6 } from '../../util/ipv6.js';
import { IPV4, IPV6, pickAddress } from './addresses.js';
import type { NetworkEntry } from './store.js';
import type { EndpointRecord, EndpointRequest, EndpointSettings } from './types.js';
import { ipv4Pool, ipv6Pool, type NetworkContext } from './context.js';
import { joinRemote, leaveRemote } from './remote.js';
import { leaveSwarm } from './swarm.js';

function randomInterfaceName(): string {
  return `veth${newId().slice(0, 7)}`;
}

export function endpointSettings(ctx: NetworkContext, networkId: string, ep: EndpointRecord | undefined, request?: EndpointRequest): EndpointSettings {
  const entry = ctx.entries.get(networkId);
  const gateway = ep?.ipv4 && entry ? (ipv4Pool(entry.network)?.Gateway ?? '') : '';
  const gateway6 = ep?.ipv6 && entry ? (ipv6Pool(entry.network)?.Gateway ?? '') : '';
  const staticIPv4 = ep ? (ep.staticIPv4 ? ep.ipv4 : undefined) : request?.ipv4Address;
  const staticIPv6 = ep ? (ep.staticIPv6 ? ep.ipv6 : undefined) : request?.ipv6Address;
  const linkLocalIPs = ep ? ep.linkLocalIPs : request?.linkLocalIPs;
  const ipamConfig: EndpointSettings['IPAMConfig'] = staticIPv4 || staticIPv6 || linkLocalIPs ? {} : null;
  if (staticIPv4) ipamConfig!.IPv4Address = staticIPv4;
  if (staticIPv6) ipamConfig!.IPv6Address = staticIPv6;
  if (linkLocalIPs) ipamConfig!.LinkLocalIPs = [...linkLocalIPs];
  const aliases = ep ? ep.aliases : request?.aliases;
  const links = ep ? ep.links : request?.links;
  const driverOpts = ep ? ep.driverOpts : request?.driverOpts;
  const userDefined = entry !== undefined && !ctx.isPredefined(entry);
  // What the client gave is shown as given (null when it gave nothing), before the start too.
  return {
    IPAMConfig: ipamConfig,
    Links: links && links.length > 0 ? [...links] : null,
    Aliases: aliases && aliases.length > 0 ? [...aliases] : null,
    MacAddress: ep ? ep.macAddress : (request?.macAddress ?? ''),
    DriverOpts: driverOpts ? { ...driverOpts } : null,
    GwPriority: 0,
    NetworkID: networkId,
    EndpointID: ep?.endpointId ?? '',
    Gateway: gateway,
    IPAddress: ep?.ipv4 ?? '',
    IPPrefixLen: ep?.ipv4 ? ep.prefixLen : 0,
    IPv6Gateway: gateway6,
    GlobalIPv6Address: ep?.ipv6 ?? '',
    GlobalIPv6PrefixLen: ep?.ipv6 ? (ep.prefixLen6 ?? 0) : 0,
    DNSNames: ep && userDefined ? [ep.containerName, ...(ep.aliases ?? []), ep.containerId.slice(0, 12)] : null,
  };
}

export function containerNetworks(ctx: NetworkContext, containerId: string): Record<string, EndpointSettings> {
  const out: Record<string, EndpointSettings> = {};
  for (const entry of ctx.entries.values()) {
    const ep = entry.endpoints.get(containerId);
    if (ep && !ep.gateway) out[entry.network.Name] = endpointSettings(ctx, entry.network.Id, ep);
  }
  return out;
}

export function renamed(ctx: NetworkContext, containerId: string, newName: string): Promise<void> {
  return ctx.lock.run(async () => {
    for (const entry of ctx.entries.values()) {
      const ep = entry.endpoints.get(containerId);
      if (!ep) continue;
      ep.containerName = newName.replace(/^\//, '');
      await ctx.saveEndpoints(entry);
    }
  });
}

/** The host ends of the container's veths (its bridge endpoints), in no particular order. */
export function hostInterfaces(ctx: NetworkContext, containerId: string): string[] {
  const out: string[] = [];
  for (const entry of ctx.entries.values()) {
    const ep = entry.endpoints.get(containerId);
    if (ep?.hostInterface) out.push(ep.hostInterface);
  }
  return out;
}

/**
 * The other containers' interfaces a container's frames may be handed to directly (their MAC address and
 * the host end of their veth): those of the bridge networks it shares with them whose frames skip the bridge.
 */
export function directPeers(ctx: NetworkContext, containerId: string): Array<{ mac: string; hostInterface: string }> {
  const out: Array<{ mac: string; hostInterface: string }> = [];
  for (const entry of ctx.entries.values()) {
    if (entry.network.Driver !== 'bridge' || !entry.endpoints.get(containerId)?.hostInterface || !deliversDirectly(ctx, entry)) continue;
    for (const ep of entry.endpoints.values()) {
      if (ep.containerId !== containerId && ep.hostInterface && ep.macAddress && !ep.remote) out.push({ mac: ep.macAddress, hostInterface: ep.hostInterface });
    }
  }
  return out;
}

export function allocate(ctx: NetworkContext, entry: NetworkEntry, containerId: string, requested: string | undefined): { address: number; subnet: Subnet; gateway: number } {
  const pool = ipv4Pool(entry.network);
  const subnet = pool ? parseCIDR(pool.Subnet)?.subnet : undefined;
  const gateway = pool?.Gateway ? parseIPv4(pool.Gateway) : undefined;
  if (!pool || !subnet || gateway === undefined) throw new Conflict(`network ${entry.network.Name} has no IPv4 subnet`);
  const taken = otherAddresses(ctx, entry, containerId, (ep) => ep.ipv4);
  const address = pickAddress(IPV4, pool, BigInt(gateway), entry.network.Name, taken, requested, entry.lastAllocated);
  return { address: Number(address), subnet, gateway };
}

/** The addresses of one family held by the network's endpoints other than the container's. */
function otherAddresses(ctx: NetworkContext, entry: NetworkEntry, containerId: string, address: (ep: EndpointRecord) => string | undefined): string[] {
  const out: string[] = [];
  for (const ep of entry.endpoints.values()) {
    const a = address(ep);
    if (a && ep.containerId !== containerId) out.push(a);
  }
  return out;
}

/** An IPv6 address for the container on a network with EnableIPv6 (the requested one, or the next free one). */
function allocate6(ctx: NetworkContext, entry: NetworkEntry, containerId: string, requested: string | undefined): { address: bigint; subnet: Subnet6; gateway: bigint } {
  const pool = ipv6Pool(entry.network);
  const subnet = pool ? parseCIDR6(pool.Subnet)?.subnet : undefined;
  const gateway = pool?.Gateway ? parseIPv6(pool.Gateway) : undefined;
  if (!pool || !subnet || gateway === undefined) throw new Conflict(`network ${entry.network.Name} has no IPv6 subnet`);
  const taken = otherAddresses(ctx, entry, containerId, (ep) => ep.ipv6);
  const address = pickAddress(IPV6, pool, gateway, entry.network.Name, taken, requested, entry.lastAllocated6);
  return { address, subnet, gateway };
}

/**
 * Whether frames between the network's containers may skip the bridge (VethSpec.direct): only when this
 * engine's rules let all of them through, as they do unless icc is off.
 */
function deliversDirectly(ctx: NetworkContext, entry: NetworkEntry): boolean {
  return ctx.opts.iptables && entry.network.Options['com.docker.network.bridge.enable_icc'] !== 'false';
}

/** Deletes the endpoint's host interface, if it has one (the container's end goes with it), its direct delivery first. */
export async function unplug(ctx: NetworkContext, entry: NetworkEntry, ep: EndpointRecord): Promise<void> {
  if (ep.remote) return leaveRemote(ctx, entry, ep);
  if (ep.swarmAttachment) return leaveSwarm(ctx, entry, ep, { unplug: true, wait: true });
  if (!ep.hostInterface) return;
  await undirect(ctx, entry, ep);
  await ctx.host.removeInterface(ep.hostInterface);
}

/** Ends the endpoint's direct delivery; a failure is only logged (the bridge still delivers). */
export async function undirect(ctx: NetworkContext, entry: NetworkEntry, ep: EndpointRecord): Promise<void> {
  if (!ep.hostInterface || !ep.macAddress) return;
  const bridge = entry.bridge ?? ctx.opts.bridgeName;
  await ctx.host.dropDirectDelivery(bridge, ep.macAddress).catch((err) => {
    log.warn('cannot end the direct delivery of a container interface', { bridge, interface: ep.hostInterface, error: errorMessage(err) });
  });
}

/** Records the container's endpoint in one network and, for a bridge network, plugs it in. */
export async function join(
  ctx: NetworkContext,
  entry: NetworkEntry,
  container: { id: string; name: string },
  request: EndpointRequest,
  pid: number | undefined,
  index: number,
  defaultRoute = index === 0,
  defaultRoute6 = defaultRoute,
): Promise<EndpointRecord> {
  const containerName = container.name.replace(/^\//, '');
  // A record left by an earlier run of this container (never disconnected) is replaced.
  const stale = entry.endpoints.get(container.id);
  if (stale) await unplug(ctx, entry, stale).catch(() => undefined);
  const endpoint: EndpointRecord = { containerId: container.id, containerName, endpointId: newId(), ipv4: '', prefixLen: 0, macAddress: '', pid };
  if (request.aliases) endpoint.aliases = [...request.aliases];
  if (request.links) endpoint.links = [...request.links];
  if (request.driverOpts) endpoint.driverOpts = { ...request.driverOpts };
  if (request.linkLocalIPs) endpoint.linkLocalIPs = [...request.linkLocalIPs];
  if (entry.remote && pid !== undefined) {
    await joinRemote(ctx, entry, endpoint, request, pid, index, defaultRoute);
    entry.endpoints.set(container.id, endpoint);
    try {
      await ctx.saveEndpoints(entry);
    } catch (err) {
      entry.endpoints.delete(container.id);
      await leaveRemote(ctx, entry, endpoint);
      throw err;
    }
    return endpoint;
  }
  if (entry.network.Driver !== 'bridge' || pid === undefined) {
    entry.endpoints.set(container.id, endpoint);
    await ctx.saveEndpoints(entry);
    return endpoint;
  }
  const { address, subnet, gateway } = allocate(ctx, entry, container.id, request.ipv4Address);
  const v6 = ctx.hasIPv6(entry) ? allocate6(ctx, entry, container.id, request.ipv6Address) : undefined;
  endpoint.ipv4 = formatIPv4(address);
  endpoint.prefixLen = subnet.prefix;
  endpoint.macAddress = request.macAddress ?? macFromIPv4(address);
  endpoint.hostInterface = randomInterfaceName();
  endpoint.containerInterface = `eth${index}`;
  if (request.ipv4Address) endpoint.staticIPv4 = true;
  else entry.lastAllocated = endpoint.ipv4;
  if (v6) {
    endpoint.ipv6 = formatIPv6(v6.address);
    endpoint.prefixLen6 = v6.subnet.prefix;
    if (request.ipv6Address) endpoint.staticIPv6 = true;
    else entry.lastAllocated6 = endpoint.ipv6;
  }
  // The allocation is written while the interface is made: a crash in between leaves either a record that
  // recovery releases or an interface on the bridge that no record owns, which recovery removes.
  entry.endpoints.set(container.id, endpoint);
  const [saved, attached] = await Promise.allSettled([
    ctx.store.save(entry),
    ctx.host.attachVeth({
      pid,
      bridge: entry.bridge ?? ctx.opts.bridgeName,
      hostInterface: endpoint.hostInterface,
      containerInterface: `eth${index}`,
      address: endpoint.ipv4,
      prefixLen: subnet.prefix,
      gateway: !defaultRoute || entry.network.Internal ? undefined : formatIPv4(gateway),
      macAddress: endpoint.macAddress,
      mtu: ctx.mtuOf(entry),
      direct: deliversDirectly(ctx, entry),
      ...(endpoint.linkLocalIPs ? { linkLocal: endpoint.linkLocalIPs } : {}),
      ...(v6
        ? { ipv6: { address: endpoint.ipv6!, prefixLen: v6.subnet.prefix, gateway: !defaultRoute6 || entry.network.Internal ? undefined : formatIPv6(v6.gateway) } }
        : {}),
    }),
  ]);
  if (saved.status === 'rejected' || attached.status === 'rejected') {
    const err = attached.status === 'rejected' ? attached.reason : (saved as PromiseRejectedResult).reason;
    if (attached.status === 'fulfilled') await unplug(ctx, entry, endpoint).catch(() => undefined);
    entry.endpoints.delete(container.id);
    await ctx.store.save(entry).catch(() => undefined);
    throw new Error(`cannot connect container ${containerName} to network ${entry.network.Name}: ${errorMessage(err)}`, { cause: err });
  }
  return endpoint;
}

