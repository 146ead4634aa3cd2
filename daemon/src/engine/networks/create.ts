/**
 * Validation of a network create request (POST /networks/create): the body as the client sent it becomes
 * a checked description of a user-defined bridge network, or a typed error naming the bad field. Then the
 * network is made: its address pools chosen, its record written and its bridge brought up.
 */
import { Conflict, Forbidden, InvalidParameter, NotFound, NotImplemented } from '../../errors.js';
import { contains, defaultBridgeCandidates, formatIPv4, formatSubnet, overlaps, parseCIDR, parseIPv4, subnetSize, type Subnet } from './ipv4.js';
import { contains6, formatIPv6, formatSubnet6, isIPv6Text, overlaps6, parseCIDR6, parseIPv6, poolSubnets, type Subnet6 } from '../../util/ipv6.js';
import { newId } from '../../util/ids.js';
import { nowNano, rfc3339Nano } from '../../util/json.js';
import type { NetworkEntry } from './store.js';
import type { NetworkRecord, IPAMPool } from './types.js';
import { ipv4Pool, ipv6Pool, type NetworkContext } from './context.js';
import { setUpBridge } from './bridges.js';
import { createRemote, destroyRemote } from './remote.js';

export interface NetworkCreateSpec {
  name: string;
  /** `bridge`, or the name of a network driver plugin. */
  driver: string;
  /** The IPAM driver plugin, when one is named (not `default`). */
  ipamDriver?: string;
  internal: boolean;
  attachable: boolean;
  labels: Record<string, string>;
  /** The Options as given (shown back by inspect). */
  options: Record<string, string>;
  /** Name of the bridge on the host, when the client chose it (com.docker.network.bridge.name). */
  bridgeName?: string;
  mtu?: number;
  masquerade: boolean;
  /** The IPv4 pool when the client gave one; otherwise the service picks a free range. */
  pool?: { subnet: Subnet; gateway: number; gatewayGiven: boolean; ipRange?: Subnet; auxiliary: Record<string, string> };
  /** EnableIPv6: the network has an IPv6 subnet too (the client's pool6, else one from the engine's ULA prefix). */
  enableIPv6: boolean;
  /** The IPv6 pool when the client gave one. */
  pool6?: { subnet: Subnet6; gateway: bigint; ipRange?: Subnet6; auxiliary: Record<string, string> };
  ipamOptions: Record<string, string>;
}

/**
 * Docker takes any name; here it starts with a letter or digit (the container engine's own keys start
 * otherwise), and holds no control character nor slash (it names the network in a URL path). Spaces are fine.
 */
const NAME = /^[a-zA-Z0-9][^\x00-\x1f\x7f/]*$/;
const INTERFACE_NAME = /^[A-Za-z0-9_.-]{1,15}$/;
const PREDEFINED = ['bridge', 'host', 'none'];

function isObject(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

function stringMap(value: unknown, field: string): Record<string, string> {
  if (value === undefined || value === null) return {};
  if (!isObject(value)) throw new InvalidParameter(`${field} must be an object of strings`);
  for (const [k, v] of Object.entries(value)) if (typeof v !== 'string') throw new InvalidParameter(`${field}.${k} must be a string`);
  return { ...(value as Record<string, string>) };
}

function bool(value: unknown, field: string): boolean {
  if (value === undefined || value === null) return false;
  if (typeof value !== 'boolean') throw new InvalidParameter(`${field} must be a boolean`);
  return value;
}

export function parseCreateRequest(body: unknown): NetworkCreateSpec {
  if (!isObject(body)) throw new InvalidParameter('request body must be a JSON object with at least a Name');
  const name = body.Name;
  if (typeof name !== 'string' || name === '') throw new InvalidParameter('Name is required to create a network');
  if (PREDEFINED.includes(name)) throw new Forbidden(`operation is not permitted on predefined ${name} network`);
  if (!NAME.test(name) || name.length > 128) {
    throw new InvalidParameter(`invalid network name ${JSON.stringify(name)}: it must start with a letter or digit and hold no slash or control character`);
  }
  const driver = body.Driver === undefined || body.Driver === null || body.Driver === '' ? 'bridge' : body.Driver;
  if (typeof driver !== 'string') throw new InvalidParameter('Driver must be a string');
  if (driver === 'host' || driver === 'null') throw new Forbidden(`only one instance of "${driver}" network is allowed`);
  if (['overlay', 'macvlan', 'ipvlan'].includes(driver)) throw new NotImplemented(`the ${driver} network driver is not supported yet; use bridge`);
  if (body.EnableIPv4 === false) throw new InvalidParameter('EnableIPv4 cannot be false: a network without IPv4 is not supported');
  if (bool(body.Ingress, 'Ingress')) throw new Forbidden('an ingress network can only be created in swarm mode');
  if (bool(body.ConfigOnly, 'ConfigOnly') || (isObject(body.ConfigFrom) && body.ConfigFrom.Network)) {
    throw new NotImplemented('config-only networks are not supported yet');
  }
  if (body.Scope !== undefined && body.Scope !== '' && body.Scope !== 'local') {
    throw new InvalidParameter(`invalid Scope ${JSON.stringify(body.Scope)}: a bridge network is local`);
  }
  const options = stringMap(body.Options, 'Options');
  const labels = stringMap(body.Labels, 'Labels');
  const spec: NetworkCreateSpec = {
    name,
    driver,
    internal: bool(body.Internal, 'Internal'),
    attachable: bool(body.Attachable, 'Attachable'),
    labels,
    options,
    masquerade: true,
    ipamOptions: {},
    enableIPv6: bool(body.EnableIPv6, 'EnableIPv6'),
  };
  const bridgeName = options['com.docker.network.bridge.name'];
  if (bridgeName !== undefined) {
    if (!INTERFACE_NAME.test(bridgeName)) throw new InvalidParameter(`invalid Options.com.docker.network.bridge.name ${JSON.stringify(bridgeName)}: at most 15 of [A-Za-z0-9_.-]`);
    spec.bridgeName = bridgeName;
  }
  const mtu = options['com.docker.network.driver.mtu'];
  if (mtu !== undefined) {
    const n = Number(mtu);
    if (!/^\d+$/.test(mtu) || n < 68 || n > 65535) throw new InvalidParameter(`invalid Options.com.docker.network.driver.mtu ${JSON.stringify(mtu)}: expected 68 to 65535`);
    spec.mtu = n;
  }
  const masq = options['com.docker.network.bridge.enable_ip_masquerade'];
  if (masq !== undefined) {
    if (masq !== 'true' && masq !== 'false') throw new InvalidParameter(`invalid Options.com.docker.network.bridge.enable_ip_masquerade ${JSON.stringify(masq)}: expected true or false`);
    spec.masquerade = masq === 'true';
  }

  const ipam = body.IPAM;
  if (ipam !== undefined && ipam !== null) {
    if (!isObject(ipam)) throw new InvalidParameter('IPAM must be an object');
    if (ipam.Driver !== undefined && ipam.Driver !== null && ipam.Driver !== '' && ipam.Driver !== 'default') {
      if (typeof ipam.Driver !== 'string') throw new InvalidParameter('IPAM.Driver must be a string');
      spec.ipamDriver = ipam.Driver;
    }
    spec.ipamOptions = stringMap(ipam.Options, 'IPAM.Options');
    const configs = ipam.Config ?? [];
    if (!Array.isArray(configs)) throw new InvalidParameter('IPAM.Config must be a list');
    for (const [i, raw] of configs.entries()) {
      const field = `IPAM.Config[${i}]`;
      if (!isObject(raw)) throw new InvalidParameter(`${field} must be an object`);
      // The family of a pool is its subnet's; a pool without a subnet is refused by the IPv4 parser.
      if (typeof raw.Subnet === 'string' && isIPv6Text(raw.Subnet)) {
        if (!spec.enableIPv6) {
          throw new InvalidParameter(`invalid ${field}.Subnet ${raw.Subnet}: IPv6 has not been enabled for this network, but an IPv6 subnet has been provided`);
        }
        if (spec.pool6) throw new NotImplemented('more than one IPv6 pool per network is not supported yet');
        spec.pool6 = parsePool6(raw, field);
      } else {
        if (spec.pool) throw new NotImplemented('more than one IPv4 pool per network is not supported yet');
        spec.pool = parsePool(raw, field);
      }
    }
  }
  return spec;
}

/** The family mismatch of one field of a pool, in Docker's words. */
function familyMismatch(field: string, value: string, valueFamily: 'IPv4' | 'IPv6'): InvalidParameter {
  const other = valueFamily === 'IPv4' ? 'IPv6' : 'IPv4';
  return new InvalidParameter(`invalid ${field}: ${value} is an ${valueFamily} address whereas it is associated to an ${other} subnet`);
}

function parsePool6(raw: Record<string, unknown>, field: string): NonNullable<NetworkCreateSpec['pool6']> {
  const text = (key: string): string | undefined => {
    const v = raw[key];
    if (v === undefined || v === null || v === '') return undefined;
    if (typeof v !== 'string') throw new InvalidParameter(`${field}.${key} must be a string`);
    return v;
  };
  const subnetText = text('Subnet')!;
  const parsed = parseCIDR6(subnetText);
  if (!parsed) throw new InvalidParameter(`invalid ${field}.Subnet ${JSON.stringify(subnetText)}: expected CIDR notation such as fd00:1::/64`);
  const subnet = parsed.subnet;
  if (parsed.address !== subnet.base) throw new InvalidParameter(`invalid ${field}.Subnet ${subnetText}: it has host bits set (did you mean ${formatSubnet6(subnet)}?)`);
  if (subnet.prefix > 126) throw new InvalidParameter(`invalid ${field}.Subnet ${subnetText}: the prefix must be at most /126 to hold a gateway and a container`);
  if (subnet.prefix < 8) throw new InvalidParameter(`invalid ${field}.Subnet ${subnetText}: the prefix must be at least /8`);
  if (subnet.base >> 120n === 0xffn) throw new InvalidParameter(`invalid ${field}.Subnet ${subnetText}: it is a multicast range`);
  if (subnet.base >> 118n === 0x3fan) throw new InvalidParameter(`invalid ${field}.Subnet ${subnetText}: link-local addresses (fe80::/10) cannot be a network's subnet`);
  const inside = (key: string, value: string): bigint => {
    const a = parseIPv6(value);
    if (a === undefined) {
      if (parseIPv4(value) !== undefined) throw familyMismatch(key, value, 'IPv4');
      throw new InvalidParameter(`invalid ${key} ${JSON.stringify(value)}: expected an IPv6 address`);
    }
    if (!contains6(subnet, a)) throw new InvalidParameter(`invalid ${key} ${value}: it is not in the subnet ${subnetText}`);
    if (a === subnet.base) throw new InvalidParameter(`invalid ${key} ${value}: it is the network address (subnet-router anycast) of ${subnetText}`);
    return a;
  };
  const gatewayText = text('Gateway');
  const gateway = gatewayText ? inside(`${field}.Gateway`, gatewayText) : subnet.base + 1n;
  let ipRange: Subnet6 | undefined;
  const rangeText = text('IPRange');
  if (rangeText) {
    const r = parseCIDR6(rangeText);
    if (!r) {
      if (parseCIDR(rangeText)) throw familyMismatch(`${field}.IPRange`, rangeText, 'IPv4');
      throw new InvalidParameter(`invalid ${field}.IPRange ${JSON.stringify(rangeText)}: expected a subnet in CIDR notation`);
    }
    if (r.address !== r.subnet.base) throw new InvalidParameter(`invalid ${field}.IPRange ${rangeText}: it has host bits set (did you mean ${formatSubnet6(r.subnet)}?)`);
    if (r.subnet.prefix < subnet.prefix || !contains6(subnet, r.subnet.base)) throw new InvalidParameter(`invalid ${field}.IPRange ${rangeText}: it is not inside the subnet ${subnetText}`);
    ipRange = r.subnet;
  }
  const auxiliary = stringMap(raw.AuxiliaryAddresses ?? raw.AuxAddress, `${field}.AuxiliaryAddresses`);
  for (const [k, v] of Object.entries(auxiliary)) auxiliary[k] = formatIPv6(inside(`${field}.AuxiliaryAddresses.${k}`, v));
  return { subnet, gateway, ipRange, auxiliary };
}

function parsePool(raw: unknown, field: string): NonNullable<NetworkCreateSpec['pool']> {
  if (!isObject(raw)) throw new InvalidParameter(`${field} must be an object`);
  const text = (key: string): string | undefined => {
    const v = raw[key];
    if (v === undefined || v === null || v === '') return undefined;
    if (typeof v !== 'string') throw new InvalidParameter(`${field}.${key} must be a string`);
    return v;
  };
  const subnetText = text('Subnet');
  if (!subnetText) throw new InvalidParameter(`${field}.Subnet is required when a pool is given`);
  const parsed = parseCIDR(subnetText);
  if (!parsed) throw new InvalidParameter(`invalid ${field}.Subnet ${JSON.stringify(subnetText)}: expected CIDR notation such as 172.28.0.0/16`);
  const subnet = parsed.subnet;
  if (parsed.address !== subnet.base) throw new InvalidParameter(`invalid ${field}.Subnet ${subnetText}: it has host bits set (did you mean ${formatSubnet(subnet)}?)`);
  if (subnet.prefix > 30) throw new InvalidParameter(`invalid ${field}.Subnet ${subnetText}: the prefix must be at most /30 to hold a gateway and a container`);
  const broadcast = subnet.base + subnetSize(subnet) - 1;
  const inside = (key: string, value: string): number => {
    const a = parseIPv4(value);
    if (a === undefined && parseIPv6(value) !== undefined) throw familyMismatch(key, value, 'IPv6');
    if (a === undefined) throw new InvalidParameter(`invalid ${key} ${JSON.stringify(value)}: expected an IPv4 address`);
    if (!contains(subnet, a)) throw new InvalidParameter(`invalid ${key} ${value}: it is not in the subnet ${subnetText}`);
    if (a === subnet.base || a === broadcast) throw new InvalidParameter(`invalid ${key} ${value}: it is the network or broadcast address of ${subnetText}`);
    return a;
  };
  const gatewayText = text('Gateway');
  const gateway = gatewayText ? inside(`${field}.Gateway`, gatewayText) : subnet.base + 1;
  let ipRange: Subnet | undefined;
  const rangeText = text('IPRange');
  if (rangeText) {
    const r = parseCIDR(rangeText);
    if (!r && parseCIDR6(rangeText)) throw familyMismatch(`${field}.IPRange`, rangeText, 'IPv6');
    if (!r || r.address !== r.subnet.base) throw new InvalidParameter(`invalid ${field}.IPRange ${JSON.stringify(rangeText)}: expected a subnet in CIDR notation`);
    if (r.subnet.prefix < subnet.prefix || !contains(subnet, r.subnet.base)) throw new InvalidParameter(`invalid ${field}.IPRange ${rangeText}: it is not inside the subnet ${subnetText}`);
    ipRange = r.subnet;
  }
  const auxiliary = stringMap(raw.AuxiliaryAddresses ?? raw.AuxAddress, `${field}.AuxiliaryAddresses`);
  for (const [k, v] of Object.entries(auxiliary)) inside(`${field}.AuxiliaryAddresses.${k}`, v);
  return { subnet, gateway, gatewayGiven: gatewayText !== undefined, ipRange, auxiliary };
}

/** Creates a user-defined bridge network: its record, its Linux bridge and its firewall rules. */
export async function create(ctx: NetworkContext, body: unknown): Promise<{ Id: string; Warning: string }> {
  const spec = parseCreateRequest(body);
  if (spec.driver === 'bridge' && spec.ipamDriver) {
    if (!(await ctx.plugins?.ipamDriver(spec.ipamDriver))) throw new NotFound(`plugin "${spec.ipamDriver}" not found`);
    throw new NotImplemented('an IPAM driver plugin is supported with network driver plugins only');
  }
  return ctx.lock.run(async () => {
    if (ctx.byName(spec.name)) throw new Conflict(`network with name ${spec.name} already exists`);
    const id = newId();
    if (spec.driver !== 'bridge') return createPluginNetwork(ctx, spec, id);
    const bridge = spec.bridgeName ?? `br-${id.slice(0, 12)}`;
    for (const other of ctx.entries.values()) {
      if (other.bridge === bridge) throw new Conflict(`the bridge ${bridge} is already used by network ${other.network.Name}`);
    }
    // A new network never takes over an interface that is already there (another engine's bridge).
    if ((await ctx.host.bridgeAddress(bridge)) !== undefined) throw new Conflict(`the bridge ${bridge} already exists on the host`);
    const pool = await choosePool(ctx, spec);
    const pool6 = spec.enableIPv6 ? await choosePool6(ctx, spec) : undefined;
    const network = newNetworkRecord(spec, id, { driver: 'bridge', enableIPv6: spec.enableIPv6, ipamDriver: 'default', pools: pool6 ? [pool, pool6] : [pool] });
    const entry: NetworkEntry = { network, endpoints: new Map(), bridge };
    if (pool6 && !spec.pool6) entry.engineSubnet6 = true;
    try {
      await setUpBridge(ctx, entry);
      await ctx.store.save(entry);
    } catch (err) {
      await ctx.host.removeNat(bridge).catch(() => undefined);
      await ctx.host.removeBridge(bridge).catch(() => undefined);
      throw err;
    }
    ctx.entries.set(id, entry);
    ctx.events.publish('network', 'create', id, { name: spec.name, type: 'bridge' });
    return { Id: id, Warning: '' };
  });
}

/** The pool a new network gets: the client's (if it overlaps no other network), or a free range. */
/** The record of a new local network, as bridge and plugin drivers both store it. */
function newNetworkRecord(
  spec: NetworkCreateSpec,
  id: string,
  made: { driver: string; enableIPv6: boolean; ipamDriver: string; pools: NetworkRecord['IPAM']['Config'] },
): NetworkRecord {
  return {
    Name: spec.name,
    Id: id,
    Created: rfc3339Nano(nowNano()),
    Scope: 'local',
    Driver: made.driver,
    EnableIPv4: true,
    EnableIPv6: made.enableIPv6,
    IPAM: { Driver: made.ipamDriver, Options: spec.ipamOptions, Config: made.pools },
    Internal: spec.internal,
    Attachable: spec.attachable,
    Ingress: false,
    ConfigFrom: { Network: '' },
    ConfigOnly: false,
    Options: spec.options,
    Labels: spec.labels,
  };
}

async function choosePool(ctx: NetworkContext, spec: NetworkCreateSpec): Promise<NetworkRecord['IPAM']['Config'][number]> {
  const ours = [...ctx.entries.values()]
    .map((e) => ({ name: e.network.Name, pool: ipv4Pool(e.network) }))
    .map((o) => ({ name: o.name, subnet: o.pool ? parseCIDR(o.pool.Subnet)?.subnet : undefined }))
    .filter((o): o is { name: string; subnet: Subnet } => o.subnet !== undefined);
  if (spec.pool) {
    const clash = ours.find((o) => overlaps(o.subnet, spec.pool!.subnet));
    if (clash) throw new Forbidden(`invalid pool request: Pool overlaps with other one on this address space (network ${clash.name} has ${formatSubnet(clash.subnet)})`);
    const pool: NetworkRecord['IPAM']['Config'][number] = { Subnet: formatSubnet(spec.pool.subnet), Gateway: formatIPv4(spec.pool.gateway) };
    if (spec.pool.ipRange) pool.IPRange = formatSubnet(spec.pool.ipRange);
    if (Object.keys(spec.pool.auxiliary).length > 0) pool.AuxiliaryAddresses = spec.pool.auxiliary;
    return pool;
  }
  const used = [
    ...(await ctx.host.usedSubnets()).map((s) => parseCIDR(s)?.subnet).filter((s): s is Subnet => s !== undefined),
    ...ours.map((o) => o.subnet),
  ];
  const subnet = defaultBridgeCandidates().find((c) => !used.some((u) => overlaps(u, c)));
  if (!subnet) throw new Forbidden('all predefined address pools have been fully subnetted: give the network a subnet (IPAM.Config)');
  return { Subnet: formatSubnet(subnet), Gateway: formatIPv4(subnet.base + 1) };
}

/**
 * The IPv6 pool of a new network: the client's (if it overlaps no other network's), or the first /64 of the
 * engine's unique local /48 that no network and no route or address of the host uses.
 */
async function choosePool6(ctx: NetworkContext, spec: NetworkCreateSpec): Promise<IPAMPool> {
  const ours = [...ctx.entries.values()]
    .map((e) => ({ name: e.network.Name, pool: ipv6Pool(e.network) }))
    .map((o) => ({ name: o.name, subnet: o.pool ? parseCIDR6(o.pool.Subnet)?.subnet : undefined }))
    .filter((o): o is { name: string; subnet: Subnet6 } => o.subnet !== undefined);
  if (spec.pool6) {
    const clash = ours.find((o) => overlaps6(o.subnet, spec.pool6!.subnet));
    if (clash) throw new Forbidden(`invalid pool request: Pool overlaps with other one on this address space (network ${clash.name} has ${formatSubnet6(clash.subnet)})`);
    const pool: IPAMPool = { Subnet: formatSubnet6(spec.pool6.subnet), Gateway: formatIPv6(spec.pool6.gateway) };
    if (spec.pool6.ipRange) pool.IPRange = formatSubnet6(spec.pool6.ipRange);
    if (Object.keys(spec.pool6.auxiliary).length > 0) pool.AuxiliaryAddresses = spec.pool6.auxiliary;
    return pool;
  }
  const used = [
    ...(await ctx.host.usedIPv6Subnets()).map((s) => parseCIDR6(s)?.subnet).filter((s): s is Subnet6 => s !== undefined),
    ...ours.map((o) => o.subnet),
  ];
  for (const candidate of poolSubnets(ctx.ulaPool)) {
    if (!used.some((u) => overlaps6(u, candidate))) return { Subnet: formatSubnet6(candidate), Gateway: formatIPv6(candidate.base + 1n) };
  }
  throw new Forbidden(`all the IPv6 subnets of ${formatSubnet6(ctx.ulaPool)} are in use: give the network an IPv6 subnet (IPAM.Config)`);
}

/** A network of a driver plugin (remote.ts): the plugin makes it; the engine keeps its record. */
async function createPluginNetwork(ctx: NetworkContext, spec: NetworkCreateSpec, id: string): Promise<{ Id: string; Warning: string }> {
  if (spec.enableIPv6) throw new NotImplemented('IPv6 on networks of plugin drivers is not supported yet');
  const made = await createRemote(ctx, {
    id,
    driverName: spec.driver,
    ipamName: spec.ipamDriver,
    options: spec.options,
    ipamOptions: spec.ipamOptions,
    pool: spec.pool && {
      subnet: formatSubnet(spec.pool.subnet),
      ipRange: spec.pool.ipRange && formatSubnet(spec.pool.ipRange),
      gateway: spec.pool.gatewayGiven ? formatIPv4(spec.pool.gateway) : undefined,
    },
    defaultPool: () => choosePool(ctx, spec),
  });
  const network = newNetworkRecord(spec, id, { driver: made.driver, enableIPv6: false, ipamDriver: made.ipamDriver, pools: [made.pool] });
  const entry: NetworkEntry = { network, endpoints: new Map(), remote: made.state };
  try {
    await ctx.store.save(entry);
  } catch (err) {
    await destroyRemote(ctx, entry).catch(() => undefined);
    throw err;
  }
  ctx.entries.set(id, entry);
  ctx.events.publish('network', 'create', id, { name: spec.name, type: made.driver });
  return { Id: id, Warning: '' };
}
