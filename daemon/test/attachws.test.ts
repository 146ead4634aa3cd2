/**
 * Attach over a websocket (GET /containers/{id}/attach/ws) against a real berthd, with the `ws` client:
 * stdin to the container, its output back as binary messages (text before API 1.28), the past log with
 * logs=1, stream selection from API 1.42, and the refusals (unknown container, no handshake, paused).
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import WebSocket from 'ws';
import { useEngine } from './harness.js';

const engine = useEngine();

interface Received {
  data: Buffer;
  binary: boolean;
}

function open(path: string): Promise<{ ws: WebSocket; messages: Received[]; closed: Promise<void> }> {
  const ws = new WebSocket(`ws+unix://${engine.socket}:${path}`);
  const messages: Received[] = [];
  ws.on('message', (data: Buffer, binary: boolean) => messages.push({ data: Buffer.from(data), binary }));
  const closed = new Promise<void>((r) => ws.on('close', () => r()));
  return new Promise((resolve, reject) => {
    ws.once('open', () => resolve({ ws, messages, closed }));
    ws.once('error', reject);
  });
}

async function until(check: () => boolean, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 20));
  }
}

const text = (messages: Received[]) => Buffer.concat(messages.map((m) => m.data)).toString();

describe('attach over websocket', () => {
  test('stdin goes to the container, its output comes back in binary messages (1.28 and later)', async () => {
    const id = (await engine.dockerOk(['run', '-d', '-i', 'busybox', 'sh', '-c', 'while read line; do echo "got $line"; echo "err $line" >&2; done'])).trim();
    const { ws, messages } = await open(`/v1.44/containers/${id}/attach/ws?stream=1&stdin=1&stdout=1&stderr=1`);
    ws.send(Buffer.from('one\n'));
    await until(() => text(messages).includes('got one\n') && text(messages).includes('err one\n'));
    assert.ok(messages.every((m) => m.binary));
    ws.close();
    await engine.dockerOk(['rm', '-f', id]);
  });

  test('stdout only from 1.42 on; every stream before 1.42', async () => {
    const cmd = ['run', '-d', '-i', 'busybox', 'sh', '-c', 'while read line; do echo "out $line"; echo "err $line" >&2; done'];
    const id = (await engine.dockerOk(cmd)).trim();
    const selective = await open(`/v1.44/containers/${id}/attach/ws?stream=1&stdin=1&stdout=1`);
    selective.ws.send('a\n');
    await until(() => text(selective.messages).includes('out a\n'));
    await new Promise((r) => setTimeout(r, 200));
    assert.equal(text(selective.messages), 'out a\n');
    selective.ws.close();
    await selective.closed;

    const legacy = await open(`/v1.41/containers/${id}/attach/ws?stream=1`);
    legacy.ws.send('b\n');
    await until(() => text(legacy.messages).includes('out b\n') && text(legacy.messages).includes('err b\n'));
    legacy.ws.close();
    await engine.dockerOk(['rm', '-f', id]);
  });

  test('text messages before API 1.28', async () => {
    const id = (await engine.dockerOk(['run', '-d', '-i', 'busybox', 'cat'])).trim();
    const { ws, messages } = await open(`/v1.27/containers/${id}/attach/ws?stream=1`);
    ws.send('hello\n');
    await until(() => text(messages) === 'hello\n');
    assert.ok(messages.every((m) => !m.binary));
    ws.close();
    await engine.dockerOk(['rm', '-f', id]);
  });

  test('logs=1 sends the past output, then the connection closes without stream', async () => {
    const id = (await engine.dockerOk(['run', '-d', 'busybox', 'sh', '-c', 'echo first; echo second'])).trim();
    await engine.dockerOk(['wait', id]);
    const { messages, closed } = await open(`/v1.44/containers/${id}/attach/ws?logs=1&stdout=1`);
    await closed;
    assert.equal(text(messages), 'first\nsecond\n');
    await engine.dockerOk(['rm', id]);
  });

  test('the stream ends when the container exits', async () => {
    const id = (await engine.dockerOk(['run', '-d', '-i', 'busybox', 'sh', '-c', 'read x; echo bye $x'])).trim();
    const { ws, messages, closed } = await open(`/v1.44/containers/${id}/attach/ws?stream=1&stdin=1&stdout=1`);
    ws.send('now\n');
    await closed;
    assert.equal(text(messages), 'bye now\n');
    await engine.dockerOk(['rm', '-f', id]);
  });

  test('refusals: unknown container 404, a plain GET 400, a paused container 409', async () => {
    assert.equal((await engine.request('GET', '/containers/no-such/attach/ws?stream=1')).status, 404);
    const id = (await engine.dockerOk(['run', '-d', 'busybox', 'sleep', '600'])).trim();
    const plain = await engine.request('GET', `/containers/${id}/attach/ws?stream=1`);
    assert.equal(plain.status, 400);
    assert.match(plain.json().message, /websocket/);
    await engine.dockerOk(['pause', id]);
    await assert.rejects(open(`/containers/${id}/attach/ws?stream=1`), /409/);
    await engine.dockerOk(['unpause', id]);
    await engine.dockerOk(['rm', '-f', id]);
  });
});
