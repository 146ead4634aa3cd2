/**
 * IPv6 addresses and subnets as 128-bit BigInts: parsing (RFC 4291 text forms, with an embedded dotted
 * quad), the canonical text of RFC 5952, containment and overlap, and the unique local (ULA, RFC 4193)
 * pool new networks take their /64 from when the client gives no IPv6 subnet.
 */
import { createHash } from 'node:crypto';

export interface Subnet6 {
  /** The network address (host bits zero). */
  base: bigint;
  prefix: number;
}

const ALL_ONES = (1n << 128n) - 1n;
const HEXTET = /^[0-9a-fA-F]{1,4}$/;
const DOTTED = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/;

function parseGroups(part: string, allowDotted: boolean): number[] | undefined {
  if (part === '') return [];
  const pieces = part.split(':');
  const out: number[] = [];
  for (const [i, piece] of pieces.entries()) {
    if (allowDotted && i === pieces.length - 1 && piece.includes('.')) {
      const m = DOTTED.exec(piece);
      if (!m) return undefined;
      const octets = m.slice(1).map(Number);
      if (octets.some((o, j) => o > 255 || (m[j + 1].length > 1 && m[j + 1].startsWith('0')))) return undefined;
      out.push(octets[0] * 256 + octets[1], octets[2] * 256 + octets[3]);
      continue;
    }
    if (!HEXTET.test(piece)) return undefined;
    out.push(parseInt(piece, 16));
  }
  return out;
}

/** Parses an IPv6 address in any of its text forms; undefined when the text is not one (zones are refused). */
export function parseIPv6(text: string): bigint | undefined {
  if (typeof text !== 'string' || text.length < 2 || text.length > 45 || !text.includes(':')) return undefined;
  const halves = text.split('::');
  if (halves.length > 2) return undefined;
  let groups: number[];
  if (halves.length === 2) {
    const head = parseGroups(halves[0], false);
    const tail = parseGroups(halves[1], true);
    if (!head || !tail || head.length + tail.length > 7) return undefined;
    groups = [...head, ...new Array<number>(8 - head.length - tail.length).fill(0), ...tail];
  } else {
    const all = parseGroups(text, true);
    if (!all || all.length !== 8) return undefined;
    groups = all;
  }
  let n = 0n;
  for (const g of groups) n = (n << 16n) | BigInt(g);
  return n;
}

/** The canonical text (RFC 5952): lower case, no leading zeros, the longest run of two or more zero groups as `::`. */
export function formatIPv6(n: bigint): string {
  const groups: number[] = [];
  for (let i = 7; i >= 0; i--) groups.push(Number((n >> BigInt(i * 16)) & 0xffffn));
  let bestStart = -1;
  let bestLen = 0;
  for (let i = 0; i < 8; ) {
    if (groups[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && groups[j] === 0) j++;
    if (j - i > bestLen && j - i >= 2) {
      bestStart = i;
      bestLen = j - i;
    }
    i = j;
  }
  const hex = groups.map((g) => g.toString(16));
  if (bestStart < 0) return hex.join(':');
  return `${hex.slice(0, bestStart).join(':')}::${hex.slice(bestStart + bestLen).join(':')}`;
}

export function maskOf6(prefix: number): bigint {
  return prefix === 0 ? 0n : (ALL_ONES << BigInt(128 - prefix)) & ALL_ONES;
}

/** Number of addresses in the subnet. */
export function subnetSize6(subnet: Subnet6): bigint {
  return 1n << BigInt(128 - subnet.prefix);
}

/** Parses `addr/n` (IPv6). The address is kept apart from the subnet (host bits cleared). */
export function parseCIDR6(text: string): { address: bigint; subnet: Subnet6 } | undefined {
  const m = /^([^/]+)\/(\d{1,3})$/.exec(text);
  if (!m) return undefined;
  const address = parseIPv6(m[1]);
  const prefix = Number(m[2]);
  if (address === undefined || prefix > 128 || (m[2].length > 1 && m[2].startsWith('0'))) return undefined;
  return { address, subnet: { base: address & maskOf6(prefix), prefix } };
}

export function formatSubnet6(subnet: Subnet6): string {
  return `${formatIPv6(subnet.base)}/${subnet.prefix}`;
}

export function contains6(subnet: Subnet6, address: bigint): boolean {
  return (address & maskOf6(subnet.prefix)) === subnet.base;
}

export function overlaps6(a: Subnet6, b: Subnet6): boolean {
  const mask = maskOf6(Math.min(a.prefix, b.prefix));
  return (a.base & mask) === (b.base & mask);
}

/** Whether a text looks like an IPv6 address or subnet (a colon), to pick the family of a client's value. */
export function isIPv6Text(text: string): boolean {
  return text.includes(':');
}

/** The unique local prefix (fd00::/8): no address outside it is ever picked for a network by default. */
export const ULA_RANGE: Subnet6 = { base: 0xfdn << 120n, prefix: 8 };

/**
 * The /48 unique local prefix an engine takes its networks' default IPv6 subnets from: `fd` and a 40-bit
 * global id drawn from `seed` (the engine's data root and the machine's id), as RFC 4193 suggests, so that
 * two engines on one machine, or two machines, do not pick the same ranges.
 */
export function ulaPrefix(seed: string): Subnet6 {
  const digest = createHash('sha256').update(seed).digest();
  let globalId = 0n;
  for (let i = 0; i < 5; i++) globalId = (globalId << 8n) | BigInt(digest[i]);
  return { base: (0xfdn << 120n) | (globalId << 80n), prefix: 48 };
}

/** The /64 subnets of a /48 pool in order, the first `limit` of them (the subnet id counts up from 0). */
export function* poolSubnets(pool: Subnet6, size = 64, limit = 65536): Generator<Subnet6> {
  const step = 1n << BigInt(128 - size);
  const count = 1n << BigInt(size - pool.prefix);
  for (let i = 0n; i < count && i < BigInt(limit); i++) yield { base: pool.base + i * step, prefix: size };
}
