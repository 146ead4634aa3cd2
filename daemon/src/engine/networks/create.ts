/**
 * Validation of a network create request (POST /networks/create): the body as the client sent it becomes
 * a checked description of a user-defined bridge network, or a typed error naming the bad field.
 */
import { Forbidden, InvalidParameter, NotFound, NotImplemented } from '../errors.js';
import { contains, formatSubnet, parseCIDR, parseIPv4, subnetSize, type Subnet } from './ipv4.js';

export interface NetworkCreateSpec {
  name: string;
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
  pool?: { subnet: Subnet; gateway: number; ipRange?: Subnet; auxiliary: Record<string, string> };
  ipamOptions: Record<string, string>;
}

const NAME = /^[a-zA-Z0-9][a-zA-Z0-9_.-]*$/;
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
    throw new InvalidParameter(`invalid network name ${JSON.stringify(name)}: only [a-zA-Z0-9][a-zA-Z0-9_.-] are allowed`);
  }
  const driver = body.Driver === undefined || body.Driver === null || body.Driver === '' ? 'bridge' : body.Driver;
  if (typeof driver !== 'string') throw new InvalidParameter('Driver must be a string');
  if (driver === 'host' || driver === 'null') throw new Forbidden(`only one instance of "${driver}" network is allowed`);
  if (['overlay', 'macvlan', 'ipvlan'].includes(driver)) throw new NotImplemented(`the ${driver} network driver is not supported yet; use bridge`);
  if (driver !== 'bridge') throw new NotFound(`plugin "${driver}" not found`);
  if (bool(body.EnableIPv6, 'EnableIPv6')) throw new NotImplemented('IPv6 networks are not supported yet');
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
    internal: bool(body.Internal, 'Internal'),
    attachable: bool(body.Attachable, 'Attachable'),
    labels,
    options,
    masquerade: true,
    ipamOptions: {},
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
      throw new NotFound(`plugin "${String(ipam.Driver)}" not found`);
    }
    spec.ipamOptions = stringMap(ipam.Options, 'IPAM.Options');
    const configs = ipam.Config ?? [];
    if (!Array.isArray(configs)) throw new InvalidParameter('IPAM.Config must be a list');
    if (configs.length > 1) throw new NotImplemented('more than one IPAM pool per network is not supported yet');
    if (configs.length === 1) spec.pool = parsePool(configs[0], 'IPAM.Config[0]');
  }
  return spec;
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
  if (subnetText.includes(':')) throw new NotImplemented('IPv6 pools are not supported yet');
  const parsed = parseCIDR(subnetText);
  if (!parsed) throw new InvalidParameter(`invalid ${field}.Subnet ${JSON.stringify(subnetText)}: expected CIDR notation such as 172.28.0.0/16`);
  const subnet = parsed.subnet;
  if (parsed.address !== subnet.base) throw new InvalidParameter(`invalid ${field}.Subnet ${subnetText}: it has host bits set (did you mean ${formatSubnet(subnet)}?)`);
  if (subnet.prefix > 30) throw new InvalidParameter(`invalid ${field}.Subnet ${subnetText}: the prefix must be at most /30 to hold a gateway and a container`);
  const broadcast = subnet.base + subnetSize(subnet) - 1;
  const inside = (key: string, value: string): number => {
    const a = parseIPv4(value);
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
    if (!r || r.address !== r.subnet.base) throw new InvalidParameter(`invalid ${field}.IPRange ${JSON.stringify(rangeText)}: expected a subnet in CIDR notation`);
    if (r.subnet.prefix < subnet.prefix || !contains(subnet, r.subnet.base)) throw new InvalidParameter(`invalid ${field}.IPRange ${rangeText}: it is not inside the subnet ${subnetText}`);
    ipRange = r.subnet;
  }
  const auxiliary = stringMap(raw.AuxiliaryAddresses ?? raw.AuxAddress, `${field}.AuxiliaryAddresses`);
  for (const [k, v] of Object.entries(auxiliary)) inside(`${field}.AuxiliaryAddresses.${k}`, v);
  return { subnet, gateway, ipRange, auxiliary };
}

