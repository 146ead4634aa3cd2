/**
 * Stream helpers of the API: the 8-byte multiplexed frames of attach, exec and logs, detach-key
 * recognition on stdin, writing with backpressure, and JSON progress streams.
 */
import type { Duplex, Writable } from 'node:stream';
import type { RecordFraming } from '../engine/containers/logs.js';
import { errorMessage, InvalidParameter } from '../errors.js';
import type { ApiResponse } from './http.js';

export const MEDIA_RAW = 'application/vnd.docker.raw-stream';
export const MEDIA_MULTIPLEXED = 'application/vnd.docker.multiplexed-stream';

const STREAM_IDS = { stdin: 0, stdout: 1, stderr: 2 } as const;

/** One multiplexed frame: stream id, three zero bytes, big-endian length, payload. */
export function frame(stream: 'stdin' | 'stdout' | 'stderr', data: Buffer): Buffer {
  const header = Buffer.alloc(8);
  header[0] = STREAM_IDS[stream];
  header.writeUInt32BE(data.length, 4);
  return Buffer.concat([header, data]);
}

/** Frames for logBytes: a multiplexed frame header before each line. */
export const MULTIPLEXED_FRAMING: RecordFraming = {
  headerBytes: 8,
  writeHeader(out, at, stream, length) {
    out[at] = STREAM_IDS[stream];
    out[at + 1] = 0;
    out[at + 2] = 0;
    out[at + 3] = 0;
    out.writeUInt32BE(length, at + 4);
  },
};

/** Writes and waits for the stream to drain when its buffer is full; false when the stream is gone. */
export async function writeWithBackpressure(out: Writable, data: Buffer | string): Promise<boolean> {
  if (out.destroyed || out.writableEnded) return false;
  if (out.write(data)) return true;
  return drained(out);
}

/** Resolves once a stream whose buffer was full has drained (true), or false when it is gone. */
export function drained(out: Writable): Promise<boolean> {
  if (out.destroyed || out.writableEnded) return Promise.resolve(false);
  if (!out.writableNeedDrain) return Promise.resolve(true);
  return new Promise<boolean>((resolve) => {
    const done = (ok: boolean) => {
      out.off('drain', onDrain);
      out.off('close', onClose);
      out.off('error', onClose);
      resolve(ok);
    };
    const onDrain = () => done(true);
    const onClose = () => done(false);
    out.once('drain', onDrain);
    out.once('close', onClose);
    out.once('error', onClose);
  });
}

export const DEFAULT_DETACH_KEYS = 'ctrl-p,ctrl-q';

/** Parses a detach-keys string (`ctrl-p,ctrl-q`, `a`, `ctrl-@`) into bytes. */
export function parseDetachKeys(spec: string): Buffer {
  const bytes: number[] = [];
  for (const key of spec.split(',')) {
    const k = key.trim();
    if (k.length === 1) {
      bytes.push(k.charCodeAt(0));
      continue;
    }
    const m = /^ctrl-(.)$/i.exec(k);
    if (!m) throw new InvalidParameter(`Invalid detach keys (${spec}) provided: ${JSON.stringify(k)} is not a key, expected a character or ctrl-<value>`);
    const c = m[1].toLowerCase();
    if (c >= 'a' && c <= 'z') bytes.push(c.charCodeAt(0) - 96);
    else if (c === '@') bytes.push(0);
    else if (c === '[') bytes.push(27);
    else if (c === '\\') bytes.push(28);
    else if (c === ']') bytes.push(29);
    else if (c === '^') bytes.push(30);
    else if (c === '_') bytes.push(31);
    else throw new InvalidParameter(`Invalid detach keys (${spec}) provided: unknown key ${JSON.stringify(k)}`);
  }
  return Buffer.from(bytes);
}

/**
 * Watches stdin for the detach sequence. `push` returns the bytes to pass on and whether the sequence was
 * seen; bytes that might start the sequence are held back until it is clear they do not.
 */
export class DetachKeyMatcher {
  private held = 0;

  constructor(private readonly keys: Buffer) {}

  push(chunk: Buffer): { data: Buffer; detached: boolean } {
    if (this.keys.length === 0) return { data: chunk, detached: false };
    const out: number[] = [];
    for (const byte of chunk) {
      if (byte === this.keys[this.held]) {
        this.held++;
        if (this.held === this.keys.length) return { data: Buffer.from(out), detached: true };
        continue;
      }
      for (let i = 0; i < this.held; i++) out.push(this.keys[i]);
      this.held = byte === this.keys[0] ? 1 : 0;
      if (this.held === 0) out.push(byte);
    }
    return { data: Buffer.from(out), detached: false };
  }
}

/**
 * Copies a client's stdin (the hijacked connection) to a process's input with backpressure, watching for the
 * detach keys. `detach` runs when the client typed them; `clientEnded` when the client closed its side.
 */
export function pumpStdin(conn: Duplex, input: NodeJS.WritableStream, detachKeys: Buffer, on: { detach(): void; clientEnded(): void }): void {
  const matcher = new DetachKeyMatcher(detachKeys);
  conn.on('data', (chunk: Buffer) => {
    const { data, detached } = matcher.push(chunk);
    if (data.length > 0 && !input.write(data)) {
      conn.pause();
      input.once('drain', () => conn.resume());
    }
    if (detached) on.detach();
  });
  conn.on('end', () => on.clientEnded());
  // A start whose JSON body came after its head left the connection paused, so that nothing beyond the body was
  // read before this: a 'data' listener does not undo an explicit pause.
  conn.resume();
}

/**
 * A JSON progress stream (pull, push, import) that starts only when there is something to say: an error before
 * that becomes an ordinary error response; an error after it goes in-band as `{"errorDetail", "error"}`.
 */
export class ProgressStream {
  private out: Writable | undefined;

  constructor(
    private readonly res: ApiResponse,
    private readonly headers: Record<string, string> = {},
  ) {}

  get started(): boolean {
    return this.out !== undefined;
  }

  write(message: object): void {
    this.out ??= this.res.stream(200, 'application/json', this.headers);
    this.out.write(JSON.stringify(message) + '\n');
  }

  fail(err: unknown): void {
    const message = errorMessage(err);
    this.write({ errorDetail: { message }, error: message });
    this.end();
  }

  end(): void {
    this.out ??= this.res.stream(200, 'application/json', this.headers);
    this.out.end();
  }

  /** Runs `work`, which reports through `write`, and ends the stream with its outcome. */
  async run(work: (write: (message: object) => void) => Promise<unknown>): Promise<void> {
    try {
      await work((message) => this.write(message));
    } catch (err) {
      if (!this.started) throw err;
      this.fail(err);
      return;
    }
    this.end();
  }
}
