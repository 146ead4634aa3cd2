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

/** Turns log records into output chunks: a newline after complete records, a timestamp before each line. */
export async function* logChunks(records: AsyncIterable<LogRecord>, opts: LogOptions): AsyncGenerator<LogChunk> {
  const atLineStart = { stdout: true, stderr: true };
  for await (const record of records) {
    if (opts.untilNano !== undefined && record.timeNano > opts.untilNano) return;
    if (opts.sinceNano !== undefined && record.timeNano < opts.sinceNano) continue;
    if (record.stream === 'stdout' ? !opts.stdout : !opts.stderr) continue;
    const parts: Buffer[] = [];
    if (opts.timestamps && atLineStart[record.stream]) parts.push(Buffer.from(`${rfc3339Nano(record.timeNano)} `));
    parts.push(record.data);
    if (record.complete) parts.push(NEWLINE);
    atLineStart[record.stream] = record.complete;
    yield { stream: record.stream, data: parts.length === 1 ? parts[0] : Buffer.concat(parts) };
  }
}

const NEWLINE = Buffer.from('\n');
