/**
 * The image service: the local images (configurations, tags, layers) and the verbs on them. The api
 * module for images calls it; the container engine sees it through ImageLookup (types.ts). Each verb lives
 * in its own file (list.ts, tag.ts, remove.ts, create.ts, save.ts) over the state they share (context.ts);
 * this class only gathers them, and connects the registries.
 */
import type { Readable, Writable } from 'node:stream';
import { NotFound, NotImplemented } from '../../errors.js';
import type { EventBus } from '../events.js';
import { familiarString, type Reference } from '../reference.js';
import { ARCH, ImageContext, type DeleteRecord, type Filters, type ProgressMessage } from './context.js';
import { commitImage, createImage, importRootfs, load } from './create.js';
import { diskUsage, history, inspect, list } from './list.js';
import { Distribution, type AuthConfig, type PullRequest, type RegistryOptions } from './registry/index.js';
import { prune, remove } from './remove.js';
import { save } from './save.js';
import type { ImageRecord, ImageStore } from './store.js';
import { tag } from './tag.js';
import type { LayerStore, ToolsHost } from '../../host/host.js';
import type { StateStore } from '../../state/state.js';
import type { CreateImageOptions, ImageForContainer, ImageLookup, ImageRunConfig, ImageUsers } from './types.js';

export type { DeleteRecord, Filters, ProgressMessage } from './context.js';
export { parseUntil } from './list.js';

export class ImageService implements ImageLookup {
  private readonly ctx: ImageContext;

  /** The images' records are kept in `state` (under `image/`), their layers in `layers`. */
  constructor(
    private readonly state: StateStore,
    layers: LayerStore & { diffDir?(chainId: string): string },
    events: EventBus,
  ) {
    this.ctx = new ImageContext(state, layers, events);
  }

  get store(): ImageStore {
    return this.ctx.store;
  }

  /** The container engine tells which images containers use (removal answers 409 while in use). */
  setUsers(users: ImageUsers): void {
    this.ctx.users = users;
  }

  /** Reads the images, then removes layers that no image uses (what an interrupted load or removal left). */
  async init(): Promise<void> {
    await this.ctx.store.load();
    await this.ctx.distribution?.init();
    const used = new Set(this.ctx.store.all().flatMap((i) => i.chainIds));
    for (const chainId of this.ctx.layers.chainIds()) if (!used.has(chainId)) await this.ctx.layers.remove(chainId);
  }

  // -- registries --

  /**
   * Connects the service to registries: pull, push, and (through the result) login and inspect. `tools`
   * decode the layers Node cannot (zstd).
   */
  useRegistries(options: RegistryOptions, tools: Pick<ToolsHost, 'decompressor'>): Distribution {
    const ctx = this.ctx;
    ctx.distribution = new Distribution(
      this.state,
      options,
      {
        layers: ctx.layers,
        tools,
        lookup: (ref) => ctx.store.lookup(ref),
        hasImage: (id) => ctx.store.has(id),
        commit: (image) =>
          ctx.exclusive(() => commitImage(ctx, { configBytes: image.configBytes, config: image.config, layers: image.layers, tags: image.refs }, () => undefined, 'create')),
        tagsOf: (name) =>
          ctx.store
            .allRefs()
            .filter(([r]) => r.name === name && r.tag !== undefined)
            .map(([ref, id]) => ({ ref, id })),
        imageForPush: async (id) => {
          const image = ctx.store.get(id);
          if (!image) throw new NotFound(`No such image: ${id}`);
          return { id, configBytes: await ctx.store.configBytes(id), chainIds: [...image.chainIds], diffIds: [...image.diffIds] };
        },
        addDigestRef: async (ref, id) => {
          await ctx.exclusive(() => ctx.store.setRef(ref, id));
        },
      },
      ctx.events,
    );
    return ctx.distribution;
  }

  private registries(): Distribution {
    if (!this.ctx.distribution) throw new NotImplemented('this engine has no registry access configured');
    return this.ctx.distribution;
  }

  /** Pulls from a registry (`POST /images/create?fromImage=`), progress to `emit`. */
  pull(request: PullRequest, emit: (m: ProgressMessage) => void, signal: AbortSignal): Promise<void> {
    return this.registries().pull(request, emit, signal);
  }

  /** Pushes a tag, or all tags of a repository, to its registry. */
  push(name: string, tag: string | undefined, auth: AuthConfig | undefined, emit: (m: ProgressMessage) => void, signal: AbortSignal): Promise<void> {
    return this.registries().push(name, tag, auth, emit, signal);
  }

  // -- lookup --

  /**
   * Finds an image by full id, reference (name, name:tag, name@digest) or unique id prefix. `byRef`
   * tells how it was found.
   */
  find(text: string): { image: ImageRecord; ref?: Reference } {
    return this.ctx.find(text);
  }

  async resolveForContainer(refText: string): Promise<ImageForContainer> {
    const { image, ref } = this.ctx.find(refText);
    return {
      id: image.id,
      reference: ref ? familiarString(ref) : image.id,
      config: (image.config.config ?? {}) as ImageRunConfig,
      os: image.config.os ?? 'linux',
      architecture: image.config.architecture ?? ARCH,
      chainIds: [...image.chainIds],
    };
  }

  /** The unpacked layer folders of an image, bottom first (for overlay lowerdir, reverse them). */
  lowerDirs(chainIds: string[]): string[] {
    return this.ctx.layers.lowerDirs(chainIds);
  }

  // -- list, inspect, history --

  list(opts: { all?: boolean; filters: Filters; sharedSize?: boolean }): Record<string, unknown>[] {
    return list(this.ctx, opts);
  }

  /** Disk use of images for /system/df: each layer counted once; reclaimable is what no image in use holds. */
  diskUsage(): ReturnType<typeof diskUsage> {
    return diskUsage(this.ctx);
  }

  inspect(name: string): Record<string, unknown> {
    return inspect(this.ctx, name);
  }

  history(name: string): Record<string, unknown>[] {
    return history(this.ctx, name);
  }

  // -- tag, remove, prune --

  tag(name: string, repo: string, tag_: string | undefined): Promise<void> {
    return tag(this.ctx, name, repo, tag_);
  }

  remove(name: string, opts: { force?: boolean; noprune?: boolean } = {}): Promise<DeleteRecord[]> {
    return remove(this.ctx, name, opts);
  }

  prune(filters: Filters): Promise<{ ImagesDeleted: DeleteRecord[]; SpaceReclaimed: number }> {
    return prune(this.ctx, filters);
  }

  // -- load, import, create, save --

  /** Loads the images of an archive read from `input` (messages for the client to `emit`). */
  load(input: Readable, emit: (m: ProgressMessage) => void, signal?: AbortSignal, opts: { quiet?: boolean } = {}): Promise<string[]> {
    return load(this.ctx, input, emit, signal, opts);
  }

  /** Imports a root filesystem tar as a one-layer image (`docker import`). */
  importRootfs(
    input: Readable,
    opts: { repo?: string; tag?: string; changes?: string[]; message?: string; platform?: string },
    signal?: AbortSignal,
  ): Promise<string> {
    return importRootfs(this.ctx, input, opts, signal);
  }

  /** Creates an image from a parent image (or from nothing) plus an optional layer tar (commit, build). */
  createImage(opts: CreateImageOptions, signal?: AbortSignal): Promise<string> {
    return createImage(this.ctx, opts, signal);
  }

  /** Writes the named images as one archive to `out` (docker-archive, legacy and OCI layouts). */
  save(names: string[], out: Writable, signal?: AbortSignal): Promise<void> {
    return save(this.ctx, names, out, signal);
  }
}
