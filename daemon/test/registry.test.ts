/**
 * Pull and push against a real registry (Debian's docker-registry on 127.0.0.1, no auth) with the docker
 * CLI and dockerode: push, rmi, pull back by tag and by digest (same image id), a second push that
 * uploads nothing, cross-repository mounts, `docker run` of a missing image, progress messages, events.
 */
import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { eventually, startEngine, type Engine } from './harness.js';
import { getFromRegistry, haveRegistry, startRegistry, type TestRegistry } from './registry-support.js';

const skip = haveRegistry() ? false : 'docker-registry is not installed';

function progressLines(text: string): Array<Record<string, any>> {
  return text
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => JSON.parse(l) as Record<string, any>);
}

describe('registry: push and pull with the docker CLI', { skip }, () => {
  let engine: Engine;
  let registry: TestRegistry;
  let imageId: string;
  let pushedDigest: string;

  before(async () => {
    registry = await startRegistry();
    engine = await startEngine();
    await engine.loadBusybox();
    imageId = (await engine.dockerOk(['image', 'inspect', '-f', '{{.Id}}', 'busybox'])).trim();
  });
  after(async () => {
    await engine?.cleanup();
    await registry?.stop();
  });

  it('docker push sends the layers, the configuration and a schema 2 manifest', async () => {
    const name = `${registry.host}/busybox:v1`;
    await engine.dockerOk(['tag', 'busybox', name]);
    const out = await engine.dockerOk(['push', name], { timeoutMs: 120_000 });
    assert.match(out, /The push refers to repository \[127\.0\.0\.1:\d+\/busybox\]/);
    assert.match(out, /Pushed/);
    const m = /v1: digest: (sha256:[a-f0-9]{64}) size: (\d+)/.exec(out);
    assert.ok(m, out);
    pushedDigest = m[1];
    const manifest = await getFromRegistry(registry, '/v2/busybox/manifests/v1', 'application/vnd.docker.distribution.manifest.v2+json');
    assert.equal(manifest.status, 200);
    assert.equal(manifest.headers['docker-content-digest'], pushedDigest);
    const parsed = JSON.parse(manifest.body.toString());
    assert.equal(parsed.mediaType, 'application/vnd.docker.distribution.manifest.v2+json');
    assert.equal(parsed.config.digest, imageId);
    assert.equal(parsed.layers.length, 1);
    assert.equal(parsed.layers[0].mediaType, 'application/vnd.docker.image.rootfs.diff.tar.gzip');
    const digests = await engine.dockerOk(['image', 'inspect', '-f', '{{json .RepoDigests}}', name]);
    assert.ok(digests.includes(`${registry.host}/busybox@${pushedDigest}`), digests);
  });

  it('a second push finds every layer in place and gives the same digest', async () => {
    const name = `${registry.host}/busybox:v1`;
    const res = await engine.request('POST', `/v1.44/images/${encodeURIComponent(`${registry.host}/busybox`)}/push?tag=v1`, {
      headers: { 'X-Registry-Auth': Buffer.from('{}').toString('base64') },
    });
    assert.equal(res.status, 200);
    const lines = progressLines(res.text);
    assert.ok(lines.some((l) => l.status === 'Layer already exists'), res.text);
    assert.ok(!lines.some((l) => l.status === 'Pushed'), res.text);
    const aux = lines.find((l) => l.aux);
    assert.deepEqual(Object.keys(aux!.aux).sort(), ['Digest', 'Size', 'Tag']);
    assert.equal(aux!.aux.Digest, pushedDigest);
    assert.equal(aux!.aux.Tag, 'v1');
    assert.ok(lines.some((l) => l.status === `v1: digest: ${pushedDigest} size: ${aux!.aux.Size}`));
    void name;
  });

  it('pushing to another repository of the same registry mounts the layer', async () => {
    const other = `${registry.host}/team/tools:v1`;
    await engine.dockerOk(['tag', 'busybox', other]);
    const out = await engine.dockerOk(['push', other], { timeoutMs: 120_000 });
    assert.match(out, /Mounted from busybox/);
  });

  it('rmi then docker pull by tag gives back the identical image, with progress as dockerd writes it', async () => {
    for (const ref of [`${registry.host}/busybox:v1`, `${registry.host}/team/tools:v1`, 'busybox:latest']) await engine.dockerOk(['rmi', ref]);
    const images = await engine.dockerOk(['images', '-q']);
    assert.equal(images.trim(), '', 'every image is gone');
    assert.deepEqual(readdirSync(path.join(engine.dataRoot, 'image', 'layers')), []);

    const res = await engine.request('POST', `/v1.44/images/create?fromImage=${encodeURIComponent(`${registry.host}/busybox`)}&tag=v1`, { timeoutMs: 120_000 });
    assert.equal(res.status, 200);
    const lines = progressLines(res.text);
    assert.deepEqual(lines[0], { status: 'Pulling from busybox', id: 'v1' });
    const statuses = lines.map((l) => l.status);
    for (const s of ['Pulling fs layer', 'Downloading', 'Verifying Checksum', 'Download complete', 'Extracting', 'Pull complete']) {
      assert.ok(statuses.includes(s), `${s} in ${res.text}`);
    }
    const downloading = lines.find((l) => l.status === 'Downloading')!;
    assert.equal(typeof downloading.progressDetail.current, 'number');
    assert.equal(typeof downloading.progressDetail.total, 'number');
    assert.match(downloading.progress, /^\[=*>\s*\]\s+[\d.]+[kMG]?B\/[\d.]+[kMG]?B$/);
    assert.match(downloading.id, /^[a-f0-9]{12}$/);
    assert.ok(statuses.includes(`Digest: ${pushedDigest}`), res.text);
    assert.equal(statuses[statuses.length - 1], `Status: Downloaded newer image for ${registry.host}/busybox:v1`);
    const id = (await engine.dockerOk(['image', 'inspect', '-f', '{{.Id}}', `${registry.host}/busybox:v1`])).trim();
    assert.equal(id, imageId);
    const digests = await engine.dockerOk(['image', 'inspect', '-f', '{{json .RepoDigests}}', `${registry.host}/busybox:v1`]);
    assert.deepEqual(JSON.parse(digests), [`${registry.host}/busybox@${pushedDigest}`]);

    const again = await engine.dockerOk(['pull', `${registry.host}/busybox:v1`]);
    assert.match(again, /Image is up to date for 127\.0\.0\.1:\d+\/busybox:v1/);
  });

  it('docker pull by digest gives the identical image', async () => {
    await engine.dockerOk(['rmi', `${registry.host}/busybox:v1`]);
    assert.equal((await engine.dockerOk(['images', '-q'])).trim(), '');
    const out = await engine.dockerOk(['pull', `${registry.host}/busybox@${pushedDigest}`], { timeoutMs: 120_000 });
    assert.match(out, /Downloaded newer image/);
    const id = (await engine.dockerOk(['image', 'inspect', '-f', '{{.Id}}', `${registry.host}/busybox@${pushedDigest}`])).trim();
    assert.equal(id, imageId);
    const tags = await engine.dockerOk(['image', 'inspect', '-f', '{{json .RepoTags}}', id]);
    assert.deepEqual(JSON.parse(tags), []);
  });

  it('docker run of a missing image pulls it first, and the pull is an event', async () => {
    const since = Math.floor(Date.now() / 1000) - 1;
    const out = await engine.dockerOk(['run', '--rm', `${registry.host}/team/tools:v1`, 'echo', 'pulled and ran'], { timeoutMs: 120_000 });
    assert.match(out, /pulled and ran/);
    const events = await eventually(async () => {
      const e = await engine.dockerOk(['events', '--since', String(since), '--until', String(Math.floor(Date.now() / 1000) + 1), '--filter', 'type=image', '--format', '{{.Action}} {{.Actor.Attributes.name}}']);
      assert.match(e, /pull 127\.0\.0\.1:\d+\/team\/tools:v1/);
      return e;
    }, 20_000);
    void events;
  });

  it('pulling a tag that does not exist is a 404 with the registry\'s words', async () => {
    const r = await engine.docker(['pull', `${registry.host}/busybox:nope`]);
    assert.notEqual(r.code, 0);
    assert.match(r.stderr, /manifest for 127\.0\.0\.1:\d+\/busybox:nope not found: manifest unknown/);
    const res = await engine.request('POST', `/v1.44/images/create?fromImage=${encodeURIComponent(`${registry.host}/busybox`)}&tag=nope`);
    assert.equal(res.status, 404);
    assert.match(res.json().message, /manifest unknown/);
  });

  it('dockerode pulls and pushes', async () => {
    const docker = engine.dockerode();
    const stream = await docker.pull(`${registry.host}/busybox:v1`);
    const pulled = await new Promise<any[]>((resolve, reject) => docker.modem.followProgress(stream, (err: Error | null, out: any[]) => (err ? reject(err) : resolve(out))));
    assert.ok(pulled.some((l) => String(l.status).startsWith('Digest: sha256:')));
    await docker.getImage(`${registry.host}/busybox:v1`).tag({ repo: `${registry.host}/dockerode`, tag: 'x' });
    const push = (await docker.getImage(`${registry.host}/dockerode:x`).push({ authconfig: {} } as any)) as unknown as NodeJS.ReadableStream;
    const pushed = await new Promise<any[]>((resolve, reject) => docker.modem.followProgress(push, (err: Error | null, out: any[]) => (err ? reject(err) : resolve(out))));
    assert.ok(pushed.some((l) => l.aux && l.aux.Tag === 'x'), JSON.stringify(pushed));
  });
});

describe('registry flags', () => {
  let engine: Engine;
  after(async () => {
    await engine?.cleanup();
  });

  it('--insecure-registry and --registry-mirror show in /info', async () => {
    engine = await startEngine({ args: ['--insecure-registry', '10.9.0.0/16', '--insecure-registry', 'registry.test:5000', '--registry-mirror', 'https://mirror.test'] });
    const info = (await engine.request('GET', '/v1.44/info')).json();
    assert.deepEqual(info.RegistryConfig.InsecureRegistryCIDRs, ['127.0.0.0/8', '::1/128', '10.9.0.0/16']);
    assert.deepEqual(info.RegistryConfig.Mirrors, ['https://mirror.test/']);
    assert.equal(info.RegistryConfig.IndexConfigs['registry.test:5000'].Secure, false);
    assert.deepEqual(info.RegistryConfig.IndexConfigs['docker.io'].Mirrors, ['https://mirror.test/']);
  });
});
