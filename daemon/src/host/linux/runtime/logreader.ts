/**
 * Reader of conmon's k8s-file log: one record per line, `<RFC3339Nano> <stdout|stderr> <P|F> <text>\n`, where
 * P marks a partial line continued by the next record.
 *
 * Built for big logs: the file is read in large chunks and split with Buffer.indexOf, records point into the
 * chunk (no copy), and their time is parsed only when asked for. `tail` reads backwards from the end in
 * blocks, counting newlines. `follow` waits for the file to grow (fs.watch plus a slow timer), and ends when
 * the signal aborts or, once `until()` says the container stopped, when the file is drained.
 */
import { promises as fs, watch, type FSWatcher } from 'node:fs';
import type { FileHandle } from 'node:fs/promises';
import type { LogRecord, LogRecordBlock } from '../../host.js';
import { parseBlock, parseLines, tailOffset } from './logformat.js';

export { parseBlock, parseLines, parseTimeNano, tailOffset } from './logformat.js';

const CHUNK = 1 << 20;
const FOLLOW_POLL_MS = 250;

export interface ReadLogOptions {
  follow: boolean;
  signal: AbortSignal;
  tail?: number;
  until?: () => boolean;
}

class LogIterator implements AsyncIterator<LogRecord> {
  private handle: FileHandle | undefined;
  private position = 0;
  private pending: Buffer | undefined; // a fragment of a line not yet complete
  private queue: LogRecord[] = [];
  private index = 0;
  private finished = false;
  private watcher: FSWatcher | undefined;
  private wake: (() => void) | undefined;
  private opened = false;
  /** In columns mode, the block of the last chunk read (not yet taken), instead of `queue`. */
  private block: LogRecordBlock | undefined;

  constructor(
    private readonly file: string,
    private readonly opts: ReadLogOptions,
    private readonly columns = false,
  ) {}

  /** The records of the next chunk read as a column block (never empty), or undefined at the end. */
  async nextBlock(): Promise<LogRecordBlock | undefined> {
    if (!this.block && !(await this.fill())) return undefined;
    const block = this.block;
    this.block = undefined;
    return block;
  }

  private hasQueued(): boolean {
    return this.columns ? this.block !== undefined : this.index < this.queue.length;
  }

  next(): Promise<IteratorResult<LogRecord>> {
    if (this.index < this.queue.length) return Promise.resolve({ value: this.queue[this.index++], done: false });
    return this.fill().then((more) => (more ? { value: this.queue[this.index++], done: false } : { value: undefined, done: true }));
  }

  /** The records of the next chunk read (never empty), or undefined at the end. */
  async nextBatch(): Promise<LogRecord[] | undefined> {
    if (this.index >= this.queue.length && !(await this.fill())) return undefined;
    const batch = this.index === 0 ? this.queue : this.queue.slice(this.index);
    this.queue = [];
    this.index = 0;
    return batch;
  }

  async return(): Promise<IteratorResult<LogRecord>> {
    await this.finish();
    return { value: undefined, done: true };
  }

  private async finish(): Promise<void> {
    this.finished = true;
    this.block = undefined;
    this.queue = [];
    this.index = 0;
    this.watcher?.close();
    this.watcher = undefined;
    this.wake?.();
    const h = this.handle;
    this.handle = undefined;
    await h?.close().catch(() => undefined);
  }

  private async open(): Promise<boolean> {
    try {
      this.handle = await fs.open(this.file, 'r');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return false;
      throw err;
    }
    this.opened = true;
    if (this.opts.tail !== undefined && this.opts.tail >= 0) {
      const { size } = await this.handle.stat();
      this.position = await tailOffset(this.handle, size, this.opts.tail);
    }
    return true;
  }

  /** Reads until the queue holds records (true) or the log ended (false). */
  private async fill(): Promise<boolean> {
    try {
      for (;;) {
        if (this.finished || this.opts.signal.aborted) {
          await this.finish();
          return false;
        }
        // Asked before reading: if the container had stopped, what this read returns is all there is.
        const stopped = this.opts.until?.() ?? false;
        if (!this.opened && !(await this.open())) {
          if (!this.opts.follow || stopped) {
            await this.finish();
            return false;
          }
          await this.waitForChange();
          continue;
        }
        const n = await this.readChunk();
        if (this.hasQueued()) return true;
        if (n > 0) continue; // read only a fragment of a long line
        if (!this.opts.follow || stopped) {
          await this.finish();
          return false;
        }
        await this.waitForChange();
      }
    } catch (err) {
      await this.finish();
      throw err;
    }
  }

  /** Reads the next chunk and parses its complete lines into the queue; returns the bytes read. */
  private async readChunk(): Promise<number> {
    const carry = this.pending?.length ?? 0;
    const size = carry >= CHUNK / 2 ? carry * 2 : CHUNK;
    const buf = Buffer.allocUnsafe(size);
    if (carry) this.pending!.copy(buf, 0);
    const { bytesRead } = await this.handle!.read(buf, carry, size - carry, this.position);
    this.position += bytesRead;
    const end = carry + bytesRead;
    this.queue = [];
    this.index = 0;
    let rest: number;
    if (this.columns) {
      const parsed = parseBlock(buf, 0, end);
      rest = parsed.rest;
      this.block = parsed.block.count > 0 ? parsed.block : undefined;
    } else {
      rest = parseLines(buf, 0, end, this.queue);
    }
    this.pending = rest < end ? Buffer.from(buf.subarray(rest, end)) : undefined;
    return bytesRead;
  }

  private waitForChange(): Promise<void> {
    return new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.opts.signal.removeEventListener('abort', done);
        this.wake = undefined;
        resolve();
      };
      const timer = setTimeout(done, FOLLOW_POLL_MS);
      this.opts.signal.addEventListener('abort', done, { once: true });
      this.wake = done;
      if (!this.watcher && this.opened) {
        try {
          this.watcher = watch(this.file, { persistent: false }, () => this.wake?.());
          this.watcher.on('error', () => undefined);
        } catch {
          // the timer alone will do
        }
      }
    });
  }
}

/** Reads a conmon k8s-file log as records; see the module comment for tail and follow. */
export function readConmonLog(file: string, opts: ReadLogOptions): AsyncIterable<LogRecord> {
  return { [Symbol.asyncIterator]: () => new LogIterator(file, opts) };
}

/**
 * The same records in batches (one per chunk read, up to about a MiB of log): for consumers that write many
 * records at once, this spares one promise per record.
 */
export function readConmonLogBatches(file: string, opts: ReadLogOptions): AsyncIterable<LogRecord[]> {
  return {
    [Symbol.asyncIterator]: () => {
      const it = new LogIterator(file, opts);
      return {
        next: async () => {
          const batch = await it.nextBatch();
          return batch ? { value: batch, done: false } : { value: undefined, done: true };
        },
        return: async () => {
          await it.return();
          return { value: undefined, done: true };
        },
      };
    },
  };
}

/** The same records in column blocks (one per chunk read, up to about a MiB of log): no object per record. */
export function readConmonLogBlocks(file: string, opts: ReadLogOptions): AsyncIterable<LogRecordBlock> {
  return {
    [Symbol.asyncIterator]: () => {
      const it = new LogIterator(file, opts, true);
      return {
        next: async () => {
          const block = await it.nextBlock();
          return block ? { value: block, done: false } : { value: undefined, done: true };
        },
        return: async () => {
          await it.return();
          return { value: undefined, done: true };
        },
      };
    },
  };
}
