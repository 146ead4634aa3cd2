import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Conflict, NotFound } from '../errors.js';
import { boolParam, filterParam } from './params.js';
import { Router } from './router.js';
import { enginePermission, grants, splitVersion } from './server.js';
import { serveRouter, type TestServer } from './testing.js';

describe('API server', () => {
  let api: TestServer;
  let cors: TestServer;
  const seen: Array<{ path: string; version: number; params: Record<string, string> }> = [];

  before(async () => {
    const router = new Router()
      .get('/probe', (req, res) => {
        seen.push({ path: req.path, version: req.version, params: req.params });
        res.json(200, { version: req.version });
      })
      .get('/images/:name*/json', (req, res) => res.json(200, { name: req.params.name }))
      .get('/containers/:id/json', (req, res) => res.json(200, { id: req.params.id }))
      .get('/bool', (req, res) => res.json(200, { all: boolParam(req, 'all') }))
      .get('/filtered', (req, res) => res.json(200, Object.fromEntries(filterParam(req, ['label', 'status']))))
      .get('/missing', () => {
        throw new NotFound('no such thing: x');
      })
      .get('/conflict', () => {
        throw new Conflict('in use');
      })
      .get('/crash', () => {
        throw new Error('boom');
      })
      .post('/body', async (req, res) => res.json(200, { body: (await req.json()) ?? null }))
      .post('/hijack', (req, res) => {
        const sock = res.hijack('application/vnd.docker.raw-stream');
        sock.write('hello from the engine\n');
        sock.on('data', (c: Buffer) => {
          sock.end(`echo:${c.toString()}`);
        });
        // The client closing its side ends the session (a half-closed socket would stay open forever).
        sock.on('end', () => sock.end());
      });
    api = await serveRouter(router);
    cors = await serveRouter(router, { corsOrigin: 'https://ui.example' });
  });
  after(async () => {
    await api.close();
    await cors.close();
  });

  test('version prefix: every version from 1.24 to 1.53 is served, no prefix means 1.53', async () => {
    for (const v of [24, 25, 40, 53]) {
      const r = await api.request('GET', `/v1.${v}/probe`);
      assert.equal(r.status, 200);
      assert.deepEqual(JSON.parse(r.text), { version: v });
    }
    const r = await api.request('GET', '/probe');
    assert.deepEqual(JSON.parse(r.text), { version: 53 });
  });

  test('versions out of range answer 400 with a JSON message', async () => {
    for (const [path, word] of [['/v1.23/probe', 'too old'], ['/v1.54/probe', 'too new'], ['/v2.0/probe', 'too new'], ['/v0.9/probe', 'too old']]) {
      const r = await api.request('GET', path);
      assert.equal(r.status, 400, path);
      assert.match(r.headers['content-type'] ?? '', /application\/json/);
      assert.match(JSON.parse(r.text).message, new RegExp(word));
    }
    assert.deepEqual(splitVersion('/v1.30'), { minor: 30, path: '/' });
  });

  test('unknown routes and methods answer 404 with a JSON message', async () => {
    for (const [method, path] of [['GET', '/nope'], ['GET', '/v1.44/nope'], ['DELETE', '/probe']]) {
      const r = await api.request(method, path);
      assert.equal(r.status, 404);
      assert.equal(typeof JSON.parse(r.text).message, 'string');
    }
  });

  test('path parameters: a greedy image name holds slashes, a trailing slash names the same resource', async () => {
    let r = await api.request('GET', '/v1.44/images/registry.local:5000/team/app:1.0/json');
    assert.deepEqual(JSON.parse(r.text), { name: 'registry.local:5000/team/app:1.0' });
    r = await api.request('GET', '/images/sha256%3Aabc/json');
    assert.deepEqual(JSON.parse(r.text), { name: 'sha256:abc' });
    r = await api.request('GET', '/containers/abc/json/');
    assert.deepEqual(JSON.parse(r.text), { id: 'abc' });
  });

  test('boolean query values: 1/True/true and 0/False/false, anything else 400', async () => {
    for (const v of ['1', 'True', 'true']) assert.deepEqual(JSON.parse((await api.request('GET', `/bool?all=${v}`)).text), { all: true });
    for (const v of ['0', 'False', 'false', '']) assert.deepEqual(JSON.parse((await api.request('GET', `/bool?all=${v}`)).text), { all: false });
    assert.deepEqual(JSON.parse((await api.request('GET', '/bool')).text), { all: false });
    for (const v of ['yes', 'TRUE', '2']) {
      const r = await api.request('GET', `/bool?all=${v}`);
      assert.equal(r.status, 400, v);
      assert.match(JSON.parse(r.text).message, /invalid boolean value/);
    }
  });

  test('filters: both shapes are read, unknown keys and malformed JSON answer 400', async () => {
    const listShape = encodeURIComponent(JSON.stringify({ label: ['a=1', 'b'], status: ['running'] }));
    const mapShape = encodeURIComponent(JSON.stringify({ label: { 'a=1': true, b: true, c: false } }));
    assert.deepEqual(JSON.parse((await api.request('GET', `/filtered?filters=${listShape}`)).text), { label: ['a=1', 'b'], status: ['running'] });
    assert.deepEqual(JSON.parse((await api.request('GET', `/filtered?filters=${mapShape}`)).text), { label: ['a=1', 'b'] });
    let r = await api.request('GET', `/filtered?filters=${encodeURIComponent('{"colour":["red"]}')}`);
    assert.equal(r.status, 400);
    assert.match(JSON.parse(r.text).message, /invalid filter 'colour'/);
    r = await api.request('GET', `/filtered?filters=${encodeURIComponent('{"label":')}`);
    assert.equal(r.status, 400);
    r = await api.request('GET', `/filtered?filters=${encodeURIComponent('["label"]')}`);
    assert.equal(r.status, 400);
  });

  test('errors map by class: 404, 409, and 500 for the unclassified', async () => {
    let r = await api.request('GET', '/missing');
    assert.equal(r.status, 404);
    assert.deepEqual(JSON.parse(r.text), { message: 'no such thing: x' });
    r = await api.request('GET', '/conflict');
    assert.equal(r.status, 409);
    r = await api.request('GET', '/crash');
    assert.equal(r.status, 500);
    assert.equal(JSON.parse(r.text).message, 'boom');
    r = await api.request('HEAD', '/missing');
    assert.equal(r.status, 404);
    assert.equal(r.text, '');
  });

  test('bodies: malformed JSON, oversized and truncated bodies answer 4xx and the server serves on', async () => {
    let r = await api.request('POST', '/body', { body: '{"Image": "busybox"', headers: { 'Content-Type': 'application/json' } });
    assert.equal(r.status, 400);
    assert.match(JSON.parse(r.text).message, /invalid JSON/);

    const big = Buffer.alloc(5 * 1024 * 1024, 0x20);
    r = await api.request('POST', '/body', { body: big, headers: { 'Content-Type': 'application/json' } });
    assert.equal(r.status, 413);
    assert.match(JSON.parse(r.text).message, /exceeds the limit/);

    // Chunked, without Content-Length: the limit holds while reading.
    const chunked = await api.raw(
      `POST /body HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n` +
        `${(5 * 1024 * 1024).toString(16)}\r\n${' '.repeat(5 * 1024 * 1024)}\r\n0\r\n\r\n`,
      { until: /\r\n\r\n[\s\S]*\}\n/ },
    );
    assert.match(chunked, /^HTTP\/1\.1 413 /);

    // A body cut short: the client declares 100 bytes, sends 10 and closes its side.
    const truncated = await api.raw('POST /body HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"a": 1234', { endAfterWrite: true });
    assert.doesNotMatch(truncated, /^HTTP\/1\.1 200/);

    r = await api.request('POST', '/body', { body: '{"ok": true}', headers: { 'Content-Type': 'application/json' } });
    assert.deepEqual(JSON.parse(r.text), { body: { ok: true } });
    r = await api.request('POST', '/body');
    assert.deepEqual(JSON.parse(r.text), { body: null });
  });

  test('Upgrade: tcp is answered with 101 UPGRADED and the raw stream follows', async () => {
    const text = await api.raw('POST /v1.44/hijack HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: tcp\r\nContent-Length: 0\r\n\r\n', { until: /hello from the engine\n/ });
    assert.match(text, /^HTTP\/1\.1 101 UPGRADED\r\n/);
    assert.match(text, /\r\nConnection: Upgrade\r\n/i);
    assert.match(text, /\r\nUpgrade: tcp\r\n/i);
    assert.match(text, /\r\nContent-Type: application\/vnd\.docker\.raw-stream\r\n/i);
    // Without the header the same handler answers 200 and still streams.
    const plain = await api.raw('POST /hijack HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n', { until: /hello from the engine\n/ });
    assert.match(plain, /^HTTP\/1\.1 200 OK\r\n/);
  });

  test('Upgrade: tcp stream carries bytes both ways', async () => {
    const net = await import('node:net');
    const text = await new Promise<string>((resolve, reject) => {
      const conn = net.connect(api.socket);
      let got = '';
      conn.on('data', (c: Buffer) => {
        got += c.toString();
        if (got.includes('hello from the engine\n') && !got.includes('echo:')) conn.write('ping');
      });
      conn.on('end', () => resolve(got));
      conn.on('error', reject);
      conn.write('POST /hijack HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: tcp\r\n\r\n');
    });
    assert.match(text, /echo:ping$/);
  });

  test('every answer names the API version, the OS and the engine', async () => {
    for (const path of ['/probe', '/nope', '/v1.10/probe']) {
      const r = await api.request('GET', path);
      assert.equal(r.headers['api-version'], '1.53', path);
      assert.equal(r.headers.ostype, 'linux', path);
      assert.match(String(r.headers.server), /^Berth\/\S+ \(linux\)$/, path);
    }
  });

  test('CORS headers only when an origin is configured', async () => {
    const plain = await api.request('GET', '/probe');
    assert.equal(plain.headers['access-control-allow-origin'], undefined);
    const withCors = await cors.request('GET', '/probe');
    assert.equal(withCors.headers['access-control-allow-origin'], 'https://ui.example');
    assert.match(String(withCors.headers['access-control-allow-methods']), /GET/);
    const preflight = await cors.request('OPTIONS', '/v1.44/containers/json');
    assert.equal(preflight.status, 200);
    assert.equal(preflight.headers['access-control-allow-origin'], 'https://ui.example');
    const noPreflight = await api.request('OPTIONS', '/v1.44/containers/json');
    assert.equal(noPreflight.status, 404);
    // Errors carry the CORS headers too, so a browser can read them.
    const err = await cors.request('GET', '/v1.10/probe');
    assert.equal(err.headers['access-control-allow-origin'], 'https://ui.example');
  });

  test('the server serves on after every bad request above', async () => {
    const r = await api.request('GET', '/v1.44/probe');
    assert.equal(r.status, 200);
    assert.ok(seen.length > 0);
  });
});

test('a token\'s engine permission: reads need engineRead, the websocket attach and every other method engineWrite', () => {
  assert.equal(enginePermission('GET', '/containers/json'), 'engineRead');
  assert.equal(enginePermission('HEAD', '/v1.44/_ping'), 'engineRead');
  assert.equal(enginePermission('GET', '/v1.41/containers/json'), 'engineRead');
  for (const path of ['/containers/abc/attach/ws', '/v1.44/containers/abc/attach/ws', '/containers/abc/attach/ws/']) {
    assert.equal(enginePermission('GET', path), 'engineWrite', path);
  }
  assert.equal(enginePermission('GET', '/containers/abc/attach/wsx'), 'engineRead');
  for (const method of ['POST', 'PUT', 'DELETE', 'PATCH']) assert.equal(enginePermission(method, '/volumes/create'), 'engineWrite');
  assert.ok(grants(['engineWrite'], 'engineRead'));
  assert.ok(!grants(['engineRead'], 'engineWrite'));
  assert.ok(!grants(['networkPoliciesWrite'], 'networkPoliciesRead'));
});
