/**
 * IPv4 addresses and subnets as plain numbers: parsing with clear errors, containment, overlap, and the
 * MAC address Docker derives from an endpoint's address.
 */
import { InvalidParameter } from '../../errors.js';

export interface Subnet {
  /** The network address (host bits zero), as an unsigned 32-bit number. */
  base: number;
  prefix: number;
}

const DOTTED = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/;

/** Parses a dotted-quad IPv4 address; undefined when the text is not one. */
export function parseIPv4(text: string): number | undefined {
  const m = DOTTED.exec(text);
  if (!m) return undefined;
  let n = 0;
  for (let i = 1; i <= 4; i++) {
    const octet = Number(m[i]);
    if (octet > 255 || (m[i].length > 1 && m[i].startsWith('0'))) return undefined;
    n = n * 256 + octet;
  }
  return n;
}

export function formatIPv4(n: number): string {
  return [n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255].join('.');
}

export function maskOf(prefix: number): number {
  return prefix === 0 ? 0 : (0xffffffff << (32 - prefix)) >>> 0;
}

/** Number of addresses in the subnet. */
export function subnetSize(subnet: Subnet): number {
  return 2 ** (32 - subnet.prefix);
}

/**
 * Parses `a.b.c.d/n`. With `strict`, host bits must be zero (a subnet); without, the address is kept
 * apart (an interface address such as a bridge's `--bip 10.1.0.1/24`).
 */
export function parseCIDR(text: string): { address: number; subnet: Subnet } | undefined {
  const m = /^([^/]+)\/(\d{1,2})$/.exec(text);
  if (!m) return undefined;
  const address = parseIPv4(m[1]);
  const prefix = Number(m[2]);
  if (address === undefined || prefix > 32) return undefined;
  return { address, subnet: { base: (address & maskOf(prefix)) >>> 0, prefix } };
}

export function formatSubnet(subnet: Subnet): string {
  return `${formatIPv4(subnet.base)}/${subnet.prefix}`;
}

export function contains(subnet: Subnet, address: number): boolean {
  return ((address & maskOf(subnet.prefix)) >>> 0) === subnet.base;
}

export function overlaps(a: Subnet, b: Subnet): boolean {
  const prefix = Math.min(a.prefix, b.prefix);
  return ((a.base & maskOf(prefix)) >>> 0) === ((b.base & maskOf(prefix)) >>> 0);
}

/** Docker's MAC for an endpoint: 02:42 followed by the four bytes of its IPv4 address. */
export function macFromIPv4(address: number): string {
  const bytes = [0x02, 0x42, address >>> 24, (address >>> 16) & 255, (address >>> 8) & 255, address & 255];
  return bytes.map((b) => b.toString(16).padStart(2, '0')).join(':');
}

const MAC = /^[0-9a-fA-F]{2}(:[0-9a-fA-F]{2}){5}$/;

/** Validates a MAC address given by a client: six hex pairs, unicast. Returns it in lower case. */
export function parseMac(text: string, field: string): string {
  if (!MAC.test(text)) throw new InvalidParameter(`invalid MAC address ${JSON.stringify(text)} in ${field}: expected six hex pairs such as 02:42:ac:11:00:02`);
  const first = parseInt(text.slice(0, 2), 16);
  if (first & 1) throw new InvalidParameter(`invalid MAC address ${JSON.stringify(text)} in ${field}: a multicast address cannot be assigned to an interface`);
  return text.toLowerCase();
}

/**
 * The candidate pools for the default bridge when no --bip is given, in Docker's order: the /16s of
 * 172.17 to 172.31, then the /20s of 192.168.
 */
export function defaultBridgeCandidates(): Subnet[] {
  const out: Subnet[] = [];
  for (let b = 17; b <= 31; b++) out.push({ base: parseIPv4(`172.${b}.0.0`)!, prefix: 16 });
  for (let c = 0; c < 256; c += 16) out.push({ base: parseIPv4(`192.168.${c}.0`)!, prefix: 20 });
  return out;
}
