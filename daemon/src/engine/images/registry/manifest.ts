/**
 * Manifests as registries serve them: Docker schema 2 and OCI image manifests, Docker manifest lists and
 * OCI indexes, checked field by field (a malformed manifest is a clear error, not a crash), and the
 * choice of one platform's manifest from a list.
 */
import { createHash } from 'node:crypto';
import { InvalidParameter, NotFound } from '../../../errors.js';

export const MEDIA = {
  dockerManifest: 'application/vnd.docker.distribution.manifest.v2+json',
  dockerList: 'application/vnd.docker.distribution.manifest.list.v2+json',
  dockerConfig: 'application/vnd.docker.container.image.v1+json',
  dockerLayer: 'application/vnd.docker.image.rootfs.diff.tar',
  dockerLayerGzip: 'application/vnd.docker.image.rootfs.diff.tar.gzip',
  dockerForeignLayer: 'application/vnd.docker.image.rootfs.foreign.diff.tar.gzip',
  ociManifest: 'application/vnd.oci.image.manifest.v1+json',
  ociIndex: 'application/vnd.oci.image.index.v1+json',
  ociConfig: 'application/vnd.oci.image.config.v1+json',
  ociLayer: 'application/vnd.oci.image.layer.v1.tar',
  ociLayerGzip: 'application/vnd.oci.image.layer.v1.tar+gzip',
  ociLayerZstd: 'application/vnd.oci.image.layer.v1.tar+zstd',
  ociLayerNondistGzip: 'application/vnd.oci.image.layer.nondistributable.v1.tar+gzip',
  ociLayerNondist: 'application/vnd.oci.image.layer.nondistributable.v1.tar',
  ociLayerNondistZstd: 'application/vnd.oci.image.layer.nondistributable.v1.tar+zstd',
} as const;

const LAYER_TYPES = new Set<string>([
  MEDIA.dockerLayer,
  MEDIA.dockerLayerGzip,
  MEDIA.dockerForeignLayer,
  MEDIA.ociLayer,
  MEDIA.ociLayerGzip,
  MEDIA.ociLayerZstd,
  MEDIA.ociLayerNondist,
  MEDIA.ociLayerNondistGzip,
  MEDIA.ociLayerNondistZstd,
]);

export type LayerCompression = 'gzip' | 'zstd' | 'none';

export function compressionOf(mediaType: string): LayerCompression {
  if (mediaType.endsWith('+zstd')) return 'zstd';
  if (mediaType.endsWith('.gzip') || mediaType.endsWith('+gzip')) return 'gzip';
  return 'none';
}

export interface Platform {
  os: string;
  architecture: string;
  variant?: string;
  'os.version'?: string;
  'os.features'?: string[];
}

export interface Descriptor {
  mediaType: string;
  digest: string;
  size: number;
  urls?: string[];
  platform?: Platform;
  annotations?: Record<string, string>;
}

export interface ImageManifest {
  kind: 'image';
  mediaType: string;
  config: Descriptor;
  layers: Descriptor[];
}

export interface ManifestIndex {
  kind: 'index';
  mediaType: string;
  manifests: Descriptor[];
}

export type Manifest = ImageManifest | ManifestIndex;

export function sha256Digest(bytes: Buffer): string {
  return `sha256:${createHash('sha256').update(bytes).digest('hex')}`;
}

const DIGEST = /^sha256:[a-f0-9]{64}$/;

function descriptor(raw: unknown, what: string): Descriptor {
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) throw new InvalidParameter(`malformed manifest: ${what} is not an object`);
  const d = raw as Record<string, unknown>;
  if (typeof d.digest !== 'string' || !DIGEST.test(d.digest)) {
    if (typeof d.digest === 'string' && /^[a-z0-9]+:/.test(d.digest) && !d.digest.startsWith('sha256:')) {
      throw new InvalidParameter(`unsupported digest algorithm in ${what}: ${d.digest}`);
    }
    throw new InvalidParameter(`malformed manifest: ${what} has an invalid digest ${JSON.stringify(d.digest)}`);
  }
  if (typeof d.size !== 'number' || !Number.isSafeInteger(d.size) || d.size < 0) throw new InvalidParameter(`malformed manifest: ${what} has an invalid size ${JSON.stringify(d.size)}`);
  const out: Descriptor = { mediaType: typeof d.mediaType === 'string' ? d.mediaType : '', digest: d.digest, size: d.size };
  if (Array.isArray(d.urls)) out.urls = d.urls.filter((u): u is string => typeof u === 'string');
  if (d.platform && typeof d.platform === 'object') {
    const p = d.platform as Record<string, unknown>;
    out.platform = { os: String(p.os ?? ''), architecture: String(p.architecture ?? '') };
    if (typeof p.variant === 'string' && p.variant) out.platform.variant = p.variant;
    if (typeof p['os.version'] === 'string' && p['os.version']) out.platform['os.version'] = p['os.version'];
    if (Array.isArray(p['os.features'])) out.platform['os.features'] = p['os.features'].map(String);
  }
  if (d.annotations && typeof d.annotations === 'object') out.annotations = d.annotations as Record<string, string>;
  return out;
}

/**
 * Parses manifest bytes. The media type comes from the document itself when it says, else from the
 * Content-Type the registry sent; unknown types and the old schema 1 are refused with a clear message.
 */
export function parseManifest(bytes: Buffer, contentType: string): Manifest {
  let raw: Record<string, unknown>;
  try {
    raw = JSON.parse(bytes.toString('utf8')) as Record<string, unknown>;
  } catch (err) {
    throw new InvalidParameter(`malformed manifest: not JSON: ${(err as Error).message}`);
  }
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) throw new InvalidParameter('malformed manifest: not a JSON object');
  let mediaType = typeof raw.mediaType === 'string' && raw.mediaType !== '' ? raw.mediaType : contentType;
  if (raw.schemaVersion === 1 || mediaType.startsWith('application/vnd.docker.distribution.manifest.v1')) {
    throw new InvalidParameter('unsupported manifest format: Docker image manifest schema 1 is deprecated and not supported; push the image again with a current client');
  }
  if (raw.schemaVersion !== 2) throw new InvalidParameter(`malformed manifest: schemaVersion ${JSON.stringify(raw.schemaVersion)} (expected 2)`);
  if (mediaType === '' || mediaType === 'application/json' || mediaType === 'application/octet-stream') {
    // An OCI document may omit mediaType: tell by its shape.
    if (Array.isArray(raw.manifests)) mediaType = MEDIA.ociIndex;
    else if (raw.config) mediaType = MEDIA.ociManifest;
  }
  switch (mediaType) {
    case MEDIA.dockerList:
    case MEDIA.ociIndex: {
      if (!Array.isArray(raw.manifests)) throw new InvalidParameter('malformed manifest list: manifests is not a list');
      return { kind: 'index', mediaType, manifests: raw.manifests.map((m, i) => descriptor(m, `manifests[${i}]`)) };
    }
    case MEDIA.dockerManifest:
    case MEDIA.ociManifest: {
      const config = descriptor(raw.config, 'config');
      if (!Array.isArray(raw.layers)) throw new InvalidParameter('malformed manifest: layers is not a list');
      const layers = raw.layers.map((l, i) => descriptor(l, `layers[${i}]`));
      for (const [i, layer] of layers.entries()) {
        if (!LAYER_TYPES.has(layer.mediaType)) throw new InvalidParameter(`unsupported layer media type ${JSON.stringify(layer.mediaType)} (layers[${i}])`);
      }
      if (config.mediaType !== MEDIA.dockerConfig && config.mediaType !== MEDIA.ociConfig) {
        throw new InvalidParameter(`unsupported image config media type ${JSON.stringify(config.mediaType)}: not a container image (an artifact?)`);
      }
      return { kind: 'image', mediaType, config, layers };
    }
    default:
      throw new InvalidParameter(`unsupported manifest media type ${JSON.stringify(mediaType)}`);
  }
}

/** This host's platform: linux and the Go name of the CPU (amd64, arm64 with variant v8, arm v7...). */
export function hostPlatform(): Platform {
  switch (process.arch) {
    case 'x64':
      return { os: 'linux', architecture: 'amd64' };
    case 'arm64':
      return { os: 'linux', architecture: 'arm64', variant: 'v8' };
    case 'arm':
      return { os: 'linux', architecture: 'arm', variant: `v${(process.config.variables as { arm_version?: string }).arm_version ?? '7'}` };
    case 'ia32':
      return { os: 'linux', architecture: '386' };
    default:
      return { os: 'linux', architecture: process.arch };
  }
}

/** Parses `os[/arch[/variant]]` as the `platform` query parameter gives it; defaults from this host. */
export function parsePlatform(text: string): Platform {
  const parts = text.trim().toLowerCase().split('/');
  if (parts.length > 3 || parts.some((p) => p === '')) throw new InvalidParameter(`invalid platform ${JSON.stringify(text)}: expected os[/arch[/variant]]`);
  const host = hostPlatform();
  const os = parts[0];
  let architecture = parts[1] ?? host.architecture;
  let variant = parts[2] ?? (parts[1] === undefined ? host.variant : undefined);
  // Docker's normalisation of architecture names.
  if (architecture === 'x86_64' || architecture === 'x86-64') architecture = 'amd64';
  if (architecture === 'aarch64') architecture = 'arm64';
  if (architecture === 'arm64' && (variant === undefined || variant === '8')) variant = 'v8';
  if (architecture === 'armhf') [architecture, variant] = ['arm', 'v7'];
  if (architecture === 'armel') [architecture, variant] = ['arm', 'v6'];
  if (architecture === 'arm' && variant === undefined) variant = 'v7';
  if (architecture === 'arm' && variant && /^\d$/.test(variant)) variant = `v${variant}`;
  return { os, architecture, ...(variant ? { variant } : {}) };
}

export function formatPlatform(p: Platform): string {
  return [p.os, p.architecture, p.variant].filter(Boolean).join('/');
}

/**
 * Picks a platform's manifest from a list: same os and architecture, the variant equal when asked
 * (arm64's v8 matches a missing variant), else the closest lower arm variant (v7 runs v6, v5).
 */
export function selectManifest(index: ManifestIndex, want: Platform): Descriptor {
  const candidates = index.manifests.filter(
    (m) =>
      m.platform &&
      m.platform.os === want.os &&
      m.platform.architecture === want.architecture &&
      (m.mediaType === '' || m.mediaType === MEDIA.dockerManifest || m.mediaType === MEDIA.ociManifest),
  );
  const variantOf = (p: Platform) => (p.architecture === 'arm64' && !p.variant ? 'v8' : p.variant);
  const wantVariant = variantOf(want);
  const exact = candidates.find((m) => variantOf(m.platform!) === wantVariant);
  if (exact) return exact;
  if (want.architecture === 'arm' && wantVariant) {
    const level = Number(wantVariant.slice(1));
    const lower = candidates
      .filter((m) => m.platform!.variant && Number(m.platform!.variant.slice(1)) <= level)
      .sort((a, b) => Number(b.platform!.variant!.slice(1)) - Number(a.platform!.variant!.slice(1)));
    if (lower[0]) return lower[0];
  }
  const noVariant = candidates.find((m) => !m.platform!.variant);
  if (noVariant && !want.variant) return noVariant;
  if (candidates.length > 0 && want.variant === undefined) return candidates[0];
  const available = index.manifests.filter((m) => m.platform).map((m) => formatPlatform(m.platform!)).join(', ');
  throw new NotFound(`no matching manifest for ${formatPlatform(want)} in the manifest list entries${available ? ` (available: ${available})` : ''}`);
}

/** Checks that fetched bytes are what the digest names. */
export function verifyDigest(bytes: Buffer, digest: string, what: string): void {
  const actual = sha256Digest(bytes);
  if (actual !== digest) throw new InvalidParameter(`${what}: digest mismatch: the content has ${actual}, expected ${digest}`);
}
