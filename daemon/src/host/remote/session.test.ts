import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { PassThrough, Readable, Writable } from 'node:stream';
import { once } from 'node:events';
import { Flag, Session, Sink, type CallHandler } from './session.js';
import { MAGIC } from './frames.js';
import { NotFound, Unavailable } from '../../errors.js';

/** A client and a server session over a real unix socket in a temporary folder. */
async function pair(handler: CallHandler): Promise<{ client: Session; server: Session; done: () => Promise<void> }> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'berth-session-'));
  const socketPath = path.join(dir, 's');
  let server!: Session;
  const listener = net.createServer((conn) => {
    server = new Session(conn, { role: 'server', version: '9.9.9', hello: { kernel: 'test' }, handler });
  });
  await new Promise<void>((resolve) => listener.listen(socketPath, resolve));
  const conn = net.connect(socketPath);
  await once(conn, 'connect');
  const client = new Session(conn, { role: 'client', version: '1.0.0' });
  await client.ready;
  return {
    client,
    server,
    done: async () => {
      client.close();
      server?.close();
      await new Promise((resolve) => listener.close(resolve));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

function sha(buf: Buffer): string {
  return createHash('sha256').update(buf).digest('hex');
}

async function readAll(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

test('the handshake carries the agent version and its fields', async () => {
  const { client, done } = await pair(() => undefined);
  try {
    const hello = await client.ready;
    assert.equal(hello.version, '9.9.9');
    assert.equal(hello.kernel, 'test');
    assert.equal(hello.protocol, 1);
  } finally {
    await done();
  }
});

test('values that JSON cannot carry cross intact', async () => {
  const { client, done } = await pair((target, args) => (target === 'echo' ? args : undefined));
  try {
    const sent = [undefined, 12n ** 30n, Buffer.from([0, 1, 255]), { big: Buffer.alloc(70_000, 7), second: [Buffer.from('x'.repeat(100))] }, new Int32Array([1, -2, 3]), new Date('2026-01-02T03:04:05.678Z'),
      new Map([['a', { x: undefined }]]), new Set([1]), { $$: 'not a tag', nested: [null, NaN] }];
    const got = (await client.call('echo', sent)) as unknown[];
    assert.deepEqual(got, sent);
  } finally {
    await done();
  }
});

test('typed errors cross as their class, with their fields', async () => {
  const { client, done } = await pair(() => {
    throw Object.assign(new NotFound('no such container: abc'), { detail: 7 });
  });
  try {
    await assert.rejects(client.call('x', []), (err: Error) => {
      assert.ok(err instanceof NotFound);
      assert.equal(err.message, 'no such container: abc');
      assert.equal((err as unknown as { detail: number }).detail, 7);
      return true;
    });
  } finally {
    await done();
  }
});

test('a system error keeps its code', async () => {
  const { client, done } = await pair(async () => {
    const { readFile } = await import('node:fs/promises');
    return readFile('/nonexistent/berth');
  });
  try {
    await assert.rejects(client.call('x', []), { code: 'ENOENT' });
  } finally {
    await done();
  }
});

test('byte streams cross both ways, as arguments and results', async () => {
  const data = randomBytes(3 * 1024 * 1024 + 17);
  const { client, done } = await pair(async (target, args) => {
    if (target === 'upload') return sha(await readAll(args[0] as Readable));
    if (target === 'download') return Readable.from([data.subarray(0, 100), data.subarray(100)]);
    if (target === 'into') {
      const sink = args[0] as Writable;
      sink.write(data.subarray(0, 5));
      sink.end(data.subarray(5));
      await once(sink, 'finish');
      return 'written';
    }
  });
  try {
    assert.equal(await client.call('upload', [Readable.from([data])]), sha(data));
    assert.equal(sha(await readAll((await client.call('download', [])) as Readable)), sha(data));
    const sink = new PassThrough();
    const collected = readAll(sink);
    assert.equal(await client.call('into', [new Sink(sink)]), 'written');
    assert.equal(sha(await collected), sha(data));
  } finally {
    await done();
  }
});

test('a slow reader on one stream never stalls another', async () => {
  let producedSlow = 0;
  const big = 16 * 1024 * 1024;
  const { client, done } = await pair(() => {
    const slow = new Readable({
      read() {
        producedSlow += 64 * 1024;
        this.push(Buffer.alloc(64 * 1024, 1));
      },
    });
    let fastLeft = big;
    const fast = new Readable({
      read() {
        const n = Math.min(64 * 1024, fastLeft);
        fastLeft -= n;
        this.push(n ? Buffer.alloc(n, 2) : null);
      },
    });
    return { slow, fast };
  });
  try {
    const { slow, fast } = (await client.call('two', [])) as { slow: Readable; fast: Readable };
    // Nobody reads `slow`; `fast` must still arrive whole.
    const got = await readAll(fast);
    assert.equal(got.length, big);
    // The unread stream's producer stopped after about a window (plus the buffers of both ends).
    assert.ok(producedSlow <= 1024 * 1024, `the slow stream's producer ran ahead by ${producedSlow} bytes`);
    slow.destroy();
  } finally {
    await done();
  }
});

test('destroying a received stream stops its producer', async () => {
  let destroyed = false;
  const { client, done } = await pair(() => {
    const endless = new Readable({
      read() {
        this.push(Buffer.alloc(1024));
      },
      destroy(err, cb) {
        destroyed = true;
        cb(err);
      },
    });
    return endless;
  });
  try {
    const stream = (await client.call('endless', [])) as Readable;
    for await (const _ of stream) break;
    for (let i = 0; i < 100 && !destroyed; i++) await new Promise((r) => setTimeout(r, 10));
    assert.ok(destroyed);
  } finally {
    await done();
  }
});

test('async iterables cross as value streams, and leaving the loop ends the producer', async () => {
  let finished = false;
  const { client, done } = await pair(() => {
    return (async function* () {
      try {
        for (let i = 0; ; i++) yield { i, big: BigInt(i), data: Buffer.from([i & 255]) };
      } finally {
        finished = true;
      }
    })();
  });
  try {
    const got: unknown[] = [];
    for await (const item of (await client.call('records', [])) as AsyncIterable<unknown>) {
      got.push(item);
      if (got.length === 3) break;
    }
    assert.deepEqual(got[2], { i: 2, big: 2n, data: Buffer.from([2]) });
    for (let i = 0; i < 100 && !finished; i++) await new Promise((r) => setTimeout(r, 10));
    assert.ok(finished);
  } finally {
    await done();
  }
});

test('an abort signal crosses, and cancelling a call aborts it on the other side', async () => {
  const seen: string[] = [];
  const { client, done } = await pair(async (target, args, callSignal) => {
    const signal = target === 'withSignal' ? (args[0] as AbortSignal) : callSignal;
    await new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
    seen.push(`${target}: ${String(signal.reason?.message ?? signal.reason)}`);
    return 'aborted';
  });
  try {
    const controller = new AbortController();
    const call = client.call('withSignal', [controller.signal]);
    setTimeout(() => controller.abort(new Error('enough')), 20);
    assert.equal(await call, 'aborted');
    const cancel = new AbortController();
    const cancelled = client.call('cancelled', [], cancel.signal);
    setTimeout(() => cancel.abort(new Error('gone')), 20);
    await assert.rejects(cancelled, /gone/);
    for (let i = 0; i < 100 && seen.length < 2; i++) await new Promise((r) => setTimeout(r, 10));
    assert.deepEqual(seen, ['withSignal: enough', 'cancelled: the caller cancelled the call']);
  } finally {
    await done();
  }
});

test('a promise inside a result settles on the other side', async () => {
  const { client, done } = await pair(() => ({ pid: 7, exit: new Promise((resolve) => setTimeout(() => resolve(3), 20)), failed: Promise.reject(new NotFound('gone')) }));
  try {
    const got = (await client.call('exec', [])) as { pid: number; exit: Promise<number>; failed: Promise<never> };
    assert.equal(got.pid, 7);
    assert.equal(await got.exit, 3);
    await assert.rejects(got.failed, (err) => err instanceof NotFound);
  } finally {
    await done();
  }
});

test('callbacks are called back, with their results', async () => {
  const { client, done } = await pair(async (_target, args) => {
    const hooks = args[0] as { afterCreate(pid: number): Promise<string> };
    return `started after ${await hooks.afterCreate(42)}`;
  });
  try {
    assert.equal(await client.call('start', [{ afterCreate: async (pid: number) => `hook ${pid}` }]), 'started after hook 42');
  } finally {
    await done();
  }
});

test('a flag turns true on the other side once its predicate does', async () => {
  let stopped = false;
  let remote!: () => boolean;
  const { client, done } = await pair((_t, args) => {
    remote = args[0] as () => boolean;
    return remote();
  });
  try {
    assert.equal(await client.call('f', [new Flag(() => stopped, 10)]), false);
    stopped = true;
    for (let i = 0; i < 100 && !remote(); i++) await new Promise((r) => setTimeout(r, 10));
    assert.equal(remote(), true);
  } finally {
    await done();
  }
});

test('a lost connection fails pending calls as Unavailable and ends their streams', async () => {
  const { client, server, done } = await pair((target) => (target === 'stream' ? new PassThrough() : new Promise(() => {})));
  try {
    const stream = (await client.call('stream', [])) as Readable;
    const errored = once(stream, 'error');
    const pending = client.call('hang', []);
    server.close();
    await assert.rejects(pending, (err) => err instanceof Unavailable);
    const [err] = await errored;
    assert.ok(err instanceof Unavailable);
  } finally {
    await done();
  }
});

test('a client skips bytes left over from an earlier session before the magic', async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'berth-session-'));
  const socketPath = path.join(dir, 's');
  const listener = net.createServer((conn) => {
    // Junk, then a stale hello of another session, then the real server.
    conn.write(Buffer.concat([Buffer.from('garbage'), MAGIC, Buffer.from([0, 0, 0, 0, 1, 0, 0, 0, 2]), Buffer.from('{}')]));
    new Session(conn, { role: 'server', version: '2', handler: () => 'ok' });
  });
  await new Promise<void>((resolve) => listener.listen(socketPath, resolve));
  const conn = net.connect(socketPath);
  const client = new Session(conn, { role: 'client', version: '1' });
  try {
    assert.equal((await client.ready).version, '2');
    assert.equal(await client.call('x', []), 'ok');
  } finally {
    client.close();
    await new Promise((resolve) => listener.close(resolve));
    rmSync(dir, { recursive: true, force: true });
  }
});
