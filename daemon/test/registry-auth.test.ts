/**
 * Registry authentication through the docker CLI and the API: htpasswd basic auth and token auth
 * (a token server in the test, JWTs the registry verifies), `docker login` (POST /auth, with the
 * identity token a token server's refresh token becomes), X-Registry-Auth on pull and push, anonymous
 * bearer tokens, and clear errors for wrong credentials.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startEngine, type Engine } from './harness.js';
import { haveRegistry, registryAuthHeader, startRegistry, type TestRegistry } from './registry-support.js';

const skip = haveRegistry() ? false : 'docker-registry is not installed';
const USERS = { alice: 'wonderland-9' };

describe('registry auth: htpasswd basic auth', { skip }, () => {
  let engine: Engine;
  let registry: TestRegistry;

  before(async () => {
    registry = await startRegistry({ auth: 'basic', users: USERS });
    engine = await startEngine();
    await engine.loadBusybox();
  });
  after(async () => {
    await engine?.cleanup();
    await registry?.stop();
  });

  it('POST /auth with wrong credentials is a 401 the CLI prints', async () => {
    const res = await engine.request('POST', '/v1.44/auth', { body: { username: 'alice', password: 'wrong', serveraddress: registry.host } });
    assert.equal(res.status, 401);
    assert.match(res.json().message, /login attempt to http:\/\/127\.0\.0\.1:\d+\/v2\/ failed with status: 401/);
    const cli = await engine.docker(['login', '-u', 'alice', '--password-stdin', registry.host], { input: 'wrong\n' });
    assert.notEqual(cli.code, 0);
    assert.match(cli.stderr, /failed with status: 401/);
  });

  it('pull without credentials says that access was denied', async () => {
    const res = await engine.request('POST', `/v1.44/images/create?fromImage=${encodeURIComponent(`${registry.host}/busybox`)}&tag=latest`);
    assert.equal(res.status, 404);
    assert.match(res.json().message, /pull access denied for 127\.0\.0\.1:\d+\/busybox.*docker login/);
  });

  it('docker login, push and pull with the stored credentials', async () => {
    const out = await engine.dockerOk(['login', '-u', 'alice', '--password-stdin', registry.host], { input: `${USERS.alice}\n` });
    assert.match(out, /Login Succeeded/);
    const name = `${registry.host}/busybox:secret`;
    await engine.dockerOk(['tag', 'busybox', name]);
    const pushed = await engine.dockerOk(['push', name], { timeoutMs: 120_000 });
    assert.match(pushed, /secret: digest: sha256:[a-f0-9]{64}/);
    await engine.dockerOk(['rmi', name]);
    const pulled = await engine.dockerOk(['pull', name], { timeoutMs: 120_000 });
    assert.match(pulled, /Status: Downloaded newer image for 127\.0\.0\.1:\d+\/busybox:secret/);
  });

  it('X-Registry-Auth with a wrong password is refused clearly', async () => {
    const res = await engine.request('POST', `/v1.44/images/create?fromImage=${encodeURIComponent(`${registry.host}/busybox`)}&tag=secret`, {
      headers: { 'X-Registry-Auth': registryAuthHeader({ username: 'alice', password: 'nope', serveraddress: registry.host }) },
    });
    assert.equal(res.status, 401);
    assert.match(res.json().message, /unauthorized/i);
  });

  it('a malformed X-Registry-Auth header is a 400', async () => {
    const res = await engine.request('POST', `/v1.44/images/create?fromImage=${encodeURIComponent(`${registry.host}/busybox`)}&tag=secret`, {
      headers: { 'X-Registry-Auth': 'not-json-at-all' },
    });
    assert.equal(res.status, 400);
    assert.match(res.json().message, /X-Registry-Auth/);
  });
});

describe('registry auth: token server', { skip }, () => {
  let engine: Engine;
  let registry: TestRegistry;

  before(async () => {
    registry = await startRegistry({ auth: 'token', users: USERS, anonymousPull: true });
    engine = await startEngine();
    await engine.loadBusybox();
  });
  after(async () => {
    await engine?.cleanup();
    await registry?.stop();
  });

  it('POST /auth answers the refresh token as IdentityToken; wrong credentials are a 401', async () => {
    const ok = await engine.request('POST', '/v1.44/auth', { body: { username: 'alice', password: USERS.alice, serveraddress: registry.host } });
    assert.equal(ok.status, 200);
    assert.equal(ok.json().Status, 'Login Succeeded');
    assert.match(ok.json().IdentityToken, /^refresh-/);
    const bad = await engine.request('POST', '/v1.44/auth', { body: { username: 'alice', password: 'bad', serveraddress: registry.host } });
    assert.equal(bad.status, 401);
    assert.match(bad.json().message, /invalid username or password/);
    const cli = await engine.docker(['login', '-u', 'alice', '--password-stdin', registry.host], { input: 'bad\n' });
    assert.notEqual(cli.code, 0);
    assert.match(cli.stderr, /invalid username or password/);
  });

  it('docker login keeps the identity token; push and pull use it through the refresh grant', async () => {
    await engine.dockerOk(['login', '-u', 'alice', '--password-stdin', registry.host], { input: `${USERS.alice}\n` });
    const name = `${registry.host}/private/busybox:v1`;
    await engine.dockerOk(['tag', 'busybox', name]);
    const before = registry.tokenRequests.length;
    await engine.dockerOk(['push', name], { timeoutMs: 120_000 });
    const used = registry.tokenRequests.slice(before);
    assert.ok(used.some((r) => r.method === 'POST' && r.grant === 'refresh_token' && r.scope.includes('repository:private/busybox:pull,push')), JSON.stringify(used));
    await engine.dockerOk(['rmi', name]);
    await engine.dockerOk(['pull', name], { timeoutMs: 120_000 });
  });

  it('anonymous pulls get a bearer token from the challenge', async () => {
    await engine.dockerOk(['logout', registry.host]);
    await engine.dockerOk(['rmi', `${registry.host}/private/busybox:v1`]);
    const before = registry.tokenRequests.length;
    const out = await engine.dockerOk(['pull', `${registry.host}/private/busybox:v1`], { timeoutMs: 120_000 });
    assert.match(out, /Downloaded newer image/);
    const used = registry.tokenRequests.slice(before);
    assert.ok(used.some((r) => r.method === 'GET' && r.account === undefined && r.scope.includes('repository:private/busybox:pull')), JSON.stringify(used));
  });

  it('pushing without credentials is refused clearly', async () => {
    const r = await engine.docker(['push', `${registry.host}/private/busybox:v1`], { timeoutMs: 120_000 });
    assert.notEqual(r.code, 0);
    assert.match(r.stderr + r.stdout, /unauthorized|denied|authentication required/i);
  });

  it('X-Registry-Auth with a wrong password is a 401 naming the token server', async () => {
    const res = await engine.request('POST', `/v1.44/images/create?fromImage=${encodeURIComponent(`${registry.host}/private/busybox`)}&tag=v1`, {
      headers: { 'X-Registry-Auth': registryAuthHeader({ username: 'alice', password: 'nope', serveraddress: registry.host }) },
    });
    assert.equal(res.status, 401);
    assert.match(res.json().message, /token server .* refused the credentials: invalid username or password/);
  });
});
