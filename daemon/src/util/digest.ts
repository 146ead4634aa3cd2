/**
 * SHA-256 of a stream of chunks (diff ids of layers, digests of blobs), computed on libuv's thread pool by an
 * off-thread hasher when one is set (the Linux host's layerhash addon: host/linux/layers/hash.ts, set by the
 * composition with useOffThreadHasher) while this thread goes on parsing and writing; in this thread with
 * node:crypto otherwise.
 *
 * The chunks given to `update` are hashed later, in order: they must not change afterwards (stream chunks
 * never do: each is a fresh buffer or a slice of one).
 */
import { createHash, type Hash } from 'node:crypto';

/** SHA-256 on the thread pool: `update` hashes the buffers in order, off this thread. */
export interface OffThreadHasher {
  create(): object;
  update(hasher: object, buffers: Buffer[]): Promise<void>;
  digest(hasher: object): string;
}

/** Chunks are handed to the thread pool in batches of about this many bytes. */
const BATCH = 1 << 20;
/** Bytes waiting for the hasher beyond which `update` asks the caller to wait. */
const MAX_AHEAD = 8 << 20;

let loadHasher: (() => OffThreadHasher | null) | undefined;
let hasher: OffThreadHasher | null | undefined;

/**
 * Sets what gives the off-thread hasher (asked once, at the first digest: loading it costs start-up time), or
 * goes back to hashing in this thread.
 */
export function useOffThreadHasher(load: (() => OffThreadHasher | null) | undefined): void {
  loadHasher = load;
  hasher = undefined;
}

function offThreadHasher(): OffThreadHasher | null {
  if (hasher === undefined) hasher = loadHasher?.() ?? null;
  return hasher;
}

/** True when digests are computed off this thread (tests). */
export function digestsOffThread(): boolean {
  return offThreadHasher() !== null;
}

export class StreamDigest {
  private readonly native: OffThreadHasher | null = offThreadHasher();
  private readonly hasher: object | undefined;
  private readonly local: Hash | undefined;
  private pending: Buffer[] = [];
  private pendingBytes = 0;
  private running: Promise<void> | undefined;
  private failure: unknown;
  /** Bytes given to `update` so far. */
  size = 0;

  constructor() {
    if (this.native) this.hasher = this.native.create();
    else this.local = createHash('sha256');
  }

  /**
   * Adds the next chunk. Returns a promise when the caller should wait before the next one (the hasher is
   * behind by more than MAX_AHEAD bytes), undefined otherwise.
   */
  update(chunk: Buffer): Promise<void> | undefined {
    this.size += chunk.length;
    if (this.local) {
      this.local.update(chunk);
      return undefined;
    }
    if (chunk.length === 0) return undefined;
    this.pending.push(chunk);
    this.pendingBytes += chunk.length;
    if (!this.running) {
      if (this.pendingBytes >= BATCH) this.start();
      return undefined;
    }
    return this.pendingBytes >= MAX_AHEAD ? this.running : undefined;
  }

  private start(): void {
    const batch = this.pending;
    this.pending = [];
    this.pendingBytes = 0;
    this.running = this.native!.update(this.hasher!, batch).then(
      () => {
        this.running = undefined;
        if (this.pendingBytes >= BATCH) this.start();
      },
      (err: unknown) => {
        this.failure ??= err;
        this.running = undefined;
      },
    );
  }

  /** The digest of everything given to `update`, as `sha256:<hex>`. */
  async digest(): Promise<string> {
    if (this.local) return `sha256:${this.local.digest('hex')}`;
    for (;;) {
      while (this.running) await this.running;
      if (this.failure !== undefined) throw this.failure;
      if (this.pendingBytes === 0) break;
      this.start();
    }
    return `sha256:${this.native!.digest(this.hasher!)}`;
  }
}
