/**
 * Reading a container's log for `GET /containers/{id}/logs` and for attach with logs=1: records from the
 * Host's log reader, selected by stream and time, with Docker's timestamps.
 */
import type { LogRecord } from '../../host/host.js';
import { rfc3339Nano } from '../../util/json.js';

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
