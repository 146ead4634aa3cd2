/**
 * The layer store on this machine: each layer unpacked once into a folder named by its chain id, ready to
 * be an overlay lower folder, with its tar split (split.ts) so that `save` rebuilds byte-identical layer
 * tars and therefore the same diff ids and image ids, without a second copy of the contents.
 *
 * ## Formats (version 2)
 *
 * - `<root>/layers/<chain hex>/diff/`: the unpacked layer (whiteouts as 0:0 character devices, opaque
 *   folders marked with trusted.overlay.opaque=y).
 * - `<root>/layers/<chain hex>/layer.split`, `layer.refs.json`, `aside/`: the tar split (split.ts).
 *   Version 1 layers kept the whole tar as `layer.tar.gz` instead; they are still read.
 * - `<root>/layers/<chain hex>/layer.json`: `{"version": 2, "chainId", "diffId", "parent", "tarSize",
 *   "diskSize"}`, written before the folder is renamed into `layers/`: a folder there without it is
 *   debris of an older crash and is removed at start.
 * - `<root>/staging/`: layers being read, and layers being removed (renamed here first, then deleted).
 *   Emptied at start.
 */
import { randomBytes } from 'node:crypto';
import { createReadStream, createWriteStream, promises as fs, readdirSync, readFileSync, rmSync, mkdirSync, existsSync } from 'node:fs';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createGunzip } from 'node:zlib';
import { InvalidParameter, NotFound } from '../../../errors.js';
import { writeJSONAtomic } from '../../../util/atomic.js';
import { log } from '../../../util/log.js';
import { StreamDigest } from '../../../util/digest.js';
import { decompressed, drainStream, type Decoded } from '../../../util/streams.js';
import { rebuildTar, SplitRecorder } from './split.js';
import { unpackLayer } from './unpack.js';
import type { LayerInfo, LayerStore, PathInfo, StagedLayer } from '../../host.js';
import { LayersTree } from './tree.js';

const FORMAT_VERSION = 2;
/** Output pieces of the layer gunzip: fewer, larger pieces mean fewer trips through the unpacking. */
const GUNZIP_CHUNK = 256 * 1024;
const READABLE_VERSIONS = [1, 2];

interface StagedState {
  dir: string;
  diskSize: number;
  /** Set once the staged folder was moved into the store. */
  committedAs?: string;
}

function abortError(): Error {
  return Object.assign(new Error('The operation was aborted'), { name: 'AbortError' });
}

function hexOf(digest: string): string {
  const m = /^sha256:([a-f0-9]{64})$/.exec(digest);
  if (!m) throw new InvalidParameter(`invalid layer digest ${JSON.stringify(digest)}`);
  return m[1];
}

export class LinuxLayerStore implements LayerStore {
  private readonly layers = new Map<string, LayerInfo>();
  private readonly staged = new WeakMap<StagedLayer, StagedState>();
  private readonly layersDir: string;
  private readonly stagingDir: string;

  /** `root` is the image store's folder (`<data-root>/image`). */
  constructor(readonly root: string) {
    this.layersDir = path.join(root, 'layers');
    this.stagingDir = path.join(root, 'staging');
    this.load();
  }

  /** Reads the committed layers and removes what a crash left behind. */
  private load(): void {
    mkdirSync(this.layersDir, { recursive: true, mode: 0o700 });
    rmSync(this.stagingDir, { recursive: true, force: true });
    mkdirSync(this.stagingDir, { recursive: true, mode: 0o700 });
    for (const name of readdirSync(this.layersDir)) {
      const dir = path.join(this.layersDir, name);
      const metaFile = path.join(dir, 'layer.json');
      try {
        const meta = JSON.parse(readFileSync(metaFile, 'utf8')) as LayerInfo & { version: number };
        if (!READABLE_VERSIONS.includes(meta.version) || meta.chainId !== `sha256:${name}`) throw new Error(`unexpected layer.json`);
        this.layers.set(meta.chainId, { chainId: meta.chainId, diffId: meta.diffId, parent: meta.parent, tarSize: meta.tarSize, diskSize: meta.diskSize });
      } catch (err) {
        log.warn('removing an incomplete layer folder', { dir, error: (err as Error).message });
        rmSync(dir, { recursive: true, force: true });
      }
    }
  }

  async stage(input: NodeJS.ReadableStream, signal?: AbortSignal): Promise<StagedLayer> {
    // The input's errors are heard from the start: one raised while the folders below are made would
    // otherwise find no listener and end the process. It is thrown once the folders exist.
    let inputError: Error | undefined;
    input.on('error', (err: Error) => (inputError ??= err));
    const dir = path.join(this.stagingDir, randomBytes(16).toString('hex'));
    const diffDir = path.join(dir, 'diff');
    await fs.mkdir(diffDir, { recursive: true, mode: 0o755 });
    await fs.mkdir(path.join(dir, 'aside'), { mode: 0o700 });
    const digest = new StreamDigest();
    const splitFile = createWriteStream(path.join(dir, 'layer.split'), { mode: 0o600 });
    splitFile.on('error', () => undefined);
    const recorder = new SplitRecorder(splitFile);
    const raw = input as Readable;
    let decoded: Decoded | undefined;
    const onAbort = (): void => {
      (decoded?.stream ?? raw).destroy(signal?.reason instanceof Error ? signal.reason : abortError());
    };
    signal?.addEventListener('abort', onAbort, { once: true });
    try {
      if (signal?.aborted) throw signal.reason ?? abortError();
      if (inputError) throw inputError instanceof InvalidParameter ? inputError : new InvalidParameter(`invalid layer: ${inputError.message}`, { cause: inputError });
      decoded = await decompressed(raw, GUNZIP_CHUNK);
      const tarStream = decoded.stream;
      let result;
      try {
        result = await unpackLayer(tarStream, diffDir, { recorder, asideDir: path.join(dir, 'aside') }, (chunk) => digest.update(chunk));
      } catch (err) {
        if (signal?.aborted) throw signal.reason ?? abortError();
        if (err instanceof InvalidParameter || (err as Error).name === 'AbortError') throw err;
        const code = (err as NodeJS.ErrnoException).code;
        if (code === undefined || code.startsWith('Z_') || code === 'ERR_STREAM_PREMATURE_CLOSE') {
          throw new InvalidParameter(`invalid layer: ${(err as Error).message}`, { cause: err });
        }
        throw err;
      }
      await recorder.finish();
      await writeJSONAtomic(path.join(dir, 'layer.refs.json'), { version: 1, paths: recorder.paths });
      const staged: StagedLayer = { diffId: await digest.digest(), size: digest.size };
      this.staged.set(staged, { dir, diskSize: result.diskSize });
      return staged;
    } catch (err) {
      // Read the rest of the input to its end, so that an archive holding this file can go on.
      decoded?.detach();
      if (!signal?.aborted) await drainStream(raw);
      splitFile.destroy();
      await fs.rm(dir, { recursive: true, force: true });
      if (signal?.aborted || err instanceof InvalidParameter || (err as Error).name === 'AbortError') throw err;
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'Z_DATA_ERROR' || code === 'Z_BUF_ERROR' || code === undefined) {
        throw new InvalidParameter(`invalid layer: ${(err as Error).message}`, { cause: err });
      }
      throw err;
    } finally {
      signal?.removeEventListener('abort', onAbort);
    }
  }

  async commit(staged: StagedLayer, chainId: string, parent: string | null): Promise<void> {
    const hex = hexOf(chainId);
    if (this.layers.has(chainId)) return;
    const state = this.staged.get(staged);
    if (!state) throw new Error('commit of a layer that was not staged by this store');
    if (state.committedAs !== undefined) {
      // The same layer tar on top of another parent: unpack it again from the kept copy.
      const again = await this.stage(this.openTar(state.committedAs));
      try {
        await this.commit(again, chainId, parent);
      } finally {
        await this.discard(again);
      }
      return;
    }
    const info: LayerInfo = { chainId, diffId: staged.diffId, parent, tarSize: staged.size, diskSize: state.diskSize };
    await writeJSONAtomic(path.join(state.dir, 'layer.json'), { version: FORMAT_VERSION, ...info });
    await fs.rename(state.dir, path.join(this.layersDir, hex));
    state.committedAs = chainId;
    this.layers.set(chainId, info);
  }

  async discard(staged: StagedLayer): Promise<void> {
    const state = this.staged.get(staged);
    if (!state || state.committedAs !== undefined) return;
    await fs.rm(state.dir, { recursive: true, force: true });
  }

  has(chainId: string): boolean {
    return this.layers.has(chainId);
  }

  chainIds(): string[] {
    return [...this.layers.keys()];
  }

  info(chainId: string): LayerInfo | undefined {
    return this.layers.get(chainId);
  }

  openTar(chainId: string): Readable {
    const info = this.layers.get(chainId);
    if (!info) throw new NotFound(`layer ${chainId} does not exist`);
    const dir = path.join(this.layersDir, hexOf(chainId));
    const legacy = path.join(dir, 'layer.tar.gz');
    if (existsSync(legacy)) {
      const gunzip = createGunzip();
      pipeline(createReadStream(legacy), gunzip).catch(() => undefined);
      return gunzip;
    }
    const refs = JSON.parse(readFileSync(path.join(dir, 'layer.refs.json'), 'utf8')) as { version: number; paths: string[] };
    return rebuildTar(dir, info.diffId, refs.paths);
  }

  async remove(chainId: string): Promise<void> {
    if (!this.layers.has(chainId)) return;
    const dir = path.join(this.layersDir, hexOf(chainId));
    const trash = path.join(this.stagingDir, `removed-${randomBytes(8).toString('hex')}`);
    this.layers.delete(chainId);
    await fs.rename(dir, trash);
    await fs.rm(trash, { recursive: true, force: true });
  }

  layerTreeStat(chainIds: string[], rel: string): Promise<PathInfo | undefined> {
    return new LayersTree(this.lowerDirs(chainIds)).lstat(rel);
  }

  layerTreeReadlink(chainIds: string[], rel: string): Promise<string> {
    return new LayersTree(this.lowerDirs(chainIds)).readlink(rel);
  }

  layerTreeReaddir(chainIds: string[], rel: string): Promise<string[]> {
    return new LayersTree(this.lowerDirs(chainIds)).readdir(rel);
  }

  layerTreeRead(chainIds: string[], rel: string): Promise<NodeJS.ReadableStream> {
    return new LayersTree(this.lowerDirs(chainIds)).open(rel);
  }

  lowerDirs(chainIds: string[]): string[] {
    return chainIds.map((chainId) => {
      if (!this.layers.has(chainId)) throw new NotFound(`layer ${chainId} does not exist`);
      return path.join(this.layersDir, hexOf(chainId), 'diff');
    });
  }

  /** The folder of a layer, for GraphDriver data in image inspect. */
  diffDir(chainId: string): string {
    return path.join(this.layersDir, hexOf(chainId), 'diff');
  }

  /** True when a committed layer's folder is on disk (tests). */
  onDisk(chainId: string): boolean {
    return existsSync(path.join(this.layersDir, hexOf(chainId), 'layer.json'));
  }
}
