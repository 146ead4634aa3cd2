/**
 * The daemon's HTTP front door against hostile or broken clients: requests that make URL parsing throw,
 * unhandled rejections, slow and idle connections, web pages posting to a TCP listener (cross-site requests
 * and DNS rebinding), stale pidfiles, and where the UI's token goes.
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, promises as fs, readFileSync, statSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import Docker from 'dockerode';
import { Engine, eventually, runCommand, startEngine } from './harness.js';
import { startTcpEngine } from './tcp-support.js';

/** Sends raw bytes on a fresh connection to a unix socket or a TCP port; resolves with the answer when the peer closes. */
function rawExchange(target: string | number, bytes: string, timeoutMs = 10_000): Promise<string> {
  return new Promise((resolve, reject) => {
    const conn = typeof target === 'number' ? net.connect(target, '127.0.0.1') : net.connect(target);
    let text = '';
    const done = () => {
      clearTimeout(timer);
      conn.destroy();
      resolve(text);
    };
    const timer = setTimeout(done, timeoutMs);
    conn.on('data', (c: Buffer) => {
      text += c.toString('latin1');
      if (/\r\n\r\n[\s\S]*\n$/.test(text) || /Content-Length: 0\r\n\r\n$/i.test(text)) done();
    });
    conn.on('close', done);
    conn.on('error', (err) => (text ? done() : reject(err)));
    conn.write(bytes);
  });
}

async function pings(engine: Engine): Promise<void> {
  const r = await engine.request('GET', '/_ping', { timeoutMs: 3000 });
  assert.equal(r.status, 200);
  assert.equal(r.text, 'OK');
}

/** One HTTP request to a TCP port, with exactly the headers given (Host included). */
function tcpRequest(port: number, method: string, urlPath: string, headers: Record<string, string>, body?: string | Buffer): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, method, path: urlPath, headers, agent: false, setHost: false }, (res) => {
      let text = '';
      res.on('data', (c) => (text += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
    });
    req.on('error', reject);
    req.setTimeout(20_000, () => req.destroy(new Error(`${method} ${urlPath} timed out`)));
    req.end(body);
  });
}

describe('no request ends the daemon', () => {
  let engine: Engine;
  let trigger: string;
  before(async () => {
    // A preloaded module rejects a promise nobody waits for once the test asks, as a bug in the daemon would.
    const root = await fs.mkdtemp('/tmp/bt-rej-');
    trigger = path.join(root, 'reject-now');
    const preload = path.join(root, 'reject.mjs');
    await fs.writeFile(
      preload,
      `import { existsSync } from 'node:fs';\n` +
        `const timer = setInterval(() => {\n` +
        `  if (!existsSync(${JSON.stringify(trigger)})) return;\n` +
        `  clearInterval(timer);\n` +
        `  Promise.reject(new Error('deliberate unhandled rejection'));\n` +
        `}, 50);\n` +
        `timer.unref();\n`,
    );
    engine = await startEngine({ args: ['--ui', '127.0.0.1:0'], nodeArgs: ['--import', preload] });
  });
  after(async () => {
    await engine?.cleanup();
    if (trigger) await fs.rm(path.dirname(trigger), { recursive: true, force: true });
  });

  test('GET // and other targets URL parsing refuses are answered on the API socket', async () => {
    for (const target of ['//', '//_ping', '///containers/json', '//[']) {
      const text = await rawExchange(engine.socket, `GET ${target} HTTP/1.1\r\nHost: api.moby.localhost\r\nConnection: close\r\n\r\n`);
      assert.match(text, /^HTTP\/1\.1 4\d\d /, `${target}: ${text}`);
      assert.match(text, /"message":/);
      await pings(engine);
    }
    assert.equal(engine.pid !== undefined, true, 'the daemon is still running');
  });

  test('GET // is answered on the --ui listener', async () => {
    const file = path.join(engine.execRoot, 'ui-url');
    const loginUrl = (await eventually(() => (existsSync(file) ? readFileSync(file, 'utf8').trim() : undefined)))!;
    const port = Number(new URL(loginUrl).port);
    for (const target of ['//', '//x', '//[']) {
      const text = await rawExchange(port, `GET ${target} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nConnection: close\r\n\r\n`);
      assert.match(text, /^HTTP\/1\.1 4\d\d /, `${target}: ${text}`);
    }
    // The same with an upgrade (the websocket path of the listener).
    const upgraded = await rawExchange(port, `GET // HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n`);
    assert.match(upgraded, /^HTTP\/1\.1 4\d\d /);
    await pings(engine);
  });

  test('an unhandled rejection is logged and the daemon serves on', async () => {
    await fs.writeFile(trigger, '');
    await eventually(() => engine.daemonLog.includes('deliberate unhandled rejection'), 5000);
    assert.match(engine.daemonLog, /level=error msg="unhandled rejection"/);
    await new Promise((r) => setTimeout(r, 300));
    await pings(engine);
    assert.notEqual(engine.pid, undefined);
  });

  test('the UI token is in a file only its owner reads, not in the log', async () => {
    const file = path.join(engine.execRoot, 'ui-url');
    const mode = statSync(file).mode & 0o777;
    assert.equal(mode, 0o600, `mode ${mode.toString(8)}`);
    const loginUrl = readFileSync(file, 'utf8').trim();
    const token = new URL(loginUrl).searchParams.get('token');
    assert.ok(token && token.length >= 20);
    assert.ok(!engine.daemonLog.includes(token), 'the token is in the daemon log');
    assert.match(engine.daemonLog, /UI listening/);
    // The token of the file is the one the UI takes.
    const port = Number(new URL(loginUrl).port);
    const withToken = await tcpRequest(port, 'GET', '/api/_ping', { Host: `127.0.0.1:${port}`, Authorization: `Bearer ${token}` });
    assert.equal(withToken.status, 200, withToken.text);
    const wrong = await tcpRequest(port, 'GET', '/api/_ping', { Host: `127.0.0.1:${port}`, Authorization: `Bearer ${token.slice(1)}` });
    assert.equal(wrong.status, 401);
  });
});

describe('slow and idle clients', () => {
  let engine: Engine;
  before(async () => {
    engine = await startEngine({
      env: { BERTH_HTTP_HEADERS_TIMEOUT_MS: '2000', BERTH_HTTP_BODY_IDLE_MS: '2000', BERTH_HTTP_KEEPALIVE_MS: '2000', BERTH_HTTP_MAX_UNFINISHED: '150' },
    });
    await engine.loadBusybox();
  });
  after(() => engine?.cleanup());

  test('half-open connections are closed in bounded time while _ping answers and streams stay open', async (t) => {
    // Long-lived responses started before the flood: logs with follow, and events.
    await engine.dockerOk(['run', '-d', '--name', 'talker', 'busybox', 'sh', '-c', 'echo first; sleep 8; echo second; sleep 600']);
    const logs = http.get({ socketPath: engine.socket, path: '/containers/talker/logs?follow=1&stdout=1' });
    let logText = '';
    logs.on('response', (res) => res.on('data', (c: Buffer) => (logText += c.toString('latin1'))));
    const events = http.get({ socketPath: engine.socket, path: '/events' });
    let eventText = '';
    events.on('response', (res) => res.on('data', (c: Buffer) => (eventText += c.toString('utf8'))));
    after(() => {
      logs.destroy();
      events.destroy();
    });
    await eventually(() => logText.includes('first'));

    // 300 connections that never finish: silent ones, unfinished heads, unfinished bodies.
    const sockets: net.Socket[] = [];
    let closed = 0;
    const started = Date.now();
    for (let i = 0; i < 300; i++) {
      const s = net.connect(engine.socket);
      s.on('error', () => undefined);
      s.on('close', () => closed++);
      s.resume(); // reading, so that the server's close is seen
      if (i % 3 === 1) s.write('GET /containers/json HTTP/1.1\r\nHost: docker\r\n');
      if (i % 3 === 2) s.write('POST /containers/create HTTP/1.1\r\nHost: docker\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"Image":');
      sockets.push(s);
    }
    after(() => {
      for (const s of sockets) s.destroy();
    });
    // Beyond the cap of unfinished requests, the oldest go at once.
    await eventually(() => closed >= 150, 3000);
    // _ping answers throughout, quickly.
    const pingTimes: number[] = [];
    while (closed < 300 && Date.now() - started < 15_000) {
      const t0 = Date.now();
      await pings(engine);
      pingTimes.push(Date.now() - t0);
      await new Promise((r) => setTimeout(r, 100));
    }
    assert.equal(closed, 300, `${300 - closed} connections still open after ${Date.now() - started} ms`);
    t.diagnostic(`300 half-open connections closed in ${Date.now() - started} ms; ${pingTimes.length} pings meanwhile, slowest ${Math.max(...pingTimes)} ms`);
    assert.ok(Date.now() - started < 10_000, `closing took ${Date.now() - started} ms`);
    assert.ok(Math.max(...pingTimes) < 1000, `slowest _ping ${Math.max(...pingTimes)} ms`);

    // The streams outlived every timeout: the log's next line and a new event still arrive.
    await eventually(() => logText.includes('second'), 15_000);
    await engine.dockerOk(['create', '--name', 'late', 'busybox', 'true']);
    await eventually(() => /"Action":"create"[\s\S]*late/.test(eventText) || eventText.includes('"name":"late"'), 5000);
  });

  test('an upload that keeps flowing is not cut; one that stalls is', async () => {
    const tarball = path.join(engine.root, 'slow.tar');
    const { buildBusyboxArchive } = (await import('./fixtures/busybox.js')) as { buildBusyboxArchive(file: string, opts?: { tag?: string }): Promise<void> };
    await buildBusyboxArchive(tarball, { tag: 'slow:1' });
    const bytes = await fs.readFile(tarball);
    // Ten pieces 600 ms apart: the upload lasts longer than the body timeout, but never stops for that long.
    const status = await new Promise<number>((resolve, reject) => {
      const req = http.request(
        { socketPath: engine.socket, method: 'POST', path: '/images/load?quiet=1', headers: { 'Content-Type': 'application/x-tar', 'Content-Length': bytes.length } },
        (res) => {
          res.resume();
          res.on('end', () => resolve(res.statusCode ?? 0));
        },
      );
      req.on('error', reject);
      const piece = Math.ceil(bytes.length / 10);
      let at = 0;
      const next = () => {
        req.write(bytes.subarray(at, at + piece));
        at += piece;
        if (at >= bytes.length) req.end();
        else setTimeout(next, 600);
      };
      next();
    });
    assert.equal(status, 200);
    assert.equal((await engine.request('GET', '/images/slow:1/json')).status, 200);

    // The same upload stopping half-way: the connection is closed once the body has been idle long enough.
    const t0 = Date.now();
    const text = await rawExchange(
      engine.socket,
      `POST /images/load HTTP/1.1\r\nHost: docker\r\nContent-Type: application/x-tar\r\nContent-Length: ${bytes.length}\r\n\r\n` + bytes.subarray(0, 4096).toString('latin1'),
      20_000,
    );
    assert.ok(Date.now() - t0 < 8000, `the stalled upload was held ${Date.now() - t0} ms`);
    assert.doesNotMatch(text, /^HTTP\/1\.1 200/);
    await pings(engine);
  });
});

describe('a plain TCP listener', () => {
  let engine: Engine;
  let port: number;
  before(async () => {
    ({ engine, port } = await startTcpEngine());
    await engine.loadBusybox();
  });
  after(() => engine?.cleanup());

  test('starting it without TLS warns', () => {
    assert.match(engine.daemonLog, /level=warn msg="serving the API on tcp:\/\/127\.0\.0\.1:\d+ without TLS/);
  });

  test('a text/plain POST from a web page is refused and creates nothing', async () => {
    const body = JSON.stringify({ Image: 'busybox', Cmd: ['true'] });
    for (const type of ['text/plain', 'text/plain;charset=UTF-8', 'application/x-www-form-urlencoded']) {
      const r = await tcpRequest(port, 'POST', '/containers/create?name=csrf', { Host: `127.0.0.1:${port}`, 'Content-Type': type, 'Content-Length': String(body.length) }, body);
      assert.equal(r.status, 400, r.text);
      assert.match(JSON.parse(r.text).message, /Content-Type/);
    }
    // A body without a Content-Type (a Blob from fetch) is refused too.
    const bare = await tcpRequest(port, 'POST', '/containers/create?name=csrf', { Host: `127.0.0.1:${port}`, 'Content-Length': String(body.length) }, body);
    assert.equal(bare.status, 400, bare.text);
    // A tar endpoint refuses form and text bodies.
    const load = await tcpRequest(port, 'POST', '/images/load', { Host: `127.0.0.1:${port}`, 'Content-Type': 'text/plain', 'Content-Length': '3' }, 'abc');
    assert.equal(load.status, 400, load.text);
    // A browser's request carries its Origin, also when it has no body.
    const prune = await tcpRequest(port, 'POST', '/containers/prune', { Host: `127.0.0.1:${port}`, Origin: 'https://evil.example' });
    assert.equal(prune.status, 403, prune.text);
    assert.match(JSON.parse(prune.text).message, /cross-origin/);
    // A page's websocket (no CORS applies to those) to attach is refused the same way.
    await engine.dockerOk(['create', '--name', 'ws-target', 'busybox', 'true']);
    const ws = await rawExchange(
      port,
      `GET /containers/ws-target/attach/ws?stream=1&stdin=1 HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nOrigin: https://evil.example\r\n` +
        'Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n',
    );
    assert.match(ws, /^HTTP\/1\.1 403 /);
    await engine.dockerOk(['rm', 'ws-target']);
    assert.equal((await engine.request('GET', '/containers/csrf/json')).status, 404);
    // An empty body without a Content-Type is what real clients send to many endpoints.
    const ok = await tcpRequest(port, 'POST', '/containers/create?name=plain', { Host: `127.0.0.1:${port}`, 'Content-Type': 'application/json', 'Content-Length': String(body.length) }, body);
    assert.equal(ok.status, 201, ok.text);
    const start = await tcpRequest(port, 'POST', '/containers/plain/start', { Host: `127.0.0.1:${port}`, 'Content-Length': '0' });
    assert.equal(start.status, 204, start.text);
    await engine.dockerOk(['rm', '-f', 'plain']);
  });

  test('a Host that is not an IP address or a loopback name is refused (DNS rebinding)', async () => {
    for (const host of ['evil.example', `evil.example:${port}`, `127.0.0.1.nip.io:${port}`, 'localhost.evil.example', '']) {
      const r = await tcpRequest(port, 'GET', '/containers/json', { Host: host });
      assert.equal(r.status, 403, `${host}: ${r.status} ${r.text}`);
      assert.match(JSON.parse(r.text).message, /not allowed/);
    }
    for (const host of [`127.0.0.1:${port}`, `localhost:${port}`, 'localhost', `[::1]:${port}`, 'api.moby.localhost', 'docker']) {
      const r = await tcpRequest(port, 'GET', '/_ping', { Host: host });
      assert.equal(r.status, 200, `${host}: ${r.text}`);
    }
  });

  test('the docker CLI, dockerode and docker-py work over it', async () => {
    for (const address of [`tcp://127.0.0.1:${port}`, `tcp://localhost:${port}`]) {
      const run = await engine.docker(['run', '--rm', 'busybox', 'echo', 'over-tcp'], { env: { DOCKER_HOST: address } });
      assert.equal(run.code, 0, run.stderr);
      assert.equal(run.stdout.trim(), 'over-tcp');
    }
    // A tar upload from the CLI (docker cp into a container).
    await engine.dockerOk(['create', '--name', 'cp-target', 'busybox', 'true']);
    const file = path.join(engine.root, 'copied.txt');
    await fs.writeFile(file, 'copied over tcp\n');
    const cp = await engine.docker(['cp', file, 'cp-target:/copied.txt'], { env: { DOCKER_HOST: `tcp://127.0.0.1:${port}` } });
    assert.equal(cp.code, 0, cp.stderr);
    await engine.dockerOk(['rm', 'cp-target']);

    for (const host of ['127.0.0.1', 'localhost']) {
      const docker = new Docker({ host, port });
      const container = await docker.createContainer({ Image: 'busybox', Cmd: ['true'] });
      await container.start();
      assert.equal((await container.wait()).StatusCode, 0);
      await container.remove();
      assert.ok((await docker.listImages()).length > 0);
    }

    // Debian's python3-docker (not the python3 of another install on PATH).
    const tarball = path.join(engine.root, 'py.tar');
    const { buildBusyboxArchive } = (await import('./fixtures/busybox.js')) as { buildBusyboxArchive(file: string, opts?: { tag?: string }): Promise<void> };
    await buildBusyboxArchive(tarball, { tag: 'pyloaded:1' });
    const script = [
      'import sys, docker',
      'for base in sys.argv[1:3]:',
      '    c = docker.DockerClient(base_url=base)',
      "    out = c.containers.run('busybox', ['echo', 'py-ok'], remove=True)",
      "    assert out == b'py-ok\\n', out",
      "    c.networks.create('pynet-' + str(len(base))).remove()",
      "with open(sys.argv[3], 'rb') as f:",
      '    images = docker.DockerClient(base_url=sys.argv[1]).images.load(f.read())',
      "print(' '.join(t for i in images for t in i.tags))",
    ].join('\n');
    const py = await runCommand('/usr/bin/python3', ['-c', script, `tcp://127.0.0.1:${port}`, `tcp://localhost:${port}`, tarball], { timeoutMs: 60_000 });
    assert.equal(py.code, 0, py.stderr);
    assert.match(py.stdout, /pyloaded:1/);
  });
});

describe('a stale pidfile', () => {
  let engine: Engine;
  const children: ChildProcess[] = [];
  before(async () => {
    engine = await startEngine();
  });
  after(async () => {
    for (const child of children) child.kill('SIGKILL');
    await engine?.cleanup();
  });

  test('a start after kill -9 succeeds', async () => {
    const pid = engine.pid!;
    await engine.crash();
    assert.equal(readFileSync(engine.pidfile, 'utf8').trim(), String(pid));
    await engine.start();
    await pings(engine);
  });

  test('a pidfile naming a zombie or an unrelated live process does not block a start', async () => {
    await engine.stop();
    // A zombie: a child of a process that never reaps it.
    const parent = spawn('sh', ['-c', 'sleep 0 & echo $!; exec sleep 60'], { stdio: ['ignore', 'pipe', 'ignore'] });
    children.push(parent);
    const zombie = Number((await new Promise<Buffer>((resolve) => parent.stdout!.once('data', resolve))).toString().trim());
    await eventually(() => /^State:\s+Z/m.test(readFileSync(`/proc/${zombie}/status`, 'utf8')), 5000);
    await fs.writeFile(engine.pidfile, `${zombie}\n`);
    await engine.start();
    await pings(engine);
    assert.equal(readFileSync(engine.pidfile, 'utf8').trim(), String(engine.pid));
    await engine.stop();

    const unrelated = spawn('sleep', ['60'], { stdio: 'ignore' });
    children.push(unrelated);
    await fs.writeFile(engine.pidfile, `${unrelated.pid}\n`);
    await engine.start();
    await pings(engine);
  });

  test('a live berthd with the same pidfile blocks a start', async () => {
    const second = new Engine({ args: ['--pidfile', engine.pidfile] });
    try {
      await assert.rejects(second.start(), /names a running berthd/);
    } finally {
      await second.cleanup();
    }
    assert.equal(readFileSync(engine.pidfile, 'utf8').trim(), String(engine.pid));
    await pings(engine);
  });
});
