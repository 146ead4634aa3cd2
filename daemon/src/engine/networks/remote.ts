/**
 * Networks of plugin drivers ("remote" drivers, as Docker calls them): the plugin's NetworkDriver makes the
 * network and its endpoints, and hands each joining container an interface it made on the host, which the
 * Host moves into the container's namespace. Addresses come from the plugin's IpamDriver when the network
 * names one (`--ipam-driver`), else from the engine's own allocation. IPv4 only. The ports a container
 * publishes on such a network are forwarded to its endpoint's address, which the host reaches by its route
 * through the plugin's interface (publish.ts).
 */
import { EngineError, errorMessage, InvalidParameter, NotFound } from '../../errors.js';
import { newId } from '../../util/ids.js';
import { log } from '../../util/log.js';
import { formatIPv4, formatSubnet, macFromIPv4, parseCIDR, parseIPv4 } from './ipv4.js';
import type { NetworkEntry } from './store.js';
import type { EndpointRecord, EndpointRequest, IPAMPool } from './types.js';
import type { NetworkContext } from './context.js';
import { allocate } from './endpoint.js';

/** A plugin's driver as the network service calls it (`Interface.Method` with a JSON body). */
export interface NetworkPluginDriver {
  /** The name networks record it under (a managed plugin's full name). */
  name: string;
  call<T = any>(method: string, body: unknown): Promise<T>;
}

/** Where plugin drivers are found (engine/plugins/netdrivers.ts). */
export interface NetworkPlugins {
  /** The network driver plugin of that name; undefined when no plugin has it. */
  networkDriver(name: string): Promise<NetworkPluginDriver | undefined>;
  ipamDriver(name: string): Promise<NetworkPluginDriver | undefined>;
}

/** What a plugin network keeps beside its record. */
export interface RemoteState {
  /** The IPAM plugin's pool and gateway (CIDR, as it answered), when the network has one. */
  ipam?: { poolId: string; gateway: string; addressSpace: string };
}

const GATEWAY_REQUEST = { RequestAddressType: 'com.docker.network.gateway' };

async function need(lookup: Promise<NetworkPluginDriver | undefined> | undefined, name: string): Promise<NetworkPluginDriver> {
  const driver = await lookup;
  if (!driver) throw new NotFound(`plugin "${name}" not found`);
  return driver;
}

/** An `a.b.c.d/n` a plugin answered, checked. */
function cidrOf(text: unknown, what: string): { address: string; prefixLen: number } {
  const parsed = typeof text === 'string' ? parseCIDR(text) : undefined;
  if (!parsed) throw new EngineError(`the IPAM plugin answered an invalid ${what}: ${JSON.stringify(text)}`);
  return { address: formatIPv4(parsed.address), prefixLen: parsed.subnet.prefix };
}

export interface RemoteCreate {
  id: string;
  driverName: string;
  ipamName?: string;
  options: Record<string, string>;
  ipamOptions: Record<string, string>;
  /** The client's pool; `gatewayGiven` when it named the gateway. */
  pool?: { subnet: string; ipRange?: string; gateway?: string };
  /** The engine's pool when the network has no IPAM plugin. */
  defaultPool: () => Promise<IPAMPool>;
}

/** Makes a network with the plugin: its pool (the IPAM plugin's or the engine's), then CreateNetwork. */
export async function createRemote(ctx: NetworkContext, c: RemoteCreate): Promise<{ driver: string; ipamDriver: string; pool: IPAMPool; state: RemoteState }> {
  const driver = await need(ctx.plugins?.networkDriver(c.driverName), c.driverName);
  const ipam = c.ipamName ? await need(ctx.plugins?.ipamDriver(c.ipamName), c.ipamName) : undefined;
  const state: RemoteState = {};
  let pool: IPAMPool;
  let addressSpace = 'LocalDefault';
  if (ipam) {
    const spaces = await ipam.call<{ LocalDefaultAddressSpace?: string }>('IpamDriver.GetDefaultAddressSpaces', {});
    addressSpace = spaces.LocalDefaultAddressSpace || 'local';
    const requested = await ipam.call<{ PoolID?: string; Pool?: string }>('IpamDriver.RequestPool', {
      AddressSpace: addressSpace,
      Pool: c.pool?.subnet ?? '',
      SubPool: c.pool?.ipRange ?? '',
      Options: c.ipamOptions,
      V6: false,
    });
    const subnet = typeof requested.Pool === 'string' ? parseCIDR(requested.Pool) : undefined;
    if (!subnet || typeof requested.PoolID !== 'string') throw new EngineError(`the IPAM plugin ${ipam.name} answered an invalid pool: ${JSON.stringify(requested)}`);
    try {
      const gw = await ipam.call<{ Address?: string }>('IpamDriver.RequestAddress', { PoolID: requested.PoolID, Address: c.pool?.gateway ?? '', Options: GATEWAY_REQUEST });
      const gateway = cidrOf(gw.Address, 'gateway');
      state.ipam = { poolId: requested.PoolID, gateway: `${gateway.address}/${gateway.prefixLen}`, addressSpace };
      pool = { Subnet: formatSubnet(subnet.subnet), Gateway: gateway.address };
      if (c.pool?.ipRange) pool.IPRange = c.pool.ipRange;
    } catch (err) {
      await ipam.call('IpamDriver.ReleasePool', { PoolID: requested.PoolID }).catch(() => undefined);
      throw err;
    }
  } else {
    pool = await c.defaultPool();
  }
  const prefix = parseCIDR(pool.Subnet)!.subnet.prefix;
  try {
    await driver.call('NetworkDriver.CreateNetwork', {
      NetworkID: c.id,
      Options: { 'com.docker.network.enable_ipv6': false, 'com.docker.network.generic': c.options },
      IPv4Data: [{ AddressSpace: addressSpace, Pool: pool.Subnet, Gateway: `${pool.Gateway}/${prefix}`, AuxAddresses: {} }],
      IPv6Data: [],
    });
  } catch (err) {
    if (ipam && state.ipam) await releaseIpam(ipam, state.ipam);
    throw err;
  }
  return { driver: driver.name, ipamDriver: ipam?.name ?? 'default', pool, state };
}

async function releaseIpam(ipam: NetworkPluginDriver, s: NonNullable<RemoteState['ipam']>): Promise<void> {
  await ipam.call('IpamDriver.ReleaseAddress', { PoolID: s.poolId, Address: s.gateway.split('/')[0] }).catch((err) => log.warn('cannot release a gateway address', { error: errorMessage(err) }));
  await ipam.call('IpamDriver.ReleasePool', { PoolID: s.poolId }).catch((err) => log.warn('cannot release an address pool', { error: errorMessage(err) }));
}

/** Deletes the network with its plugin (DeleteNetwork), then its pool with the IPAM plugin. */
export async function destroyRemote(ctx: NetworkContext, entry: NetworkEntry): Promise<void> {
  const driver = await need(ctx.plugins?.networkDriver(entry.network.Driver), entry.network.Driver);
  await driver.call('NetworkDriver.DeleteNetwork', { NetworkID: entry.network.Id });
  const ipamState = entry.remote?.ipam;
  if (ipamState) {
    const ipam = await ctx.plugins?.ipamDriver(entry.network.IPAM.Driver).catch(() => undefined);
    if (ipam) await releaseIpam(ipam, ipamState);
  }
}

interface JoinAnswer {
  InterfaceName?: { SrcName?: string; DstPrefix?: string };
  Gateway?: string;
  StaticRoutes?: Array<{ Destination?: string; RouteType?: number; NextHop?: string }> | null;
}

/**
 * The container joins the plugin's network: its address (the IPAM plugin's or the engine's), CreateEndpoint,
 * Join in its namespace, and the interface the plugin named moved into the namespace by the Host.
 */
export async function joinRemote(
  ctx: NetworkContext,
  entry: NetworkEntry,
  endpoint: EndpointRecord,
  request: EndpointRequest,
  pid: number,
  index: number,
  defaultRoute: boolean,
): Promise<void> {
  const network = entry.network;
  const driver = await need(ctx.plugins?.networkDriver(network.Driver), network.Driver);
  const ipamState = entry.remote?.ipam;
  const ipam = ipamState ? await need(ctx.plugins?.ipamDriver(network.IPAM.Driver), network.IPAM.Driver) : undefined;
  let address: string;
  let prefixLen: number;
  if (ipam && ipamState) {
    const answer = await ipam.call<{ Address?: string }>('IpamDriver.RequestAddress', { PoolID: ipamState.poolId, Address: request.ipv4Address ?? '', Options: {} });
    ({ address, prefixLen } = cidrOf(answer.Address, 'address'));
  } else {
    const allocated = allocate(ctx, entry, endpoint.containerId, request.ipv4Address);
    address = formatIPv4(allocated.address);
    prefixLen = allocated.subnet.prefix;
  }
  endpoint.ipv4 = address;
  endpoint.prefixLen = prefixLen;
  endpoint.macAddress = request.macAddress ?? macFromIPv4(parseIPv4(address)!);
  const ids = { NetworkID: network.Id, EndpointID: endpoint.endpointId };
  let stage: 'address' | 'endpoint' | 'joined' = 'address';
  try {
    const created = await driver.call<{ Interface?: { Address?: string; MacAddress?: string } | null }>('NetworkDriver.CreateEndpoint', {
      ...ids,
      Interface: { Address: `${address}/${prefixLen}`, AddressIPv6: '', MacAddress: endpoint.macAddress },
      Options: { ...(request.driverOpts ?? {}) },
    });
    stage = 'endpoint';
    if (created.Interface?.Address || created.Interface?.MacAddress) throw new EngineError(`plugin ${driver.name} answered an interface for an endpoint that has one`);
    const joined = await driver.call<JoinAnswer>('NetworkDriver.Join', { ...ids, SandboxKey: `/proc/${pid}/ns/net`, Options: {} });
    stage = 'joined';
    const src = joined.InterfaceName?.SrcName;
    if (!src) throw new EngineError(`plugin ${driver.name} named no interface in its Join answer`);
    const dst = `${joined.InterfaceName?.DstPrefix || 'eth'}${index}`;
    const routes = (joined.StaticRoutes ?? []).map((r) => {
      if (typeof r.Destination !== 'string') throw new EngineError(`plugin ${driver.name} answered a static route without a destination`);
      return r.RouteType === 1 || !r.NextHop ? { destination: r.Destination } : { destination: r.Destination, nextHop: r.NextHop };
    });
    await ctx.host.adoptInterface({
      pid,
      hostName: src,
      containerInterface: dst,
      address,
      prefixLen,
      macAddress: endpoint.macAddress,
      gateway: defaultRoute && !network.Internal && joined.Gateway ? joined.Gateway : undefined,
      routes,
    });
    endpoint.containerInterface = dst;
    endpoint.remote = true;
  } catch (err) {
    await undo(entry, endpoint, stage, driver, ipam);
    if (err instanceof InvalidParameter || err instanceof NotFound) throw err;
    throw new EngineError(`cannot connect container ${endpoint.containerName} to network ${network.Name}: ${errorMessage(err)}`, { cause: err });
  }
}

async function undo(entry: NetworkEntry, ep: EndpointRecord, stage: 'address' | 'endpoint' | 'joined', driver: NetworkPluginDriver, ipam?: NetworkPluginDriver): Promise<void> {
  const ids = { NetworkID: entry.network.Id, EndpointID: ep.endpointId };
  const warn = (what: string) => (err: unknown) => log.warn(`cannot ${what} on a plugin network`, { network: entry.network.Name, container: ep.containerId, error: errorMessage(err) });
  if (stage === 'joined') await driver.call('NetworkDriver.Leave', ids).catch(warn('leave'));
  if (stage !== 'address') await driver.call('NetworkDriver.DeleteEndpoint', ids).catch(warn('delete an endpoint'));
  const ipamState = entry.remote?.ipam;
  if (ipam && ipamState && ep.ipv4) await ipam.call('IpamDriver.ReleaseAddress', { PoolID: ipamState.poolId, Address: ep.ipv4 }).catch(warn('release an address'));
}

/** The container leaves the plugin's network: Leave, DeleteEndpoint, its address released. Failures are logged. */
export async function leaveRemote(ctx: NetworkContext, entry: NetworkEntry, ep: EndpointRecord): Promise<void> {
  if (!ep.remote) return;
  const driver = await ctx.plugins?.networkDriver(entry.network.Driver).catch(() => undefined);
  const ipam = entry.remote?.ipam ? await ctx.plugins?.ipamDriver(entry.network.IPAM.Driver).catch(() => undefined) : undefined;
  if (!driver) {
    log.warn('the plugin of a network is gone: its endpoint is dropped', { network: entry.network.Name, driver: entry.network.Driver });
    return;
  }
  await undo(entry, ep, 'joined', driver, ipam);
}
