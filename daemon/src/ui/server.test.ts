import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { WebSocket } from 'ws';
import { createHash } from 'node:crypto';
import { pageCsp, parseUiAddress, startUiServer, UI_COOKIE, type UiServer } from './server.js';

/** A stand-in engine on a unix socket: echoes what reached it, and hijacks exec start like the real one. */
function fakeEngine(socketPath: string): Promise<{ server: http.Server; seen: Array<{ method: string; url: string; headers: http.IncomingHttpHeaders }> }> {
  const seen: Array<{ method: string; url: string; headers: http.IncomingHttpHeaders }> = [];
  const server = http.createServer((req, res) => {
    seen.push({ method: req.method!, url: req.url!, headers: req.headers });
    if (req.url === '/v1.53/containers/nope/json') {
      res.writeHead(404, { 'Content-Type': 'application/json' });
      return void res.end(JSON.stringify({ message: 'No such container: nope' }));
    }
    res.writeHead(200, { 'Content-Type': 'application/json' });
    res.end(JSON.stringify({ url: req.url }));
  });
  server.on('upgrade', (req, socket, head: Buffer) => {
    seen.push({ method: req.method!, url: req.url!, headers: req.headers });
    if (req.url === '/exec/e1/start') {
      socket.write('HTTP/1.1 101 UPGRADED\r\nConnection: Upgrade\r\nUpgrade: tcp\r\n\r\n');
      // A shell that echoes what it reads, upper-cased (the start body came with the headers, in `head`).
      assert.deepEqual(JSON.parse(head.toString()), { Detach: false, Tty: true });
      socket.on('data', (d: Buffer) => socket.write(d.toString().toUpperCase()));
      return;
    }
    socket.end('HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\nContent-Length: 31\r\n\r\n{"message":"No such exec: e2x"}');
  });
  return new Promise((resolve) => server.listen(socketPath, () => resolve({ server, seen })));
}

function get(ui: UiServer, urlPath: string, headers: Record<string, string> = {}, method = 'GET'): Promise<{ status: number; headers: http.IncomingHttpHeaders; text: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port: ui.port, path: urlPath, method, headers: { Host: `127.0.0.1:${ui.port}`, ...headers } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, text: Buffer.concat(chunks).toString() }));
    });
    req.on('error', reject);
    req.end();
  });
}

function openWs(ui: UiServer, urlPath: string, headers: Record<string, string>): Promise<{ ws: WebSocket } | { status: number }> {
  return new Promise((resolve) => {
    const ws = new WebSocket(`ws://127.0.0.1:${ui.port}${urlPath}`, { headers });
    ws.once('open', () => resolve({ ws }));
    ws.once('unexpected-response', (_req, res) => resolve({ status: res.statusCode! }));
    ws.once('error', () => undefined);
  });
}

const BOOT = "window.berthBoot = {};";

describe('berthd --ui server', () => {
  let dir: string;
  let ui: UiServer;
  let engine: Awaited<ReturnType<typeof fakeEngine>>;
  let cookie: string;

  before(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'berth-ui-'));
    const staticDir = path.join(dir, 'dist');
    mkdirSync(path.join(staticDir, 'assets'), { recursive: true });
    writeFileSync(path.join(staticDir, 'index.html'), `<!doctype html><title>Berth</title><script>${BOOT}</script><script type="module" src="./assets/app.js"></script>`);
    writeFileSync(path.join(staticDir, 'assets', 'app.js'), 'console.log(1)');
    writeFileSync(path.join(dir, 'secret.txt'), 'secret');
    engine = await fakeEngine(path.join(dir, 'engine.sock'));
    ui = await startUiServer({ engine: { socketPath: path.join(dir, 'engine.sock') }, staticDir, port: 0, token: 'tok-123', engineToken: 'engine-tok' });
    cookie = `${UI_COOKIE}=tok-123`;
  });
  after(async () => {
    await ui.close();
    engine.server.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('refuses pages and API calls without the token', async () => {
    assert.equal((await get(ui, '/')).status, 401);
    const api = await get(ui, '/api/v1.53/containers/json');
    assert.equal(api.status, 401);
    assert.match(JSON.parse(api.text).message, /token is required/);
    assert.equal((await get(ui, '/api/_ping', { Cookie: `${UI_COOKIE}=wrong` })).status, 401);
    assert.equal((await get(ui, '/?token=wrong')).status, 401);
    assert.equal(engine.seen.length, 0, 'nothing reached the engine');
  });

  it('turns the token of the first visit into an HttpOnly SameSite=Strict cookie', async () => {
    const first = await get(ui, '/containers?token=tok-123');
    assert.equal(first.status, 302);
    assert.equal(first.headers.location, '/containers');
    const setCookie = String(first.headers['set-cookie']);
    assert.match(setCookie, new RegExp(`^${UI_COOKIE}=tok-123;`));
    assert.match(setCookie, /HttpOnly/);
    assert.match(setCookie, /SameSite=Strict/);
    const page = await get(ui, '/containers', { Cookie: cookie });
    assert.equal(page.status, 200);
    assert.match(page.text, /<title>Berth/);
  });

  it('forwards API calls to the engine without the UI credentials, and passes engine errors through', async () => {
    const res = await get(ui, '/api/v1.53/containers/json?all=1', { Cookie: cookie, Origin: `http://127.0.0.1:${ui.port}` });
    assert.equal(res.status, 200);
    assert.deepEqual(JSON.parse(res.text), { url: '/v1.53/containers/json?all=1' });
    const last = engine.seen.at(-1)!;
    assert.equal(last.headers.cookie, undefined);
    assert.equal(last.headers.origin, undefined);
    const missing = await get(ui, '/api/v1.53/containers/nope/json', { Cookie: cookie });
    assert.equal(missing.status, 404);
    assert.equal(JSON.parse(missing.text).message, 'No such container: nope');
    assert.equal((await get(ui, '/api/_ping', { Authorization: 'Bearer tok-123' })).status, 200);
  });

  it("sends the engine its own engine token, never the page's", async () => {
    const res = await get(ui, '/api/v1/sandboxes/c1/network-policies', { Authorization: 'Bearer tok-123' });
    assert.equal(res.status, 200);
    const last = engine.seen.at(-1)!;
    assert.equal(last.url, '/v1/sandboxes/c1/network-policies');
    assert.equal(last.headers.authorization, 'Bearer engine-tok');
  });

  it('refuses cross-origin requests even with the cookie', async () => {
    const before = engine.seen.length;
    const evil = await get(ui, '/api/v1.53/containers/x/kill', { Cookie: cookie, Origin: 'http://evil.example' }, 'POST');
    assert.equal(evil.status, 403);
    assert.match(JSON.parse(evil.text).message, /cross-origin/);
    assert.equal((await get(ui, '/api/_ping', { Cookie: cookie, 'Sec-Fetch-Site': 'cross-site' })).status, 403);
    // DNS rebinding: the attacker's name in Host.
    assert.equal((await get(ui, '/api/_ping', { Cookie: cookie, Host: `evil.example:${ui.port}` })).status, 403);
    assert.equal((await get(ui, '/api/_ping', { Cookie: cookie, Host: `127.0.0.1:1` })).status, 403);
    assert.equal(engine.seen.length, before, 'nothing reached the engine');
  });

  it('serves the renderer, with index.html for client routes, and nothing outside its folder', async () => {
    const asset = await get(ui, '/assets/app.js', { Cookie: cookie });
    assert.equal(asset.status, 200);
    assert.match(String(asset.headers['content-type']), /javascript/);
    assert.equal((await get(ui, '/assets/missing.js', { Cookie: cookie })).status, 404);
    const escape = await get(ui, '/../secret.txt', { Cookie: cookie });
    assert.doesNotMatch(escape.text, /secret/);
    const encoded = await get(ui, '/%2e%2e/secret.txt', { Cookie: cookie });
    assert.doesNotMatch(encoded.text, /secret/);
  });

  it("allows the page's own inline script by its hash and no other, and revalidates the page with its ETag", async () => {
    const page = await get(ui, '/', { Cookie: cookie });
    assert.equal(page.status, 200);
    const csp = String(page.headers['content-security-policy']);
    const hash = createHash('sha256').update(BOOT).digest('base64');
    assert.match(csp, new RegExp(`script-src 'self' 'sha256-${hash.replace(/[+/]/g, '\\$&')}'(;|$)`));
    assert.doesNotMatch(csp, /script-src[^;]*unsafe-inline/);
    const etag = String(page.headers.etag);
    assert.ok(etag.length > 2);
    const again = await get(ui, '/', { Cookie: cookie, 'If-None-Match': etag });
    assert.equal(again.status, 304);
    assert.equal(again.text, '');
    // A page without inline scripts gets no script-src exception.
    assert.doesNotMatch(pageCsp('<script src="x.js"></script><p>no inline</p>'), /script-src/);
  });

  it('bridges an exec websocket to the hijacked exec start, and refuses websockets without token or from another origin', async () => {
    const origin = `http://127.0.0.1:${ui.port}`;
    const noToken = await openWs(ui, '/ui/exec/e1/ws', { Origin: origin });
    assert.deepEqual(noToken, { status: 401 });
    const crossOrigin = await openWs(ui, '/ui/exec/e1/ws', { Origin: 'http://evil.example', Cookie: cookie });
    assert.deepEqual(crossOrigin, { status: 403 });
    const attachNoToken = await openWs(ui, '/api/v1.53/containers/c1/attach/ws?stream=1', { Origin: origin });
    assert.deepEqual(attachNoToken, { status: 401 });

    const opened = await openWs(ui, '/ui/exec/e1/ws', { Origin: origin, Cookie: cookie });
    assert.ok('ws' in opened);
    const ws = opened.ws;
    const reply = new Promise<string>((resolve) => ws.once('message', (d: Buffer) => resolve(d.toString())));
    ws.send(Buffer.from('echo hi'));
    assert.equal(await reply, 'ECHO HI');
    const start = engine.seen.find((s) => s.url === '/exec/e1/start')!;
    assert.equal(start.headers.upgrade, 'tcp');
    ws.close();

    const failed = await openWs(ui, '/ui/exec/e2x/ws', { Origin: origin, Cookie: cookie });
    assert.ok('ws' in failed);
    const closed = await new Promise<{ code: number; reason: string }>((resolve) => failed.ws.once('close', (code, reason) => resolve({ code, reason: reason.toString() })));
    assert.equal(closed.code, 4404);
    assert.equal(closed.reason, 'No such exec: e2x');
  });

  it('accepts only loopback addresses', () => {
    assert.deepEqual(parseUiAddress(undefined), { host: '127.0.0.1', port: 2380 });
    assert.deepEqual(parseUiAddress(''), { host: '127.0.0.1', port: 2380 });
    assert.deepEqual(parseUiAddress('8080'), { host: '127.0.0.1', port: 8080 });
    assert.deepEqual(parseUiAddress('[::1]:9000'), { host: '::1', port: 9000 });
    assert.throws(() => parseUiAddress('0.0.0.0:8080'), /only loopback/);
    assert.throws(() => parseUiAddress('192.168.1.2:80'), /only loopback/);
    assert.throws(() => parseUiAddress('x'), /invalid --ui address/);
  });
});
