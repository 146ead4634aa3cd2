/**
 * The image service: the local images (configurations, tags, layers) and the verbs on them. The api
 * module for images calls it; the container engine sees it through ImageLookup (types.ts).
 */
import { matchLabels, matchNotLabels } from '../filters.js';
import type { Readable, Writable } from 'node:stream';
import { Conflict, InvalidParameter, NotFound, NotImplemented } from '../../errors.js';
import type { EventBus } from '../events.js';
import {
  familiarName,
  familiarString,
  looksLikeIdPrefix,
  matchReferencePattern,
  parseNormalizedNamed,
  parseReference,
  validateTag,
  type Reference,
} from '../reference.js';
import { nowNano, parseTimestamp, rfc3339Nano, ZERO_TIME } from '../../util/json.js';
import { shortId } from '../../util/ids.js';
import { applyChanges } from './changes.js';
import { imagesOf, readArchive, type ArchiveImage } from './load.js';
import { writeArchive } from './save.js';
import { Distribution, type AuthConfig, type PullRequest, type RegistryOptions } from './registry/index.js';
import { chainIdsOf, ImageStore, type ImageConfig, type ImageRecord } from './store.js';
import type { CreateImageOptions, ImageForContainer, ImageLookup, ImageRunConfig, ImageUsers } from './types.js';
import type { LayerStore } from '../../host/host.js';

export type Filters = Map<string, string[]>;

/** One line of a JSON progress stream (`{"stream": ...}`, `{"status": ...}`). */
export type ProgressMessage = Record<string, unknown>;

export interface DeleteRecord {
  Untagged?: string;
  Deleted?: string;
}

const ARCH = process.arch === 'x64' ? 'amd64' : process.arch === 'ia32' ? '386' : process.arch;

/** Seconds since the epoch of an RFC 3339 time (0 when absent or unreadable). */
function unixSeconds(time: string | undefined): number {
  if (!time) return 0;
  const nano = parseTimestamp(time);
  return nano === undefined ? 0 : Number(nano / 1_000_000_000n);
}

function createdNano(image: ImageRecord): bigint {
  return (image.config.created && parseTimestamp(image.config.created)) || 0n;
}

const DURATION_UNITS: Record<string, number> = { ns: 1e-9, us: 1e-6, 'µs': 1e-6, ms: 1e-3, s: 1, m: 60, h: 3600 };

/** `until` values: a timestamp (Unix or RFC 3339), a date, or a Go duration before now ("10m", "1h30m"). */
export function parseUntil(value: string): bigint {
  const ts = parseTimestamp(value);
  if (ts !== undefined) return ts;
  const date = /^(\d{4}-\d{2}-\d{2})(?:T(\d{2}:\d{2}(?::\d{2})?))?$/.exec(value);
  if (date) {
    const ms = Date.parse(`${date[1]}T${date[2] ?? '00:00:00'}`);
    if (!Number.isNaN(ms)) return BigInt(ms) * 1_000_000n;
  }
  if (/^(\d+(\.\d+)?(ns|us|µs|ms|s|m|h))+$/.test(value)) {
    let seconds = 0;
    for (const m of value.matchAll(/(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)/g)) seconds += Number(m[1]) * DURATION_UNITS[m[2]];
    return nowNano() - BigInt(Math.round(seconds * 1e9));
  }
  throw new InvalidParameter(`invalid filter 'until=${value}': expected a timestamp, a date or a duration such as 10m`);
}

/**
 * label filters: `key`, `key=value` (every one must match, as Docker's key-value lists); negated (`label!`)
 * as the prune endpoints accept. Only the image's own labels count (never an object's inherited keys).
 */
function labelsMatch(labels: Readonly<Record<string, string>>, wanted: string[] | undefined, negated: string[] | undefined): boolean {
  return matchLabels(wanted, labels) && matchNotLabels(negated, labels);
}

/** The full container-config shape that image inspect shows (api/compat trims it per version). */
function fullRunConfig(c: (ImageRunConfig & Record<string, unknown>) | undefined | null): Record<string, unknown> {
  const config = c ?? {};
  const out: Record<string, unknown> = {
    Hostname: (config.Hostname as string | undefined) ?? '',
    Domainname: (config.Domainname as string | undefined) ?? '',
    User: config.User ?? '',
    AttachStdin: false,
    AttachStdout: false,
    AttachStderr: false,
  };
  if (config.ExposedPorts && Object.keys(config.ExposedPorts).length > 0) out.ExposedPorts = config.ExposedPorts;
  Object.assign(out, {
    Tty: false,
    OpenStdin: false,
    StdinOnce: false,
    Env: config.Env ?? null,
    Cmd: config.Cmd ?? null,
  });
  if (config.Healthcheck) out.Healthcheck = config.Healthcheck;
  if (config.ArgsEscaped) out.ArgsEscaped = true;
  Object.assign(out, {
    Image: (config.Image as string | undefined) ?? '',
    Volumes: config.Volumes ?? null,
    WorkingDir: config.WorkingDir ?? '',
    Entrypoint: config.Entrypoint ?? null,
    OnBuild: config.OnBuild ?? null,
    Labels: config.Labels ?? null,
  });
  if (config.StopSignal) out.StopSignal = config.StopSignal;
  if (config.Shell) out.Shell = config.Shell;
  // Unset lists and maps are left out rather than null: the published schemas type them as array/object.
  for (const [key, value] of Object.entries(out)) if (value === null) delete out[key];
  return out;
}

export class ImageService implements ImageLookup {
  readonly store: ImageStore;
  private users: ImageUsers | undefined;
  private lock: Promise<unknown> = Promise.resolve();

  constructor(
    root: string,
    private readonly layers: LayerStore & { diffDir?(chainId: string): string },
    private readonly events: EventBus,
  ) {
    this.store = new ImageStore(root);
  }

  /** The container engine tells which images containers use (removal answers 409 while in use). */
  setUsers(users: ImageUsers): void {
    this.users = users;
  }

  /** Removes layers that no image uses (what an interrupted load or removal left). */
  async init(): Promise<void> {
    const used = new Set(this.store.all().flatMap((i) => i.chainIds));
    for (const chainId of this.layers.chainIds()) if (!used.has(chainId)) await this.layers.remove(chainId);
  }

  /** Runs changes of the store one at a time. */
  private exclusive<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.lock.then(fn, fn);
    this.lock = run.catch(() => undefined);
    return run;
  }

  private containersUsing(id: string): string[] {
    return this.users?.containersUsingImage(id) ?? [];
  }

  // -- registries --

  private distribution: Distribution | undefined;

  /** Connects the service to registries: pull, push, and (through the result) login and inspect. */
  useRegistries(options: RegistryOptions): Distribution {
    this.distribution = new Distribution(
      this.store.root,
      options,
      {
        layers: this.layers,
        lookup: (ref) => this.store.lookup(ref),
        hasImage: (id) => this.store.has(id),
        commit: (image) =>
          this.exclusive(() => this.commitImage({ configBytes: image.configBytes, config: image.config, layers: image.layers, tags: image.refs }, () => undefined, 'create')),
        tagsOf: (name) =>
          this.store
            .allRefs()
            .filter(([r]) => r.name === name && r.tag !== undefined)
            .map(([ref, id]) => ({ ref, id })),
        imageForPush: async (id) => {
          const image = this.store.get(id);
          if (!image) throw new NotFound(`No such image: ${id}`);
          return { id, configBytes: await this.store.configBytes(id), chainIds: [...image.chainIds], diffIds: [...image.diffIds] };
        },
        addDigestRef: async (ref, id) => {
          await this.exclusive(() => this.store.setRef(ref, id));
        },
      },
      this.events,
    );
    return this.distribution;
  }

  private registries(): Distribution {
    if (!this.distribution) throw new NotImplemented('this engine has no registry access configured');
    return this.distribution;
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
    const full = /^(?:sha256:)?([a-f0-9]{64})$/.exec(text);
    if (full) {
      const image = this.store.get(`sha256:${full[1]}`);
      if (image) return { image };
      throw new NotFound(`No such image: ${text}`);
    }
    let ref: Reference | undefined;
    try {
      ref = parseNormalizedNamed(text);
    } catch (err) {
      if (!looksLikeIdPrefix(text)) throw err;
    }
    if (ref) {
      const id = this.store.lookup(ref);
      if (id) return { image: this.store.get(id)!, ref };
    }
    if (looksLikeIdPrefix(text)) {
      const ids = this.store.byPrefix(text);
      if (ids.length === 1) return { image: this.store.get(ids[0])! };
      if (ids.length > 1) throw new NotFound(`No such image: ${text} (the id prefix is ambiguous)`);
    }
    throw new NotFound(`No such image: ${ref ? familiarString(ref) : text}`);
  }

  async resolveForContainer(refText: string): Promise<ImageForContainer> {
    const { image, ref } = this.find(refText);
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
    return this.layers.lowerDirs(chainIds);
  }

  private tagsOf(id: string): string[] {
    return this.store
      .refsOf(id)
      .filter((r) => r.tag !== undefined)
      .map((r) => familiarString(r))
      .sort();
  }

  private digestsOf(id: string): string[] {
    return this.store
      .refsOf(id)
      .filter((r) => r.digest !== undefined)
      .map((r) => `${familiarName(r.name)}@${r.digest}`)
      .sort();
  }

  private sizeOf(image: ImageRecord): number {
    return image.chainIds.reduce((sum, c) => sum + (this.layers.info(c)?.diskSize ?? 0), 0);
  }

  // -- list, inspect, history --

  list(opts: { all?: boolean; filters: Filters; sharedSize?: boolean }): Record<string, unknown>[] {
    const f = opts.filters;
    const dangling = f.get('dangling');
    let danglingOnly: boolean | undefined;
    if (dangling && dangling.length > 0) {
      const v = dangling[dangling.length - 1];
      if (v === 'true' || v === '1') danglingOnly = true;
      else if (v === 'false' || v === '0') danglingOnly = false;
      else throw new InvalidParameter(`invalid filter 'dangling=${v}'`);
    }
    const before = f.get('before')?.map((r) => createdNano(this.find(r).image));
    const since = f.get('since')?.map((r) => createdNano(this.find(r).image));
    const until = f.get('until')?.map(parseUntil);
    const patterns = f.get('reference');
    const labels = f.get('label');
    const out: Array<{ created: bigint; summary: Record<string, unknown> }> = [];
    for (const image of this.store.all()) {
      const refs = this.store.refsOf(image.id);
      // Intermediate images (untagged parents of others) show only with all=1, and are never dangling.
      const intermediate = refs.length === 0 && this.hasChildren(image.id);
      if (intermediate && (!opts.all || danglingOnly === true)) continue;
      if (danglingOnly === true && refs.length > 0) continue;
      if (danglingOnly === false && refs.length === 0) continue;
      const created = createdNano(image);
      if (before && !before.every((b) => created < b)) continue;
      if (since && !since.every((s) => created > s)) continue;
      if (until && !until.every((u) => created <= u)) continue;
      if (labels && !labelsMatch(image.config.config?.Labels ?? {}, labels, undefined)) continue;
      let tags = this.tagsOf(image.id);
      if (patterns) {
        const matching = refs.filter((r) => patterns.some((p) => matchReferencePattern(p, r)));
        if (matching.length === 0) continue;
        // Docker shows only the tags that matched the pattern.
        tags = matching.filter((r) => r.tag !== undefined).map((r) => familiarString(r)).sort();
      }
      const size = this.sizeOf(image);
      const users = this.users ? this.containersUsing(image.id).length : -1;
      out.push({
        created,
        summary: {
          Id: image.id,
          ParentId: image.meta.parent ?? '',
          RepoTags: tags,
          RepoDigests: this.digestsOf(image.id),
          Created: unixSeconds(image.config.created),
          Size: size,
          SharedSize: -1,
          VirtualSize: size,
          Labels: image.config.config?.Labels ?? {},
          Containers: users,
        },
      });
    }
    out.sort((a, b) => (a.created === b.created ? 0 : a.created > b.created ? -1 : 1));
    return out.map((o) => o.summary);
  }

  inspect(name: string): Record<string, unknown> {
    const { image } = this.find(name);
    const c = image.config;
    const size = this.sizeOf(image);
    const dirs = this.layers.diffDir ? image.chainIds.map((id) => this.layers.diffDir!(id)) : [];
    const graphData: Record<string, string> = {};
    if (dirs.length > 0) {
      const top = dirs[dirs.length - 1];
      if (dirs.length > 1) graphData.LowerDir = dirs.slice(0, -1).reverse().join(':');
      graphData.MergedDir = top.replace(/\/diff$/, '/merged');
      graphData.UpperDir = top;
      graphData.WorkDir = top.replace(/\/diff$/, '/work');
    }
    const out: Record<string, unknown> = {
      Id: image.id,
      RepoTags: this.tagsOf(image.id),
      RepoDigests: this.digestsOf(image.id),
      Parent: image.meta.parent ?? '',
      Comment: c.comment ?? '',
    };
    if (c.created) out.Created = c.created;
    Object.assign(out, {
      Container: c.container ?? '',
      ContainerConfig: fullRunConfig(c.container_config as ImageRunConfig & Record<string, unknown>),
      DockerVersion: c.docker_version ?? '',
      Author: c.author ?? '',
      Config: fullRunConfig(c.config),
      Architecture: c.architecture ?? ARCH,
    });
    if (c.variant) out.Variant = c.variant;
    out.Os = c.os ?? 'linux';
    if (c['os.version']) out.OsVersion = c['os.version'];
    Object.assign(out, {
      Size: size,
      VirtualSize: size,
      GraphDriver: { Name: 'overlay2', Data: graphData },
      RootFS: { Type: 'layers', Layers: [...image.diffIds] },
      Metadata: { LastTagTime: image.meta.lastTagTime ?? ZERO_TIME },
    });
    return out;
  }

  history(name: string): Record<string, unknown>[] {
    const { image } = this.find(name);
    const entries: Record<string, unknown>[] = [];
    const history = image.config.history && image.config.history.length > 0
      ? image.config.history
      : image.chainIds.map(() => ({ created: image.config.created, created_by: '', comment: '' }));
    let layerIndex = 0;
    for (const h of history) {
      let size = 0;
      if (!('empty_layer' in h && h.empty_layer)) {
        const chainId = image.chainIds[layerIndex++];
        size = chainId ? this.layers.info(chainId)?.diskSize ?? 0 : 0;
      }
      entries.push({
        Id: '<missing>',
        Created: unixSeconds(h.created),
        CreatedBy: h.created_by ?? '',
        Tags: [],
        Size: size,
        Comment: h.comment ?? '',
      });
    }
    entries.reverse();
    if (entries.length > 0) {
      entries[0].Id = image.id;
      const tags = this.tagsOf(image.id);
      entries[0].Tags = tags;
    }
    return entries;
  }

  // -- tag, remove, prune --

  async tag(name: string, repo: string, tag: string | undefined): Promise<void> {
    if (!repo) throw new InvalidParameter('repository name is required to tag an image');
    const { image } = this.find(name);
    let ref = parseReference(repo);
    if (ref.digest) throw new InvalidParameter('refusing to create a tag with a digest reference');
    if (tag) {
      if (ref.tag !== undefined) throw new InvalidParameter(`cannot give a tag both in repo (${repo}) and in tag (${tag})`);
      validateTag(tag);
      ref = { ...ref, tag };
    }
    if (ref.tag === undefined) ref = { ...ref, tag: 'latest' };
    await this.exclusive(async () => {
      await this.store.setRef(ref, image.id);
      await this.store.setLastTagTime(image.id, rfc3339Nano(nowNano()));
    });
    this.events.publish('image', 'tag', image.id, { name: familiarString(ref) });
  }

  /** Removes a layer chain's layers that no remaining image uses; returns the removed chain ids. */
  private async releaseLayers(chainIds: string[]): Promise<{ removed: string[]; bytes: number }> {
    const used = new Set(this.store.all().flatMap((i) => i.chainIds));
    const removed: string[] = [];
    let bytes = 0;
    for (const chainId of [...chainIds].reverse()) {
      if (used.has(chainId)) continue;
      bytes += this.layers.info(chainId)?.diskSize ?? 0;
      await this.layers.remove(chainId);
      removed.push(chainId);
    }
    return { removed, bytes };
  }

  private async deleteImage(image: ImageRecord, records: DeleteRecord[]): Promise<number> {
    await this.store.remove(image.id);
    records.push({ Deleted: image.id });
    const { removed, bytes } = await this.releaseLayers(image.chainIds);
    for (const chainId of removed) records.push({ Deleted: chainId });
    this.events.publish('image', 'delete', image.id, { name: image.id });
    return bytes;
  }

  /**
   * Deletes an image and then, unless `prune` is false (noprune), its parents that nothing else holds:
   * untagged, without other children, unused by containers (the intermediate images of a build).
   */
  private async deleteWithParents(image: ImageRecord, records: DeleteRecord[], prune: boolean): Promise<void> {
    await this.deleteImage(image, records);
    let parentId = image.meta.parent;
    while (prune && parentId) {
      const parent = this.store.get(parentId);
      if (!parent || this.store.refsOf(parent.id).length > 0 || this.hasChildren(parent.id) || this.containersUsing(parent.id).length > 0) return;
      await this.deleteImage(parent, records);
      parentId = parent.meta.parent;
    }
  }

  private async untag(image: ImageRecord, ref: Reference, records: DeleteRecord[]): Promise<void> {
    if (await this.store.deleteRef(ref)) {
      records.push({ Untagged: familiarString(ref) });
      this.events.publish('image', 'untag', image.id, { name: familiarString(ref) });
    }
  }

  private hasChildren(id: string): boolean {
    return this.store.all().some((i) => i.meta.parent === id);
  }

  async remove(name: string, opts: { force?: boolean; noprune?: boolean } = {}): Promise<DeleteRecord[]> {
    return this.exclusive(async () => {
      const { image, ref } = this.find(name);
      const records: DeleteRecord[] = [];
      const users = this.containersUsing(image.id);
      const refs = this.store.refsOf(image.id);
      const children = this.hasChildren(image.id);
      if (ref) {
        // Removing the last tag of a repository also removes that repository's digest references (RepoDigests), as Docker does.
        const digestRefs = ref.digest === undefined && !refs.some((r) => r.name === ref.name && r.tag !== undefined && r.tag !== ref.tag)
          ? refs.filter((r) => r.name === ref.name && r.digest !== undefined && r.tag === undefined)
          : [];
        if (refs.length - digestRefs.length > 1) {
          await this.untag(image, ref, records);
          for (const d of digestRefs) await this.untag(image, d, records);
          return records;
        }
        if (users.length > 0 && !opts.force) {
          throw new Conflict(`conflict: unable to remove repository reference "${familiarString(ref)}" (must force) - container ${shortId(users[0])} is using its referenced image ${shortId(image.id)}`);
        }
        await this.untag(image, ref, records);
        for (const d of digestRefs) await this.untag(image, d, records);
        if (users.length > 0 || children) return records;
        await this.deleteWithParents(image, records, !opts.noprune);
        return records;
      }
      if (children) throw new Conflict(`conflict: unable to delete ${shortId(image.id)} (cannot be forced) - image has dependent child images`);
      if (users.length > 0) {
        if (!opts.force) throw new Conflict(`conflict: unable to delete ${shortId(image.id)} (must be forced) - image is being used by container ${shortId(users[0])}`);
        // Forced while containers use it: the references go, the image stays for those containers.
        for (const r of refs) await this.untag(image, r, records);
        return records;
      }
      if (refs.length > 1 && !opts.force) {
        const repos = new Set(refs.map((r) => r.name));
        if (repos.size > 1) throw new Conflict(`conflict: unable to delete ${shortId(image.id)} (must be forced) - image is referenced in multiple repositories`);
      }
      for (const r of refs) await this.untag(image, r, records);
      await this.deleteWithParents(image, records, !opts.noprune);
      return records;
    });
  }

  async prune(filters: Filters): Promise<{ ImagesDeleted: DeleteRecord[]; SpaceReclaimed: number }> {
    const dangling = filters.get('dangling');
    let danglingOnly = true;
    if (dangling && dangling.length > 0) {
      const v = dangling[dangling.length - 1];
      if (v === 'false' || v === '0') danglingOnly = false;
      else if (v !== 'true' && v !== '1') throw new InvalidParameter(`invalid filter 'dangling=${v}'`);
    }
    const until = filters.get('until')?.map(parseUntil);
    return this.exclusive(async () => {
      const records: DeleteRecord[] = [];
      let reclaimed = 0;
      for (const image of this.store.all()) {
        const refs = this.store.refsOf(image.id);
        if (danglingOnly && refs.length > 0) continue;
        if (this.containersUsing(image.id).length > 0 || this.hasChildren(image.id)) continue;
        if (until && !until.every((u) => createdNano(image) <= u)) continue;
        if (!labelsMatch(image.config.config?.Labels ?? {}, filters.get('label'), filters.get('label!'))) continue;
        for (const r of refs) await this.untag(image, r, records);
        reclaimed += await this.deleteImage(image, records);
      }
      if (records.length > 0) this.events.publish('image', 'prune', '', { reclaimed: String(reclaimed) });
      return { ImagesDeleted: records, SpaceReclaimed: reclaimed };
    });
  }

  // -- load, import, save --

  private async commitImage(
    image: ArchiveImage,
    emit: (m: ProgressMessage) => void,
    action: 'load' | 'import' | 'create',
    parent: string | null = null,
  ): Promise<string> {
    const chainIds = chainIdsOf(image.config.rootfs!.diff_ids);
    for (let i = 0; i < chainIds.length; i++) {
      if (this.layers.has(chainIds[i])) continue;
      await this.layers.commit(image.layers[i], chainIds[i], i > 0 ? chainIds[i - 1] : null);
    }
    const { id } = await this.store.add(image.configBytes, image.config, parent);
    for (const tag of image.tags) {
      const before = await this.store.setRef(tag, id);
      if (before) {
        emit({ stream: `The image ${familiarString(tag)} already exists, renaming the old one with ID ${before} to empty string\n` });
        this.events.publish('image', 'untag', before, { name: familiarString(tag) });
      }
      await this.store.setLastTagTime(id, rfc3339Nano(nowNano()));
      this.events.publish('image', 'tag', id, { name: familiarString(tag) });
    }
    const names = image.tags.map((t) => familiarString(t));
    if (action === 'load') {
      if (names.length === 0) emit({ stream: `Loaded image ID: ${id}\n` });
      for (const n of names) emit({ stream: `Loaded image: ${n}\n` });
    }
    if (action !== 'create') this.events.publish('image', action, id, { name: names[0] ?? id });
    return id;
  }

  /**
   * Loads the images of an archive read from `input`. Messages for the client go to `emit`; errors are
   * thrown (the api layer writes them in-band when the stream has started).
   */
  async load(input: Readable, emit: (m: ProgressMessage) => void, signal?: AbortSignal, opts: { quiet?: boolean } = {}): Promise<string[]> {
    const onLayer = opts.quiet
      ? undefined
      : (_name: string, staged: { diffId: string; size: number }) =>
          emit({ status: 'Loading layer', progressDetail: { current: staged.size, total: staged.size }, id: shortId(staged.diffId) });
    const contents = await readArchive(input, this.layers, signal, onLayer);
    const staged = contents.allStaged();
    try {
      const images = imagesOf(contents);
      if (images.length === 0) throw new InvalidParameter('invalid image archive: it holds no image');
      return await this.exclusive(async () => {
        const ids: string[] = [];
        for (const image of images) ids.push(await this.commitImage(image, emit, 'load'));
        return ids;
      });
    } finally {
      await Promise.all(staged.map((s) => this.layers.discard(s)));
    }
  }

  /** Imports a root filesystem tar as a one-layer image (`docker import`). */
  async importRootfs(
    input: Readable,
    opts: { repo?: string; tag?: string; changes?: string[]; message?: string; platform?: string },
    signal?: AbortSignal,
  ): Promise<string> {
    let ref: Reference | undefined;
    if (opts.repo) {
      ref = parseReference(opts.repo);
      if (ref.digest) throw new InvalidParameter('cannot import to a digest reference');
      if (opts.tag) {
        validateTag(opts.tag);
        ref = { ...ref, tag: opts.tag };
      }
      if (ref.tag === undefined) ref = { ...ref, tag: 'latest' };
    }
    let os = 'linux';
    let architecture = ARCH;
    let variant: string | undefined;
    if (opts.platform) {
      const [pOs, pArch, pVariant] = opts.platform.split('/');
      if (pOs && pOs !== 'linux') throw new InvalidParameter(`unsupported platform ${opts.platform}: only linux images can be imported`);
      os = pOs || os;
      architecture = pArch || architecture;
      variant = pVariant;
    }
    const runConfig = applyChanges({}, opts.changes ?? []);
    const staged = await this.layers.stage(input, signal);
    try {
      const created = rfc3339Nano(nowNano());
      const config: ImageConfig = {
        architecture,
        ...(variant ? { variant } : {}),
        comment: opts.message ?? '',
        config: runConfig as ImageConfig['config'],
        created,
        history: [{ created, comment: opts.message || 'Imported from -' }],
        os,
        rootfs: { type: 'layers', diff_ids: [staged.diffId] },
      };
      const configBytes = Buffer.from(JSON.stringify(config));
      return await this.exclusive(() =>
        this.commitImage({ configBytes, config, layers: [staged], tags: ref ? [ref] : [] }, () => undefined, 'import'),
      );
    } finally {
      await this.layers.discard(staged);
    }
  }

  /**
   * Creates an image from a parent image (or from nothing) plus an optional layer tar: what `docker
   * commit` and the image builder need. The layer tar is the container's diff (whiteouts as `.wh.`
   * entries); without it the new history entry is an empty layer. Tags are given in any reference form.
   */
  async createImage(
    opts: CreateImageOptions,
    signal?: AbortSignal,
  ): Promise<string> {
    const parent = opts.parent ? this.find(opts.parent).image : undefined;
    const tags = (opts.tags ?? []).map((t) => parseNormalizedNamed(t));
    const staged = opts.layer ? await this.layers.stage(opts.layer, signal) : undefined;
    try {
      const created = rfc3339Nano(nowNano());
      const entry: NonNullable<ImageConfig['history']>[number] = { created };
      if (opts.createdBy) entry.created_by = opts.createdBy;
      if (opts.author) entry.author = opts.author;
      if (opts.comment) entry.comment = opts.comment;
      if (!staged) entry.empty_layer = true;
      const diffIds = [...(parent?.diffIds ?? []), ...(staged ? [staged.diffId] : [])];
      const config: ImageConfig = {
        architecture: parent?.config.architecture ?? ARCH,
        ...(parent?.config.variant ? { variant: parent.config.variant } : {}),
        os: parent?.config.os ?? 'linux',
        created,
        ...(opts.container ? { container: opts.container } : {}),
        ...(opts.containerConfig ? { container_config: opts.containerConfig } : {}),
        ...(opts.author ? { author: opts.author } : {}),
        ...(opts.comment ? { comment: opts.comment } : {}),
        config: opts.config as ImageConfig['config'],
        rootfs: { type: 'layers', diff_ids: diffIds },
        history: [...(parent?.config.history ?? []), entry],
      };
      const configBytes = Buffer.from(JSON.stringify(config));
      // Layers of the parent are in the store already: their placeholders are never unpacked.
      const layers = [...(parent?.diffIds ?? []).map((diffId) => ({ diffId, size: 0 })), ...(staged ? [staged] : [])];
      return await this.exclusive(async () => {
        if (parent && !this.store.has(parent.id)) throw new NotFound(`No such image: ${opts.parent} (removed while the new image was made)`);
        const id = await this.commitImage({ configBytes, config, layers, tags }, () => undefined, 'create', parent?.id ?? null);
        return id;
      });
    } finally {
      if (staged) await this.layers.discard(staged);
    }
  }

  /**
   * Writes the named images as one archive to `out`: docker-archive (manifest.json), the legacy layout
   * (repositories, per-layer folders) and an OCI layout (index.json, blobs/sha256), as Docker 25+ does.
   */
  async save(names: string[], out: Writable, signal?: AbortSignal): Promise<void> {
    if (names.length === 0) throw new InvalidParameter('no image names given to save');
    const selected = new Map<string, { image: ImageRecord; tags: Reference[] }>();
    for (const name of names) {
      const { image, ref } = this.find(name);
      const entry = selected.get(image.id) ?? { image, tags: [] };
      selected.set(image.id, entry);
      if (!ref) continue;
      // A bare repository name saves every tag of that repository.
      const parsed = parseReference(name);
      const refs = parsed.tag === undefined && parsed.digest === undefined
        ? this.store.allRefs().filter(([r, id]) => r.name === ref.name && r.tag !== undefined && id === image.id).map(([r]) => r)
        : [ref];
      for (const r of refs) if (!entry.tags.some((t) => familiarString(t) === familiarString(r))) entry.tags.push(r);
    }
    const images = await Promise.all(
      [...selected.values()].map(async ({ image, tags }) => ({
        id: image.id,
        configBytes: await this.store.configBytes(image.id),
        config: image.config,
        chainIds: image.chainIds,
        diffIds: image.diffIds,
        tags,
      })),
    );
    await writeArchive(images, this.layers, out, signal);
    for (const image of images) this.events.publish('image', 'save', image.id, { name: image.tags[0] ? familiarString(image.tags[0]) : image.id });
  }
}
