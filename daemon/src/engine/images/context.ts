/**
 * The state the image verbs share (list.ts, remove.ts, create.ts, ...): the store, the layer store, the
 * event bus, who uses which image, and the lock that runs changes of the store one at a time.
 */
import { NotFound } from '../../errors.js';
import type { EventBus } from '../events.js';
import { familiarName, familiarString, looksLikeIdPrefix, parseNormalizedNamed, type Reference } from '../reference.js';
import type { Distribution } from './registry/index.js';
import { ImageStore, type ImageRecord } from './store.js';
import type { LayerStore } from '../../host/host.js';
import type { StateStore } from '../../state/state.js';
import type { ImageUsers } from './types.js';

export type Filters = Map<string, string[]>;

/** One line of a JSON progress stream (`{"stream": ...}`, `{"status": ...}`). */
export type ProgressMessage = Record<string, unknown>;

export interface DeleteRecord {
  Untagged?: string;
  Deleted?: string;
}

export const ARCH = process.arch === 'x64' ? 'amd64' : process.arch === 'ia32' ? '386' : process.arch;

export class ImageContext {
  readonly store: ImageStore;
  users: ImageUsers | undefined;
  lock: Promise<unknown> = Promise.resolve();
  distribution: Distribution | undefined;

  constructor(
    state: StateStore,
    readonly layers: LayerStore & { diffDir?(chainId: string): string },
    readonly events: EventBus,
  ) {
    this.store = new ImageStore(state);
  }

  /** Runs changes of the store one at a time. */
  exclusive<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.lock.then(fn, fn);
    this.lock = run.catch(() => undefined);
    return run;
  }

  containersUsing(id: string): string[] {
    return this.users?.containersUsingImage(id) ?? [];
  }

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

  tagsOf(id: string): string[] {
    return this.store
      .refsOf(id)
      .filter((r) => r.tag !== undefined)
      .map((r) => familiarString(r))
      .sort();
  }

  digestsOf(id: string): string[] {
    return this.store
      .refsOf(id)
      .filter((r) => r.digest !== undefined)
      .map((r) => `${familiarName(r.name)}@${r.digest}`)
      .sort();
  }

  sizeOf(image: ImageRecord): number {
    return image.chainIds.reduce((sum, c) => sum + (this.layers.info(c)?.diskSize ?? 0), 0);
  }

  hasChildren(id: string): boolean {
    return this.store.all().some((i) => i.meta.parent === id);
  }
}
