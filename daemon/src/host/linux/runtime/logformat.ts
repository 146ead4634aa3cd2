/**
 * conmon's k8s-file log format: one record per line, `<RFC3339Nano> <stdout|stderr> <P|F> <text>\n`, where P
 * marks a partial line continued by the next record. Records point into the chunk they were read in (no
 * copy), and their time is parsed only when asked for; `tailOffset` finds where the last lines begin.
 */
import type { FileHandle } from 'node:fs/promises';
import { LOG_COMPLETE, LOG_STDERR, type LogRecord, type LogRecordBlock } from '../../host.js';

const NL = 0x0a;
const SPACE = 0x20;
const TAIL_BLOCK = 64 << 10;

// Records come in bursts within one second: the seconds of the last second seen are reused when its bytes
// (date, time and zone) are the same.
const cachedSecondBytes = Buffer.alloc(25);
let cachedSecondsValid = false;
let cachedSeconds = 0;

/** Where the fraction of an RFC 3339 time starting at `start` ends (the zone starts there). */
function fractionEnd(buf: Buffer, start: number, end: number): number {
  let i = start + 19;
  if (buf[i] !== 0x2e) return i;
  for (i++; i < end && buf[i] >= 48 && buf[i] <= 57; i++);
  return i;
}

/** The fraction of an RFC 3339 time starting at `start`, in nanoseconds (nine digits at most). */
function fractionNanos(buf: Buffer, start: number, end: number): number {
  let i = start + 19;
  let frac = 0;
  let digits = 0;
  if (buf[i] === 0x2e) {
    for (i++; digits < 9 && i < end && buf[i] >= 48 && buf[i] <= 57; i++, digits++) frac = frac * 10 + (buf[i] - 48);
  }
  for (; digits < 9; digits++) frac *= 10;
  return frac;
}

function digitsAt(buf: Buffer, at: number, n: number): number {
  let v = 0;
  for (let k = 0; k < n; k++) v = v * 10 + (buf[at + k] - 48);
  return v;
}

/** Whole seconds since the epoch of an RFC 3339 time in `buf[start, end)`; its zone starts at `zoneAt`. */
function wholeSeconds(buf: Buffer, start: number, end: number, zoneAt: number): number {
  const hasOffset = zoneAt + 5 < end + 1 && (buf[zoneAt] === 0x2b || buf[zoneAt] === 0x2d);
  if (cachedSecondsValid) {
    let same = true;
    for (let k = 0; k < 19; k++) {
      if (buf[start + k] !== cachedSecondBytes[k]) {
        same = false;
        break;
      }
    }
    if (same) {
      if (!hasOffset) same = cachedSecondBytes[19] === 0;
      else for (let k = 0; k < 6; k++) if (buf[zoneAt + k] !== cachedSecondBytes[19 + k]) same = false;
    }
    if (same) return cachedSeconds;
  }
  let offsetMin = 0;
  if (hasOffset) {
    const sign = buf[zoneAt] === 0x2b ? 1 : -1;
    offsetMin = sign * (digitsAt(buf, zoneAt + 1, 2) * 60 + digitsAt(buf, zoneAt + 4, 2));
  }
  const ms = Date.UTC(digitsAt(buf, start, 4), digitsAt(buf, start + 5, 2) - 1, digitsAt(buf, start + 8, 2), digitsAt(buf, start + 11, 2), digitsAt(buf, start + 14, 2), digitsAt(buf, start + 17, 2));
  buf.copy(cachedSecondBytes, 0, start, start + 19);
  if (hasOffset) buf.copy(cachedSecondBytes, 19, zoneAt, zoneAt + 6);
  else cachedSecondBytes[19] = 0;
  cachedSeconds = (ms - offsetMin * 60_000) / 1000;
  cachedSecondsValid = true;
  return cachedSeconds;
}

/** Parses an RFC 3339 timestamp with up to nine fractional digits, from bytes, to nanoseconds. */
export function parseTimeNano(buf: Buffer, start: number, end: number): bigint {
  return BigInt(wholeSeconds(buf, start, end, fractionEnd(buf, start, end))) * 1_000_000_000n + BigInt(fractionNanos(buf, start, end));
}

/** One record, pointing into the chunk it was read from; the time is parsed on first use. */
class ChunkRecord implements LogRecord {
  constructor(
    private readonly chunk: Buffer,
    private readonly timeStart: number,
    private readonly timeEnd: number,
    readonly stream: 'stdout' | 'stderr',
    readonly complete: boolean,
    readonly data: Buffer,
  ) {}
  get time(): string {
    return this.chunk.toString('latin1', this.timeStart, this.timeEnd);
  }
  get timeNano(): bigint {
    return parseTimeNano(this.chunk, this.timeStart, this.timeEnd);
  }
}

/**
 * Parses the complete lines of `buf[start, end)` into `out`; returns the offset just past the last complete
 * line (the start of a trailing fragment, if any). Malformed lines are skipped.
 */
export function parseLines(buf: Buffer, start: number, end: number, out: LogRecord[]): number {
  let pos = start;
  for (;;) {
    const nl = buf.indexOf(NL, pos);
    if (nl < 0 || nl >= end) return pos;
    const sp = buf.indexOf(SPACE, pos);
    // `<time> stdout F <text>`: the stream starts one byte after the time, the flag 8 bytes after.
    if (sp > pos && sp + 9 <= nl && buf[sp + 1] === 0x73 && buf[sp + 7] === SPACE) {
      const kind = buf[sp + 4];
      const flag = buf[sp + 8];
      const stream = kind === 0x6f ? 'stdout' : kind === 0x65 ? 'stderr' : undefined;
      if (stream && (flag === 0x46 || flag === 0x50)) {
        const dataStart = Math.min(sp + 10, nl);
        out.push(new ChunkRecord(buf, pos, sp, stream, flag === 0x46, buf.subarray(dataStart, nl)));
      }
    }
    pos = nl + 1;
  }
}

/** Records of one chunk in columns (see LogRecordBlock); times are parsed when asked for. */
class ColumnBlock implements LogRecordBlock {
  constructor(
    readonly buf: Buffer,
    readonly count: number,
    readonly offsets: Int32Array,
    readonly flags: Uint8Array,
  ) {}
  seconds(i: number): number {
    const at = this.offsets[3 * i];
    const end = this.offsets[3 * i + 1];
    return wholeSeconds(this.buf, at, end, fractionEnd(this.buf, at, end));
  }
  nanos(i: number): number {
    return fractionNanos(this.buf, this.offsets[3 * i], this.offsets[3 * i + 1]);
  }
}

/** conmon's time with nine digits and an offset (`2026-11-22T01:57:17.552529288+00:00`): the usual length. */
const USUAL_TIME_LENGTH = 35;

/**
 * Parses the complete lines of `buf[start, end)` into a column block; returns it and the offset just past the
 * last complete line. Malformed lines are skipped.
 */
export function parseBlock(buf: Buffer, start: number, end: number): { block: LogRecordBlock; rest: number } {
  let capacity = Math.max(16, ((end - start) / 128) | 0);
  let offsets = new Int32Array(capacity * 3);
  let flags = new Uint8Array(capacity);
  let count = 0;
  let pos = start;
  for (;;) {
    const nl = buf.indexOf(NL, pos);
    if (nl < 0 || nl >= end) break;
    let sp = pos + USUAL_TIME_LENGTH;
    if (buf[sp] !== SPACE || sp >= nl) sp = buf.indexOf(SPACE, pos);
    // `<time> stdout F <text>`: the stream starts one byte after the time, the flag 8 bytes after.
    if (sp > pos && sp + 9 <= nl && buf[sp + 1] === 0x73 && buf[sp + 7] === SPACE) {
      const kind = buf[sp + 4];
      const flag = buf[sp + 8];
      if ((kind === 0x6f || kind === 0x65) && (flag === 0x46 || flag === 0x50)) {
        if (count === capacity) {
          capacity *= 2;
          const grown = new Int32Array(capacity * 3);
          grown.set(offsets);
          offsets = grown;
          const grownFlags = new Uint8Array(capacity);
          grownFlags.set(flags);
          flags = grownFlags;
        }
        const o = 3 * count;
        offsets[o] = pos;
        offsets[o + 1] = sp + 10 < nl ? sp + 10 : nl;
        offsets[o + 2] = nl;
        flags[count] = (kind === 0x65 ? LOG_STDERR : 0) | (flag === 0x46 ? LOG_COMPLETE : 0);
        count++;
      }
    }
    pos = nl + 1;
  }
  return { block: new ColumnBlock(buf, count, offsets, flags), rest: pos };
}

/** Bytes enough to hold a record's time, stream and flag (`<RFC3339Nano with offset> stdout F `). */
const RECORD_HEAD = 64;

/** Whether the record starting at `buf[at]` is the end of a line (F) rather than a part of one (P). */
function completesLine(buf: Buffer, at: number, end: number): boolean {
  const sp = buf.indexOf(SPACE, at);
  return sp >= at && sp + 8 < end && buf[sp + 8] === 0x46;
}

/**
 * Offset where the last `tail` lines of the file begin, reading backwards in blocks. A line the container
 * wrote may span several records (conmon cuts lines at its buffer's size and marks the parts P): lines are
 * counted by their final (F) record, so that `tail=N` gives N lines of output, as Docker does. A fragment
 * after the last newline is still being written and left out.
 */
export async function tailOffset(handle: FileHandle, size: number, tail: number): Promise<number> {
  const block = Buffer.allocUnsafe(TAIL_BLOCK);
  const head = Buffer.allocUnsafe(RECORD_HEAD);
  let end = size;
  let recordEnd = -1; // the newline ending the record whose start is searched for
  let counted = 0;
  const headAt = async (at: number): Promise<boolean> => {
    const { bytesRead } = await handle.read(head, 0, RECORD_HEAD, at);
    return completesLine(head, 0, bytesRead);
  };
  while (end > 0) {
    const start = Math.max(0, end - TAIL_BLOCK);
    const len = end - start;
    const { bytesRead } = await handle.read(block, 0, len, start);
    const have = Math.min(bytesRead, len);
    for (let i = have - 1; i >= 0; i--) {
      i = block.lastIndexOf(NL, i);
      if (i < 0) break;
      const at = start + i;
      if (recordEnd < 0) {
        recordEnd = at;
        if (tail === 0) return at + 1;
        continue;
      }
      // The record's head is read from the block, or from the file when it runs past the block's end.
      const lineEnd = i + 1 + RECORD_HEAD <= have ? completesLine(block, i + 1, have) : await headAt(at + 1);
      if (lineEnd) {
        if (counted === tail) return recordEnd + 1;
        counted++;
      }
      recordEnd = at;
    }
    end = start;
  }
  // The first record of the file.
  if (recordEnd >= 0 && counted === tail && (await headAt(0))) return recordEnd + 1;
  return 0;
}
