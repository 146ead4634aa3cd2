/**
 * POST /images/load with every archive layout, and with bad archives: each bad one answers a clear
 * error, stores nothing (no image, no layer, no staging debris), and the daemon keeps serving.
 */
import assert from 'node:assert/strict';
import { createReadStream, existsSync, mkdirSync, readdirSync, readFileSync } from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { gzipSync } from 'node:zlib';
import { after, before, describe, it } from 'node:test';
import { dockerArchive, imageConfig, legacyArchive, ociArchive, sha256, tarBuffer } from './fixtures/archives.js';
import { buildBusyboxArchive } from './fixtures/busybox.js';
import { runCommand, startEngine, type Engine } from './harness.js';

describe('image archives', () => {
  let engine: Engine;
  let base: Buffer;
  let upper: Buffer;

  before(async () => {
    engine = await startEngine();
    base = await tarBuffer([
      { name: 'etc/', type: 'directory' },
      { name: 'etc/os-release', content: 'ID=test\n' },
      { name: 'etc/motd', content: 'hello\n' },
      { name: 'data/', type: 'directory' },
      { name: 'data/old', content: 'old\n' },
    ]);
    upper = await tarBuffer([
      { name: 'etc/.wh.motd' },
      { name: 'data/', type: 'directory' },
      { name: 'data/.wh..wh..opq' },
      { name: 'data/new', content: 'new\n' },
    ]);
  });
  after(async () => {
    await engine?.cleanup();
  });

  const imageRoot = () => path.join(engine.dataRoot, 'image');
  const stored = () => ({
    images: readdirSync(path.join(imageRoot(), 'imagedb')).length,
    layers: readdirSync(path.join(imageRoot(), 'layers')).length,
    staging: readdirSync(path.join(imageRoot(), 'staging')).length,
    blobs: readdirSync(path.join(imageRoot(), 'blobs', 'sha256')).length,
  });

  async function load(body: Buffer, query = 'quiet=1') {
    return engine.request('POST', `/v1.45/images/load?${query}`, { body, headers: { 'Content-Type': 'application/x-tar' }, timeoutMs: 60_000 });
  }

  async function removeAll(): Promise<void> {
    const ids = (await engine.dockerOk(['images', '-q', '--no-trunc'])).trim().split('\n').filter(Boolean);
    for (const id of new Set(ids)) await engine.dockerOk(['rmi', '-f', id]);
  }

  it('loads a two-layer docker-archive and stacks its layers with whiteouts', async () => {
    const res = await load(await dockerArchive([base, upper], { tags: ['stack:1'] }));
    assert.equal(res.status, 200, res.text);
    assert.match(res.text, /"stream":"Loaded image: stack:1\\n"/);
    const inspect = (await engine.request('GET', '/v1.45/images/stack:1/json')).json();
    assert.deepEqual(inspect.RootFS.Layers, [`sha256:${sha256(base)}`, `sha256:${sha256(upper)}`]);
    const layerDirs = (inspect.GraphDriver.Data.LowerDir as string).split(':').concat(inspect.GraphDriver.Data.UpperDir);
    const top = inspect.GraphDriver.Data.UpperDir as string;
    assert.ok(layerDirs.every((d) => existsSync(d)));
    assert.equal(readFileSync(path.join(top, 'data', 'new'), 'utf8'), 'new\n');
    assert.ok(!existsSync(path.join(top, 'etc', '.wh.motd')));
    // Stacked by overlayfs as the container engine stacks them, the whiteouts hide the lower files.
    const merged = path.join(engine.root, 'merged');
    mkdirSync(merged);
    // overlay's lowerdir lists the top layer first: UpperDir (the image's top layer), then LowerDir.
    const lowerdir = `${inspect.GraphDriver.Data.UpperDir}:${inspect.GraphDriver.Data.LowerDir}`;
    const mount = await runCommand('mount', ['-t', 'overlay', 'overlay', '-o', `lowerdir=${lowerdir}`, merged]);
    assert.equal(mount.code, 0, mount.stderr);
    try {
      assert.equal(readFileSync(path.join(merged, 'etc', 'os-release'), 'utf8'), 'ID=test\n');
      assert.ok(!existsSync(path.join(merged, 'etc', 'motd')), 'whiteout hides etc/motd');
      assert.deepEqual(readdirSync(path.join(merged, 'data')), ['new'], 'opaque data/ hides data/old');
    } finally {
      await runCommand('umount', [merged]);
    }
    await removeAll();
  });

  it('parallel loads of the same archive end with one image and its layers once', async () => {
    const archive = await dockerArchive([base, upper], { tags: ['same:1'] });
    const results = await Promise.all([load(archive), load(archive), load(archive)]);
    for (const res of results) assert.equal(res.status, 200, res.text);
    assert.deepEqual(stored(), { images: 1, layers: 2, staging: 0, blobs: 1 });
    await removeAll();
    assert.deepEqual(stored(), { images: 0, layers: 0, staging: 0, blobs: 0 });
  });

  it('loads the legacy layout (repositories and per-layer folders)', async () => {
    const res = await load(await legacyArchive([base, upper], 'legacy/app', 'old'));
    assert.equal(res.status, 200, res.text);
    assert.match(res.text, /Loaded image: legacy\/app:old/);
    const inspect = (await engine.request('GET', '/v1.45/images/legacy/app:old/json')).json();
    assert.deepEqual(inspect.RootFS.Layers, [`sha256:${sha256(base)}`, `sha256:${sha256(upper)}`]);
    assert.deepEqual(inspect.Config.Cmd, ['sh']);
    const history = (await engine.request('GET', '/v1.45/images/legacy/app:old/history')).json();
    assert.equal(history.length, 2);
    await removeAll();
  });

  it('loads an OCI layout with gzip layers, named by its annotation, and one without a name', async () => {
    const res = await load(await ociArchive([base, upper], 'docker.io/library/oci:v2'));
    assert.equal(res.status, 200, res.text);
    assert.match(res.text, /Loaded image: oci:v2/);
    const inspect = (await engine.request('GET', '/v1.45/images/oci:v2/json')).json();
    assert.equal(inspect.RootFS.Layers.length, 2);
    const unnamed = await load(await ociArchive([base], undefined));
    assert.equal(unnamed.status, 200, unnamed.text);
    assert.match(unnamed.text, /Loaded image ID: sha256:[0-9a-f]{64}/);
    await removeAll();
  });

  it('loads a gzip compressed archive, and streams progress without quiet', async () => {
    const file = path.join(engine.root, 'bb.tar');
    await buildBusyboxArchive(file, { tag: 'zipped:1' });
    const res = await load(gzipSync(readFileSync(file)), 'quiet=0');
    assert.equal(res.status, 200, res.text);
    const lines = res.text.trim().split('\n').map((l) => JSON.parse(l));
    assert.equal(lines[0].status, 'Loading layer');
    assert.deepEqual(lines[lines.length - 1], { stream: 'Loaded image: zipped:1\n' });
    await removeAll();
  });

  const bad: Array<[string, () => Promise<Buffer>, RegExp]> = [
    ['a layer with ../ entries', async () => dockerArchive([await tarBuffer([{ name: 'ok', content: 'x' }, { name: '../../escape', content: 'x' }])]), /points outside the layer|\.\." component/],
    ['a layer writing through an absolute symlink', async () => dockerArchive([await tarBuffer([{ name: 'evil', type: 'symlink', linkname: '/tmp' }, { name: 'evil/pwned', content: 'x' }])]), /through the symlink evil/],
    ['a layer hard-linking a host file', async () => dockerArchive([await tarBuffer([{ name: 'shadow', type: 'link', linkname: '/etc/shadow' }])]), /not an earlier entry of the layer/],
    ['a manifest naming a missing layer', async () => dockerArchive([base], { omitLayers: true, tags: ['x:1'] }), /layer [0-9a-f]{64}\/layer\.tar of image .* is missing from the archive/],
    ['a diff id mismatch', async () => dockerArchive([base], { config: imageConfig([sha256(upper)]), tags: ['x:1'] }), /has diff id sha256:[0-9a-f]{64}, but the image configuration expects/],
    ['garbage', async () => Buffer.from('this is not a tar archive at all, not even close'.repeat(40)), /invalid image archive|invalid tar|Invalid tar header/i],
    ['a truncated upload', async () => (await dockerArchive([base, upper], { tags: ['x:1'] })).subarray(0, 1800), /invalid|Unexpected end of data/i],
    ['an archive without any manifest', async () => tarBuffer([{ name: 'hello.txt', content: 'hi' }]), /neither manifest\.json, index\.json nor repositories/],
  ];
  for (const [what, build, message] of bad) {
    it(`refuses ${what}, stores nothing, keeps serving`, async () => {
      const before = stored();
      const res = await load(await build());
      // As dockerd: 200, and the error is the stream's last message.
      assert.equal(res.status, 200, res.text);
      const last = JSON.parse(res.text.trim().split('\n').pop()!);
      assert.match(last.error, message);
      assert.equal(last.errorDetail.message, last.error);
      assert.deepEqual(stored(), { ...before, staging: 0 });
      assert.ok(!existsSync('/tmp/pwned'));
      assert.ok(!existsSync(path.join(engine.root, 'escape')));
      assert.equal((await engine.request('GET', '/_ping')).text, 'OK');
    });
  }

  it('reports an error after progress has started in-band, and the docker CLI shows it', async () => {
    const archive = await dockerArchive([base], { config: imageConfig([sha256(upper)]), tags: ['x:1'] });
    const res = await load(archive, 'quiet=0');
    assert.equal(res.status, 200);
    const last = JSON.parse(res.text.trim().split('\n').pop()!);
    assert.match(last.error, /diff id/);
    assert.equal(last.errorDetail.message, last.error);
    const file = path.join(engine.root, 'mismatch.tar');
    await import('node:fs/promises').then((fs) => fs.writeFile(file, archive));
    const cli = await engine.docker(['load', '-i', file]);
    assert.notEqual(cli.code, 0);
    assert.match(cli.stderr, /diff id/);
  });

  it('a file that is not an image archive: docker load and dockerode read the error from the stream', async () => {
    const file = path.join(engine.root, 'not-an-archive.txt');
    await import('node:fs/promises').then((fs) => fs.writeFile(file, 'just some text, no tar here\n'.repeat(100)));
    const cli = await engine.docker(['load', '-i', file]);
    assert.notEqual(cli.code, 0);
    assert.match(cli.stderr, /invalid image archive|invalid tar/i);
    assert.doesNotMatch(cli.stderr, /Error response from daemon/);
    const docker = engine.dockerode();
    const stream = await docker.loadImage(createReadStream(file));
    const output = await new Promise<Array<{ error?: string }>>((resolve, reject) =>
      docker.modem.followProgress(stream, (err: Error | null, messages: Array<{ error?: string }>) => (err ? reject(err) : resolve(messages))));
    const failed = output.find((m) => m.error);
    assert.ok(failed, `no error in the stream: ${JSON.stringify(output)}`);
    assert.match(failed.error!, /invalid image archive|invalid tar/i);
  });

  it('a client that disconnects mid-upload leaves nothing behind', async () => {
    const archive = await dockerArchive([base, upper], { tags: ['cut:1'] });
    const before = stored();
    await new Promise<void>((resolve) => {
      const req = http.request({ socketPath: engine.socket, method: 'POST', path: '/v1.45/images/load?quiet=1', headers: { 'Content-Length': String(archive.length) } });
      req.on('error', () => resolve());
      req.write(archive.subarray(0, 3000));
      setTimeout(() => {
        req.destroy();
        resolve();
      }, 300);
    });
    for (let i = 0; i < 50 && stored().staging > 0; i++) await new Promise((r) => setTimeout(r, 100));
    assert.deepEqual(stored(), { ...before, staging: 0 });
    assert.equal((await engine.request('GET', '/_ping')).text, 'OK');
  });
});
