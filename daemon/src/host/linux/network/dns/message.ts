/**
 * The few parts of the DNS wire format (RFC 1035) the embedded server needs: the header and question of a
 * query, and an answer of A and AAAA records built for it. Everything else is forwarded as bytes.
 */
import { formatIPv6, parseIPv6 } from '../../../../util/ipv6.js';

export const TYPE_A = 1;
export const TYPE_AAAA = 28;
export const CLASS_IN = 1;

export const RCODE_NOERROR = 0;
export const RCODE_FORMERR = 1;
export const RCODE_SERVFAIL = 2;
export const RCODE_NXDOMAIN = 3;

export interface Question {
  id: number;
  /** Flags of the query (opcode and RD are echoed in the answer). */
  flags: number;
  name: string;
  type: number;
  qclass: number;
  /** Offset just past the question (the header and question are copied into the answer). */
  end: number;
}

/** The header and first question of a query; undefined when the message is not a well-formed query. */
export function parseQuery(msg: Buffer): Question | undefined {
  if (msg.length < 12) return undefined;
  const id = msg.readUInt16BE(0);
  const flags = msg.readUInt16BE(2);
  if (flags & 0x8000) return undefined; // a response, not a query
  if (msg.readUInt16BE(4) !== 1) return undefined;
  const labels: string[] = [];
  let offset = 12;
  for (let guard = 0; ; guard++) {
    if (offset >= msg.length || guard > 127) return undefined;
    const len = msg[offset];
    if (len === 0) {
      offset += 1;
      break;
    }
    // Queries carry no compression pointers; one here is malformed.
    if (len > 63 || offset + 1 + len > msg.length) return undefined;
    labels.push(msg.subarray(offset + 1, offset + 1 + len).toString('latin1'));
    offset += 1 + len;
  }
  if (offset + 4 > msg.length) return undefined;
  const name = labels.join('.');
  if (name.length > 253) return undefined;
  return { id, flags, name, type: msg.readUInt16BE(offset), qclass: msg.readUInt16BE(offset + 2), end: offset + 4 };
}

/** The 16 bytes of an IPv6 address in its text form; undefined when it is not one. */
function ipv6Bytes(text: string): Buffer | undefined {
  const n = parseIPv6(text);
  if (n === undefined) return undefined;
  const out = Buffer.alloc(16);
  out.writeBigUInt64BE(n >> 64n, 0);
  out.writeBigUInt64BE(n & 0xffff_ffff_ffff_ffffn, 8);
  return out;
}

/**
 * An answer to `query` (whose question ends at q.end) with the given addresses and response code: A records
 * for the IPv4 addresses and AAAA records for the IPv6 ones (the caller picks those the question asks for).
 */
export function buildAnswer(query: Buffer, q: Question, addresses: readonly string[], rcode = RCODE_NOERROR, ttl = 600): Buffer {
  const header = Buffer.alloc(12);
  header.writeUInt16BE(q.id, 0);
  // QR, the query's opcode and RD, AA (the engine is the authority for its names), RA.
  header.writeUInt16BE(0x8000 | (q.flags & 0x7900) | 0x0400 | 0x0080 | (rcode & 0xf), 2);
  header.writeUInt16BE(1, 4);
  header.writeUInt16BE(addresses.length, 6);
  const records = addresses.map((address) => {
    const v6 = address.includes(':') ? ipv6Bytes(address) : undefined;
    const rr = Buffer.alloc(v6 ? 28 : 16);
    rr.writeUInt16BE(0xc00c, 0); // the name: a pointer to the question's
    rr.writeUInt16BE(v6 ? TYPE_AAAA : TYPE_A, 2);
    rr.writeUInt16BE(CLASS_IN, 4);
    rr.writeUInt32BE(ttl, 6);
    rr.writeUInt16BE(v6 ? 16 : 4, 10);
    if (v6) v6.copy(rr, 12);
    else address.split('.').forEach((octet, i) => rr.writeUInt8(Number(octet) & 0xff, 12 + i));
    return rr;
  });
  return Buffer.concat([header, query.subarray(12, q.end), ...records]);
}

/** An error answer (SERVFAIL, FORMERR...) echoing the query's id and question when it has one. */
export function buildError(query: Buffer, rcode: number): Buffer | undefined {
  const q = parseQuery(query);
  if (q) return buildAnswer(query, q, [], rcode);
  if (query.length < 12) return undefined;
  const header = Buffer.alloc(12);
  header.writeUInt16BE(query.readUInt16BE(0), 0);
  header.writeUInt16BE(0x8000 | (query.readUInt16BE(2) & 0x7900) | 0x0080 | (rcode & 0xf), 2);
  return header;
}

/** One address record of an answer. */
export interface AddressRecord {
  address: string;
  ttl: number;
}

/** Skips a (possibly compressed) name at `offset`; answers the offset past it, or -1 when malformed. */
function skipName(msg: Buffer, offset: number): number {
  for (let guard = 0; guard < 128; guard++) {
    if (offset >= msg.length) return -1;
    const len = msg[offset];
    if (len === 0) return offset + 1;
    if ((len & 0xc0) === 0xc0) return offset + 2 <= msg.length ? offset + 2 : -1;
    if (len > 63) return -1;
    offset += 1 + len;
  }
  return -1;
}

/**
 * The question's name and the A and AAAA records of an answer's answer section (those of the names a CNAME
 * chain led to included: they are what the asked name stands for). Undefined when the message is not a
 * well-formed answer.
 */
export function parseAnswerAddresses(msg: Buffer): { name: string; records: AddressRecord[] } | undefined {
  if (msg.length < 12 || !(msg.readUInt16BE(2) & 0x8000)) return undefined;
  if (msg.readUInt16BE(4) !== 1) return undefined;
  // The question is read as a query's (same layout, the QR bit aside).
  const header = Buffer.from(msg.subarray(0, 12));
  header.writeUInt16BE(msg.readUInt16BE(2) & 0x7fff, 2);
  const q = parseQuery(Buffer.concat([header, msg.subarray(12)]));
  if (!q) return undefined;
  const count = msg.readUInt16BE(6);
  const records: AddressRecord[] = [];
  let offset = q.end;
  for (let i = 0; i < count; i++) {
    offset = skipName(msg, offset);
    if (offset < 0 || offset + 10 > msg.length) return undefined;
    const type = msg.readUInt16BE(offset);
    const rclass = msg.readUInt16BE(offset + 2);
    const ttl = msg.readUInt32BE(offset + 4);
    const length = msg.readUInt16BE(offset + 8);
    const data = offset + 10;
    if (data + length > msg.length) return undefined;
    if (rclass === CLASS_IN && type === TYPE_A && length === 4) records.push({ address: [...msg.subarray(data, data + 4)].join('.'), ttl });
    else if (rclass === CLASS_IN && type === TYPE_AAAA && length === 16) {
      let n = 0n;
      for (const b of msg.subarray(data, data + 16)) n = (n << 8n) | BigInt(b);
      records.push({ address: formatIPv6(n), ttl });
    }
    offset = data + length;
  }
  return { name: q.name, records };
}
