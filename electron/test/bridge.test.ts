import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { BridgeError, checkRequest, forwardRequest, openStream, openTerminal } from '../src/bridge.js';
import { fakeEngine, FakePort } from './fakes.js';

describe('bridge allow-list', () => {
  it('lets through the operations the app uses', () => {
    assert.deepEqual(checkRequest('get', '/v1.53/containers/json?all=1'), { method: 'GET', path: '/v1.53/containers/json?all=1' });
    for (const [m, p] of [
      ['POST', '/v1.53/containers/abc/stop'],
      ['DELETE', '/v1.53/containers/abc?force=1'],
      ['POST', '/v1.53/exec/e1/resize?h=10&w=20'],
      ['GET', '/v1.53/images/registry:5000/x/y:1/history'],
      ['POST', '/v1.53/images/create?fromImage=busybox&tag=latest'],
      ['GET', '/v1.53/events'],
      ['POST', '/v1.53/networks/n1/connect'],
      ['GET', '/_ping'],
    ]) assert.doesNotThrow(() => checkRequest(m, p), `${m} ${p}`);
  });

  it('refuses everything else, and paths that climb out', () => {
    const refused = (m: unknown, p: unknown, status: number) => {
      assert.throws(() => checkRequest(m, p), (err: unknown) => err instanceof BridgeError && err.status === status, `${String(m)} ${String(p)}`);
    };
    refused('PUT', '/v1.53/containers/abc/archive?path=/etc', 403);
    refused('POST', '/v1.53/plugins/pull', 403);
    refused('POST', '/v1.53/swarm/init', 403);
    refused('GET', '/v1.53/containers/abc/export', 403);
    refused('POST', '/v1.53/exec/e1/start', 403);
    refused('GET', '/v1.53/containers/../../secrets', 400);
    refused('GET', '/v1.53/containers/%2e%2e/json', 400);
    refused('GET', 'http://elsewhere/v1.53/info', 400);
    refused(undefined, '/v1.53/info', 400);
  });
});

describe('bridge to an engine socket', () => {
  let dir: string;
  let engine: Awaited<ReturnType<typeof fakeEngine>>;
  let endpoint: { socketPath: string };
  before(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'berth-bridge-'));
    endpoint = { socketPath: path.join(dir, 'e.sock') };
    engine = await fakeEngine(endpoint.socketPath);
  });
  after(async () => {
    await engine.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('forwards an allowed request and returns status and body', async () => {
    const res = await forwardRequest(endpoint, { method: 'GET', path: '/v1.53/containers/json?all=1' });
    assert.equal(res.status, 200);
    assert.deepEqual(JSON.parse(res.body), [{ Id: 'c1', Names: ['/web'] }]);
    const missing = await forwardRequest(endpoint, { method: 'GET', path: '/v1.53/containers/zz/json' });
    assert.equal(missing.status, 404);
    await assert.rejects(forwardRequest(endpoint, { method: 'POST', path: '/v1.53/swarm/init' }), /not an operation the app may use/);
  });

  it('streams a response over a port until the engine ends it', async () => {
    const port = new FakePort();
    openStream(endpoint, { method: 'GET', path: '/v1.53/events' }, port);
    await port.until((s) => s.some((m) => m.type === 'end'));
    assert.equal(port.text(), '{"Type":"container","Action":"start"}\n{"Type":"container","Action":"die"}\n');
    assert.equal(port.closed, true);
    const refused = new FakePort();
    openStream(endpoint, { method: 'GET', path: '/v1.53/containers/c1/export' }, refused);
    assert.equal(refused.sent[0].type, 'error');
    assert.equal(refused.sent[0].status, 403);
  });

  it('bridges an exec terminal both ways, with keystrokes sent before the upgrade', async () => {
    const port = new FakePort();
    openTerminal(endpoint, { kind: 'exec', execId: 'e1' }, '1.53', port);
    port.send({ type: 'data', data: new TextEncoder().encode('echo hi') });
    await port.until(() => port.text() === 'ECHO HI');
    assert.ok(engine.seen.some((s) => s.startsWith('POST /v1.53/exec/e1/start upgrade=tcp body={"Detach":false,"Tty":true}')));
    port.send({ type: 'data', data: new TextEncoder().encode('exit\n') });
    await port.until((s) => s.some((m) => m.type === 'end'));
  });

  it('attaches to a container, and reports an unknown exec with the engine message', async () => {
    const port = new FakePort();
    openTerminal(endpoint, { kind: 'attach', containerId: 'c1' }, '1.53', port);
    port.send({ type: 'data', data: new TextEncoder().encode('ls') });
    await port.until(() => port.text() === 'LS');
    port.send({ type: 'close' });
    const bad = new FakePort();
    openTerminal(endpoint, { kind: 'exec', execId: 'nope' }, '1.53', bad);
    await bad.until((s) => s.some((m) => m.type === 'error'));
    assert.equal(bad.sent.at(-1).message, 'No such exec: nope');
    const invalid = new FakePort();
    openTerminal(endpoint, { kind: 'exec', execId: '../x' } as never, '1.53', invalid);
    assert.equal(invalid.sent[0].status, 400);
  });
});
