/**
 * The classic image builder (POST /build as dockerd's builder v1): the context unpacked, the Dockerfile
 * parsed and checked in full before step 1, then each stage's instructions run in order. Steps that change
 * only the config make an image without a layer (an empty_layer history entry); RUN runs a real container
 * of the container engine and commits its writable layer; COPY and ADD write their files as a layer
 * directly. A step whose inputs (parent image, instruction text with the build args it sees, the content of
 * COPY/ADD sources) were seen before is taken from the build cache.
 *
 * Formats: `<data-root>/build/cache.json`, kept through the StateStore, holds the build cache index,
 * `{"version": 1, "entries": {<key>: <image id>}}` (the key is sha256 of the parent id, the step's history
 * line and its content hash). Each running build has a workspace of the daemon's scratch space
 * (state/scratch.ts) for its context and downloads, removed when the build ends (and all of them at start).
 */
import path from 'node:path';
import { Readable } from 'node:stream';
import { InvalidParameter } from '../../errors.js';
import type { BuildScratch } from '../../state/scratch.js';
import { readJSON, writeJSON, type StateStore } from '../../state/state.js';
import type { ImageConfig } from '../images/store.js';
import { applyDockerignore, readText, unpackContext } from './context.js';
import { parseDockerfile } from './parser.js';
import { resolveInTree } from './sources.js';
import { BuildRun } from './run.js';
import type { BuildContainers, BuildHost, BuildImages, BuildOptions, Emit, PullFunction } from './types.js';

export { BuildStepError, credentialsFor, type BuildContainers, type BuildHost, type BuildImages, type BuildOptions, type Emit, type PullFunction, type RegistryCredentials } from './types.js';

/** The build cache's index in the StateStore. */
const CACHE = 'build/cache.json';

export class Builder {
  private cache: Map<string, string> | undefined;
  private cacheWrite: Promise<void> = Promise.resolve();

  constructor(
    private readonly deps: {
      /** Where the build cache's index is kept. */
      state: StateStore;
      /** Where builds unpack their contexts. */
      scratch: BuildScratch;
      images: BuildImages;
      containers: BuildContainers;
      host: BuildHost;
      /** The registry pull, when the engine has one. */
      pull?: PullFunction;
    },
  ) {}

  /** Removes contexts a crash left behind. */
  async init(): Promise<void> {
    await this.deps.scratch.reset();
  }

  private async loadCache(): Promise<Map<string, string>> {
    if (this.cache) return this.cache;
    const file = await readJSON<{ version: number; entries: Record<string, string> }>(this.deps.state, CACHE).catch(() => undefined);
    this.cache = new Map(Object.entries(file?.version === 1 ? file.entries : {}));
    return this.cache;
  }

  private saveCache(): Promise<void> {
    const entries = Object.fromEntries(this.cache ?? []);
    this.cacheWrite = this.cacheWrite.then(() => writeJSON(this.deps.state, CACHE, { version: 1, entries })).catch(() => undefined);
    return this.cacheWrite;
  }

  /** The image ids the build cache knows (for prune). */
  async cachedImages(): Promise<Set<string>> {
    return new Set((await this.loadCache()).values());
  }

  /**
   * Runs a build: `input` is the context tar, messages for the client go to `emit`. Errors before step 1
   * (bad context, bad Dockerfile) are thrown before anything was emitted.
   */
  async build(input: Readable, opts: BuildOptions, emit: Emit, signal: AbortSignal): Promise<string> {
    const workspace = await this.deps.scratch.workspace();
    try {
      await unpackContext(input, workspace, this.deps.host, signal);
      const dockerfileRel = path.posix.normalize(opts.dockerfile.replace(/^\/+/, ''));
      if (dockerfileRel.startsWith('..')) throw new InvalidParameter(`the Dockerfile (${opts.dockerfile}) must be within the build context`);
      let text: string | undefined;
      for (const candidate of opts.dockerfile === 'Dockerfile' ? ['Dockerfile', 'dockerfile'] : [dockerfileRel]) {
        const real = await resolveInTree(workspace.context, candidate).catch(() => candidate);
        text = await readText(workspace.context, real).catch(() => undefined);
        if (text !== undefined) break;
      }
      if (text === undefined) throw new InvalidParameter(`Cannot locate specified Dockerfile: ${opts.dockerfile}`);
      // As dockerd: the Dockerfile and .dockerignore themselves go too when the patterns exclude them.
      await applyDockerignore(workspace.context, []);
      const parsed = parseDockerfile(text);
      const run = new BuildRun(this, opts, emit, signal, workspace, parsed.escape);
      const stages = run.plan(parsed.instructions);
      return await run.execute(stages);
    } finally {
      await workspace.dispose();
    }
  }

  /** @internal used by BuildRun */
  get d() {
    return this.deps;
  }

  /** @internal */
  async cacheGet(key: string, allowed: Set<string> | undefined): Promise<string | undefined> {
    const id = (await this.loadCache()).get(key);
    if (!id || !this.deps.images.store.has(id)) return undefined;
    if (allowed && !allowed.has(id)) return undefined;
    return id;
  }

  /** @internal */
  async cachePut(key: string, id: string): Promise<void> {
    (await this.loadCache()).set(key, id);
    await this.saveCache();
  }

  /**
   * POST /build/prune: removes the images only the build cache holds (untagged, no container, no child
   * left), leaves first. `until` keeps what is newer.
   */
  async prune(opts: { untilNano?: bigint }): Promise<{ CachesDeleted: string[]; SpaceReclaimed: number }> {
    const cache = await this.loadCache();
    const { images, containers } = this.deps;
    const deleted: string[] = [];
    let reclaimed = 0;
    for (let progress = true; progress; ) {
      progress = false;
      const cached = new Set(cache.values());
      const parents = new Set(images.store.all().map((i) => i.meta.parent).filter((p): p is string => !!p));
      for (const id of cached) {
        const image = images.store.get(id);
        if (!image) continue;
        if (images.store.refsOf(id).length > 0 || parents.has(id) || containers.containersUsingImage(id).length > 0) continue;
        if (opts.untilNano !== undefined) {
          const created = image.config.created ? Date.parse(image.config.created) * 1e6 : 0;
          if (BigInt(Math.floor(created)) > opts.untilNano) continue;
        }
        const sizeOf = (ref: string) => {
          try {
            return Number(images.inspect(ref).Size) || 0;
          } catch {
            return 0;
          }
        };
        const own = Math.max(0, sizeOf(id) - (image.meta.parent ? sizeOf(image.meta.parent) : 0));
        try {
          const records = await images.remove(id, { noprune: true });
          if (records.some((r) => r.Deleted)) {
            deleted.push(id);
            progress = true;
            reclaimed += own;
          }
        } catch {
          // In use by now, or removed meanwhile: kept.
        }
      }
    }
    for (const [key, id] of [...cache]) if (!images.store.has(id)) cache.delete(key);
    await this.saveCache();
    return { CachesDeleted: deleted, SpaceReclaimed: reclaimed };
  }
}

export type { ImageConfig };
