/** Images made here: loaded from an archive, imported from a root filesystem tar, or created (commit, build). */
import type { Readable } from 'node:stream';
import { InvalidParameter, NotFound } from '../../errors.js';
import { familiarString, parseNormalizedNamed, parseReference, validateTag, type Reference } from '../reference.js';
import { nowNano, rfc3339Nano } from '../../util/json.js';
import { shortId } from '../../util/ids.js';
import { applyChanges } from './changes.js';
import { imagesOf, readArchive, type ArchiveImage } from './load.js';
import { chainIdsOf, type ImageConfig } from './store.js';
import type { CreateImageOptions } from './types.js';
import { ARCH, type ImageContext, type ProgressMessage } from './context.js';

export async function commitImage(
  ctx: ImageContext,
  image: ArchiveImage,
  emit: (m: ProgressMessage) => void,
  action: 'load' | 'import' | 'create',
  parent: string | null = null,
): Promise<string> {
  const chainIds = chainIdsOf(image.config.rootfs!.diff_ids);
  for (let i = 0; i < chainIds.length; i++) {
    if (ctx.layers.has(chainIds[i])) continue;
    await ctx.layers.commit(image.layers[i], chainIds[i], i > 0 ? chainIds[i - 1] : null);
  }
  const { id } = await ctx.store.add(image.configBytes, image.config, parent);
  for (const tag of image.tags) {
    const before = await ctx.store.setRef(tag, id);
    if (before) {
      emit({ stream: `The image ${familiarString(tag)} already exists, renaming the old one with ID ${before} to empty string\n` });
      ctx.events.publish('image', 'untag', before, { name: familiarString(tag) });
    }
    await ctx.store.setLastTagTime(id, rfc3339Nano(nowNano()));
    ctx.events.publish('image', 'tag', id, { name: familiarString(tag) });
  }
  const names = image.tags.map((t) => familiarString(t));
  if (action === 'load') {
    if (names.length === 0) emit({ stream: `Loaded image ID: ${id}\n` });
    for (const n of names) emit({ stream: `Loaded image: ${n}\n` });
  }
  if (action !== 'create') ctx.events.publish('image', action, id, { name: names[0] ?? id });
  return id;
}

/**
 * Loads the images of an archive read from `input`. Messages for the client go to `emit`; errors are
 * thrown (the api layer writes them in-band when the stream has started).
 */
export async function load(ctx: ImageContext, input: Readable, emit: (m: ProgressMessage) => void, signal?: AbortSignal, opts: { quiet?: boolean } = {}): Promise<string[]> {
  const onLayer = opts.quiet
    ? undefined
    : (_name: string, staged: { diffId: string; size: number }) =>
        emit({ status: 'Loading layer', progressDetail: { current: staged.size, total: staged.size }, id: shortId(staged.diffId) });
  const contents = await readArchive(input, ctx.layers, signal, onLayer);
  const staged = contents.allStaged();
  try {
    const images = imagesOf(contents);
    if (images.length === 0) throw new InvalidParameter('invalid image archive: it holds no image');
    return await ctx.exclusive(async () => {
      const ids: string[] = [];
      for (const image of images) ids.push(await commitImage(ctx, image, emit, 'load'));
      return ids;
    });
  } finally {
    await Promise.all(staged.map((s) => ctx.layers.discard(s)));
  }
}

/** Imports a root filesystem tar as a one-layer image (`docker import`). */
export async function importRootfs(
  ctx: ImageContext,
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
  const staged = await ctx.layers.stage(input, signal);
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
    return await ctx.exclusive(() =>
      commitImage(ctx, { configBytes, config, layers: [staged], tags: ref ? [ref] : [] }, () => undefined, 'import'),
    );
  } finally {
    await ctx.layers.discard(staged);
  }
}

/**
 * Creates an image from a parent image (or from nothing) plus an optional layer tar: what `docker
 * commit` and the image builder need. The layer tar is the container's diff (whiteouts as `.wh.`
 * entries); without it the new history entry is an empty layer. Tags are given in any reference form.
 */
export async function createImage(
  ctx: ImageContext,
  opts: CreateImageOptions,
  signal?: AbortSignal,
): Promise<string> {
  const parent = opts.parent ? ctx.find(opts.parent).image : undefined;
  const tags = (opts.tags ?? []).map((t) => parseNormalizedNamed(t));
  const staged = opts.layer ? await ctx.layers.stage(opts.layer, signal) : undefined;
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
    return await ctx.exclusive(async () => {
      if (parent && !ctx.store.has(parent.id)) throw new NotFound(`No such image: ${opts.parent} (removed while the new image was made)`);
      const id = await commitImage(ctx, { configBytes, config, layers, tags }, () => undefined, 'create', parent?.id ?? null);
      return id;
    });
  } finally {
    if (staged) await ctx.layers.discard(staged);
  }
}

