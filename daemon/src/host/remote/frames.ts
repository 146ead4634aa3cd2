/**
 * Frames of the agent protocol. Every frame is a 9-byte header and a payload:
 *
 *   u32 channel (big-endian) | u8 kind | u32 payload length | payload
 *
 * Channel 0 carries the handshake. Every other id is chosen by the side that opens it: the client (the daemon)
 * takes odd ids and the server (the agent) even ones, so the two never collide. An id names a call, a byte or
 * value stream, an abort signal, a callback or a flag, all in one space.
 *
 * Before its HELLO frame each side writes MAGIC: a reader that starts in the middle of old bytes (a serial port
 * keeps what was queued before the other side went away) skips everything up to the magic.
 */
export const MAGIC = Buffer.from('\x7fBERTH-AGENT\x01', 'latin1');

export const HEADER_SIZE = 9;
/** Larger payloads are refused: streams are cut into frames of at most MAX_DATA bytes. */
export const MAX_PAYLOAD = 16 * 1024 * 1024;
export const MAX_DATA = 64 * 1024;

export const enum Kind {
  /** ch 0: JSON {protocol, version, session, ...}. */
  Hello = 1,
  /** ch = call id: the encoded {t: target, a: args}. */
  Call = 2,
  /** ch = call id: the encoded result. */
  Result = 3,
  /** ch = call id: the encoded error. */
  Error = 4,
  /** ch = call id: the caller gave up; the callee aborts the call's signal. */
  Cancel = 5,
  /** ch = stream id: bytes, or one encoded value on a value stream. */
  Data = 6,
  /** ch = stream id: u32 more bytes the receiver accepts. */
  Credit = 7,
  /** ch = stream id: the sender has finished. */
  End = 8,
  /** ch = stream id: either side abandons the stream; payload an encoded error or empty. */
  Reset = 9,
  /** ch = signal id: the signal aborted; payload the encoded reason. */
  Abort = 10,
  /** ch = callback, signal or flag id: the receiving side dropped it. */
  Release = 11,
  /** ch = flag id: the flag became true. */
  Set = 12,
}

export function frame(channel: number, kind: Kind, payload?: Buffer): Buffer {
  const length = payload?.length ?? 0;
  const out = Buffer.allocUnsafe(HEADER_SIZE + length);
  out.writeUInt32BE(channel, 0);
  out.writeUInt8(kind, 4);
  out.writeUInt32BE(length, 5);
  if (payload) payload.copy(out, HEADER_SIZE);
  return out;
}

/** The header of a frame, for writing the header and the payload as two buffers (no copy of big payloads). */
export function header(channel: number, kind: Kind, length: number): Buffer {
  const out = Buffer.allocUnsafe(HEADER_SIZE);
  out.writeUInt32BE(channel, 0);
  out.writeUInt8(kind, 4);
  out.writeUInt32BE(length, 5);
  return out;
}

export class ProtocolError extends Error {}

/**
 * Cuts a byte stream into frames. Until `synced`, bytes before MAGIC are dropped. Chunks are kept as a list
 * and joined only for the frame being cut, so a large payload that arrives in many pieces is copied once.
 */
export class FrameReader {
  private chunks: Buffer[] = [];
  private buffered = 0;
  synced = false;

  constructor(private readonly onFrame: (channel: number, kind: Kind, payload: Buffer) => void) {}

  push(chunk: Buffer): void {
    this.chunks.push(chunk);
    this.buffered += chunk.length;
    if (!this.synced && !this.sync()) return;
    while (this.buffered >= HEADER_SIZE) {
      // A new peer's magic where a frame would start (a serial port's next client): skipped, its hello follows.
      const start = this.peek(Math.min(this.buffered, MAGIC.length));
      if (start.subarray(0, 4).equals(MAGIC.subarray(0, 4))) {
        if (this.buffered < MAGIC.length) return;
        if (start.subarray(0, MAGIC.length).equals(MAGIC)) {
          this.take(MAGIC.length);
          continue;
        }
      }
      const head = this.peek(HEADER_SIZE);
      const length = head.readUInt32BE(5);
      if (length > MAX_PAYLOAD) throw new ProtocolError(`frame of ${length} bytes is larger than the protocol allows`);
      if (this.buffered < HEADER_SIZE + length) return;
      const whole = this.take(HEADER_SIZE + length);
      this.onFrame(whole.readUInt32BE(0), whole.readUInt8(4) as Kind, whole.subarray(HEADER_SIZE));
    }
  }

  /** Drops bytes up to and including MAGIC; false while it has not been seen (keeps a possible partial match). */
  private sync(): boolean {
    const all = this.take(this.buffered);
    const at = all.indexOf(MAGIC);
    if (at < 0) {
      const keep = Math.min(all.length, MAGIC.length - 1);
      const tail = all.subarray(all.length - keep);
      this.chunks = keep ? [tail] : [];
      this.buffered = keep;
      return false;
    }
    const rest = all.subarray(at + MAGIC.length);
    this.chunks = rest.length ? [rest] : [];
    this.buffered = rest.length;
    this.synced = true;
    return true;
  }

  private peek(n: number): Buffer {
    if (this.chunks[0]!.length >= n) return this.chunks[0]!;
    const joined = Buffer.concat(this.chunks);
    this.chunks = [joined];
    return joined;
  }

  private take(n: number): Buffer {
    if (n === 0) return Buffer.alloc(0);
    const first = this.chunks[0]!;
    let out: Buffer;
    if (first.length >= n) {
      out = first.subarray(0, n);
      if (first.length === n) this.chunks.shift();
      else this.chunks[0] = first.subarray(n);
    } else {
      out = Buffer.allocUnsafe(n);
      let filled = 0;
      while (filled < n) {
        const c = this.chunks[0]!;
        const want = n - filled;
        if (c.length <= want) {
          c.copy(out, filled);
          filled += c.length;
          this.chunks.shift();
        } else {
          c.copy(out, filled, 0, want);
          this.chunks[0] = c.subarray(want);
          filled += want;
        }
      }
    }
    this.buffered -= n;
    return out;
  }
}
