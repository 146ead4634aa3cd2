/**
 * Picking a container's address in a network's pool, the same way for both families: IPv4 addresses (numbers
 * in ipv4.ts) and IPv6 ones (bigints in ipv6.ts) are handled here as bigints.
 */
import { Conflict, InvalidParameter } from '../../errors.js';
import { parseCIDR, parseIPv4, subnetSize } from './ipv4.js';
import { parseCIDR6, parseIPv6, subnetSize6 } from '../../util/ipv6.js';
import type { IPAMPool } from './types.js';

interface Range {
  base: bigint;
  size: bigint;
}

export interface AddressFamily {
  label: 'IPv4' | 'IPv6';
  parse(text: string): bigint | undefined;
  range(cidr: string): Range | undefined;
  /** Whether the last address of a subnet is its broadcast address, never given out. */
  broadcast: boolean;
}

export const IPV4: AddressFamily = {
  label: 'IPv4',
  parse: (text) => {
    const n = parseIPv4(text);
    return n === undefined ? undefined : BigInt(n);
  },
  range: (cidr) => {
    const s = parseCIDR(cidr)?.subnet;
    return s && { base: BigInt(s.base), size: BigInt(subnetSize(s)) };
  },
  broadcast: true,
};

export const IPV6: AddressFamily = {
  label: 'IPv6',
  parse: parseIPv6,
  range: (cidr) => {
    const s = parseCIDR6(cidr)?.subnet;
    return s && { base: s.base, size: subnetSize6(s) };
  },
  broadcast: false,
};

/**
 * The address a container gets in `pool` (whose subnet parses): `requested` after Docker's checks, else the
 * first free one after `last` (the last one given out), within the pool's IP range when it has one. `taken` are
 * the addresses of the network's other endpoints; the subnet's own address, its broadcast address, the gateway
 * and the auxiliary addresses (reserved for devices outside the engine) are never given.
 */
export function pickAddress(
  family: AddressFamily,
  pool: IPAMPool,
  gateway: bigint,
  network: string,
  taken: Iterable<string>,
  requested: string | undefined,
  last: string | undefined,
): bigint {
  const subnet = family.range(pool.Subnet)!;
  const inside = (r: Range, a: bigint) => a >= r.base && a < r.base + r.size;
  const inUse = new Set<bigint>();
  for (const text of [...taken, ...Object.values(pool.AuxiliaryAddresses ?? {})]) {
    const a = family.parse(text);
    if (a !== undefined) inUse.add(a);
  }
  if (requested) {
    const address = family.parse(requested)!;
    if (!inside(subnet, address)) throw new InvalidParameter(`${requested} is not in the subnet ${pool.Subnet} of network ${network}`);
    if (inUse.has(address)) throw new Conflict(`address ${requested} is already in use on network ${network}`);
    return address;
  }
  const broadcast = family.broadcast ? subnet.base + subnet.size - 1n : undefined;
  const range = (pool.IPRange ? family.range(pool.IPRange) : undefined) ?? subnet;
  const lastAddress = last ? family.parse(last) : undefined;
  let offset = lastAddress !== undefined && inside(range, lastAddress) ? lastAddress - range.base : range.size - 1n;
  // The containers of one network are few next to a large range: the scan ends long before the range does.
  const tries = range.size < 65536n ? Number(range.size) : 65536 + inUse.size;
  for (let i = 0; i < tries; i++) {
    offset = (offset + 1n) % range.size;
    const candidate = range.base + offset;
    if (candidate === subnet.base || candidate === broadcast || candidate === gateway || inUse.has(candidate)) continue;
    return candidate;
  }
  throw new Conflict(`no available ${family.label} address on network ${network} (${pool.Subnet})`);
}
