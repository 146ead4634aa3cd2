/**
 * Protocol conformance against a real berthd, in plain HTTP over its unix socket: version prefixes,
 * unknown routes, boolean query values, filters, CORS, bad bodies, connection upgrade; the daemon must
 * serve on after each.
 */
import assert from 'node:assert/strict';
import net from 'node:net';
import { after, before, describe, test } from 'node:test';
import { eventually, startEngine, type Engine } from './harness.js';

/** Sends raw bytes on a fresh connection; resolves with what came back when `until` matches or the peer closes. */
function rawExchange(socketPath: string, bytes: string | Buffer, opts: { until?: RegExp; halfClose?: boolean; timeoutMs?: number } = {}): Promise<string> {
  return new Promise((resolve, reject) => {
    const conn = net.connect(socketPath);
    let text = '';
    const done = () => {
      clearTimeout(timer);
      conn.destroy();
      resolve(text);
    };
    const timer = setTimeout(done, opts.timeoutMs ?? 10_000);
    conn.on('data', (c: Buffer) => {
      text += c.toString('latin1');
      if (opts.until?.test(text)) done();
    });
    conn.on('close', done);
    conn.on('error', (err) => (text ? done() : reject(err)));
    conn.write(bytes);
    if (opts.halfClose) conn.end();
  });
}

async function servesOn(engine: Engine): Promise<void> {
  const r = await engine.request('GET', '/_ping');
  assert.equal(r.status, 200);
  assert.equal(r.text, 'OK');
}

function jsonMessage(r: { headers: Record<string, unknown>; text: string }): string {
  assert.match(String(r.headers['content-type']), /application\/json/);
  const body = JSON.parse(r.text);
  assert.equal(typeof body.message, 'string');
  assert.ok(body.message.length > 0);
  return body.message;
}

describe('protocol conformance', () => {
  let engine: Engine;
  before(async () => {
    engine = await startEngine();
  });
  after(() => engine?.cleanup());

  test('every version from 1.24 to 1.53 is served', async () => {
    for (let minor = 24; minor <= 53; minor++) {
      const r = await engine.request('GET', `/v1.${minor}/version`);
      assert.equal(r.status, 200, `v1.${minor}`);
      assert.equal(r.json().ApiVersion, '1.53');
    }
  });

  test('1.23 and 1.54 answer 400 with a JSON message; the daemon serves on', async () => {
    let r = await engine.request('GET', '/v1.23/version');
    assert.equal(r.status, 400);
    assert.match(jsonMessage(r), /too old.*1\.24/);
    r = await engine.request('GET', '/v1.54/info');
    assert.equal(r.status, 400);
    assert.match(jsonMessage(r), /too new.*1\.53/);
    r = await engine.request('POST', '/v1.12/containers/create', { body: { Image: 'busybox' } });
    assert.equal(r.status, 400);
    await servesOn(engine);
  });

  test('no prefix means the newest version', async () => {
    const strip = (info: Record<string, unknown>) => Object.keys(info).sort();
    const bare = (await engine.request('GET', '/info')).json();
    const newest = (await engine.request('GET', '/v1.53/info')).json();
    const older = (await engine.request('GET', '/v1.49/info')).json();
    assert.deepEqual(strip(bare), strip(newest));
    assert.notDeepEqual(strip(bare), strip(older));
  });

  test('unknown routes answer 404 with a JSON message', async () => {
    for (const [method, path] of [['GET', '/nope'], ['GET', '/v1.44/containers/abc/nope'], ['PATCH', '/info'], ['POST', '/version']]) {
      const r = await engine.request(method, path);
      assert.equal(r.status, 404, `${method} ${path}`);
      jsonMessage(r);
    }
    await servesOn(engine);
  });

  test('boolean query values: 1/True/true and 0/False/false accepted, others 400', async (t) => {
    if ((await engine.request('GET', '/images/json')).status === 404) return t.skip('GET /images/json is not served by this build');
    for (const v of ['1', 'True', 'true', '0', 'False', 'false']) {
      const r = await engine.request('GET', `/images/json?all=${v}`);
      assert.equal(r.status, 200, v);
    }
    for (const v of ['yes', 'TRUE', 'on']) {
      const r = await engine.request('GET', `/images/json?all=${v}`);
      assert.equal(r.status, 400, v);
      assert.match(jsonMessage(r), /all/);
    }
  });

  test('filters in both shapes; an unknown key answers 400', async () => {
    const until = `until=${Date.now() / 1000}`;
    let r = await engine.request('GET', `/events?${until}&filters=${encodeURIComponent(JSON.stringify({ type: ['container'] }))}`);
    assert.equal(r.status, 200);
    r = await engine.request('GET', `/events?${until}&filters=${encodeURIComponent(JSON.stringify({ type: { container: true } }))}`);
    assert.equal(r.status, 200);
    r = await engine.request('GET', `/events?${until}&filters=${encodeURIComponent(JSON.stringify({ colour: ['red'] }))}`);
    assert.equal(r.status, 400);
    assert.match(jsonMessage(r), /colour/);
    r = await engine.request('GET', `/events?${until}&filters=${encodeURIComponent('{"type": [')}`);
    assert.equal(r.status, 400);
    jsonMessage(r);
    if ((await engine.request('GET', '/images/json')).status !== 404) {
      r = await engine.request('GET', `/images/json?filters=${encodeURIComponent(JSON.stringify({ dangling: ['true'] }))}`);
      assert.equal(r.status, 200);
      r = await engine.request('GET', `/images/json?filters=${encodeURIComponent(JSON.stringify({ dangling: { true: true } }))}`);
      assert.equal(r.status, 200);
      r = await engine.request('GET', `/images/json?filters=${encodeURIComponent(JSON.stringify({ colour: ['red'] }))}`);
      assert.equal(r.status, 400);
      jsonMessage(r);
    }
    await servesOn(engine);
  });

  test('no CORS headers unless --api-cors-header is set', async () => {
    const r = await engine.request('GET', '/_ping', { headers: { Origin: 'https://evil.example' } });
    assert.equal(r.headers['access-control-allow-origin'], undefined);
    const pre = await engine.request('OPTIONS', '/v1.44/containers/json', { headers: { Origin: 'https://evil.example', 'Access-Control-Request-Method': 'GET' } });
    assert.equal(pre.headers['access-control-allow-origin'], undefined);
  });

  test('malformed JSON, oversized and truncated bodies get 4xx and the daemon serves on', async (t) => {
    // The first endpoint this build serves that reads a JSON body.
    let endpoint: string | undefined;
    let probe: Awaited<ReturnType<Engine['request']>> | undefined;
    for (const candidate of ['/containers/create', '/networks/create']) {
      probe = await engine.request('POST', candidate, { body: '{', headers: { 'Content-Type': 'application/json' } });
      if (!(probe.status === 404 && /page not found/.test(probe.text))) {
        endpoint = candidate;
        break;
      }
    }
    if (!endpoint || !probe) return t.skip('no endpoint reading a JSON body is served by this build');
    assert.equal(probe.status, 400);
    assert.match(jsonMessage(probe), /JSON/i);

    let r = await engine.request('POST', endpoint, { body: '{"Image": "busybox", "Name": "x"', headers: { 'Content-Type': 'application/json' } });
    assert.equal(r.status, 400);
    jsonMessage(r);

    // Over the JSON body limit: refused with a message instead of being read whole.
    const big = Buffer.alloc(8 * 1024 * 1024, 0x20);
    big.write('{"Image":"busybox","Env":["A=');
    r = await engine.request('POST', endpoint, { body: big, headers: { 'Content-Type': 'application/json' }, timeoutMs: 60_000 });
    assert.ok(r.status === 413 || r.status === 400, `status ${r.status}`);
    jsonMessage(r);
    await servesOn(engine);

    // Declares 200 bytes, sends 20, then closes its side.
    const text = await rawExchange(
      engine.socket,
      `POST /v1.44${endpoint} HTTP/1.1\r\nHost: engine\r\nContent-Type: application/json\r\nContent-Length: 200\r\n\r\n{"Image": "busybox",`,
      { halfClose: true, timeoutMs: 5000 },
    );
    assert.doesNotMatch(text, /^HTTP\/1\.1 20\d/);
    await servesOn(engine);

    // Chunked with no end: the client goes away mid-body.
    await rawExchange(
      engine.socket,
      `POST ${endpoint} HTTP/1.1\r\nHost: engine\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n10\r\n{"Image": "busy`,
      { timeoutMs: 300 },
    );
    await servesOn(engine);
  });

  test('a request line the HTTP parser refuses does not stop the daemon', async () => {
    const text = await rawExchange(engine.socket, 'THIS IS NOT HTTP\r\n\r\n', { timeoutMs: 3000 });
    assert.match(text, /^HTTP\/1\.1 400/);
    await servesOn(engine);
  });

  test('Upgrade: tcp is answered with 101 UPGRADED on attach', async (t) => {
    if ((await engine.request('GET', '/images/json')).status === 404) return t.skip('images are not served by this build');
    const images = (await engine.request('GET', '/images/json')).json() as Array<{ RepoTags: string[] }>;
    if (!images.some((i) => i.RepoTags?.includes('busybox:latest'))) await engine.loadBusybox();
    const created = await engine.request('POST', '/containers/create', { body: { Image: 'busybox', Cmd: ['sh', '-c', 'sleep 1; echo upgraded-hello'] } });
    if (created.status === 404 && /page not found/.test(created.text)) return t.skip('containers are not served by this build');
    assert.equal(created.status, 201, created.text);
    const id = created.json().Id as string;
    try {
      const pending = rawExchange(
        engine.socket,
        `POST /v1.44/containers/${id}/attach?stream=1&stdout=1&stderr=1 HTTP/1.1\r\nHost: engine\r\nConnection: Upgrade\r\nUpgrade: tcp\r\nContent-Length: 0\r\n\r\n`,
        { until: /upgraded-hello/, timeoutMs: 20_000 },
      );
      await new Promise((r) => setTimeout(r, 200));
      const start = await engine.request('POST', `/containers/${id}/start`);
      assert.equal(start.status, 204, start.text);
      const text = await pending;
      assert.match(text, /^HTTP\/1\.1 101 UPGRADED\r\n/);
      assert.match(text, /\r\nConnection: Upgrade\r\n/i);
      assert.match(text, /\r\nUpgrade: tcp\r\n/i);
      assert.match(text, /upgraded-hello/);
    } finally {
      await engine.request('DELETE', `/containers/${id}?force=1`);
    }
    await servesOn(engine);
  });
});

describe('protocol: hijacked connections', () => {
  let engine: Engine;
  before(async () => {
    engine = await startEngine();
  });
  after(() => engine?.cleanup());

  test('attach sessions whose clients went away are released when the container ends', async (t) => {
    if ((await engine.request('GET', '/containers/json')).status === 404) return t.skip('containers are not served by this build');
    await engine.loadBusybox();
    const openFds = async () => (await engine.request('GET', '/info')).json().NFd as number;
    const before = await openFds();
    // Output only and nothing printed: as with dockerd, a client's close cannot be told from the
    // half-close that `docker run` sends after its (absent) stdin, so the session lives until the
    // container ends; then everything it held must be released.
    const id = (await engine.dockerOk(['run', '-d', 'busybox', 'sleep', '3'])).trim();
    try {
      for (let i = 0; i < 10; i++) {
        await rawExchange(
          engine.socket,
          `POST /v1.44/containers/${id}/attach?stream=1&stdout=1&stderr=1 HTTP/1.1\r\nHost: engine\r\nConnection: Upgrade\r\nUpgrade: tcp\r\n\r\n`,
          { until: /\r\n\r\n/ },
        );
      }
      await engine.dockerOk(['wait', id], { timeoutMs: 30_000 });
      const settled = await eventually(async () => {
        const now = await openFds();
        return now <= before + 3 ? now : undefined;
      }, 5000).catch(() => undefined);
      assert.ok(settled !== undefined, `the daemon holds ${(await openFds()) - before} more descriptors after the container ended`);
    } finally {
      await engine.docker(['rm', '-f', id]);
    }
  });
});

describe('protocol: CORS when configured', () => {
  let engine: Engine;
  before(async () => {
    engine = await startEngine({ args: ['--api-cors-header', 'https://ui.example'] });
  });
  after(() => engine?.cleanup());

  test('responses and preflights carry the configured origin', async () => {
    const r = await engine.request('GET', '/_ping', { headers: { Origin: 'https://ui.example' } });
    assert.equal(r.headers['access-control-allow-origin'], 'https://ui.example');
    const pre = await engine.request('OPTIONS', '/v1.44/containers/json', { headers: { Origin: 'https://ui.example', 'Access-Control-Request-Method': 'GET' } });
    assert.equal(pre.status, 200);
    assert.equal(pre.headers['access-control-allow-origin'], 'https://ui.example');
    assert.match(String(pre.headers['access-control-allow-methods']), /GET/);
    const err = await engine.request('GET', '/nope');
    assert.equal(err.status, 404);
    assert.equal(err.headers['access-control-allow-origin'], 'https://ui.example');
  });
});
