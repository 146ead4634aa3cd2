import assert from 'node:assert/strict';
import http from 'node:http';
import net from 'node:net';
import { after, before, describe, test } from 'node:test';
import { connectionLimitsFromEnv, DEFAULT_CONNECTION_LIMITS } from './connections.js';
import { Router } from './router.js';
import { allowedApiHost } from './server.js';
import { serveRouter, type TestServer } from './testing.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Opens a connection, writes `bytes`, and resolves with what came back and when the server closed it. */
function hold(socket: string, bytes: string): { closed: Promise<{ ms: number; text: string }>; conn: net.Socket } {
  const conn = net.connect(socket);
  const started = Date.now();
  let text = '';
  conn.on('data', (c: Buffer) => (text += c.toString('latin1')));
  conn.on('error', () => undefined);
  const closed = new Promise<{ ms: number; text: string }>((resolve) => conn.on('close', () => resolve({ ms: Date.now() - started, text })));
  if (bytes) conn.write(bytes);
  return { closed, conn };
}

describe('connection limits', () => {
  let api: TestServer;
  before(async () => {
    const router = new Router()
      .get('/_ping', (_req, res) => res.text(200, 'OK'))
      .post('/upload', async (req, res) => {
        let size = 0;
        if (req.query.get('wait')) await sleep(Number(req.query.get('wait')));
        for await (const chunk of req.body()) size += (chunk as Buffer).length;
        res.json(200, { size });
      })
      .get('/stream', async (_req, res) => {
        const out = res.stream(200, 'text/plain');
        out.write('start\n');
        await sleep(1200);
        out.end('end\n');
      });
    api = await serveRouter(router, { limits: { headersTimeoutMs: 400, bodyIdleMs: 400, keepAliveMs: 400, maxUnfinished: 8 } });
  });
  after(() => api.close());

  test('a head that never ends gets 408 and the connection closes', async () => {
    const silent = hold(api.socket, '');
    const partial = hold(api.socket, 'GET /_ping HTTP/1.1\r\nHost: docker\r\n');
    for (const { closed } of [silent, partial]) {
      const { ms, text } = await closed;
      assert.ok(ms < 2000, `held ${ms} ms`);
      assert.match(text, /^HTTP\/1\.1 408/);
    }
  });

  test('a body that stalls is cut; one that keeps flowing, or that the handler is slow to read, is not', async () => {
    const stalled = hold(api.socket, 'POST /upload HTTP/1.1\r\nHost: docker\r\nContent-Length: 100\r\n\r\nabc');
    const { ms, text } = await stalled.closed;
    assert.ok(ms >= 300 && ms < 2000, `held ${ms} ms`);
    assert.equal(text, '');

    // 12 pieces 150 ms apart: longer than the idle limit in all, never idle that long.
    const flowing = await new Promise<string>((resolve, reject) => {
      const req = http.request({ socketPath: api.socket, method: 'POST', path: '/upload', headers: { 'Content-Length': 12 * 1000 } }, (res) => {
        let body = '';
        res.on('data', (c) => (body += c));
        res.on('end', () => resolve(body));
      });
      req.on('error', reject);
      let sent = 0;
      const next = () => {
        req.write(Buffer.alloc(1000, 1));
        if (++sent === 12) req.end();
        else setTimeout(next, 150);
      };
      next();
    });
    assert.deepEqual(JSON.parse(flowing), { size: 12_000 });

    // The whole body is sent at once, but the handler reads it only after a second: the daemon's own pace.
    const big = Buffer.alloc(4 << 20, 2);
    const slowReader = await api.request('POST', '/upload?wait=1000', { body: big });
    assert.equal(slowReader.status, 200);
    assert.deepEqual(JSON.parse(slowReader.text), { size: big.length });
  });

  test('a response that has started is not cut by the limits', async () => {
    const r = await api.request('GET', '/stream');
    assert.equal(r.text, 'start\nend\n');
  });

  test('beyond the cap of unfinished connections the oldest are closed, and new requests are served', async () => {
    const held = Array.from({ length: 30 }, () => hold(api.socket, ''));
    let open = held.length;
    for (const h of held) void h.closed.then(() => open--);
    await sleep(150);
    assert.ok(open <= 8, `${open} connections still open`);
    assert.equal((await api.request('GET', '/_ping')).text, 'OK');
    await Promise.all(held.map((h) => h.closed));
  });
});

describe('connection limits from the environment', () => {
  test('defaults, and positive integers only', () => {
    assert.deepEqual(connectionLimitsFromEnv({}), DEFAULT_CONNECTION_LIMITS);
    assert.equal(connectionLimitsFromEnv({ BERTH_HTTP_BODY_IDLE_MS: '1500' }).bodyIdleMs, 1500);
    assert.throws(() => connectionLimitsFromEnv({ BERTH_HTTP_MAX_UNFINISHED: '0' }), /BERTH_HTTP_MAX_UNFINISHED/);
    assert.throws(() => connectionLimitsFromEnv({ BERTH_HTTP_HEADERS_TIMEOUT_MS: 'soon' }), /positive integer/);
  });
});

describe('Host names a TCP listener takes', () => {
  test('IP literals and loopback names, with or without a port', () => {
    for (const host of ['127.0.0.1', '127.0.0.1:2375', '[::1]:2375', '[::1]', '10.1.2.3:2376', 'localhost', 'LOCALHOST:2375', 'localhost.', 'api.moby.localhost', 'docker', undefined]) {
      assert.equal(allowedApiHost(host), true, String(host));
    }
  });
  test('other names are refused (DNS rebinding)', () => {
    for (const host of ['evil.example', 'evil.example:2375', '127.0.0.1.nip.io', 'localhost.evil.example', 'docker.evil', '', ' ', '[evil]:80', 'a:b:c', '127.0.0.1:2375:1']) {
      assert.equal(allowedApiHost(host), false, host);
    }
  });
});
