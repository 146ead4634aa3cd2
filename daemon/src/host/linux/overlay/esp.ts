/**
 * The encryption of encrypted overlays (OverlayEncryption) on this machine. This kernel has no ESP in its
 * xfrm (nor GCM): the daemon carries the ESP itself, in UDP on port 4500 (RFC 3948), with AES-128-GCM from
 * OpenSSL (RFC 4106's ESP format: SPI, sequence number, 8-byte IV, ICV of 16 bytes).
 *
 * The VXLAN devices keep sending to the peers' nodes; an nftables table of the node's namespace (`berth_esp`)
 * turns the VXLAN packets of encrypted VNIs that leave for another node aside to this process's socket
 * (a conntrack zone of their own, DNAT to the node's address on port 4500), which encrypts each under the
 * primary key's association with the node that holds the frame's destination MAC and sends it there. What
 * arrives on port 4500 from a peer is opened under the association its SPI names, checked to come from that
 * peer, and handed to the VXLAN socket on the node's address. The table drops any VXLAN of those VNIs that
 * would leave or arrive in clear, and anything for port 4500 that claims to come from the node itself.
 *
 * Replays are refused (RFC 4303's window of 64 sequence numbers per inbound association). SPIs are the same
 * after a restart of the daemon, so the sequence numbers must go on growing across restarts without any
 * state kept: an outbound association starts at 32768 per second since its key was made, more than it
 * sends (the daemon carries far fewer packets per second than that).
 */
import { createCipheriv, createDecipheriv, createHash, hkdfSync, randomBytes } from 'node:crypto';
import dgram from 'node:dgram';
import { log } from '../../../util/log.js';
import { IPV4 } from '../network/firewall.js';
import { run } from '../network/run.js';
import type { OverlayEncryption } from '../../overlay.js';

export const ESP_PORT = 4500;
const TABLE = 'berth_esp';
/** The conntrack zone of VXLAN packets turned aside (their NAT must not meet that of other VXLAN flows). */
const ZONE = 58;
/** A peer's MAC address as the overlay names it (lower case). */
export const MAC = /^[0-9a-f]{2}(:[0-9a-f]{2}){5}$/;
const ICV = 16;
const UDP_PROTOCOL = 17;

/** One direction between two nodes under one key. */
export interface Association {
  spi: number;
  key: Buffer;
  salt: Buffer;
  /** Outbound: the last sequence number sent, and the random half of the IVs. */
  seq: number;
  ivPrefix: Buffer;
  /** Inbound: the highest sequence number taken in, and which of the 64 below it were (bit n: top - n). */
  top: number;
  window: bigint;
}

/** Sequence numbers an outbound association moves on by per second of its key's age (see above). */
export const SEQ_PER_SECOND = 32768;
const WINDOW = 64n;
const WINDOW_MASK = (1n << WINDOW) - 1n;

/** The SPI of the direction src -> dst under the key of `tag` (never below 256, which RFC 4303 reserves). */
export function spiOf(src: string, dst: string, tag: number): number {
  const v = createHash('sha256').update(`${src}>${dst}#${tag}`).digest().readUInt32BE(0);
  return v < 256 ? v + 256 : v;
}

/**
 * The association src -> dst under `key` (20 bytes, made at `created` ms): its own AES key and salt, derived
 * from the swarm's key; sending, it starts past every sequence number an earlier run can have used.
 */
export function association(key: Buffer, src: string, dst: string, tag: number, created?: number, nowMs = Date.now()): Association {
  const material = Buffer.from(hkdfSync('sha256', key, 'berth overlay esp', `${src}>${dst}`, 20));
  const seq = created === undefined ? 0 : Math.min(Math.floor(Math.max(0, nowMs - created) / 1000) * SEQ_PER_SECOND, 0xffff0000);
  return { spi: spiOf(src, dst, tag), key: material.subarray(0, 16), salt: material.subarray(16, 20), seq, ivPrefix: randomBytes(4), top: 0, window: 0n };
}

/** Whether sequence number `seq` may be taken in under `sa` (new, and not below its window). */
export function fresh(sa: Association, seq: number): boolean {
  if (seq === 0) return false;
  if (seq > sa.top) return true;
  const behind = BigInt(sa.top - seq);
  return behind < WINDOW && ((sa.window >> behind) & 1n) === 0n;
}

/** Records `seq` as taken in (once the packet opened). */
export function taken(sa: Association, seq: number): void {
  if (seq > sa.top) {
    const shift = BigInt(seq - sa.top);
    sa.window = shift >= WINDOW ? 1n : ((sa.window << shift) | 1n) & WINDOW_MASK;
    sa.top = seq;
  } else {
    sa.window |= 1n << BigInt(sa.top - seq);
  }
}

/**
 * An ESP packet carrying `vxlan` (the UDP payload of a VXLAN packet from `sourcePort` to `port`) in transport
 * mode: the inner UDP header and the payload are encrypted, the SPI and sequence number authenticated.
 */
export function seal(sa: Association, vxlan: Buffer, sourcePort: number, port: number): Buffer {
  sa.seq = (sa.seq + 1) >>> 0;
  if (sa.seq === 0) {
    // The counter went round (peers refuse what follows until the key changes): a fresh random half keeps
    // the IVs unique.
    sa.ivPrefix = randomBytes(4);
    sa.seq = 1;
  }
  const header = Buffer.alloc(16);
  header.writeUInt32BE(sa.spi, 0);
  header.writeUInt32BE(sa.seq, 4);
  sa.ivPrefix.copy(header, 8);
  header.writeUInt32BE(sa.seq, 12);
  const udp = Buffer.alloc(8);
  udp.writeUInt16BE(sourcePort, 0);
  udp.writeUInt16BE(port, 2);
  udp.writeUInt16BE(8 + vxlan.length, 4);
  const pad = (4 - ((8 + vxlan.length + 2) % 4)) % 4;
  const trailer = Buffer.alloc(pad + 2);
  for (let i = 0; i < pad; i++) trailer[i] = i + 1;
  trailer[pad] = pad;
  trailer[pad + 1] = UDP_PROTOCOL;
  const cipher = createCipheriv('aes-128-gcm', sa.key, Buffer.concat([sa.salt, header.subarray(8, 16)]), { authTagLength: ICV });
  cipher.setAAD(header.subarray(0, 8));
  return Buffer.concat([header, cipher.update(udp), cipher.update(vxlan), cipher.update(trailer), cipher.final(), cipher.getAuthTag()]);
}

/** The VXLAN payload of an ESP packet under `sa`, or undefined when it does not open (or is not UDP). */
export function open(sa: Association, packet: Buffer): Buffer | undefined {
  if (packet.length < 16 + 8 + 2 + ICV) return undefined;
  try {
    const decipher = createDecipheriv('aes-128-gcm', sa.key, Buffer.concat([sa.salt, packet.subarray(8, 16)]), { authTagLength: ICV });
    decipher.setAAD(packet.subarray(0, 8));
    decipher.setAuthTag(packet.subarray(packet.length - ICV));
    const plain = Buffer.concat([decipher.update(packet.subarray(16, packet.length - ICV)), decipher.final()]);
    const next = plain[plain.length - 1];
    const pad = plain[plain.length - 2]!;
    if (next !== UDP_PROTOCOL || plain.length < 8 + 2 + pad) return undefined;
    return plain.subarray(8, plain.length - 2 - pad);
  } catch {
    return undefined;
  }
}

/** The nftables script of the node's namespace for `spec` (see the file's comment). */
export function espRuleset(spec: OverlayEncryption): string {
  const vnis = [...new Set(spec.networks.map((n) => n.vni))].sort((a, b) => a - b).join(', ');
  const vxlan = `udp dport ${spec.port} @th,96,24 { ${vnis} }`;
  return [
    `table ip ${TABLE}`,
    `delete table ip ${TABLE}`,
    `table ip ${TABLE} {`,
    '  chain raw_out {',
    '    type filter hook output priority raw; policy accept;',
    `    ip daddr != ${spec.localAddr} ${vxlan} ct zone set ${ZONE}`,
    '  }',
    '  chain nat_out {',
    '    type nat hook output priority -100; policy accept;',
    `    ct zone ${ZONE} ip daddr != ${spec.localAddr} udp dport ${spec.port} dnat to ${spec.localAddr}:${ESP_PORT}`,
    '  }',
    '  chain filter_out {',
    '    type filter hook output priority 0; policy accept;',
    `    oifname != "lo" ${vxlan} drop`,
    '  }',
    '  chain input {',
    '    type filter hook input priority 0; policy accept;',
    `    iifname != "lo" ${vxlan} drop`,
    `    iifname != "lo" ip saddr ${spec.localAddr} udp dport ${ESP_PORT} drop`,
    '  }',
    '}',
  ].join('\n') + '\n';
}

/** The ESP endpoint of this node: one socket on the node's address, port 4500. */
export class EspTunnel {
  private socket?: dgram.Socket;
  private bound = '';
  private spec?: OverlayEncryption;
  private rules = '';
  /** Outbound associations by peer node (under the primary key). */
  private outbound = new Map<string, Association>();
  /** Inbound associations by SPI, with the node they come from. */
  private inbound = new Map<number, { sa: Association; node: string }>();
  /** The node of each remote endpoint: `<vni>/<mac in hex, without colons>`. */
  private routes = new Map<string, string>();
  /** The encrypted networks' VNIs: nothing else is taken in through the tunnel. */
  private vnis = new Set<number>();
  /** Associations made, by SPI (kept across updates: their sequence numbers go on). */
  private made = new Map<number, Association>();
  /** False until the table was removed or installed once (an earlier run of the daemon may have left it). */
  private checked = false;

  async set(spec: OverlayEncryption | undefined): Promise<void> {
    if (!spec) return this.close();
    if (!IPV4.test(spec.localAddr) || !Number.isInteger(spec.port)) throw new Error('invalid overlay encryption');
    for (const n of spec.networks) {
      if (!Number.isInteger(n.vni)) throw new Error('invalid VNI');
      for (const p of n.peers) if (!IPV4.test(p.node) || !MAC.test(p.mac)) throw new Error(`invalid overlay peer ${JSON.stringify(p)}`);
    }
    const keys = new Map(spec.keys.map((k) => [k.tag, Buffer.from(k.key, 'base64')]));
    const created = new Map(spec.keys.map((k) => [k.tag, k.created]));
    if (!keys.has(spec.primary) || [...keys.values()].some((k) => k.length !== 20)) throw new Error('invalid overlay keys');
    if (this.bound !== spec.localAddr) {
      await this.close();
      this.socket = await this.listen(spec.localAddr);
      this.bound = spec.localAddr;
    }
    // Associations with every peer node under every key; what was made before is kept.
    const nodes = [...new Set(spec.networks.flatMap((n) => n.peers.map((p) => p.node)))].filter((n) => n !== spec.localAddr);
    const made = new Map<number, Association>();
    const sa = (key: Buffer, src: string, dst: string, tag: number) => {
      const existing = this.made.get(spiOf(src, dst, tag));
      const candidate = association(key, src, dst, tag, created.get(tag));
      const a = existing && existing.key.equals(candidate.key) ? existing : candidate;
      made.set(a.spi, a);
      return a;
    };
    const outbound = new Map<string, Association>();
    const inbound = new Map<number, { sa: Association; node: string }>();
    for (const node of nodes) {
      for (const [tag, key] of keys) {
        const a = sa(key, node, spec.localAddr, tag);
        inbound.set(a.spi, { sa: a, node });
        if (tag === spec.primary) outbound.set(node, sa(key, spec.localAddr, node, tag));
      }
    }
    this.made = made;
    this.outbound = outbound;
    this.inbound = inbound;
    this.routes = new Map(spec.networks.flatMap((n) => n.peers.map((p) => [`${n.vni}/${p.mac.replace(/:/g, '')}`, p.node] as [string, string])));
    this.vnis = new Set(spec.networks.map((n) => n.vni));
    this.spec = spec;
    const rules = espRuleset(spec);
    if (rules !== this.rules) {
      await run('nft', ['-f', '-'], rules);
      this.rules = rules;
      this.checked = true;
    }
  }

  private listen(address: string): Promise<dgram.Socket> {
    return new Promise((resolve, reject) => {
      const socket = dgram.createSocket({ type: 'udp4', recvBufferSize: 4 << 20, sendBufferSize: 4 << 20 });
      socket.once('error', reject);
      socket.bind(ESP_PORT, address, () => {
        socket.off('error', reject);
        // A peer that cannot be reached for a moment is no news worth a warning per packet.
        socket.on('error', (err) => log.debug('overlay encryption: socket error', { error: err.message }));
        socket.on('message', (msg, rinfo) => this.packet(msg, rinfo.address, rinfo.port));
        resolve(socket);
      });
    });
  }

  private packet(msg: Buffer, from: string, fromPort: number): void {
    const spec = this.spec;
    const socket = this.socket;
    if (!spec || !socket) return;
    if (from === spec.localAddr) {
      // A VXLAN packet of this node turned aside by the table: to the node of the frame's destination.
      if (msg.length < 8 + 14) return;
      const vni = msg.readUIntBE(4, 3);
      const node = this.routes.get(`${vni}/${msg.toString('hex', 8, 14)}`);
      const sa = node ? this.outbound.get(node) : undefined;
      if (!node || !sa) return;
      socket.send(seal(sa, msg, fromPort, spec.port), ESP_PORT, node);
      return;
    }
    if (msg.length < 8) return;
    const found = this.inbound.get(msg.readUInt32BE(0));
    if (!found || found.node !== from) return;
    const seq = msg.readUInt32BE(4);
    if (!fresh(found.sa, seq)) return;
    const vxlan = open(found.sa, msg);
    if (vxlan) taken(found.sa, seq);
    if (vxlan && vxlan.length >= 8 + 14 && this.vnis.has(vxlan.readUIntBE(4, 3))) socket.send(vxlan, spec.port, spec.localAddr);
  }

  async close(): Promise<void> {
    if (this.rules || !this.checked) await run('nft', ['delete', 'table', 'ip', TABLE]).catch(() => undefined);
    this.checked = true;
    this.rules = '';
    this.spec = undefined;
    const socket = this.socket;
    this.socket = undefined;
    this.bound = '';
    this.outbound.clear();
    this.inbound.clear();
    this.made.clear();
    this.routes.clear();
    this.vnis.clear();
    if (socket) await new Promise<void>((resolve) => socket.close(() => resolve()));
  }
}
