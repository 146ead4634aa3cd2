/**
 * SHA-256 of a stream of chunks (diff ids of layers, digests of blobs), computed on libuv's thread pool by
 * the layerhash addon (daemon/native/layerfs, built by node-gyp with the layerfs addon) while this thread
 * goes on parsing and writing; in this thread with node:crypto when the addon is not there (or when
 * BERTH_LAYERHASH_ADDON=none).
 *
 * The chunks given to `update` are hashed later, in order: they must not change afterwards (stream chunks
 * never do: each is a fresh buffer or a slice of one).
 */
import { createHash, type Hash } from 'node:crypto';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

interface LayerHashAddon {
  create(): object;
  update(hasher: object, buffers: Buffer[]): Promise<void>;
  digest(hasher: object): string;
}

/** Chunks are handed to the thread pool in batches of about this many bytes. */
const BATCH = 1 << 20;
/** Bytes waiting for the hasher beyond which `update` asks the caller to wait. */
const MAX_AHEAD = 8 << 20;

const here = path.dirname(fileURLToPath(import.meta.url));
/** daemon/ from dist/src/util (compiled) */
const daemonDir = path.resolve(here, '..', '..', '..');

let addon: LayerHashAddon | null | undefined;

function loadAddon(): LayerHashAddon | null {
  if (addon !== undefined) return addon;
  addon = null;
  if (process.env.BERTH_LAYERHASH_ADDON === 'none') return addon;
  const require = createRequire(import.meta.url);
  const candidates = [process.env.BERTH_LAYERHASH_ADDON, path.join(daemonDir, 'native', 'layerfs', 'build', 'Release', 'layerhash.node')];
  for (const candidate of candidates) {
    if (!candidate) continue;
    try {
      addon = require(candidate) as LayerHashAddon;
      return addon;
    } catch {
      // Not built, or a host without OpenSSL's symbols: hashed in this thread.
    }
  }
  return addon;
}

/** True when digests are computed off this thread (tests). */
export function digestsOffThread(): boolean {
  return loadAddon() !== null;
}

export class StreamDigest {
  private readonly native: LayerHashAddon | null = loadAddon();
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
