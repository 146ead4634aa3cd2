/**
 * Reading a container's log for `GET /containers/{id}/logs` and for attach with logs=1: records from the
 * Host's log reader, selected by stream and time, with Docker's timestamps.
 */
import { LOG_COMPLETE, LOG_STDERR, type AttachStreams, type ContainerRuntimeHost, type LogRecord, type LogRecordBlock } from '../../host/host.js';
import { rfc3339Nano } from '../../util/json.js';
import type { ContainerRecord } from './model.js';

/** A container's output as the Host gives it: its log records, and its live streams (attach). */
export type { AttachStreams, LogRecord, LogRecordBlock };

/** What reading a container's log needs of the Host. */
export type LogHost = Pick<ContainerRuntimeHost, 'readLogBlocks' | 'readLogBatches'>;

/** How much of the log to read: with follow, reading goes on until the container stops running. */
export interface LogReadOptions {
  follow: boolean;
  tail?: number;
  signal: AbortSignal;
}

/** Reading stops following once the container is neither running nor restarting. */
function stopped(record: ContainerRecord): () => boolean {
  return () => !record.State.Running && !record.State.Restarting;
}

/** The container's log in columnar blocks (no object per record): what `logs` is served from. */
export function readLogBlocks(host: LogHost, record: ContainerRecord, opts: LogReadOptions): AsyncIterable<LogRecordBlock> {
  return host.readLogBlocks(record.LogPath, { ...opts, until: stopped(record) });
}

/** The container's log in batches of records: what attach with logs=1 replays. */
export function readLogBatches(host: LogHost, record: ContainerRecord, opts: LogReadOptions): AsyncIterable<LogRecord[]> {
  return host.readLogBatches(record.LogPath, { ...opts, until: stopped(record) });
}

export interface LogOptions {
  stdout: boolean;
  stderr: boolean;
  timestamps: boolean;
  follow: boolean;
  /** Nanoseconds; records before it are skipped. */
  sinceNano?: bigint;
  /** Nanoseconds; records after it are skipped and following stops. */
  untilNano?: bigint;
  tail?: number;
}

export interface LogChunk {
  stream: 'stdout' | 'stderr';
  data: Buffer;
}

/**
 * Turns batches of log records into output chunks: a newline after complete records, a timestamp before
 * each line. Consecutive records of one stream within a batch become one chunk (one allocation per run
 * rather than one per line: this is what keeps a large log fast).
 */
export async function* logChunks(batches: AsyncIterable<LogRecord[]>, opts: LogOptions): AsyncGenerator<LogChunk> {
  const atLineStart = { stdout: true, stderr: true };
  let parts: Buffer[] = [];
  let bytes = 0;
  let stream: 'stdout' | 'stderr' = 'stdout';
  const take = (): LogChunk => {
    const chunk = { stream, data: parts.length === 1 ? parts[0] : Buffer.concat(parts, bytes) };
    parts = [];
    bytes = 0;
    return chunk;
  };
  for await (const batch of batches) {
    for (const record of batch) {
      if (opts.untilNano !== undefined && record.timeNano > opts.untilNano) {
        if (bytes > 0) yield take();
        return;
      }
      if (opts.sinceNano !== undefined && record.timeNano < opts.sinceNano) continue;
      if (record.stream === 'stdout' ? !opts.stdout : !opts.stderr) continue;
      if (bytes > 0 && record.stream !== stream) yield take();
      stream = record.stream;
      if (opts.timestamps && atLineStart[stream]) {
        const stamp = Buffer.from(`${rfc3339Nano(record.timeNano)} `);
        parts.push(stamp);
        bytes += stamp.length;
      }
      parts.push(record.data);
      bytes += record.data.length;
      if (record.complete) {
        parts.push(NEWLINE);
        bytes += 1;
      }
      atLineStart[stream] = record.complete;
    }
    if (bytes > 0) yield take();
  }
}

const NEWLINE = Buffer.from('\n');

/** How each record (or each line: the parts of a line stay together) is framed on the wire. */
export interface RecordFraming {
  /** Bytes before each frame's payload. */
  headerBytes: number;
  /** Writes the header of a frame of `length` payload bytes at `out[at]`. */
  writeHeader(out: Buffer, at: number, stream: 'stdout' | 'stderr', length: number): void;
}

/** A line's parts go into one frame up to this size (Docker's log lines are cut at 16 KiB). */
const MAX_MERGED_FRAME = 16 * 1024;
/** `2006-01-02T15:04:05.000000000Z ` */
const STAMP_BYTES = 31;

/**
 * The log as bytes ready to send: per block of records read, one buffer holding a frame per line (with
 * `framing`; bare bytes without), a newline after complete records, a timestamp before each line. Nothing is
 * allocated per record, and times are parsed only when since, until or timestamps ask for them: this is what
 * serves a big log at disk speed.
 */
export async function* logBytes(blocks: AsyncIterable<LogRecordBlock>, opts: LogOptions, framing?: RecordFraming): AsyncGenerator<Buffer> {
  const header = framing?.headerBytes ?? 0;
  const stampBytes = opts.timestamps ? STAMP_BYTES : 0;
  const sinceSec = opts.sinceNano === undefined ? undefined : Number(opts.sinceNano / 1_000_000_000n);
  const sinceNs = opts.sinceNano === undefined ? 0 : Number(opts.sinceNano % 1_000_000_000n);
  const untilSec = opts.untilNano === undefined ? undefined : Number(opts.untilNano / 1_000_000_000n);
  const untilNs = opts.untilNano === undefined ? 0 : Number(opts.untilNano % 1_000_000_000n);
  const byTime = sinceSec !== undefined || untilSec !== undefined;
  const stamps = new StampWriter();
  // Whether the next record of a stream starts a line (and so gets a timestamp).
  let stdoutAtStart = true;
  let stderrAtStart = true;
  // A frame of a line whose end is in the next block: carried over so that the line stays one frame (not when
  // following, where the rest of the line may come much later).
  const carryOver = framing !== undefined && !opts.follow;
  let carry: Buffer | undefined;
  let frameStderr = false;
  for await (const block of blocks) {
    const { buf, count, offsets, flags } = block;
    // Records are in time order: a block wholly before `since` is skipped, one wholly within since..until is
    // taken without looking at each record's time (a frame carried over stays for the end).
    let checkTime = byTime;
    if (byTime) {
      const firstSec = block.seconds(0);
      const firstNs = block.nanos(0);
      const lastSec = block.seconds(count - 1);
      const lastNs = block.nanos(count - 1);
      const before = (sec: number, ns: number, limitSec: number, limitNs: number) => sec < limitSec || (sec === limitSec && ns < limitNs);
      if (sinceSec !== undefined && before(lastSec, lastNs, sinceSec, sinceNs)) continue;
      if (untilSec !== undefined && before(untilSec, untilNs, firstSec, firstNs)) break;
      checkTime = (sinceSec !== undefined && before(firstSec, firstNs, sinceSec, sinceNs)) || (untilSec !== undefined && before(untilSec, untilNs, lastSec, lastNs));
    }
    // The output is built in the block's own buffer when every record's prefix (time, stream, flag) has room
    // for what replaces it (frame header, timestamp): each record then moves left, never over a record not
    // yet read. Otherwise (or with a frame carried over) in a new buffer.
    let inPlace = carry === undefined;
    for (let i = 0; inPlace && i < count; i++) if (offsets[3 * i + 1] - offsets[3 * i] < header + stampBytes) inPlace = false;
    const out = inPlace ? buf : Buffer.allocUnsafe((carry?.length ?? 0) + (offsets[3 * count - 1] - offsets[0]) + count * (header + STAMP_BYTES + 1));
    const begin = inPlace ? offsets[0] : 0;
    let used = begin;
    let frameAt = -1; // where the open frame's header is, -1 when none is open
    if (carry) {
      used = carry.copy(out, 0);
      frameAt = 0;
      carry = undefined;
    }
    const closeFrame = () => {
      if (frameAt >= 0 && framing) framing.writeHeader(out, frameAt, frameStderr ? 'stderr' : 'stdout', used - frameAt - header);
      frameAt = -1;
    };
    let stop = false;
    for (let i = 0; i < count; i++) {
      const flag = flags[i];
      const stderr = (flag & LOG_STDERR) !== 0;
      // Read before anything is written over the record's time.
      if (checkTime) {
        const sec = block.seconds(i);
        const nanos = block.nanos(i);
        if (untilSec !== undefined && (sec > untilSec || (sec === untilSec && nanos > untilNs))) {
          stop = true;
          break;
        }
        if (sinceSec !== undefined && (sec < sinceSec || (sec === sinceSec && nanos < sinceNs))) continue;
      }
      if (stderr ? !opts.stderr : !opts.stdout) continue;
      const complete = (flag & LOG_COMPLETE) !== 0;
      const atStart = stderr ? stderrAtStart : stdoutAtStart;
      // A line's parts continue the open frame of their stream, up to a size.
      if (frameAt < 0 || frameStderr !== stderr || atStart || used - frameAt > MAX_MERGED_FRAME) {
        closeFrame();
        frameAt = used;
        frameStderr = stderr;
        used += header;
      }
      if (opts.timestamps && atStart) {
        const timeAt = offsets[3 * i];
        if (isUsualUtcTime(buf, timeAt, offsets[3 * i + 1])) {
          // `2026-11-22T01:57:17.552529288+00:00` is Docker's stamp up to the zone.
          if (inPlace) buf.copyWithin(used, timeAt, timeAt + 29);
          else buf.copy(out, used, timeAt, timeAt + 29);
          out[used + 29] = 0x5a; // Z
          out[used + 30] = 0x20;
          used += STAMP_BYTES;
        } else {
          used = stamps.write(out, used, block.seconds(i), block.nanos(i));
        }
      }
      const dataStart = offsets[3 * i + 1];
      const dataEnd = offsets[3 * i + 2];
      if (inPlace) buf.copyWithin(used, dataStart, dataEnd);
      else buf.copy(out, used, dataStart, dataEnd);
      used += dataEnd - dataStart;
      if (complete) {
        out[used++] = 0x0a;
        closeFrame();
      }
      if (stderr) stderrAtStart = complete;
      else stdoutAtStart = complete;
    }
    if (carryOver && frameAt >= 0 && !stop) {
      carry = Buffer.from(out.subarray(frameAt, used));
      used = frameAt;
      frameAt = -1;
    }
    closeFrame();
    if (used > begin) yield out.subarray(begin, used);
    if (stop) break;
  }
  if (carry && framing) {
    framing.writeHeader(carry, 0, frameStderr ? 'stderr' : 'stdout', carry.length - header);
    yield carry;
  }
}

/** Whether the record's time is conmon's usual UTC form, `2026-11-22T01:57:17.552529288+00:00 stdout F `. */
function isUsualUtcTime(buf: Buffer, timeAt: number, dataStart: number): boolean {
  return (
    dataStart - timeAt === 45 &&
    buf[timeAt + 19] === 0x2e &&
    buf[timeAt + 29] === 0x2b &&
    buf[timeAt + 30] === 0x30 &&
    buf[timeAt + 31] === 0x30 &&
    buf[timeAt + 32] === 0x3a &&
    buf[timeAt + 33] === 0x30 &&
    buf[timeAt + 34] === 0x30
  );
}

/**
 * Docker's timestamp of a record, `2006-01-02T15:04:05.000000000Z ` (UTC, nine digits): the date and time
 * part is formatted once per second, the digits are written from the record's time.
 */
class StampWriter {
  private second = NaN;
  private readonly prefix = Buffer.alloc(20); // `2006-01-02T15:04:05.`

  write(out: Buffer, at: number, sec: number, nanos: number): number {
    if (sec !== this.second) {
      this.second = sec;
      this.prefix.write(`${new Date(sec * 1000).toISOString().slice(0, 19)}.`, 'latin1');
    }
    out.set(this.prefix, at);
    for (let k = at + 28; k >= at + 20; k--) {
      const tenth = (nanos / 10) | 0;
      out[k] = 48 + nanos - tenth * 10;
      nanos = tenth;
    }
    out[at + 29] = 0x5a; // Z
    out[at + 30] = 0x20;
    return at + STAMP_BYTES;
  }
}
