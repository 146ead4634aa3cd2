/**
 * Plugins through a registry: push (one gzip layer of the plugin's root and its config as a blob of the
 * plugin config media type, in a Docker schema 2 manifest), the privileges a remote plugin asks for, and
 * pull (the manifest, its plugin config and layers, every digest checked, unpacked into a new plugin).
 */
import { createHash } from 'node:crypto';
import { PassThrough, Transform, Writable, type Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createGunzip, createGzip } from 'node:zlib';
import { EngineError, InvalidParameter, ToolFailure } from '../../errors.js';
import type { ToolsHost } from '../../host/host.js';
import { parseReference, type Reference } from '../reference.js';
import type { AuthConfig } from '../images/registry/auth.js';
import type { RegistryClient, Repository } from '../images/registry/client.js';
import type { PluginConfig } from './manager.js';

export const PLUGIN_CONFIG_MEDIA_TYPE = 'application/vnd.docker.plugin.v1+json';
const SCHEMA2 = 'application/vnd.docker.distribution.manifest.v2+json';
const OCI_MANIFEST = 'application/vnd.oci.image.manifest.v1+json';
const LAYER_GZIP = 'application/vnd.docker.image.rootfs.diff.tar.gzip';

export type Emit = (message: Record<string, unknown>) => void;

export interface Privilege {
  Name: string;
  Description: string;
  Value: string[];
}

/** The privileges a plugin's config asks for, as dockerd lists them. */
export function privilegesOf(config: PluginConfig): Privilege[] {
  const out: Privilege[] = [];
  if (config.Network?.Type) out.push({ Name: 'network', Description: 'permissions to access a network', Value: [config.Network.Type] });
  if (config.IpcHost) out.push({ Name: 'host ipc namespace', Description: 'allow access to host ipc namespace', Value: ['true'] });
  if (config.PidHost) out.push({ Name: 'host pid namespace', Description: 'allow access to host pid namespace', Value: ['true'] });
  const mounts = (config.Mounts ?? []).map((m) => m.Source).filter((s): s is string => !!s);
  if (mounts.length > 0) out.push({ Name: 'mount', Description: 'host path to mount', Value: mounts });
  const devices = (config.Linux?.Devices ?? []).map((d) => d.Path).filter(Boolean);
  if (devices.length > 0) out.push({ Name: 'device', Description: 'host device to access', Value: devices });
  if (config.Linux?.AllowAllDevices) out.push({ Name: 'allow-all-devices', Description: 'allow \'rwm\' access to all devices', Value: ['true'] });
  const caps = config.Linux?.Capabilities ?? [];
  if (caps.length > 0) out.push({ Name: 'capabilities', Description: 'list of additional capabilities required', Value: [...caps] });
  return out;
}

/** Counts and hashes what passes. */
class Digester extends Transform {
  private readonly hash = createHash('sha256');
  size = 0;
  override _transform(chunk: Buffer, _enc: BufferEncoding, done: (err?: Error | null, data?: Buffer) => void): void {
    this.hash.update(chunk);
    this.size += chunk.length;
    done(null, chunk);
  }
  private result: string | undefined;
  get digest(): string {
    this.result ??= `sha256:${this.hash.digest('hex')}`;
    return this.result;
  }
}

function sha256(bytes: Buffer): string {
  return `sha256:${createHash('sha256').update(bytes).digest('hex')}`;
}

function tagOf(ref: Reference): string {
  return ref.tag ?? 'latest';
}

export async function pushPlugin(
  registry: RegistryClient,
  name: string,
  rootfs: string,
  config: PluginConfig,
  auth: AuthConfig | undefined,
  emit: Emit,
  tools: PluginTools,
  signal?: AbortSignal,
): Promise<void> {
  const ref = parseReference(name);
  const tag = tagOf(ref);
  emit({ status: `The push refers to repository [${ref.name}]` });
  const repo = await registry.repository(ref.domain, ref.path, auth, ['pull', 'push'], signal);
  // The layer: the root as a tar (the Host's tar), hashed before (its diff id) and after gzip (its digest), streamed up.
  const raw = new Digester();
  const packed = new Digester();
  const body = new PassThrough();
  const packing = pipeline(tools.packFolder(rootfs, signal), raw, createGzip(), packed, body);
  try {
    await Promise.all([repo.uploadBlob(body, () => packed.digest), packing]);
  } catch (err) {
    if (err instanceof ToolFailure) throw new EngineError(`packing the plugin's root: ${err.failure.detail}`, { cause: err });
    throw err;
  }
  emit({ status: 'Pushed', id: packed.digest.slice(7, 19) });
  const configBytes = Buffer.from(JSON.stringify({ ...config, rootfs: { type: 'layers', diff_ids: [raw.digest] } }));
  const configDigest = sha256(configBytes);
  if (!(await repo.blobExists(configDigest))) await repo.uploadSmallBlob(configBytes, configDigest);
  const manifest = Buffer.from(
    JSON.stringify({
      schemaVersion: 2,
      mediaType: SCHEMA2,
      config: { mediaType: PLUGIN_CONFIG_MEDIA_TYPE, size: configBytes.length, digest: configDigest },
      layers: [{ mediaType: LAYER_GZIP, size: packed.size, digest: packed.digest }],
    }),
  );
  await repo.putManifest(tag, manifest, SCHEMA2);
  emit({ status: `${tag}: digest: ${sha256(manifest)} size: ${manifest.length}` });
}

interface Fetched {
  repo: Repository;
  ref: Reference;
  config: PluginConfig;
  layers: Array<{ digest: string; mediaType: string }>;
  digest: string;
}

/** Reads a remote plugin's manifest and config (the config must be of the plugin media type). */
export async function fetchPlugin(registry: RegistryClient, remote: string, auth: AuthConfig | undefined, signal?: AbortSignal): Promise<Fetched> {
  const ref = parseReference(remote);
  const repo = await registry.repository(ref.domain, ref.path, auth, ['pull'], signal);
  const reference = ref.digest ?? tagOf(ref);
  const { bytes, mediaType } = await repo.getManifest(reference);
  const digest = sha256(bytes);
  if (ref.digest && ref.digest !== digest) throw new EngineError(`manifest of ${remote}: digest ${digest} does not match ${ref.digest}`);
  let manifest: any;
  try {
    manifest = JSON.parse(bytes.toString('utf8'));
  } catch {
    throw new EngineError(`manifest of ${remote} is not JSON`);
  }
  const type = manifest.mediaType ?? mediaType;
  if (type !== SCHEMA2 && type !== OCI_MANIFEST) throw new InvalidParameter(`${remote} is not a plugin: its manifest is of type ${type || 'unknown'}`);
  if (manifest.config?.mediaType !== PLUGIN_CONFIG_MEDIA_TYPE) {
    throw new InvalidParameter(`${remote} is not a plugin: its config is of type ${manifest.config?.mediaType ?? 'unknown'}, not ${PLUGIN_CONFIG_MEDIA_TYPE}`);
  }
  const blob = await repo.openBlob(manifest.config.digest);
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const c of blob) {
    size += (c as Buffer).length;
    if (size > 4 << 20) throw new EngineError(`the config of ${remote} is larger than 4 MiB`);
    chunks.push(c as Buffer);
  }
  const configBytes = Buffer.concat(chunks);
  if (sha256(configBytes) !== manifest.config.digest) throw new EngineError(`the config of ${remote} does not match its digest ${manifest.config.digest}`);
  const config = JSON.parse(configBytes.toString('utf8')) as PluginConfig;
  const layers = (manifest.layers ?? []).map((l: any) => ({ digest: String(l.digest), mediaType: String(l.mediaType ?? '') }));
  return { repo, ref, config, layers, digest };
}

/** What plugins need of the Host's tools: a folder packed as a tar, and a tar unpacked into a folder. */
export type PluginTools = Pick<ToolsHost, 'packFolder' | 'unpackInto'>;

/** Unpacks the fetched plugin's layers (digests checked) into `rootfs`. */
export async function unpackLayers(fetched: Fetched, rootfs: string, emit: Emit, tools: PluginTools): Promise<void> {
  for (const layer of fetched.layers) {
    if (!/^sha256:[0-9a-f]{64}$/.test(layer.digest)) throw new EngineError(`invalid layer digest ${layer.digest}`);
    emit({ status: 'Downloading', id: layer.digest.slice(7, 19) });
    const blob: Readable = await fetched.repo.openBlob(layer.digest);
    const check = new Digester();
    const gzip = !layer.mediaType.endsWith('.tar') && !layer.mediaType.endsWith('tar');
    const tar = new PassThrough();
    // tar may end at the archive's end marker before the blob does: what follows is still read, for the digest.
    const forward = new Writable({
      write(chunk: Buffer, _enc, done) {
        if (tar.destroyed || tar.writableEnded || tar.write(chunk)) return done();
        const go = () => {
          tar.off('drain', go);
          tar.off('close', go);
          done();
        };
        tar.once('drain', go);
        tar.once('close', go);
      },
      final(done) {
        if (!tar.destroyed) tar.end();
        done();
      },
    });
    const feeding = gzip ? pipeline(blob, check, createGunzip(), forward) : pipeline(blob, check, forward);
    feeding.catch(() => undefined);
    try {
      await Promise.all([feeding, tools.unpackInto(rootfs, tar)]);
    } catch (err) {
      blob.destroy();
      tar.destroy();
      if (err instanceof ToolFailure) throw new EngineError(`unpacking layer ${layer.digest}: ${err.failure.detail}`, { cause: err });
      throw err;
    }
    if (check.digest !== layer.digest) throw new EngineError(`layer ${layer.digest} does not match its digest (got ${check.digest})`);
    emit({ status: 'Download complete', id: layer.digest.slice(7, 19) });
  }
}
