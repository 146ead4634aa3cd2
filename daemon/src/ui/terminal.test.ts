import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { engineErrorText, hijackHeaders, proxyTerminal, type TerminalSink } from './terminal.js';

/** An engine on a unix socket whose exec `e1` is a shell that echoes in upper case; others are unknown. */
function fakeEngine(socketPath: string): Promise<http.Server> {
  const server = http.createServer((req, res) => {
    res.writeHead(500, { 'Content-Type': 'text/plain' });
    res.end('');
  });
  server.on('upgrade', (req, socket) => {
    if (req.url === '/exec/e1/start') {
      // The first bytes come with the upgrade answer.
      socket.write('HTTP/1.1 101 UPGRADED\r\nConnection: Upgrade\r\nUpgrade: tcp\r\n\r\n$ ');
      socket.on('data', (d: Buffer) => {
        const text = d.toString();
        if (text.includes('exit')) socket.end();
        else socket.write(text.toUpperCase());
      });
      return;
    }
    // A refusal: the connection closes once the client read the answer (the request body is read first, so
    // that closing does not reset the connection).
    socket.on('data', () => undefined);
    socket.on('end', () => socket.end());
    if (req.url === '/exec/plain/start') return void socket.write('HTTP/1.1 409 Conflict\r\nContent-Type: text/plain\r\nContent-Length: 12\r\nConnection: close\r\n\r\nnot running\n');
    socket.write('HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\nContent-Length: 30\r\nConnection: close\r\n\r\n{"message":"No such exec: e2"}');
  });
  return new Promise((resolve) => server.listen(socketPath, () => resolve(server)));
}

/** A sink that records what reached it, and resolves `done` at the terminal's end of any kind. */
function recorder() {
  const events: string[] = [];
  let output = '';
  let finish!: () => void;
  const done = new Promise<void>((r) => (finish = r));
  const sink: TerminalSink = {
    data: (bytes) => (output += bytes.toString()),
    end: () => (events.push('end'), finish()),
    broken: (err) => (events.push(`broken ${err.message}`), finish()),
    refused: (status, message) => (events.push(`refused ${status} ${message}`), finish()),
    unreachable: (err) => (events.push(`unreachable ${(err as NodeJS.ErrnoException).code}`), finish()),
  };
  return { sink, events, done, output: () => output };
}

describe('exec terminal proxy', () => {
  let dir: string;
  let socketPath: string;
  let engine: http.Server;
  before(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'berth-terminal-'));
    socketPath = path.join(dir, 'engine.sock');
    engine = await fakeEngine(socketPath);
  });
  after(() => {
    engine.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const open = (execId: string, sink: TerminalSink, at = socketPath) => {
    const body = JSON.stringify({ Detach: false, Tty: true });
    const request = http.request({ socketPath: at, method: 'POST', path: `/exec/${execId}/start`, headers: { Host: 'engine', ...hijackHeaders(body) } });
    return proxyTerminal(request, body, sink);
  };

  it('carries keystrokes typed before the upgrade, the first bytes of the answer, and the end', async () => {
    const r = recorder();
    const terminal = open('e1', r.sink);
    terminal.write(Buffer.from('echo hi'));
    for (let i = 0; i < 100 && r.output() !== '$ ECHO HI'; i++) await new Promise((res) => setTimeout(res, 20));
    assert.equal(r.output(), '$ ECHO HI');
    terminal.write(Buffer.from('exit'));
    await r.done;
    assert.deepEqual(r.events, ['end']);
  });

  it('reports an answer without upgrade with its status and message, JSON or text', async () => {
    const unknown = recorder();
    open('e2', unknown.sink);
    await unknown.done;
    assert.deepEqual(unknown.events, ['refused 404 No such exec: e2']);
    const plain = recorder();
    open('plain', plain.sink);
    await plain.done;
    assert.deepEqual(plain.events, ['refused 409 not running\n']);
  });

  it('reports an engine that does not answer; an error body gives its JSON message or its text', async () => {
    const missing = recorder();
    open('e1', missing.sink, path.join(dir, 'missing.sock'));
    await missing.done;
    assert.deepEqual(missing.events, ['unreachable ENOENT']);
    assert.equal(engineErrorText('{"message":"m"}'), 'm');
    assert.equal(engineErrorText('{"other":1}'), '{"other":1}');
    assert.equal(engineErrorText('text'), 'text');
  });
});
