/**
 * Reading image archives (`docker load`): the docker-archive format (manifest.json, configuration and
 * layer files, Docker 25+ puts them under blobs/sha256 and links the legacy folders to them), the legacy
 * format (`repositories` and one folder per v1 layer with VERSION, json and layer.tar), and OCI image
 * layouts (index.json, blobs/sha256).
 *
 * The archive is read once, as a stream: small JSON files are kept in memory, every other file is taken
 * for a layer and unpacked into the layer store's staging area while it is read (its diff id computed on
 * the way). Only when the archive has ended is it known which images it holds; each is then checked
 * (configuration present, every layer present, diff ids as the configuration says) before anything is
 * committed, so that a bad archive leaves nothing behind.
 */
import { createHash } from 'node:crypto';
import path from 'node:path';
import type { Readable } from 'node:stream';
import type tar from 'tar-stream';
import { tarStream } from '../../util/tar.js';
import { InvalidParameter } from '../../errors.js';
import { parseNormalizedNamed, type Reference } from '../reference.js';
import { parseImageConfig, type ImageConfig } from './store.js';
import { decompressed, feed, peekStream } from '../../util/streams.js';
import type { LayerStore, StagedLayer } from '../../host/host.js';

/** JSON files larger than this are not metadata (a configuration or manifest is a few KB). */
const MAX_METADATA_SIZE = 16 * 1024 * 1024;
/** All JSON files of one archive together (they are held in memory until the archive has been read). */
const MAX_METADATA_TOTAL = 64 * 1024 * 1024;
const MAX_LINK_HOPS = 16;
/** The archive is parsed in pieces of about this size (an upload arrives in pieces of 20-64 KiB). */
const INPUT_PIECE = 1 << 20;

/** An image found in an archive, checked and ready to commit. */
export interface ArchiveImage {
  configBytes: Buffer;
  config: ImageConfig;
  /** Staged layers, bottom first, matching config.rootfs.diff_ids. */
  layers: StagedLayer[];
  tags: Reference[];
}

export class ArchiveContents {
  readonly metadata = new Map<string, Buffer>();
  metadataBytes = 0;
  readonly layers = new Map<string, StagedLayer>();
  /** Files that were neither JSON nor a readable layer tar, with the reason: an error only if an image names one. */
  readonly unreadable = new Map<string, Error>();
  readonly links = new Map<string, string>();

  /** Follows symlink entries of the archive (Docker 25+ links `<id>/layer.tar` to `blobs/sha256/...`). */
  resolve(name: string): string {
    let current = cleanArchiveName(name);
    for (let i = 0; i < MAX_LINK_HOPS; i++) {
      const target = this.links.get(current);
      if (target === undefined) return current;
      current = target;
    }
    throw new InvalidParameter(`invalid archive: too many levels of links at ${name}`);
  }

  json<T>(name: string, what: string): T {
    const file = this.resolve(name);
    const bytes = this.metadata.get(file);
    if (!bytes) {
      if (this.layers.has(file) || this.unreadable.has(file)) throw new InvalidParameter(`invalid archive: ${what} ${name} is not a JSON file`);
      throw new InvalidParameter(`invalid archive: ${what} ${name} is missing from the archive`);
    }
    try {
      return JSON.parse(bytes.toString('utf8')) as T;
    } catch (err) {
      throw new InvalidParameter(`invalid archive: ${what} ${name} is not valid JSON: ${(err as Error).message}`, { cause: err });
    }
  }

  layer(name: string, image: string): StagedLayer {
    const file = this.resolve(name);
    const staged = this.layers.get(file);
    if (staged) return staged;
    const why = this.unreadable.get(file);
    if (why) throw new InvalidParameter(`invalid archive: layer ${name} of ${image}: ${why.message}`, { cause: why });
    throw new InvalidParameter(`invalid archive: layer ${name} of ${image} is missing from the archive`);
  }

  allStaged(): StagedLayer[] {
    return [...this.layers.values()];
  }
}

/** Normalises a name inside the archive; names leaving the archive's root are refused. */
export function cleanArchiveName(name: string): string {
  const parts: string[] = [];
  for (const part of name.split('/')) {
    if (part === '' || part === '.') continue;
    if (part === '..') {
      if (parts.length === 0) throw new InvalidParameter(`invalid archive: ${JSON.stringify(name)} points outside the archive`);
      parts.pop();
      continue;
    }
    parts.push(part);
  }
  return parts.join('/');
}

function looksLikeMetadataName(name: string): boolean {
  const base = path.posix.basename(name);
  return base === 'manifest.json' || base === 'repositories' || base === 'index.json' || base === 'oci-layout' || base === 'json' || base === 'VERSION' || base.endsWith('.json');
}

function firstNonSpace(head: Buffer): number | undefined {
  for (const b of head) if (b !== 0x20 && b !== 0x0a && b !== 0x0d && b !== 0x09) return b;
  return undefined;
}

async function readSmall(stream: Readable, name: string): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of stream) {
    size += (chunk as Buffer).length;
    if (size > MAX_METADATA_SIZE) throw new InvalidParameter(`invalid archive: ${name} is larger than ${MAX_METADATA_SIZE} bytes`);
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks);
}

/**
 * Reads a whole image archive from `input` (plain or gzip), staging its layers in `layers`. On failure
 * every staged layer is discarded before the error is thrown.
 */
export async function readArchive(
  input: Readable,
  layers: LayerStore,
  signal?: AbortSignal,
  onLayer?: (name: string, staged: StagedLayer) => void,
): Promise<ArchiveContents> {
  const contents = new ArchiveContents();
  const { stream } = await decompressed(input);
  const extract = tarStream().extract({ highWaterMark: INPUT_PIECE });
  let failure: unknown;

  const keep = (name: string, bytes: Buffer): void => {
    contents.metadataBytes += bytes.length;
    if (contents.metadataBytes > MAX_METADATA_TOTAL) throw new InvalidParameter(`invalid archive: its JSON files exceed ${MAX_METADATA_TOTAL} bytes in all`);
    contents.metadata.set(name, bytes);
  };

  const handle = async (header: tar.Header, entry: Readable): Promise<void> => {
    if (signal?.aborted) throw signal.reason ?? new Error('aborted');
    const name = cleanArchiveName(header.name);
    switch (header.type) {
      case 'directory':
        entry.resume();
        return;
      case 'symlink':
      case 'link': {
        entry.resume();
        const target = header.type === 'symlink' ? path.posix.join(path.posix.dirname(name), header.linkname ?? '') : header.linkname ?? '';
        contents.links.set(name, cleanArchiveName(target));
        return;
      }
      case 'file':
      case 'contiguous-file':
        break;
      default:
        entry.resume();
        return;
    }
    if (looksLikeMetadataName(name) && (header.size ?? 0) <= MAX_METADATA_SIZE) {
      keep(name, await readSmall(entry, name));
      return;
    }
    // A tar header carries "ustar" at offset 257; anything else starting with { or [ is a JSON blob.
    const { head, stream: whole } = await peekStream(entry, 512);
    const isTar = head.length >= 262 && head.subarray(257, 262).toString('latin1') === 'ustar';
    const first = firstNonSpace(head);
    if (!isTar && (first === 0x7b || first === 0x5b) && (header.size ?? 0) <= MAX_METADATA_SIZE) {
      keep(name, await readSmall(whole, name));
      return;
    }
    try {
      const staged = await layers.stage(whole, signal);
      contents.layers.set(name, staged);
      onLayer?.(name, staged);
    } catch (err) {
      if (!(err instanceof InvalidParameter)) throw err;
      // Not every file of an archive is a layer; this one only matters if an image names it.
      contents.unreadable.set(name, err);
    }
  };

  let inflight: Promise<void> = Promise.resolve();
  const done = new Promise<void>((resolve, reject) => {
    extract.on('entry', (header, source, next) => {
      const entry = source as unknown as Readable;
      // The archive's own error reaches us through `extract`; the entry repeats it.
      entry.on('error', () => undefined);
      inflight = handle(header, entry).then(
        () => next(),
        (err: unknown) => {
          failure ??= err;
          entry.resume();
          next(err as Error);
        },
      );
    });
    extract.on('finish', () => resolve());
    extract.on('error', (err: Error) => reject(failure ?? err));
    stream.on('error', (err: Error) => {
      failure ??= err;
      extract.destroy(err);
    });
    stream.on('close', () => {
      if (stream.readableEnded) return;
      failure ??= stream.errored ?? new InvalidParameter('invalid image archive: the upload ended early');
      extract.destroy(failure as Error);
    });
    if (stream.destroyed) {
      failure ??= stream.errored ?? new InvalidParameter('invalid image archive: the upload ended early');
      reject(failure);
    }
  });
  const detach = feed(stream, extract as unknown as NodeJS.WritableStream & { destroy(err?: Error): void }, INPUT_PIECE);
  try {
    await done;
    if (failure) throw failure;
  } catch (thrown) {
    // The request body itself is left unread (the server discards it); a decoder in front of it ends here.
    detach();
    if (stream !== input) stream.destroy();
    // A failing entry may have torn the archive stream down before its own, clearer, error was recorded.
    await inflight.catch(() => undefined);
    const err = failure ?? thrown;
    await Promise.all(contents.allStaged().map((s) => layers.discard(s)));
    if (err instanceof InvalidParameter || (err as Error).name === 'AbortError') throw err;
    const code = (err as NodeJS.ErrnoException).code;
    if (code === undefined || code.startsWith('Z_') || code === 'ECONNRESET' || code === 'ERR_STREAM_PREMATURE_CLOSE') {
      throw new InvalidParameter(`invalid image archive: ${(err as Error).message}`, { cause: err });
    }
    throw err;
  }
  return contents;
}

interface DockerManifestEntry {
  Config: string;
  RepoTags?: string[] | null;
  Layers: string[];
}

function checkLayers(image: string, config: ImageConfig, staged: StagedLayer[], names: string[]): void {
  const diffIds = config.rootfs!.diff_ids;
  if (diffIds.length !== staged.length) {
    throw new InvalidParameter(`invalid archive: ${image} lists ${staged.length} layers but its configuration has ${diffIds.length} diff ids`);
  }
  staged.forEach((layer, i) => {
    if (layer.diffId !== diffIds[i]) {
      throw new InvalidParameter(`invalid archive: layer ${names[i]} of ${image} has diff id ${layer.diffId}, but the image configuration expects ${diffIds[i]}`);
    }
  });
}

function parseTags(tags: unknown, image: string): Reference[] {
  if (tags === null || tags === undefined) return [];
  if (!Array.isArray(tags)) throw new InvalidParameter(`invalid archive: RepoTags of ${image} is not a list`);
  return tags.map((t) => {
    if (typeof t !== 'string') throw new InvalidParameter(`invalid archive: RepoTags of ${image} holds a non-string`);
    return parseNormalizedNamed(t);
  });
}

function fromDockerManifest(contents: ArchiveContents): ArchiveImage[] {
  const manifest = contents.json<DockerManifestEntry[]>('manifest.json', 'manifest');
  if (!Array.isArray(manifest)) throw new InvalidParameter('invalid archive: manifest.json is not a list');
  return manifest.map((entry, index) => {
    if (!entry || typeof entry.Config !== 'string' || !Array.isArray(entry.Layers)) {
      throw new InvalidParameter(`invalid archive: manifest.json entry ${index} needs Config and Layers`);
    }
    const configFile = contents.resolve(entry.Config);
    const configBytes = contents.metadata.get(configFile);
    if (!configBytes) throw new InvalidParameter(`invalid archive: the configuration ${entry.Config} named by manifest.json is missing from the archive`);
    const config = parseImageConfig(configBytes);
    const label = `image ${entry.Config}`;
    const staged = entry.Layers.map((l) => contents.layer(String(l), label));
    checkLayers(label, config, staged, entry.Layers);
    return { configBytes, config, layers: staged, tags: parseTags(entry.RepoTags, label) };
  });
}

interface LegacyV1Json {
  id?: string;
  parent?: string;
  created?: string;
  author?: string;
  comment?: string;
  container_config?: { Cmd?: string[] };
  [key: string]: unknown;
}

const V1_ONLY_FIELDS = ['id', 'parent', 'Size', 'parent_id', 'layer_id', 'checksum', 'throwaway'];

function fromLegacyRepositories(contents: ArchiveContents): ArchiveImage[] {
  const repositories = contents.json<Record<string, Record<string, string>>>('repositories', 'repositories file');
  if (repositories === null || typeof repositories !== 'object') throw new InvalidParameter('invalid archive: repositories is not a JSON object');
  const byTop = new Map<string, Reference[]>();
  for (const [repo, tags] of Object.entries(repositories)) {
    for (const [tag, v1id] of Object.entries(tags ?? {})) {
      if (!/^[a-f0-9]{64}$/.test(String(v1id))) throw new InvalidParameter(`invalid archive: repositories names a bad layer id ${JSON.stringify(v1id)}`);
      const list = byTop.get(v1id) ?? [];
      list.push(parseNormalizedNamed(`${repo}:${tag}`));
      byTop.set(v1id, list);
    }
  }
  const images: ArchiveImage[] = [];
  for (const [top, tags] of byTop) {
    const chain: Array<{ id: string; json: LegacyV1Json }> = [];
    const seen = new Set<string>();
    for (let id: string | undefined = top; id; ) {
      if (seen.has(id)) throw new InvalidParameter(`invalid archive: layer ${id} is its own ancestor`);
      seen.add(id);
      const json: LegacyV1Json = contents.json<LegacyV1Json>(`${id}/json`, 'layer description');
      chain.unshift({ id, json });
      id = typeof json.parent === 'string' && json.parent !== '' ? json.parent.replace(/^sha256:/, '') : undefined;
    }
    const label = `image ${top}`;
    const names = chain.map(({ id }) => `${id}/layer.tar`);
    const staged = names.map((n) => contents.layer(n, label));
    const topJson = chain[chain.length - 1].json;
    const config: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(topJson)) if (!V1_ONLY_FIELDS.includes(k)) config[k] = v;
    config.rootfs = { type: 'layers', diff_ids: staged.map((s) => s.diffId) };
    config.history = chain.map(({ json }) => {
      const entry: Record<string, unknown> = { created: json.created };
      const cmd = json.container_config?.Cmd;
      if (Array.isArray(cmd)) entry.created_by = cmd.join(' ');
      if (json.author) entry.author = json.author;
      if (json.comment) entry.comment = json.comment;
      return entry;
    });
    const configBytes = Buffer.from(JSON.stringify(config));
    images.push({ configBytes, config: parseImageConfig(configBytes), layers: staged, tags });
  }
  return images;
}

interface OciDescriptor {
  mediaType?: string;
  digest?: string;
  size?: number;
  annotations?: Record<string, string>;
  platform?: { os?: string; architecture?: string; variant?: string };
}

interface OciManifestOrIndex {
  mediaType?: string;
  manifests?: OciDescriptor[];
  config?: OciDescriptor;
  layers?: OciDescriptor[];
}

function blobName(digest: unknown, what: string): string {
  if (typeof digest !== 'string' || !/^sha256:[a-f0-9]{64}$/.test(digest)) throw new InvalidParameter(`invalid archive: ${what} has a bad digest ${JSON.stringify(digest)}`);
  return `blobs/sha256/${digest.slice(7)}`;
}

function verifiedBlob(contents: ArchiveContents, digest: string, what: string): Buffer {
  const name = blobName(digest, what);
  const bytes = contents.metadata.get(contents.resolve(name));
  if (!bytes) throw new InvalidParameter(`invalid archive: ${what} ${digest} is missing from the archive`);
  if (`sha256:${createHash('sha256').update(bytes).digest('hex')}` !== digest) throw new InvalidParameter(`invalid archive: ${what} ${digest} does not match its digest`);
  return bytes;
}

const ARCH = process.arch === 'x64' ? 'amd64' : process.arch;

function fromOciLayout(contents: ArchiveContents): ArchiveImage[] {
  const index = contents.json<OciManifestOrIndex>('index.json', 'OCI index');
  if (!index || !Array.isArray(index.manifests)) throw new InvalidParameter('invalid archive: index.json has no manifests');
  const images: ArchiveImage[] = [];
  const byConfig = new Map<string, ArchiveImage>();

  const manifestOf = (descriptor: OciDescriptor, depth: number): OciManifestOrIndex => {
    const bytes = verifiedBlob(contents, String(descriptor.digest), 'manifest');
    let doc: OciManifestOrIndex;
    try {
      doc = JSON.parse(bytes.toString('utf8')) as OciManifestOrIndex;
    } catch (err) {
      throw new InvalidParameter(`invalid archive: manifest ${descriptor.digest} is not JSON`, { cause: err });
    }
    if (Array.isArray(doc.manifests)) {
      if (depth > 4) throw new InvalidParameter('invalid archive: OCI indexes nest too deep');
      const candidates = doc.manifests.filter((m) => !m.platform || ((m.platform.os ?? 'linux') === 'linux' && (m.platform.architecture ?? ARCH) === ARCH));
      const present = candidates.filter((m) => {
        try {
          return contents.metadata.has(contents.resolve(blobName(m.digest, 'manifest')));
        } catch {
          return false;
        }
      });
      const chosen = present[0] ?? candidates[0];
      if (!chosen) throw new InvalidParameter(`invalid archive: index ${descriptor.digest} has no manifest for linux/${ARCH}`);
      return manifestOf(chosen, depth + 1);
    }
    return doc;
  };

  for (const descriptor of index.manifests) {
    const manifest = manifestOf(descriptor, 0);
    if (!manifest.config || !Array.isArray(manifest.layers)) throw new InvalidParameter(`invalid archive: manifest ${descriptor.digest} has no config or layers`);
    const configDigest = String(manifest.config.digest);
    const configBytes = verifiedBlob(contents, configDigest, 'image configuration');
    const tags: Reference[] = [];
    const named = descriptor.annotations?.['io.containerd.image.name'] ?? descriptor.annotations?.['org.opencontainers.image.ref.name'];
    if (named && (named.includes(':') || named.includes('/'))) {
      try {
        tags.push(parseNormalizedNamed(named));
      } catch {
        // A bare tag name without a repository cannot be placed; the image loads untagged.
      }
    }
    const existing = byConfig.get(configDigest);
    if (existing) {
      existing.tags.push(...tags);
      continue;
    }
    const config = parseImageConfig(configBytes);
    const label = `image ${configDigest}`;
    const names = manifest.layers.map((l) => blobName(l.digest, 'layer'));
    const staged = names.map((n) => contents.layer(n, label));
    checkLayers(label, config, staged, names);
    const image = { configBytes, config, layers: staged, tags };
    byConfig.set(configDigest, image);
    images.push(image);
  }
  return images;
}

/** The images an archive holds, each checked against its layers. */
export function imagesOf(contents: ArchiveContents): ArchiveImage[] {
  if (contents.metadata.has('manifest.json')) return fromDockerManifest(contents);
  if (contents.metadata.has('index.json')) return fromOciLayout(contents);
  if (contents.metadata.has('repositories')) return fromLegacyRepositories(contents);
  throw new InvalidParameter('invalid image archive: it has neither manifest.json, index.json nor repositories (is it an image saved with docker save?)');
}
