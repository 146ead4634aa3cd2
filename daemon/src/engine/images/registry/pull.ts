/**
 * Pulling an image from a registry: the manifest (a platform's manifest from a list or index), the
 * configuration, and the layers, three at a time, each streamed from the HTTP body through its digest
 * check (and `zstd -dc` for zstd layers) into the layer store's staging area as it arrives. Every blob
 * is checked against its digest and every layer against the configuration's diff id; only when all of
 * them are staged and checked is the image committed, so a failure or a cancelled pull leaves nothing.
 */
import { Transform, type Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { InvalidParameter, NotFound, ToolFailure } from '../../../errors.js';
import { familiarString, type Reference } from '../../reference.js';
import { StreamDigest } from '../../../util/digest.js';
import { chainIdsOf, parseImageConfig, type ImageConfig } from '../store.js';
import type { AuthConfig } from './auth.js';
import type { Repository, RegistryClient } from './client.js';
import { compressionOf, formatPlatform, hostPlatform, parseManifest, selectManifest, sha256Digest, verifyDigest, type Descriptor, type ImageManifest, type Platform } from './manifest.js';
import type { BlobMetadata } from './metadata.js';
import { ByteProgress, shortDigest, status, type Emit } from './progress.js';
import { readSmall } from './http.js';
import type { LayerStore, StagedLayer, ToolsHost } from '../../../host/host.js';

/** Layers downloaded at the same time (dockerd's default max-concurrent-downloads is 3). */
export const DOWNLOAD_CONCURRENCY = 3;
const MAX_CONFIG_SIZE = 16 * 1024 * 1024;
/*
 * gzip layers are decompressed in process by the layer store (Node's zlib inflates about four times
 * faster than the gzip tool, on the thread pool, with no copies through pipes); zstd ones by the zstd tool.
 */

/** What pulling needs of the image service. */
export interface PullTarget {
  layers: LayerStore;
  /** The Host's decompressors, for layers Node cannot decode (zstd). */
  tools: Pick<ToolsHost, 'decompressor'>;
  /** The image a reference points at now. */
  lookup(ref: Reference): string | undefined;
  hasImage(id: string): boolean;
  /** Commits an image whose layers are staged (or present already) and points `refs` at it. */
  commit(image: { configBytes: Buffer; config: ImageConfig; layers: StagedLayer[]; refs: Reference[] }): Promise<string>;
}

export interface PullOptions {
  platform?: Platform;
  auth?: AuthConfig;
}

/** A blob whose bytes do not hash to its digest. */
export class DigestMismatch extends InvalidParameter {}

/** The result of resolving a reference: the image manifest to pull and the digest to record. */
export interface Resolved {
  repo: Repository;
  /** Digest of what the reference names (the list or index for multi-platform images). */
  digest: string;
  manifest: ImageManifest;
}

/** Fetches and checks the manifest a reference names, descending into a list or index for the platform. */
export async function resolveManifest(repo: Repository, ref: Reference, platform: Platform | undefined): Promise<Resolved> {
  const reference = ref.digest ?? ref.tag ?? 'latest';
  const top = await repo.getManifest(reference);
  if (ref.digest) verifyDigest(top.bytes, ref.digest, `manifest ${repo.displayName}@${ref.digest}`);
  const digest = ref.digest ?? sha256Digest(top.bytes);
  const parsed = parseManifest(top.bytes, top.mediaType);
  if (parsed.kind === 'image') return { repo, digest, manifest: parsed };
  const chosen = selectManifest(parsed, platform ?? hostPlatform());
  const inner = await repo.getManifest(chosen.digest);
  verifyDigest(inner.bytes, chosen.digest, `manifest ${repo.displayName}@${chosen.digest}`);
  const manifest = parseManifest(inner.bytes, inner.mediaType || chosen.mediaType);
  if (manifest.kind !== 'image') throw new InvalidParameter(`malformed manifest list: the entry for ${formatPlatform(chosen.platform!)} is itself a list`);
  return { repo, digest, manifest };
}

/** Fetches and checks an image configuration blob. */
export async function fetchConfig(repo: Repository, desc: Descriptor): Promise<{ bytes: Buffer; config: ImageConfig }> {
  if (desc.size > MAX_CONFIG_SIZE) throw new InvalidParameter(`image configuration ${desc.digest} is too large (${desc.size} bytes)`);
  const res = await repo.openBlob(desc.digest);
  const bytes = await readSmall(res, MAX_CONFIG_SIZE);
  verifyDigest(bytes, desc.digest, `image configuration ${desc.digest}`);
  return { bytes, config: parseImageConfig(bytes) };
}

/** Checks that the stream's bytes are `desc` (size and digest) as they pass, with download progress. */
class BlobVerifier extends Transform {
  private readonly hash = new StreamDigest();
  private count = 0;
  verified = false;
  failure: Error | undefined;

  constructor(
    private readonly desc: Descriptor,
    private readonly progress: ByteProgress,
    private readonly onVerified: () => void,
  ) {
    super();
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, cb: (err?: Error | null, data?: Buffer) => void): void {
    this.count += chunk.length;
    if (this.count > this.desc.size) {
      this.failure = new DigestMismatch(`blob ${this.desc.digest} is larger than the ${this.desc.size} bytes its manifest gives`);
      return cb(this.failure);
    }
    this.progress.add(chunk.length);
    const behind = this.hash.update(chunk);
    if (behind) behind.then(() => cb(null, chunk), cb);
    else cb(null, chunk);
  }

  override _flush(cb: (err?: Error | null) => void): void {
    this.progress.report();
    this.hash.digest().then((actual) => this.check(actual, cb), cb);
  }

  private check(actual: string, cb: (err?: Error | null) => void): void {
    if (this.count !== this.desc.size) {
      this.failure = new DigestMismatch(`blob ${this.desc.digest} ended after ${this.count} of ${this.desc.size} bytes`);
      return cb(this.failure);
    }
    if (actual !== this.desc.digest) {
      this.failure = new DigestMismatch(`filesystem layer verification failed for digest ${this.desc.digest}: the content has digest ${actual}`);
      return cb(this.failure);
    }
    this.verified = true;
    this.onVerified();
    cb();
  }
}

/**
 * Gathers small chunks (a pipe gives 64 KiB) into larger ones before unpacking: the unpacker writes file
 * contents chunk by chunk, and each write is a round trip through the thread pool.
 */
class Coalescer extends Transform {
  private pending: Buffer[] = [];
  private size = 0;

  constructor(private readonly target = 1 << 20) {
    super({ highWaterMark: 1 << 20 });
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, cb: (err?: Error | null) => void): void {
    this.pending.push(chunk);
    this.size += chunk.length;
    if (this.size >= this.target) this.release();
    cb();
  }

  override _flush(cb: (err?: Error | null) => void): void {
    this.release();
    cb();
  }

  private release(): void {
    if (this.size === 0) return;
    this.push(this.pending.length === 1 ? this.pending[0] : Buffer.concat(this.pending, this.size));
    this.pending = [];
    this.size = 0;
  }
}

/** The pull's words for a failure of the layer's decompressor. */
function decoderError(tool: string, err: unknown): unknown {
  if (!(err instanceof ToolFailure)) return err;
  if (err.failure.missing) return new InvalidParameter(`${tool} compressed layers need the ${tool} tool (Debian package ${tool})`, { cause: err });
  if (err.failure.exitCode === undefined) return err.cause ?? err;
  return new InvalidParameter(`invalid ${tool} layer: ${err.failure.detail || `${tool} exited ${err.failure.exitCode}`}`, { cause: err });
}

/** Decompresses with the Host's tool (`zstd -dc`): Node 20's zlib has no zstd. */
function toolDecoder(tools: PullTarget['tools'], tool: 'zstd', input: Readable, signal: AbortSignal): { output: Readable; done: Promise<void> } {
  const decoder = tools.decompressor(tool, signal);
  const output = new Coalescer();
  // The consumer sees failures through its own pipeline; this keeps a late one from going unhandled.
  output.on('error', () => undefined);
  const done = pipeline(input, decoder, output).catch((err: unknown) => {
    throw decoderError(tool, err);
  });
  done.catch((err: Error) => output.destroy(err));
  return { output, done };
}

/**
 * Downloads one layer into the staging area: HTTP body -> digest check -> (zstd) -> stage. Returns the
 * staged layer once its blob digest and its diff id are both right.
 */
async function fetchLayer(
  repo: Repository,
  desc: Descriptor,
  expectedDiffId: string,
  layers: LayerStore,
  tools: PullTarget['tools'],
  emit: Emit,
  signal: AbortSignal,
): Promise<StagedLayer> {
  const id = shortDigest(desc.digest);
  const res = await repo.openBlob(desc.digest);
  const progress = new ByteProgress(emit, id, 'Downloading', desc.size);
  const verifier = new BlobVerifier(desc, progress, () => {
    status(emit, id, 'Verifying Checksum');
    status(emit, id, 'Download complete');
  });
  const downloading = pipeline(res, verifier, { signal }).catch((err: Error) => {
    throw verifier.failure ?? err;
  });
  downloading.catch(() => undefined);
  let source: Readable = verifier;
  let decoding: Promise<void> | undefined;
  const compression = compressionOf(desc.mediaType);
  if (compression === 'zstd') {
    const decoder = toolDecoder(tools, compression, verifier, signal);
    source = decoder.output;
    decoding = decoder.done;
    decoding.catch(() => undefined);
  }
  let staged: StagedLayer;
  try {
    staged = await layers.stage(source, signal);
  } catch (err) {
    res.destroy();
    await downloading.catch(() => undefined);
    if (verifier.failure) throw verifier.failure;
    if ((err as Error).name === 'AbortError' || signal.aborted) throw err;
    await decoding?.catch((e: Error) => {
      throw e;
    });
    throw err;
  }
  try {
    await downloading;
    await decoding;
    if (!verifier.verified) throw new DigestMismatch(`blob ${desc.digest} was not verified`);
    if (staged.diffId !== expectedDiffId) {
      throw new InvalidParameter(`layer ${desc.digest} unpacks to diff id ${staged.diffId}, but the image configuration expects ${expectedDiffId}`);
    }
  } catch (err) {
    await layers.discard(staged);
    throw err;
  }
  status(emit, id, 'Extracting');
  return staged;
}

/** Runs `work` over `items`, `limit` at a time, stopping the rest at the first failure. */
export async function pool<T>(
  items: T[],
  limit: number,
  work: (item: T) => Promise<void>,
  onWait: (item: T) => void,
  onFail: (err: unknown) => void,
): Promise<void> {
  let next = 0;
  let failed = false;
  items.slice(limit).forEach(onWait);
  const worker = async () => {
    while (!failed && next < items.length) {
      const item = items[next++];
      try {
        await work(item);
      } catch (err) {
        if (!failed) onFail(err);
        failed = true;
        throw err;
      }
    }
  };
  const results = await Promise.allSettled(Array.from({ length: Math.min(limit, items.length) }, worker));
  const rejected = results.find((r) => r.status === 'rejected');
  if (rejected) throw (rejected as PromiseRejectedResult).reason;
}

/**
 * Pulls one tag or digest of a repository. Returns the image id; the caller writes the final status.
 * `outcome` says whether the reference moved ("Downloaded newer image") or not ("Image is up to date").
 */
export async function pullOne(
  client: RegistryClient,
  metadata: BlobMetadata,
  target: PullTarget,
  ref: Reference,
  opts: PullOptions,
  emit: Emit,
  signal: AbortSignal,
): Promise<{ id: string; updated: boolean }> {
  const repo = await client.repository(ref.domain, ref.path, opts.auth, ['pull'], signal);
  const resolved = await resolveManifest(repo, ref, opts.platform);
  // Written once the manifest is known (as dockerd does): a missing image is still an ordinary 404.
  emit({ status: `Pulling from ${ref.path}`, id: ref.digest ?? ref.tag ?? 'latest' });
  const { manifest } = resolved;
  const { bytes: configBytes, config } = await fetchConfig(repo, manifest.config);
  if (opts.platform) {
    const want = opts.platform;
    if ((config.os ?? 'linux') !== want.os || (config.architecture && config.architecture !== want.architecture)) {
      throw new NotFound(
        `image with reference ${familiarString(ref)} was found but does not match the specified platform: wanted ${formatPlatform(want)}, actual: ${formatPlatform({ os: config.os ?? 'linux', architecture: config.architecture ?? '', variant: config.variant })}`,
      );
    }
  }
  const diffIds = config.rootfs!.diff_ids;
  if (diffIds.length !== manifest.layers.length) {
    throw new InvalidParameter(`malformed image: the manifest lists ${manifest.layers.length} layers but the configuration has ${diffIds.length} diff ids`);
  }
  const chainIds = chainIdsOf(diffIds);
  const imageId = sha256Digest(configBytes);
  const refs: Reference[] = [];
  if (ref.digest) refs.push(ref);
  else refs.push(ref, { domain: ref.domain, path: ref.path, name: ref.name, digest: resolved.digest });
  const before = target.lookup(ref);

  // Layers: present ones are skipped, the others downloaded (once per blob) and staged.
  const staged = new Map<number, StagedLayer>();
  const needed: number[] = [];
  const seenBlobs = new Map<string, number>();
  for (let i = 0; i < manifest.layers.length; i++) {
    const id = shortDigest(manifest.layers[i].digest);
    if (target.layers.has(chainIds[i]) || target.hasImage(imageId)) {
      status(emit, id, 'Already exists');
      continue;
    }
    if (seenBlobs.has(manifest.layers[i].digest)) continue;
    seenBlobs.set(manifest.layers[i].digest, i);
    needed.push(i);
    status(emit, id, 'Pulling fs layer');
  }
  const controller = new AbortController();
  const onAbort = () => controller.abort(signal.reason);
  signal.addEventListener('abort', onAbort, { once: true });
  try {
    await pool(
      needed,
      DOWNLOAD_CONCURRENCY,
      async (i) => {
        const desc = manifest.layers[i];
        const layer = await fetchLayer(repo, desc, diffIds[i], target.layers, target.tools, emit, controller.signal);
        staged.set(i, layer);
        if (controller.signal.aborted) return;
        status(emit, shortDigest(desc.digest), 'Pull complete');
      },
      (i) => status(emit, shortDigest(manifest.layers[i].digest), 'Waiting'),
      (err) => controller.abort(err),
    );
    if (signal.aborted) throw signal.reason ?? new Error('aborted');
    const layers = manifest.layers.map((desc, i) => staged.get(i) ?? staged.get(seenBlobs.get(desc.digest) ?? -1) ?? { diffId: diffIds[i], size: 0 });
    const id = await target.commit({ configBytes, config, layers, refs });
    for (const [i, desc] of manifest.layers.entries()) {
      await metadata.record(diffIds[i], { digest: desc.digest, mediaType: desc.mediaType, size: desc.size }, repo.displayName);
    }
    emit({ status: `Digest: ${resolved.digest}` });
    return { id, updated: before !== id };
  } finally {
    signal.removeEventListener('abort', onAbort);
    for (const layer of staged.values()) await target.layers.discard(layer);
  }
}
