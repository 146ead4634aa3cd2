/**
 * A local registry for pull tests: Debian's docker-registry on 127.0.0.1 with its storage in a temporary
 * folder, filled through the distribution API with an image from a `docker save` archive.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { createReadStream, mkdirSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import { gzipSync } from 'node:zlib';
import tar from 'tar-stream';

export interface Registry {
  readonly address: string;
  stop(): Promise<void>;
}

export async function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
}

export async function startRegistry(dir: string): Promise<Registry> {
  const port = await freePort();
  mkdirSync(path.join(dir, 'storage'), { recursive: true });
  const config = path.join(dir, 'config.yml');
  writeFileSync(
    config,
    `version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: ${path.join(dir, 'storage')}\nhttp:\n  addr: 127.0.0.1:${port}\n`,
  );
  const child: ChildProcess = spawn('docker-registry', ['serve', config], { stdio: 'ignore' });
  const address = `127.0.0.1:${port}`;
  const deadline = Date.now() + 10_000;
  for (;;) {
    try {
      const res = await fetch(`http://${address}/v2/`);
      if (res.ok) break;
    } catch {
      /* not up yet */
    }
    if (Date.now() > deadline) throw new Error('docker-registry did not start');
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    address,
    stop: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null) return resolve();
        child.once('exit', () => resolve());
        child.kill('SIGTERM');
      }),
  };
}

async function uploadBlob(registry: string, repo: string, data: Buffer): Promise<string> {
  const digest = `sha256:${createHash('sha256').update(data).digest('hex')}`;
  const start = await fetch(`http://${registry}/v2/${repo}/blobs/uploads/`, { method: 'POST' });
  if (start.status !== 202) throw new Error(`blob upload start: ${start.status}`);
  const location = new URL(start.headers.get('location')!, `http://${registry}`);
  location.searchParams.set('digest', digest);
  const put = await fetch(location, { method: 'PUT', body: new Uint8Array(data), headers: { 'Content-Type': 'application/octet-stream' } });
  if (put.status !== 201) throw new Error(`blob upload: ${put.status} ${await put.text()}`);
  return digest;
}

/** Pushes the single-platform image of a `docker save` archive as repo:tag, its layers gzipped as registries hold them. */
export async function pushArchive(registry: string, archive: string, repo: string, tag: string): Promise<void> {
  const files = new Map<string, Buffer>();
  const extract = tar.extract();
  extract.on('entry', (header, stream, next) => {
    const chunks: Buffer[] = [];
    stream.on('data', (c: unknown) => chunks.push(c as Buffer));
    stream.on('end', () => {
      if (header.type === 'file') files.set(header.name, Buffer.concat(chunks));
      next();
    });
  });
  await pipeline(createReadStream(archive), extract);
  const manifest = JSON.parse(files.get('manifest.json')!.toString())[0] as { Config: string; Layers: string[] };
  const config = files.get(manifest.Config)!;
  const configDigest = await uploadBlob(registry, repo, config);
  const layers = [];
  for (const layerPath of manifest.Layers) {
    const data = gzipSync(files.get(layerPath)!);
    layers.push({ mediaType: 'application/vnd.docker.image.rootfs.diff.tar.gzip', size: data.length, digest: await uploadBlob(registry, repo, data) });
  }
  const body = JSON.stringify({
    schemaVersion: 2,
    mediaType: 'application/vnd.docker.distribution.manifest.v2+json',
    config: { mediaType: 'application/vnd.docker.container.image.v1+json', size: config.length, digest: configDigest },
    layers,
  });
  const res = await fetch(`http://${registry}/v2/${repo}/manifests/${tag}`, {
    method: 'PUT',
    body,
    headers: { 'Content-Type': 'application/vnd.docker.distribution.manifest.v2+json' },
  });
  if (res.status !== 201) throw new Error(`manifest put: ${res.status} ${await res.text()}`);
}
