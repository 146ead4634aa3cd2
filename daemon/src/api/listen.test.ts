import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { isLoopbackHost, listenOn, parseListenAddress } from './listen.js';

test('listen addresses: unix paths, tcp host and port, refusals', () => {
  assert.deepEqual(parseListenAddress('unix:///run/berth/engine.sock'), { kind: 'unix', path: '/run/berth/engine.sock' });
  assert.deepEqual(parseListenAddress('/tmp/x.sock'), { kind: 'unix', path: '/tmp/x.sock' });
  assert.deepEqual(parseListenAddress('tcp://127.0.0.1:2376'), { kind: 'tcp', host: '127.0.0.1', port: 2376 });
  assert.deepEqual(parseListenAddress('tcp://[::1]:2375'), { kind: 'tcp', host: '::1', port: 2375 });
  assert.deepEqual(parseListenAddress('tcp://0.0.0.0'), { kind: 'tcp', host: '0.0.0.0', port: 2375 });
  assert.throws(() => parseListenAddress('unix://relative.sock'), /absolute/);
  assert.throws(() => parseListenAddress('fd://'), /invalid listen address/);
  assert.throws(() => parseListenAddress('tcp://1.2.3.4:99999'));
  // Windows named pipes, in the docker CLI's two spellings.
  assert.deepEqual(parseListenAddress('npipe:////./pipe/berth'), { kind: 'npipe', path: '\\\\.\\pipe\\berth' });
  assert.deepEqual(parseListenAddress('npipe://./pipe/docker_engine'), { kind: 'npipe', path: '\\\\.\\pipe\\docker_engine' });
  assert.throws(() => parseListenAddress('npipe:////./pipe/'), /invalid named pipe address/);
  assert.throws(() => parseListenAddress('npipe:///tmp/x'), /invalid named pipe address/);
});

test('loopback hosts', () => {
  for (const h of ['127.0.0.1', '127.1.2.3', '::1', 'localhost']) assert.equal(isLoopbackHost(h), true, h);
  for (const h of ['0.0.0.0', '::', '10.0.0.1', '192.0.2.1', 'example.com']) assert.equal(isLoopbackHost(h), false, h);
});

test('a stale socket file is replaced; a live one is not stolen', async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'berth-listen-'));
  const socket = path.join(dir, 'api.sock');
  try {
    // A socket file left by a crash: a process bound it and was killed before it could unlink it.
    const child = spawn(process.execPath, ['-e', `require('net').createServer().listen(${JSON.stringify(socket)}, () => console.log('up'))`], { stdio: ['ignore', 'pipe', 'inherit'] });
    await new Promise<void>((resolve) => child.stdout!.once('data', () => resolve()));
    child.kill('SIGKILL');
    await new Promise<void>((resolve) => child.once('exit', () => resolve()));
    assert.ok(existsSync(socket), 'the killed process left its socket file');
    await assert.rejects(new Promise((resolve, reject) => net.connect(socket).once('connect', resolve).once('error', reject)));
    const server = http.createServer((_req, res) => res.end('ok'));
    await listenOn(server, { kind: 'unix', path: socket });
    const answer = await new Promise<string>((resolve, reject) => {
      http.get({ socketPath: socket, path: '/' }, (res) => {
        let body = '';
        res.on('data', (c) => (body += c));
        res.on('end', () => resolve(body));
      }).on('error', reject);
    });
    assert.equal(answer, 'ok');
    const other = http.createServer();
    await assert.rejects(listenOn(other, { kind: 'unix', path: socket }), /served by another process/);
    await new Promise<void>((resolve) => server.close(() => resolve()));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
