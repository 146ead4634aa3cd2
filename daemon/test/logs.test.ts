/**
 * GET /containers/{id}/logs against a real berthd: one multiplexed frame per line (as Docker sends them, and
 * as docker-py's streaming readers expect), a line longer than conmon's buffer counted once by tail, Docker's
 * timestamps, since and until, and a TTY container's raw bytes.
 */
import assert from 'node:assert/strict';
import { readdirSync, readlinkSync } from 'node:fs';
import net from 'node:net';
import { after, before, describe, test } from 'node:test';
import { eventually, startEngine, type Engine } from './harness.js';

let engine: Engine;
let box: string;
const LONG = 100_000;

before(async () => {
  engine = await startEngine();
  await engine.loadBusybox();
  // stderr first, then a pause: conmon reads the two pipes apart, the pause fixes their order in the log.
  const script = `echo err >&2; sleep 0.5; echo one; echo two; head -c ${LONG} /dev/zero | tr '\\0' x; echo; echo last`;
  box = (await engine.dockerOk(['run', '-d', '--network', 'none', 'busybox', 'sh', '-c', script])).trim();
  const waited = await engine.request('POST', `/containers/${box}/wait`);
  assert.equal(waited.json().StatusCode, 0);
});

after(async () => {
  await engine?.cleanup();
});

function frames(body: Buffer): Array<[number, string]> {
  const out: Array<[number, string]> = [];
  let i = 0;
  while (i + 8 <= body.length) {
    const size = body.readUInt32BE(i + 4);
    out.push([body[i], body.subarray(i + 8, i + 8 + size).toString()]);
    i += 8 + size;
  }
  assert.equal(i, body.length, 'the stream ends on a frame boundary');
  return out;
}

async function logs(query: string): Promise<Array<[number, string]>> {
  const r = await engine.request('GET', `/containers/${box}/logs?${query}`);
  assert.equal(r.status, 200, r.text);
  assert.equal(r.headers['content-type'], 'application/vnd.docker.multiplexed-stream');
  return frames(r.body);
}

describe('container logs', () => {
  test('one frame per line, stdout and stderr apart; a long line whole', async () => {
    const all = await logs('stdout=1&stderr=1');
    assert.deepEqual(all.slice(0, 3), [[2, 'err\n'], [1, 'one\n'], [1, 'two\n']]);
    assert.deepEqual(all[all.length - 1], [1, 'last\n']);
    const long = all.slice(3, -1);
    assert.ok(long.map(([, t]) => t).join('') === `${'x'.repeat(LONG)}\n`, 'the long line, whole');
    assert.ok(long.every(([s]) => s === 1));
    // Docker cuts long lines into messages of 16 KiB: no frame is much larger.
    assert.ok(long.every(([, t]) => t.length <= 64 * 1024), long.map(([, t]) => t.length).join(','));
    assert.deepEqual(await logs('stdout=0&stderr=1'), [[2, 'err\n']]);
  });

  test('tail counts lines: a line conmon wrote in parts counts once', async () => {
    assert.deepEqual(await logs('stdout=1&stderr=1&tail=1'), [[1, 'last\n']]);
    const two = await logs('stdout=1&stderr=1&tail=2');
    assert.ok(two.map(([, t]) => t).join('') === `${'x'.repeat(LONG)}\nlast\n`, 'tail=2: the long line and the last');
    const four = await logs('stdout=1&stderr=1&tail=4');
    assert.deepEqual(four.slice(0, 2), [[1, 'one\n'], [1, 'two\n']]);
    assert.deepEqual((await logs('stdout=1&stderr=1&tail=5'))[0], [2, 'err\n']);
    assert.deepEqual(await logs('stdout=1&stderr=1&tail=0'), []);
    assert.equal((await logs('stdout=1&stderr=1&tail=100')).map(([, t]) => t).join('').split('\n').length - 1, 5);
  });

  test('timestamps: each line once, RFC 3339 in UTC with nine digits', async () => {
    const stamped = await logs('stdout=1&stderr=1&timestamps=1');
    const lines = stamped.map(([, t]) => t).join('').split('\n').filter(Boolean);
    // A line's first frame carries its time, the rest of a long line follows without (its end may come as a
    // frame of its own, even the newline alone, where conmon's read of the pipe happened to stop).
    assert.ok(stamped.every(([, t]) => /^\d{4}-/.test(t) || (t.length > 0 && /^x*\n?$/.test(t))), JSON.stringify(stamped.map(([, t]) => t.slice(0, 40))));
    assert.equal(lines.length, 5);
    for (const line of lines) assert.ok(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z (one|two|err|x+|last)$/.test(line), line.slice(0, 80));
    const first = lines[0].split(' ')[0];
    const inspect = (await engine.request('GET', `/containers/${box}/json`)).json();
    assert.ok(Date.parse(first) >= Date.parse(inspect.State.StartedAt) - 1000, `${first} vs ${inspect.State.StartedAt}`);
  });

  test('since and until select by time', async () => {
    const lines = (await logs('stdout=1&stderr=1&timestamps=1')).map(([, t]) => t).join('').split('\n').filter(Boolean);
    const firstNano = lines[0].split(' ')[0];
    const lastNano = lines[lines.length - 1].split(' ')[0];
    const unix = (rfc: string, deltaSeconds: number) => String(Math.floor(Date.parse(rfc) / 1000) + deltaSeconds);
    assert.deepEqual(await logs(`stdout=1&stderr=1&since=${unix(lastNano, 2)}`), []);
    assert.deepEqual(await logs(`stdout=1&stderr=1&until=${unix(firstNano, -2)}`), []);
    // The exact time of the last line: since keeps it, until just before it leaves it out.
    const sinceLast = await logs(`stdout=1&stderr=1&since=${encodeURIComponent(lastNano)}`);
    assert.deepEqual(sinceLast[sinceLast.length - 1], [1, 'last\n']);
    const all = await logs(`stdout=1&stderr=1&since=${unix(firstNano, -2)}&until=${unix(lastNano, 2)}`);
    assert.equal(all.map(([, t]) => t).join('').split('\n').length - 1, 5);
  });

  test('a client that leaves in the middle of a big log: the daemon stops reading and closes the log file', async () => {
    const big = (await engine.dockerOk(['run', '-d', '--network', 'none', 'busybox', 'sh', '-c', 'yes 0123456789abcdefghijklmnopqrstuvwxyz | head -c 40000000'])).trim();
    await engine.request('POST', `/containers/${big}/wait`);
    const logPath = (await engine.request('GET', `/containers/${big}/json`)).json().LogPath as string;
    const openLogs = () => readdirSync(`/proc/${engine.pid}/fd`).filter((fd) => {
      try {
        return readlinkSync(`/proc/${engine.pid}/fd/${fd}`) === logPath;
      } catch {
        return false;
      }
    }).length;
    const conn = net.connect(engine.socket);
    conn.on('error', () => undefined);
    conn.write(`GET /containers/${big}/logs?stdout=1&stderr=1 HTTP/1.1\r\nHost: engine\r\n\r\n`);
    await new Promise((resolve) => conn.once('data', resolve));
    conn.pause();
    conn.destroy();
    await eventually(() => (openLogs() === 0 ? true : undefined), 30_000);
    assert.equal((await engine.request('GET', '/_ping')).text, 'OK');
  });

  test('a TTY container answers raw bytes', async () => {
    const tty = (await engine.dockerOk(['run', '-d', '-t', '--network', 'none', 'busybox', 'sh', '-c', 'echo in-tty'])).trim();
    await engine.request('POST', `/containers/${tty}/wait`);
    const r = await engine.request('GET', `/containers/${tty}/logs?stdout=1&stderr=1`);
    assert.equal(r.headers['content-type'], 'application/vnd.docker.raw-stream');
    assert.equal(r.text, 'in-tty\r\n');
  });
});
