/**
 * What a pull does with what a registry serves: multi-platform indexes (the host's platform by default,
 * `platform=` for another), zstd and gzip layers, all tags of a repository, distribution inspect, and
 * the failures: a blob whose bytes do not match its digest, malformed manifests, unknown media types,
 * a registry that is down, and a pull cancelled by its client. None of them leaves an image or a staged
 * layer behind, and the daemon keeps serving.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { gunzipSync, gzipSync } from 'node:zlib';
import { tarBuffer } from './fixtures/archives.js';
import { buildBusyboxRootfs, busyboxConfig } from './fixtures/busybox.js';
import { eventually, startEngine, type Engine } from './harness.js';
import { corruptBlob, digestOf, freePort, getFromRegistry, haveRegistry, putBlob, putManifest, startRegistry, type TestRegistry } from './registry-support.js';

const skip = haveRegistry() ? false : 'docker-registry is not installed';
const HOST_ARCH = process.arch === 'x64' ? 'amd64' : process.arch;
const OCI_MANIFEST = 'application/vnd.oci.image.manifest.v1+json';
const OCI_INDEX = 'application/vnd.oci.image.index.v1+json';
const DOCKER_MANIFEST = 'application/vnd.docker.distribution.manifest.v2+json';

async function gunzipped(blob: Buffer): Promise<Buffer> {
  return gunzipSync(blob);
}

function lines(text: string): Array<Record<string, any>> {
  return text
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => JSON.parse(l) as Record<string, any>);
}

interface Layer {
  blob: Buffer;
  diffId: string;
  mediaType: string;
}

describe('registry: what pulls make of registry content', { skip }, () => {
  let engine: Engine;
  let registry: TestRegistry;
  let busyboxLayer: Layer;

  const pull = (image: string, tag: string, extra = '') =>
    engine.request('POST', `/v1.44/images/create?fromImage=${encodeURIComponent(image)}&tag=${encodeURIComponent(tag)}${extra}`, { timeoutMs: 120_000 });
  const stagingEntries = () => readdirSync(path.join(engine.dataRoot, 'image', 'staging'));
  const layerDirs = () => readdirSync(path.join(engine.dataRoot, 'image', 'layers')).sort();

  /** Pushes an image of the given layers (busybox first) with a config for `arch`; returns its manifest. */
  async function pushImage(repo: string, tag: string | undefined, layers: Layer[], config: Record<string, unknown>, mediaType = OCI_MANIFEST) {
    for (const l of layers) await putBlob(registry, repo, l.blob);
    const configBytes = Buffer.from(JSON.stringify({ ...config, rootfs: { type: 'layers', diff_ids: layers.map((l) => l.diffId) } }));
    await putBlob(registry, repo, configBytes);
    const manifest = {
      schemaVersion: 2,
      mediaType,
      config: { mediaType: mediaType === OCI_MANIFEST ? 'application/vnd.oci.image.config.v1+json' : 'application/vnd.docker.container.image.v1+json', digest: digestOf(configBytes), size: configBytes.length },
      layers: layers.map((l) => ({ mediaType: l.mediaType, digest: digestOf(l.blob), size: l.blob.length })),
    };
    const put = await putManifest(registry, repo, tag ?? digestOf(Buffer.from(JSON.stringify(manifest))), manifest, mediaType);
    return { ...put, imageId: digestOf(configBytes), mediaType };
  }

  async function extraLayer(files: Record<string, string | Buffer>, compression: 'gzip' | 'zstd'): Promise<Layer> {
    const tar = await tarBuffer(Object.entries(files).map(([name, content]) => ({ name, content, type: 'file' as const })));
    const blob = compression === 'gzip' ? gzipSync(tar) : spawnSync('zstd', ['-c', '-q'], { input: tar, maxBuffer: 1 << 28 }).stdout;
    return { blob, diffId: digestOf(tar), mediaType: compression === 'gzip' ? 'application/vnd.oci.image.layer.v1.tar+gzip' : 'application/vnd.oci.image.layer.v1.tar+zstd' };
  }

  before(async () => {
    registry = await startRegistry();
    engine = await startEngine();
    const rootfs = path.join(engine.root, 'rootfs.tar');
    const hex = await buildBusyboxRootfs(rootfs);
    busyboxLayer = { blob: gzipSync(readFileSync(rootfs)), diffId: `sha256:${hex}`, mediaType: 'application/vnd.oci.image.layer.v1.tar+gzip' };
  });
  after(async () => {
    await engine?.cleanup();
    await registry?.stop();
  });

  it('a multi-platform index pulls this host\'s platform, and platform= selects another', async () => {
    const base = busyboxConfig(busyboxLayer.diffId.slice(7));
    const amd = await pushImage('multi', undefined, [busyboxLayer], { ...base, architecture: HOST_ARCH });
    const arm = await pushImage('multi', undefined, [busyboxLayer], { ...base, architecture: 'arm64', variant: 'v8' });
    const armv7 = await pushImage('multi', undefined, [busyboxLayer], { ...base, architecture: 'arm', variant: 'v7' });
    const index = {
      schemaVersion: 2,
      mediaType: OCI_INDEX,
      manifests: [
        { mediaType: OCI_MANIFEST, digest: arm.digest, size: arm.size, platform: { os: 'linux', architecture: 'arm64', variant: 'v8' } },
        { mediaType: OCI_MANIFEST, digest: armv7.digest, size: armv7.size, platform: { os: 'linux', architecture: 'arm', variant: 'v7' } },
        { mediaType: OCI_MANIFEST, digest: amd.digest, size: amd.size, platform: { os: 'linux', architecture: HOST_ARCH } },
      ],
    };
    const { digest: indexDigest } = await putManifest(registry, 'multi', 'v1', index, OCI_INDEX);
    const name = `${registry.host}/multi:v1`;

    const out = await engine.dockerOk(['pull', name], { timeoutMs: 120_000 });
    assert.match(out, new RegExp(`Digest: ${indexDigest}`));
    assert.equal((await engine.dockerOk(['image', 'inspect', '-f', '{{.Id}} {{.Architecture}}', name])).trim(), `${amd.imageId} ${HOST_ARCH}`);
    const digests = JSON.parse(await engine.dockerOk(['image', 'inspect', '-f', '{{json .RepoDigests}}', name]));
    assert.deepEqual(digests, [`${registry.host}/multi@${indexDigest}`]);

    const res = await pull(`${registry.host}/multi`, 'v1', '&platform=linux/arm64');
    assert.equal(res.status, 200, res.text);
    assert.ok(lines(res.text).some((l) => l.status === 'Already exists'), 'the shared layer is not downloaded again');
    assert.equal((await engine.dockerOk(['image', 'inspect', '-f', '{{.Id}} {{.Architecture}} {{.Variant}}', name])).trim(), `${arm.imageId} arm64 v8`);

    await engine.dockerOk(['pull', '--platform', 'linux/arm/v7', name], { timeoutMs: 120_000 });
    assert.equal((await engine.dockerOk(['image', 'inspect', '-f', '{{.Id}}', name])).trim(), armv7.imageId);

    const none = await pull(`${registry.host}/multi`, 'v1', '&platform=linux/s390x');
    assert.equal(none.status, 404);
    assert.match(none.json().message, /no matching manifest for linux\/s390x/);

    const inspect = await engine.request('GET', `/v1.44/distribution/${encodeURIComponent(name)}/json`);
    assert.equal(inspect.status, 200, inspect.text);
    assert.deepEqual(inspect.json().Descriptor, { mediaType: OCI_INDEX, digest: indexDigest, size: Buffer.byteLength(JSON.stringify(index)) });
    assert.deepEqual(inspect.json().Platforms, [
      { os: 'linux', architecture: 'arm64', variant: 'v8' },
      { os: 'linux', architecture: 'arm', variant: 'v7' },
      { os: 'linux', architecture: HOST_ARCH },
    ]);
  });

  it('distribution inspect of a single manifest reads the platform from its configuration', async () => {
    const single = await pushImage('single', 'v1', [busyboxLayer], busyboxConfig(busyboxLayer.diffId.slice(7)), DOCKER_MANIFEST);
    const res = await engine.request('GET', `/v1.44/distribution/${encodeURIComponent(`${registry.host}/single:v1`)}/json`);
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(res.json(), { Descriptor: { mediaType: DOCKER_MANIFEST, digest: single.digest, size: single.size }, Platforms: [{ architecture: HOST_ARCH, os: 'linux' }] });
    const missing = await engine.request('GET', `/v1.44/distribution/${encodeURIComponent(`${registry.host}/single:nope`)}/json`);
    assert.equal(missing.status, 404);
  });

  it('gzip and zstd layers unpack into a runnable image', async () => {
    const zstdLayer = await extraLayer({ 'zstd.txt': 'from a zstd layer\n' }, 'zstd');
    const gzipLayer = await extraLayer({ 'gzip.txt': 'from a gzip layer\n' }, 'gzip');
    await pushImage('mixed', 'v1', [busyboxLayer, zstdLayer, gzipLayer], busyboxConfig(busyboxLayer.diffId.slice(7)));
    const out = await engine.dockerOk(['run', '--rm', `${registry.host}/mixed:v1`, 'cat', '/zstd.txt', '/gzip.txt'], { timeoutMs: 120_000 });
    assert.equal(out, 'from a zstd layer\nfrom a gzip layer\n');
    const layers = JSON.parse(await engine.dockerOk(['image', 'inspect', '-f', '{{json .RootFS.Layers}}', `${registry.host}/mixed:v1`]));
    assert.deepEqual(layers, [busyboxLayer.diffId, zstdLayer.diffId, gzipLayer.diffId]);
  });

  it('pushing a pulled image reuses its original blobs (mounted, not recompressed), zstd included', async () => {
    // Compressed at another level than the engine's own gzip: a recompression would change the digests.
    const tar = await tarBuffer([{ name: 'reuse.txt', content: 'kept as pulled\n', type: 'file' }]);
    const gzipped: Layer = { blob: gzipSync(tar, { level: 1 }), diffId: digestOf(tar), mediaType: 'application/vnd.oci.image.layer.v1.tar+gzip' };
    const zstdLayer = await extraLayer({ 'reuse-zstd.txt': 'zstd as pulled\n' }, 'zstd');
    const busyboxFast: Layer = { ...busyboxLayer, blob: gzipSync(await gunzipped(busyboxLayer.blob), { level: 1 }) };
    await pushImage('reuse/source', 'v1', [busyboxFast, gzipped, zstdLayer], busyboxConfig(busyboxLayer.diffId.slice(7)));
    await engine.dockerOk(['pull', `${registry.host}/reuse/source:v1`], { timeoutMs: 120_000 });
    await engine.dockerOk(['tag', `${registry.host}/reuse/source:v1`, `${registry.host}/reuse/copy:v1`]);
    const out = await engine.dockerOk(['push', `${registry.host}/reuse/copy:v1`], { timeoutMs: 120_000 });
    assert.match(out, /Mounted from reuse\/source/);
    assert.doesNotMatch(out, /Pushed/);
    const manifest = JSON.parse((await getFromRegistry(registry, '/v2/reuse/copy/manifests/v1', OCI_MANIFEST + ', ' + DOCKER_MANIFEST)).body.toString());
    const pushed = manifest.layers.map((l: { digest: string; mediaType: string }) => [l.digest, l.mediaType]);
    assert.deepEqual(pushed.slice(1), [gzipped, zstdLayer].map((l) => [digestOf(l.blob), l.mediaType]));
    // The busybox layer is known in this registry as two blobs (pulled from other repositories earlier): either is reused.
    assert.ok([digestOf(busyboxFast.blob), digestOf(busyboxLayer.blob)].includes(pushed[0][0]), `busybox layer pushed as ${pushed[0][0]}`);
  });

  it('an empty tag pulls every tag of the repository', async () => {
    const config = busyboxConfig(busyboxLayer.diffId.slice(7));
    await pushImage('alltags', 'a', [busyboxLayer], config);
    await pushImage('alltags', 'b', [busyboxLayer], { ...config, created: '2024-05-05T00:00:00Z' });
    const res = await pull(`${registry.host}/alltags`, '');
    assert.equal(res.status, 200, res.text);
    const tags = (await engine.dockerOk(['images', `${registry.host}/alltags`, '--format', '{{.Tag}}'])).trim().split('\n').sort();
    assert.deepEqual(tags, ['a', 'b']);
    assert.match(lines(res.text).at(-1)!.status, /^Status: Downloaded newer image for 127\.0\.0\.1:\d+\/alltags$/);
  });

  it('a blob whose content does not match its digest fails the pull in-band and stores nothing', async () => {
    const bad = await extraLayer({ 'data.bin': randomBytes(256 * 1024) }, 'gzip');
    await pushImage('corrupt', 'v1', [busyboxLayer, bad], busyboxConfig(busyboxLayer.diffId.slice(7)));
    const flipped = Buffer.from(bad.blob);
    flipped[flipped.length >> 1] ^= 0xff;
    await corruptBlob(registry, digestOf(bad.blob), flipped);
    const layersBefore = layerDirs();
    const imagesBefore = (await engine.dockerOk(['images', '-q', '--no-trunc'])).trim();
    const res = await pull(`${registry.host}/corrupt`, 'v1');
    assert.equal(res.status, 200);
    const last = lines(res.text).at(-1)!;
    assert.match(last.error, /verification failed for digest|digest/);
    assert.equal(last.errorDetail.message, last.error);
    assert.equal((await engine.dockerOk(['images', '-q', '--no-trunc'])).trim(), imagesBefore);
    assert.deepEqual(layerDirs(), layersBefore);
    await eventually(() => stagingEntries().length === 0);
    const cli = await engine.docker(['pull', `${registry.host}/corrupt:v1`]);
    assert.notEqual(cli.code, 0);
    assert.match(cli.stderr + cli.stdout, /verification failed/);
  });

  it('a registry that is down is a clear error and the daemon keeps serving', async () => {
    const port = await freePort();
    const res = await pull(`127.0.0.1:${port}/nothing`, 'latest');
    assert.ok(res.status >= 500, `status ${res.status}`);
    assert.match(res.json().message, new RegExp(`cannot reach the registry 127\\.0\\.0\\.1:${port}.*connection refused`));
    assert.equal((await engine.request('GET', '/_ping')).status, 200);
  });

  describe('with a registry that serves bad answers', () => {
    let fake: http.Server;
    let fakeHost: string;
    let slowSocketsClosed = 0;
    const big = randomBytes(6 * 1024 * 1024);
    const bigDigest = digestOf(big);
    const configBytes = Buffer.from(JSON.stringify({ ...busyboxConfig('0'.repeat(64)), rootfs: { type: 'layers', diff_ids: [`sha256:${'1'.repeat(64)}`] } }));
    const slowManifest = JSON.stringify({
      schemaVersion: 2,
      mediaType: DOCKER_MANIFEST,
      config: { mediaType: 'application/vnd.docker.container.image.v1+json', digest: digestOf(configBytes), size: configBytes.length },
      layers: [{ mediaType: 'application/vnd.docker.image.rootfs.diff.tar.gzip', digest: bigDigest, size: big.length }],
    });

    before(async () => {
      fake = http.createServer((req, res) => {
        const url = req.url ?? '';
        if (url === '/v2/') return res.writeHead(200).end('{}');
        if (url === '/v2/notjson/manifests/v1') return res.writeHead(200, { 'Content-Type': DOCKER_MANIFEST }).end('{"schemaVersion": 2, "layers": [');
        if (url === '/v2/weird/manifests/v1') return res.writeHead(200, { 'Content-Type': 'application/vnd.example.thing+json' }).end('{"schemaVersion": 2, "mediaType": "application/vnd.example.thing+json"}');
        if (url === '/v2/nolayers/manifests/v1') {
          return res.writeHead(200, { 'Content-Type': DOCKER_MANIFEST }).end(JSON.stringify({ schemaVersion: 2, mediaType: DOCKER_MANIFEST, config: { digest: 'sha256:zz', size: 1 } }));
        }
        if (url === '/v2/slow/manifests/v1') return res.writeHead(200, { 'Content-Type': DOCKER_MANIFEST }).end(slowManifest);
        if (url === `/v2/slow/blobs/${digestOf(configBytes)}`) return res.writeHead(200).end(configBytes);
        if (url === `/v2/slow/blobs/${bigDigest}`) {
          // A gzip stream that starts and then stalls: the client goes away meanwhile.
          res.writeHead(200, { 'Content-Length': String(big.length) });
          res.write(gzipSync(Buffer.alloc(1024 * 1024)).subarray(0, 64 * 1024));
          res.write(big.subarray(0, 1024 * 1024));
          res.once('close', () => slowSocketsClosed++);
          return;
        }
        res.writeHead(404, { 'Content-Type': 'application/json' }).end('{"errors":[{"code":"MANIFEST_UNKNOWN","message":"manifest unknown"}]}');
      });
      await new Promise<void>((resolve) => fake.listen(0, '127.0.0.1', () => resolve()));
      fakeHost = `127.0.0.1:${(fake.address() as AddressInfo).port}`;
    });
    after(async () => {
      fake.closeAllConnections();
      await new Promise((r) => fake.close(r));
    });

    it('a manifest that is not JSON is a 400 that says so', async () => {
      const res = await pull(`${fakeHost}/notjson`, 'v1');
      assert.equal(res.status, 400);
      assert.match(res.json().message, /malformed manifest: not JSON/);
    });

    it('an unknown manifest media type is a 400 naming it', async () => {
      const res = await pull(`${fakeHost}/weird`, 'v1');
      assert.equal(res.status, 400);
      assert.match(res.json().message, /unsupported manifest media type "application\/vnd\.example\.thing\+json"/);
    });

    it('a manifest with a bad descriptor is a 400', async () => {
      const res = await pull(`${fakeHost}/nolayers`, 'v1');
      assert.equal(res.status, 400);
      assert.match(res.json().message, /malformed manifest: config has an invalid digest/);
    });

    it('a pull cancelled by its client leaves no image and no staged layer', async () => {
      const layersBefore = layerDirs();
      const imagesBefore = (await engine.dockerOk(['images', '-q', '--no-trunc'])).trim();
      await new Promise<void>((resolve, reject) => {
        const req = http.request({ socketPath: engine.socket, method: 'POST', path: `/v1.44/images/create?fromImage=${encodeURIComponent(`${fakeHost}/slow`)}&tag=v1` }, (res) => {
          let seen = '';
          res.on('data', (chunk: Buffer) => {
            seen += chunk.toString();
            if (seen.includes('"Downloading"')) {
              req.destroy();
              resolve();
            }
          });
          res.on('error', () => undefined);
          res.on('end', () => reject(new Error(`the pull ended before downloading: ${seen}`)));
        });
        req.on('error', () => undefined);
        req.end();
      });
      await eventually(() => slowSocketsClosed === 1, 20_000);
      await eventually(() => stagingEntries().length === 0, 20_000);
      assert.deepEqual(layerDirs(), layersBefore);
      assert.equal((await engine.dockerOk(['images', '-q', '--no-trunc'])).trim(), imagesBefore);
      assert.ok(!existsSync(path.join(engine.dataRoot, 'image', 'staging', 'x')));
    });
  });
});
