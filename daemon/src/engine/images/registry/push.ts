/**
 * Pushing an image to a registry: each layer is found there already (HEAD), mounted from another
 * repository of the same registry, or compressed with gzip from the layer store's tar as it is uploaded
 * (one streamed PATCH, then PUT with the digest); then the configuration and a Docker schema 2 manifest
 * (OCI when a reused blob is an OCI type). The compressed digests are remembered per diff id, so a
 * second push uploads nothing and a pushed image pulled back is the same image.
 */
import { createHash } from 'node:crypto';
import { Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createGzip } from 'node:zlib';
import type { Reference } from '../../reference.js';
import type { AuthConfig } from './auth.js';
import type { RegistryClient, Repository } from './client.js';
import { MEDIA, sha256Digest } from './manifest.js';
import type { BlobMetadata, BlobRecord } from './metadata.js';
import { ByteProgress, shortDigest, status, type Emit } from './progress.js';
import { pool } from './pull.js';
import type { LayerStore } from '../../../host/host.js';

/** Layers uploaded at the same time (dockerd's default max-concurrent-uploads is 5). */
export const UPLOAD_CONCURRENCY = 5;

export interface PushImage {
  id: string;
  configBytes: Buffer;
  chainIds: string[];
  diffIds: string[];
}

export interface PushResult {
  tag: string;
  digest: string;
  size: number;
}

interface LayerBlob {
  digest: string;
  mediaType: string;
  size: number;
}

/** Opens a session for pushing `ref`'s repository, with read access to repositories it may mount from. */
export async function openForPush(
  client: RegistryClient,
  metadata: BlobMetadata,
  ref: Reference,
  images: PushImage[],
  auth: AuthConfig | undefined,
  signal: AbortSignal,
): Promise<Repository> {
  await metadata.load();
  const sources = new Set<string>();
  for (const image of images) {
    for (const diffId of image.diffIds) {
      for (const blob of metadata.blobsOf(diffId)) {
        for (const repo of blob.repositories) {
          if (repo.startsWith(`${ref.domain}/`) && repo !== ref.name) sources.add(repo.slice(ref.domain.length + 1));
        }
      }
    }
  }
  const extra = [...sources].slice(0, 8).map((p) => `repository:${p}:pull`);
  return client.repository(ref.domain, ref.path, auth, ['pull', 'push'], signal, extra);
}

async function pushLayer(
  repo: Repository,
  metadata: BlobMetadata,
  layers: LayerStore,
  chainId: string,
  diffId: string,
  emit: Emit,
  signal: AbortSignal,
): Promise<LayerBlob> {
  const id = shortDigest(diffId);
  const here = repo.displayName;
  const known = metadata.blobsOf(diffId);
  // Known to be in this repository: check that it still is.
  for (const blob of known.filter((b) => b.repositories.includes(here))) {
    if (await repo.blobExists(blob.digest)) {
      status(emit, id, 'Layer already exists');
      return pick(blob);
    }
    await metadata.forget(diffId, blob.digest, here);
  }
  // In another repository of the same registry: mount it.
  for (const blob of known) {
    for (const source of blob.repositories) {
      if (!source.startsWith(`${repo.domain}/`) || source === here) continue;
      const from = source.slice(repo.domain.length + 1);
      if (await repo.mountBlob(blob.digest, from).catch(() => false)) {
        status(emit, id, `Mounted from ${from}`);
        await metadata.record(diffId, blob, here);
        return pick(blob);
      }
    }
  }
  // Known elsewhere (another registry): this registry may have it anyway.
  for (const blob of known.filter((b) => !b.repositories.some((r) => r.startsWith(`${repo.domain}/`)))) {
    if (await repo.blobExists(blob.digest)) {
      status(emit, id, 'Layer already exists');
      await metadata.record(diffId, blob, here);
      return pick(blob);
    }
  }
  // Upload: the layer tar, gzip-compressed as it is read, hashed on the way out.
  const info = layers.info(chainId);
  const progress = new ByteProgress(emit, id, 'Pushing', info?.tarSize ?? 0);
  const counter = new Transform({
    transform(chunk: Buffer, _enc, cb) {
      progress.add(chunk.length);
      cb(null, chunk);
    },
  });
  const hash = createHash('sha256');
  let size = 0;
  const hasher = new Transform({
    transform(chunk: Buffer, _enc, cb) {
      hash.update(chunk);
      size += chunk.length;
      cb(null, chunk);
    },
  });
  const gzip = createGzip();
  const producing = pipeline(layers.openTar(chainId), counter, gzip, hasher, { signal });
  producing.catch(() => undefined);
  let digest = '';
  await repo.uploadBlob(hasher, () => {
    digest = `sha256:${hash.digest('hex')}`;
    return digest;
  });
  await producing;
  progress.report();
  const blob: LayerBlob = { digest, mediaType: MEDIA.dockerLayerGzip, size };
  await metadata.record(diffId, blob, here);
  status(emit, id, 'Pushed');
  return blob;
}

function pick(blob: BlobRecord): LayerBlob {
  return { digest: blob.digest, mediaType: blob.mediaType, size: blob.size };
}

/** The manifest of an image as pushed: Docker schema 2, or OCI when a layer's media type is an OCI one. */
export function buildManifest(image: PushImage, blobs: LayerBlob[]): { bytes: Buffer; mediaType: string } {
  const oci = blobs.some((b) => b.mediaType.startsWith('application/vnd.oci.'));
  const mediaType = oci ? MEDIA.ociManifest : MEDIA.dockerManifest;
  const manifest = {
    schemaVersion: 2,
    mediaType,
    config: { mediaType: oci ? MEDIA.ociConfig : MEDIA.dockerConfig, size: image.configBytes.length, digest: image.id },
    layers: blobs.map((b) => ({
      mediaType: oci && b.mediaType === MEDIA.dockerLayerGzip ? MEDIA.ociLayerGzip : b.mediaType,
      size: b.size,
      digest: b.digest,
    })),
  };
  // Indented as dockerd writes it.
  return { bytes: Buffer.from(JSON.stringify(manifest, null, 3)), mediaType };
}

/** Pushes one image as `tag` to an open repository session. */
export async function pushTag(
  repo: Repository,
  metadata: BlobMetadata,
  layers: LayerStore,
  image: PushImage,
  tag: string,
  emit: Emit,
  signal: AbortSignal,
): Promise<PushResult> {
  const order = image.chainIds.map((_, i) => i).reverse();
  for (const i of order) status(emit, shortDigest(image.diffIds[i]), 'Preparing');
  const blobs: LayerBlob[] = new Array(image.chainIds.length);
  const controller = new AbortController();
  const onAbort = () => controller.abort(signal.reason);
  signal.addEventListener('abort', onAbort, { once: true });
  try {
    await pool(
      order,
      UPLOAD_CONCURRENCY,
      async (i) => {
        blobs[i] = await pushLayer(repo, metadata, layers, image.chainIds[i], image.diffIds[i], emit, controller.signal);
      },
      (i) => status(emit, shortDigest(image.diffIds[i]), 'Waiting'),
      (err) => controller.abort(err),
    );
  } finally {
    signal.removeEventListener('abort', onAbort);
  }
  if (signal.aborted) throw signal.reason ?? new Error('aborted');
  if (!(await repo.blobExists(image.id))) await repo.uploadSmallBlob(image.configBytes, image.id);
  const manifest = buildManifest(image, blobs);
  await repo.putManifest(tag, manifest.bytes, manifest.mediaType);
  const digest = sha256Digest(manifest.bytes);
  emit({ status: `${tag}: digest: ${digest} size: ${manifest.bytes.length}` });
  emit({ progressDetail: {}, aux: { Tag: tag, Digest: digest, Size: manifest.bytes.length } });
  return { tag, digest, size: manifest.bytes.length };
}

export function pushHeader(ref: Reference): string {
  return `The push refers to repository [${ref.name}]`;
}
