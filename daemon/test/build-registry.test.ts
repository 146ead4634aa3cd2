/**
 * docker build FROM an image that is only in a registry with basic auth (Debian's docker-registry on
 * 127.0.0.1): the builder pulls it with the credentials the CLI sends in X-Registry-Config; without them the
 * build fails with the registry's refusal.
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { buildLines, contextTar, writeContext } from './build-support.js';
import { startEngine, type Engine } from './harness.js';
import { haveRegistry, startRegistry, type TestRegistry } from './registry-support.js';

const skip = haveRegistry() ? false : 'docker-registry is not installed';

describe('build from a registry', { skip }, () => {
  let engine: Engine;
  let registry: TestRegistry;

  before(async () => {
    registry = await startRegistry({ auth: 'basic', users: { builder: 'secret-pw' } });
    engine = await startEngine();
    await engine.loadBusybox();
    await engine.dockerOk(['login', '-u', 'builder', '--password-stdin', registry.host], { input: 'secret-pw\n' });
    await engine.dockerOk(['tag', 'busybox', `${registry.host}/base:1`]);
    await engine.dockerOk(['push', `${registry.host}/base:1`], { timeoutMs: 120_000 });
    await engine.dockerOk(['rmi', `${registry.host}/base:1`]);
  });
  after(async () => {
    await engine?.cleanup();
    await registry?.stop();
  });

  it('without credentials the pull of FROM is refused in-band and nothing is tagged', async () => {
    const r = await engine.request('POST', '/v1.41/build?t=fromreg:0', {
      body: await contextTar({ Dockerfile: `FROM ${registry.host}/base:1\n` }),
      headers: { 'content-type': 'application/x-tar' },
      timeoutMs: 120_000,
    });
    const last = buildLines(r.text).pop()!;
    assert.match(last.error ?? '', /denied|unauthorized|authentication|login/i, r.text);
    assert.equal((await engine.request('GET', '/images/fromreg:0/json')).status, 404);
    const bad = await engine.request('POST', '/v1.41/build', { body: Buffer.alloc(0), headers: { 'x-registry-config': '%%%notbase64' } });
    assert.equal(bad.status, 400);
  });

  it('docker build pulls the base with the credentials of docker login (X-Registry-Config)', async () => {
    const dir = await writeContext(path.join(engine.root, 'fromreg'), { Dockerfile: `FROM ${registry.host}/base:1\nRUN echo built > /built\n` });
    const out = await engine.dockerOk(['build', '-t', 'fromreg:1', dir], { timeoutMs: 300_000 });
    assert.match(out, /Successfully tagged fromreg:1/);
    assert.equal(await engine.dockerOk(['run', '--rm', 'fromreg:1', 'cat', '/built']), 'built\n');
    assert.equal((await engine.request('GET', `/images/${registry.host}/base:1/json`)).status, 200);
  });
});
