/**
 * Writing image archives (`docker save`), streamed, in the layout Docker 25+ writes so that both Berth
 * and Docker (old and new) load it:
 *
 * - `blobs/sha256/<hex>`: each layer tar (uncompressed, so its digest is its diff id), each image
 *   configuration, and an OCI manifest per image;
 * - `index.json` + `oci-layout`: the OCI image layout, one manifest descriptor per tag;
 * - `manifest.json`: the docker-archive manifest (Config, RepoTags, Layers pointing into blobs/);
 * - `repositories` and `<v1 id>/{VERSION,json,layer.tar}` (layer.tar a symlink into blobs/): the legacy
 *   layout for loaders that predate manifest.json.
 */
import { createHash } from 'node:crypto';
import { pipeline } from 'node:stream/promises';
import type { Writable } from 'node:stream';
import type tar from 'tar-stream';
import { tarStream } from '../../util/tar.js';
import { InvalidParameter } from '../../errors.js';
import { familiarName, familiarString, parseReference, type Reference } from '../reference.js';
import type { ImageContext } from './context.js';
import type { ImageConfig, ImageRecord } from './store.js';
import type { LayerStore } from '../../host/host.js';

export interface ImageToSave {
  id: string;
  configBytes: Buffer;
  config: ImageConfig;
  chainIds: string[];
  diffIds: string[];
  tags: Reference[];
}

const FIXED_TIME = new Date(0);
const MEDIA_MANIFEST = 'application/vnd.oci.image.manifest.v1+json';
const MEDIA_INDEX = 'application/vnd.oci.image.index.v1+json';
const MEDIA_CONFIG = 'application/vnd.oci.image.config.v1+json';
const MEDIA_LAYER = 'application/vnd.oci.image.layer.v1.tar';

function sha256(data: Buffer | string): string {
  return createHash('sha256').update(data).digest('hex');
}

function hex(digest: string): string {
  return digest.replace(/^sha256:/, '');
}

function addEntry(pack: tar.Pack, header: Partial<tar.Header> & { name: string }, content?: Buffer | string): Promise<void> {
  return new Promise((resolve, reject) => {
    pack.entry({ mtime: FIXED_TIME, mode: header.type === 'directory' ? 0o755 : 0o644, ...header }, content as Buffer, (err) => (err ? reject(err) : resolve()));
  });
}

export async function writeArchive(images: ImageToSave[], layers: LayerStore, out: Writable, signal?: AbortSignal): Promise<void> {
  const pack = tarStream().pack();
  const writing = pipeline(pack as unknown as NodeJS.ReadableStream, out, { signal });
  writing.catch(() => undefined);
  const written = new Set<string>();
  try {
    await addEntry(pack, { name: 'blobs/', type: 'directory' });
    await addEntry(pack, { name: 'blobs/sha256/', type: 'directory' });
    const manifestJson: Array<Record<string, unknown>> = [];
    const repositories: Record<string, Record<string, string>> = {};
    const indexManifests: Array<Record<string, unknown>> = [];

    for (const image of images) {
      // Layers, streamed from the layer store.
      for (let i = 0; i < image.chainIds.length; i++) {
        const diffHex = hex(image.diffIds[i]);
        if (written.has(diffHex)) continue;
        written.add(diffHex);
        const info = layers.info(image.chainIds[i]);
        if (!info) throw new Error(`layer ${image.chainIds[i]} of image ${image.id} is missing from the layer store`);
        await new Promise<void>((resolve, reject) => {
          const sink = pack.entry({ name: `blobs/sha256/${diffHex}`, size: info.tarSize, mode: 0o644, mtime: FIXED_TIME }, (err) => (err ? reject(err) : resolve()));
          pipeline(layers.openTar(image.chainIds[i]), sink as unknown as NodeJS.WritableStream).catch(reject);
        });
      }
      const configHex = hex(image.id);
      if (!written.has(configHex)) {
        written.add(configHex);
        await addEntry(pack, { name: `blobs/sha256/${configHex}` }, image.configBytes);
      }
      // The OCI manifest of the image.
      const manifest = Buffer.from(
        JSON.stringify({
          schemaVersion: 2,
          mediaType: MEDIA_MANIFEST,
          config: { mediaType: MEDIA_CONFIG, digest: image.id, size: image.configBytes.length },
          layers: image.chainIds.map((c, i) => ({ mediaType: MEDIA_LAYER, digest: image.diffIds[i], size: layers.info(c)!.tarSize })),
        }),
      );
      const manifestHex = sha256(manifest);
      if (!written.has(manifestHex)) {
        written.add(manifestHex);
        await addEntry(pack, { name: `blobs/sha256/${manifestHex}` }, manifest);
      }
      const descriptor = { mediaType: MEDIA_MANIFEST, digest: `sha256:${manifestHex}`, size: manifest.length };
      if (image.tags.length === 0) indexManifests.push(descriptor);
      for (const tag of image.tags) {
        indexManifests.push({
          ...descriptor,
          annotations: {
            'io.containerd.image.name': `${tag.name}:${tag.tag ?? 'latest'}`,
            'org.opencontainers.image.ref.name': tag.tag ?? 'latest',
          },
        });
      }

      // Legacy per-layer folders: v1 ids chained through their parents.
      let parent: string | undefined;
      const os = image.config.os ?? 'linux';
      for (let i = 0; i < image.chainIds.length; i++) {
        const top = i === image.chainIds.length - 1;
        const v1: Record<string, unknown> = {};
        if (top) {
          for (const [k, v] of Object.entries(image.config)) if (k !== 'rootfs' && k !== 'history') v1[k] = v;
        } else {
          v1.created = '1970-01-01T00:00:00Z';
          v1.container_config = { Cmd: null };
          v1.os = os;
        }
        if (parent) v1.parent = parent;
        const id = sha256(`${image.chainIds[i]} ${parent ?? ''} ${top ? image.id : ''}`);
        v1.id = id;
        if (!written.has(`v1:${id}`)) {
          written.add(`v1:${id}`);
          await addEntry(pack, { name: `${id}/`, type: 'directory' });
          await addEntry(pack, { name: `${id}/VERSION` }, '1.0');
          await addEntry(pack, { name: `${id}/json` }, JSON.stringify(v1));
          await addEntry(pack, { name: `${id}/layer.tar`, type: 'symlink', linkname: `../blobs/sha256/${hex(image.diffIds[i])}`, mode: 0o777 });
        }
        parent = id;
      }
      for (const tag of image.tags) {
        if (tag.tag === undefined || parent === undefined) continue;
        (repositories[familiarName(tag.name)] ??= {})[tag.tag] = parent;
      }
      manifestJson.push({
        Config: `blobs/sha256/${configHex}`,
        RepoTags: image.tags.length > 0 ? image.tags.map((t) => familiarString(t)) : null,
        Layers: image.diffIds.map((d) => `blobs/sha256/${hex(d)}`),
      });
    }

    await addEntry(pack, { name: 'index.json' }, JSON.stringify({ schemaVersion: 2, mediaType: MEDIA_INDEX, manifests: indexManifests }));
    await addEntry(pack, { name: 'manifest.json' }, JSON.stringify(manifestJson));
    await addEntry(pack, { name: 'oci-layout' }, JSON.stringify({ imageLayoutVersion: '1.0.0' }));
    if (Object.keys(repositories).length > 0) await addEntry(pack, { name: 'repositories' }, JSON.stringify(repositories));
    pack.finalize();
  } catch (err) {
    pack.destroy(err as Error);
    await writing.catch(() => undefined);
    throw err;
  }
  await writing;
}

/**
 * Writes the named images as one archive to `out`: docker-archive (manifest.json), the legacy layout
 * (repositories, per-layer folders) and an OCI layout (index.json, blobs/sha256), as Docker 25+ does.
 */
export async function save(ctx: ImageContext, names: string[], out: Writable, signal?: AbortSignal): Promise<void> {
  if (names.length === 0) throw new InvalidParameter('no image names given to save');
  const selected = new Map<string, { image: ImageRecord; tags: Reference[] }>();
  for (const name of names) {
    const { image, ref } = ctx.find(name);
    const entry = selected.get(image.id) ?? { image, tags: [] };
    selected.set(image.id, entry);
    if (!ref) continue;
    // A bare repository name saves every tag of that repository.
    const parsed = parseReference(name);
    const refs = parsed.tag === undefined && parsed.digest === undefined
      ? ctx.store.allRefs().filter(([r, id]) => r.name === ref.name && r.tag !== undefined && id === image.id).map(([r]) => r)
      : [ref];
    for (const r of refs) if (!entry.tags.some((t) => familiarString(t) === familiarString(r))) entry.tags.push(r);
  }
  const images = await Promise.all(
    [...selected.values()].map(async ({ image, tags }) => ({
      id: image.id,
      configBytes: await ctx.store.configBytes(image.id),
      config: image.config,
      chainIds: image.chainIds,
      diffIds: image.diffIds,
      tags,
    })),
  );
  await writeArchive(images, ctx.layers, out, signal);
  for (const image of images) ctx.events.publish('image', 'save', image.id, { name: image.tags[0] ? familiarString(image.tags[0]) : image.id });
}
