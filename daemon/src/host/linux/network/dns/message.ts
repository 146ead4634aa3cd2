/**
 * The few parts of the DNS wire format (RFC 1035) the embedded server needs: the header and question of a
 * query, and an answer of A and AAAA records built for it. Everything else is forwarded as bytes.
 */
import { parseIPv6 } from '../../../../engine/networks/ipv6.js';

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
