/**
 * Addresses of swarm networks, chosen by the leader from what the store holds: a network's subnet from the
 * swarm's DefaultAddrPool in blocks of SubnetSize (skipping subnets other networks hold), its VXLAN id,
 * and each task's (and service VIP's) address on it. Pure functions over the used sets, so that the leader
 * gets the same answers from the store after a failover.
 */
import { InvalidParameter, Unavailable } from '../../../errors.js';
import { contains, formatIPv4, formatSubnet, macFromIPv4, overlaps, parseCIDR, parseIPv4, type Subnet } from '../../networks/ipv4.js';

/** VXLAN ids from here up, as swarmkit's (below 4096 stay free for other uses). */
export const FIRST_VNI = 4096;
const LAST_VNI = (1 << 24) - 1;

/** The first free block of `size` bits in the pools, overlapping none of `used` (CIDR texts). */
export function allocateSubnet(pools: string[], size: number, used: string[]): string {
  const taken = used.map((u) => parseCIDR(u)?.subnet).filter((s): s is Subnet => !!s);
  for (const text of pools) {
    const pool = parseCIDR(text)?.subnet;
    if (!pool) throw new InvalidParameter(`invalid address pool ${JSON.stringify(text)}`);
    if (size < pool.prefix || size > 29) continue;
    const step = 2 ** (32 - size);
    const end = pool.base + 2 ** (32 - pool.prefix);
    for (let base = pool.base; base < end; base += step) {
      const candidate: Subnet = { base, prefix: size };
      if (!taken.some((t) => overlaps(t, candidate))) return formatSubnet(candidate);
    }
  }
  throw new Unavailable('could not find an available, non-overlapping IPv4 address pool among the swarm\'s default address pools');
}

/** The lowest VXLAN id not in `used`. */
export function allocateVni(used: Iterable<number>): number {
  const taken = new Set(used);
  for (let v = FIRST_VNI; v <= LAST_VNI; v++) if (!taken.has(v)) return v;
  throw new Unavailable('no VXLAN id left');
}

/** The subnet's first usable address (the gateway swarmkit gives when none was asked). */
export function defaultGateway(subnet: string): string {
  const s = parseCIDR(subnet)!.subnet;
  return formatIPv4(s.base + 1);
}

/**
 * The lowest free address of the subnet (or of `ipRange` within it), past the network and gateway
 * addresses and short of the broadcast address; `used` holds dotted quads.
 */
export function allocateAddress(subnet: string, gateway: string, used: ReadonlySet<string>, ipRange?: string): string {
  const s = parseCIDR(subnet)!.subnet;
  const range = ipRange ? parseCIDR(ipRange)!.subnet : s;
  const first = Math.max(range.base, s.base + 1);
  const last = Math.min(range.base + 2 ** (32 - range.prefix) - 1, s.base + 2 ** (32 - s.prefix) - 2);
  const gw = parseIPv4(gateway);
  for (let a = first; a <= last; a++) {
    if (a === gw) continue;
    const text = formatIPv4(a);
    if (!used.has(text)) return text;
  }
  throw new Unavailable(`no address left in ${subnet}`);
}

/** Docker's MAC of an endpoint: 02:42 and the address's four bytes. */
export function macOf(address: string): string {
  return macFromIPv4(parseIPv4(address)!);
}

/** Whether `address` lies in `subnet`. */
export function inSubnet(subnet: string, address: string): boolean {
  const s = parseCIDR(subnet)?.subnet;
  const a = parseIPv4(address);
  return !!s && a !== undefined && contains(s, a);
}
