/**
 * The image store: image configurations by content (the image id is the sha256 of the configuration's
 * bytes), a little metadata per image, and the index of repository references (tags) to image ids.
 *
 * ## Formats (version 1), under `<data-root>/image/`
 *
 * - `blobs/sha256/<hex>`: an image configuration, byte for byte as loaded (its sha256 is the image id).
 * - `imagedb/<hex>.json`: `{"version": 1, "lastTagTime": RFC 3339 | null, "parent": "sha256:..." | null}`.
 *   Written after the configuration blob and after its layers: an image is present when this file is.
 * - `repositories.json`: `{"version": 1, "Repositories": {"docker.io/library/busybox":
 *   {"docker.io/library/busybox:latest": "sha256:<image id>"}}}` (the shape of Docker's
 *   repositories.json, plus the version key).
 *
 * All writes are atomic and durable, through the StateStore. Layers live in the Host's layer store.
 */
import { createHash } from 'node:crypto';
import path from 'node:path';
import { readJSON, writeJSON, type StateStore } from '../../state/state.js';
import { log } from '../../util/log.js';
import { InvalidParameter } from '../../errors.js';
import { parseReference, referenceString, type Reference } from '../reference.js';
import type { ImageRunConfig } from './types.js';

const FORMAT_VERSION = 1;

/** The store's folder under the data root. */
export const IMAGE_FOLDER = 'image';
const BLOBS = `${IMAGE_FOLDER}/blobs/sha256`;
const IMAGEDB = `${IMAGE_FOLDER}/imagedb`;
const REPOSITORIES = `${IMAGE_FOLDER}/repositories.json`;

/** An image configuration (Docker / OCI image spec), the fields this engine reads. */
export interface ImageConfig {
  architecture?: string;
  variant?: string;
  os?: string;
  'os.version'?: string;
  created?: string;
  author?: string;
  comment?: string;
  docker_version?: string;
  container?: string;
  container_config?: Record<string, unknown>;
  config?: ImageRunConfig & Record<string, unknown>;
  rootfs?: { type: string; diff_ids: string[] };
  history?: Array<{ created?: string; created_by?: string; author?: string; comment?: string; empty_layer?: boolean }>;
  parent?: string;
  [key: string]: unknown;
}

export interface ImageMeta {
  lastTagTime: string | null;
  parent: string | null;
}

export interface ImageRecord {
  id: string;
  config: ImageConfig;
  /** Chain ids of the layers, bottom first. */
  chainIds: string[];
  diffIds: string[];
  meta: ImageMeta;
}

/** The chain ids of a list of diff ids (OCI image spec: chainID(n) = sha256(chainID(n-1) + " " + diffID(n))). */
export function chainIdsOf(diffIds: string[]): string[] {
  const out: string[] = [];
  for (const diffId of diffIds) {
    const prev = out[out.length - 1];
    out.push(prev === undefined ? diffId : `sha256:${createHash('sha256').update(`${prev} ${diffId}`).digest('hex')}`);
  }
  return out;
}

/** Parses and checks an image configuration's bytes; InvalidParameter when they are not one. */
export function parseImageConfig(bytes: Buffer): ImageConfig {
  let config: ImageConfig;
  try {
    config = JSON.parse(bytes.toString('utf8')) as ImageConfig;
  } catch (err) {
    throw new InvalidParameter(`invalid image configuration: ${(err as Error).message}`, { cause: err });
  }
  if (config === null || typeof config !== 'object' || Array.isArray(config)) throw new InvalidParameter('invalid image configuration: not a JSON object');
  const rootfs = config.rootfs;
  if (!rootfs || typeof rootfs !== 'object' || !Array.isArray(rootfs.diff_ids)) {
    throw new InvalidParameter('invalid image configuration: rootfs.diff_ids is missing');
  }
  for (const d of rootfs.diff_ids) {
    if (typeof d !== 'string' || !/^sha256:[a-f0-9]{64}$/.test(d)) throw new InvalidParameter(`invalid image configuration: bad diff id ${JSON.stringify(d)}`);
  }
  if (config.config !== undefined && (config.config === null || typeof config.config !== 'object')) {
    // Some writers emit "config": null for an empty configuration.
    config.config = {};
  }
  return config;
}

export class ImageStore {
  private readonly images = new Map<string, ImageRecord>();
  /** Full reference text -> image id. */
  private readonly refs = new Map<string, string>();
  /** The store's folder (for messages). */
  readonly root: string;

  constructor(private readonly state: StateStore) {
    this.root = path.join(state.root, IMAGE_FOLDER);
  }

  /** Reads the images and the index of references (once, before the store is used). */
  async load(): Promise<void> {
    await this.state.makeFolder(BLOBS, { mode: 0o700 });
    for (const name of await this.state.list(IMAGEDB, { mode: 0o700 })) {
      const m = /^([a-f0-9]{64})\.json$/.exec(name);
      if (!m) continue;
      try {
        const meta = await readJSON<ImageMeta & { version: number }>(this.state, `${IMAGEDB}/${name}`);
        if (!meta) throw new Error('its metadata is missing');
        if (meta.version !== FORMAT_VERSION) throw new Error(`unknown version ${meta.version}`);
        const bytes = await this.state.read(`${BLOBS}/${m[1]}`);
        if (!bytes) throw new Error('its configuration is missing');
        if (createHash('sha256').update(bytes).digest('hex') !== m[1]) throw new Error('configuration does not match its digest');
        const config = parseImageConfig(bytes);
        const diffIds = config.rootfs!.diff_ids;
        this.images.set(`sha256:${m[1]}`, {
          id: `sha256:${m[1]}`,
          config,
          diffIds,
          chainIds: chainIdsOf(diffIds),
          meta: { lastTagTime: meta.lastTagTime ?? null, parent: meta.parent ?? null },
        });
      } catch (err) {
        log.warn('skipping an unreadable image', { image: m[1], error: (err as Error).message });
      }
    }
    try {
      const index = await readJSON<{ version?: number; Repositories?: Record<string, Record<string, string>> }>(this.state, REPOSITORIES);
      for (const refs of Object.values(index?.Repositories ?? {})) {
        for (const [ref, id] of Object.entries(refs)) if (this.images.has(id)) this.refs.set(ref, id);
      }
    } catch (err) {
      log.error('cannot read the image repositories index', { file: path.join(this.state.root, REPOSITORIES), error: (err as Error).message });
    }
    // Blobs of images whose metadata never got written (a crash during load) are debris.
    for (const name of await this.state.list(BLOBS)) {
      if (!this.images.has(`sha256:${name}`)) await this.state.remove(`${BLOBS}/${name}`);
    }
  }

  all(): ImageRecord[] {
    return [...this.images.values()];
  }

  get(id: string): ImageRecord | undefined {
    return this.images.get(id);
  }

  has(id: string): boolean {
    return this.images.has(id);
  }

  /** Image ids whose hex starts with the prefix. */
  byPrefix(prefix: string): string[] {
    const hex = prefix.replace(/^sha256:/, '');
    return [...this.images.keys()].filter((id) => id.slice(7).startsWith(hex));
  }

  /** Adds an image whose layers are in the layer store already. Returns false when it existed. */
  async add(configBytes: Buffer, config: ImageConfig, parent: string | null = null): Promise<{ id: string; created: boolean }> {
    const hex = createHash('sha256').update(configBytes).digest('hex');
    const id = `sha256:${hex}`;
    if (this.images.has(id)) return { id, created: false };
    await this.state.write(`${BLOBS}/${hex}`, configBytes, { mode: 0o600 });
    const meta: ImageMeta = { lastTagTime: null, parent };
    await writeJSON(this.state, `${IMAGEDB}/${hex}.json`, { version: FORMAT_VERSION, ...meta });
    const diffIds = config.rootfs!.diff_ids;
    this.images.set(id, { id, config, diffIds, chainIds: chainIdsOf(diffIds), meta });
    return { id, created: true };
  }

  /** The configuration bytes exactly as stored. */
  async configBytes(id: string): Promise<Buffer> {
    const bytes = await this.state.read(`${BLOBS}/${id.replace(/^sha256:/, '')}`);
    if (!bytes) throw new Error(`the configuration of image ${id} is missing from ${this.root}`);
    return bytes;
  }

  async remove(id: string): Promise<void> {
    const hex = id.replace(/^sha256:/, '');
    if (!this.images.has(id)) return;
    for (const [ref, target] of [...this.refs]) if (target === id) this.refs.delete(ref);
    await this.saveRefs();
    this.images.delete(id);
    await this.state.remove(`${IMAGEDB}/${hex}.json`);
    await this.state.remove(`${BLOBS}/${hex}`);
  }

  async setLastTagTime(id: string, time: string): Promise<void> {
    const image = this.images.get(id);
    if (!image) return;
    image.meta.lastTagTime = time;
    await writeJSON(this.state, `${IMAGEDB}/${id.slice(7)}.json`, { version: FORMAT_VERSION, ...image.meta });
  }

  // -- references --

  /** The image a reference names (tag or digest reference, already normalised). */
  lookup(ref: Reference): string | undefined {
    return this.refs.get(referenceString(ref));
  }

  /** Full reference texts pointing at the image. */
  refsOf(id: string): Reference[] {
    const out: Reference[] = [];
    for (const [ref, target] of this.refs) if (target === id) out.push(parseReference(ref));
    return out;
  }

  allRefs(): Array<[Reference, string]> {
    return [...this.refs].map(([ref, id]) => [parseReference(ref), id]);
  }

  /** Points a reference at an image; returns the image it pointed at before (if another). */
  async setRef(ref: Reference, id: string): Promise<string | undefined> {
    const key = referenceString(ref);
    const before = this.refs.get(key);
    this.refs.set(key, id);
    await this.saveRefs();
    return before !== id ? before : undefined;
  }

  async deleteRef(ref: Reference): Promise<boolean> {
    const deleted = this.refs.delete(referenceString(ref));
    if (deleted) await this.saveRefs();
    return deleted;
  }

  private async saveRefs(): Promise<void> {
    const repositories: Record<string, Record<string, string>> = {};
    for (const [key, id] of [...this.refs].sort(([a], [b]) => a.localeCompare(b))) {
      const name = parseReference(key).name;
      (repositories[name] ??= {})[key] = id;
    }
    await writeJSON(this.state, REPOSITORIES, { version: FORMAT_VERSION, Repositories: repositories });
  }
}
