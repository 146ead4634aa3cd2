/**
 * The daemon's own UI (`berthd --ui`) reads and changes sandbox policies as the local user who holds the UI's
 * token, through the daemon's local session; every other client still needs a bearer token of the store on
 * those paths: a plain TCP client, a unix socket client, and a page that sends a token of its own through the UI.
 */
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { eventually, type Engine, type HttpResult } from './harness.js';
import { startTcpEngine, tcpRequest } from './tcp-support.js';

/** One request to 127.0.0.1:<port>, `body` sent as JSON. */
function jsonRequest(port: number, method: string, urlPath: string, headers: Record<string, string> = {}, body?: unknown): Promise<HttpResult> {
  const text = body === undefined ? undefined : JSON.stringify(body);
  return tcpRequest(port, method, urlPath, { Host: `127.0.0.1:${port}`, ...(text ? { 'Content-Type': 'application/json' } : {}), ...headers }, text);
}

describe('sandbox policies from the daemon\'s own UI', () => {
  let engine: Engine;
  let apiPort: number;
  let uiPort: number;
  let uiToken: string;
  let sandbox: string;
  const policy = { defaultAction: 'deny', rules: [{ action: 'allow', cidr: '192.0.2.0/24', protocol: 'tcp', ports: [443] }] };

  before(async () => {
    ({ engine, port: apiPort } = await startTcpEngine(['--ui', '127.0.0.1:0']));
    await engine.loadBusybox();
    const file = path.join(engine.execRoot, 'ui-url');
    const loginUrl = new URL((await eventually(() => (existsSync(file) ? readFileSync(file, 'utf8').trim() : undefined)))!);
    uiPort = Number(loginUrl.port);
    uiToken = loginUrl.searchParams.get('token')!;
    sandbox = (await engine.dockerOk(['create', '--label', `berth.network-policy=${JSON.stringify(policy)}`, 'busybox', 'true'])).trim();
  });

  after(async () => {
    if (sandbox) await engine?.docker(['rm', '-f', sandbox]).catch(() => undefined);
    await engine?.cleanup();
  });

  const ui = (method: string, urlPath: string, body?: unknown, headers: Record<string, string> = {}) =>
    jsonRequest(uiPort, method, `/api${urlPath}`, { Cookie: `berth_ui_token=${encodeURIComponent(uiToken)}`, ...headers }, body);

  test('the UI reads the policy, installs a new generation, and sees the daemon\'s validation errors', async () => {
    const read = await ui('GET', `/v1/sandboxes/${sandbox}/network-policies`);
    assert.equal(read.status, 200, read.text);
    assert.equal(read.json().generation, 1);
    assert.deepEqual(read.json().exact, policy);
    const next = { defaultAction: 'allow', rules: [{ action: 'deny', domain: '*.example.com' }] };
    const put = await ui('PUT', `/v1/sandboxes/${sandbox}/network-policies`, next);
    assert.equal(put.status, 200, put.text);
    assert.equal(put.json().generation, 2);
    assert.deepEqual(put.json().exact, next);
    const bad = await ui('PUT', `/v1/sandboxes/${sandbox}/network-policies`, { defaultAction: 'maybe', rules: [] });
    assert.equal(bad.status, 400, bad.text);
    assert.equal(bad.json().code, 'invalidArgument');
    assert.match(bad.json().message, /defaultAction/);
    // A container without a policy: notFound, which the UI shows as "no policy".
    const plain = (await engine.dockerOk(['create', 'busybox', 'true'])).trim();
    try {
      const none = await ui('GET', `/v1/sandboxes/${plain}/network-policies`);
      assert.equal(none.status, 404, none.text);
      assert.equal(none.json().code, 'notFound');
    } finally {
      await engine.docker(['rm', '-f', plain]);
    }
  });

  test('without the UI\'s token, or with a token of the page\'s own, the UI refuses; other clients still need a store token', async () => {
    const noCookie = await jsonRequest(uiPort, 'GET', `/api/v1/sandboxes/${sandbox}/network-policies`);
    assert.equal(noCookie.status, 401);
    // A plain TCP client of the engine without a token: refused, as before.
    const tcp = await jsonRequest(apiPort, 'GET', `/v1/sandboxes/${sandbox}/network-policies`);
    assert.equal(tcp.status, 401, tcp.text);
    assert.equal(tcp.json().code, 'unauthenticated');
    const tcpPut = await jsonRequest(apiPort, 'PUT', `/v1/sandboxes/${sandbox}/network-policies`, {}, policy);
    assert.equal(tcpPut.status, 401, tcpPut.text);
    const forged = await jsonRequest(apiPort, 'GET', `/v1/sandboxes/${sandbox}/network-policies`, { Authorization: 'Bearer berth_local_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA' });
    assert.equal(forged.status, 401, forged.text);
    // The unix socket too.
    const unix = await engine.request('GET', `/v1/sandboxes/${sandbox}/network-policies`);
    assert.equal(unix.status, 401, unix.text);
    // The local session's token is nowhere the daemon writes.
    assert.doesNotMatch(engine.daemonLog, /berth_local_/);
  });
});
