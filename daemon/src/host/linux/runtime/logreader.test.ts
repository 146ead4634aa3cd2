import { test } from 'node:test';
import assert from 'node:assert/strict';
import { appendFileSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { LogRecord } from '../../host.js';
import { parseLines, parseTimeNano, readConmonLog, readConmonLogBatches } from './logreader.js';

const T1 = '2026-11-22T01:57:17.552529288+00:00';
const T2 = '2026-11-22T01:57:18.000000001+00:00';

function withFile(content: string, fn: (file: string) => Promise<void>): Promise<void> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'berth-log-'));
  const file = path.join(dir, 'ctr.log');
  writeFileSync(file, content);
  return fn(file).finally(() => rmSync(dir, { recursive: true, force: true }));
}

async function collect(it: AsyncIterable<LogRecord>): Promise<string[]> {
  const out: string[] = [];
  for await (const r of it) out.push(`${r.stream}:${r.complete ? 'F' : 'P'}:${r.data.toString()}`);
  return out;
}

const never = () => new AbortController().signal;

test('parseTimeNano reads RFC 3339 with nanoseconds and offsets', () => {
  const ns = parseTimeNano(Buffer.from(T1), 0, T1.length);
  assert.equal(ns, BigInt(Date.parse('2026-11-22T01:57:17Z')) * 1_000_000n + 552529288n);
  const z = '2026-11-22T01:57:17.5Z';
  assert.equal(parseTimeNano(Buffer.from(z), 0, z.length), BigInt(Date.parse('2026-11-22T01:57:17Z')) * 1_000_000n + 500_000_000n);
  const east = '2026-11-22T03:57:17.000000007+02:00';
  assert.equal(parseTimeNano(Buffer.from(east), 0, east.length), BigInt(Date.parse('2026-11-22T01:57:17Z')) * 1_000_000n + 7n);
  // The cached second must not leak into another second.
  assert.equal(parseTimeNano(Buffer.from(T2), 0, T2.length), BigInt(Date.parse('2026-11-22T01:57:18Z')) * 1_000_000n + 1n);
});

test('parseLines splits records, keeps partial flags and empty lines, skips malformed lines and fragments', () => {
  const text = `${T1} stdout F hello\n${T1} stderr P par\n${T1} stderr F tial\n${T1} stdout F \ngarbage line\n${T2} stdout F tail-fragm`;
  const buf = Buffer.from(text);
  const out: LogRecord[] = [];
  const rest = parseLines(buf, 0, buf.length, out);
  assert.deepEqual(
    out.map((r) => [r.stream, r.complete, r.data.toString(), r.time]),
    [
      ['stdout', true, 'hello', T1],
      ['stderr', false, 'par', T1],
      ['stderr', true, 'tial', T1],
      ['stdout', true, '', T1],
    ],
  );
  assert.equal(buf.subarray(rest).toString(), `${T2} stdout F tail-fragm`);
});

test('readLog reads every record and ignores a trailing fragment without follow', async () => {
  await withFile(`${T1} stdout F one\n${T1} stderr F two\n${T2} stdout P thr`, async (file) => {
    assert.deepEqual(await collect(readConmonLog(file, { follow: false, signal: never() })), ['stdout:F:one', 'stderr:F:two']);
  });
});

test('readLog of a missing file is empty without follow', async () => {
  assert.deepEqual(await collect(readConmonLog('/nonexistent/berth/ctr.log', { follow: false, signal: never() })), []);
});

test('tail gives the last n complete records, reading backwards across blocks', async () => {
  const lines: string[] = [];
  for (let i = 0; i < 5000; i++) lines.push(`${T1} stdout F line ${i} ${'x'.repeat(i % 50)}\n`);
  await withFile(lines.join('') + `${T2} stdout F fragm`, async (file) => {
    const last3 = await collect(readConmonLog(file, { follow: false, signal: never(), tail: 3 }));
    assert.deepEqual(last3.map((s) => s.split(' ').slice(0, 2).join(' ')), ['stdout:F:line 4997', 'stdout:F:line 4998', 'stdout:F:line 4999']);
    assert.deepEqual(await collect(readConmonLog(file, { follow: false, signal: never(), tail: 0 })), []);
    assert.equal((await collect(readConmonLog(file, { follow: false, signal: never(), tail: 100000 }))).length, 5000);
    assert.equal((await collect(readConmonLog(file, { follow: false, signal: never(), tail: 1234 }))).length, 1234);
  });
});

test('tail counts lines, not records: a line cut into partial records counts once', async () => {
  const records: string[] = [];
  // Lines of 1 to 4 records (P parts, then the F end), some parts long enough to cross the read-back blocks.
  for (let i = 0; i < 3000; i++) {
    const parts = 1 + (i % 4);
    for (let p = 1; p < parts; p++) records.push(`${T1} ${i % 3 ? 'stdout' : 'stderr'} P l${i}p${p}${'y'.repeat((i * 37) % 300)}\n`);
    records.push(`${T1} ${i % 3 ? 'stdout' : 'stderr'} F l${i}end\n`);
  }
  // A line still being written: its parts so far come after the last complete line.
  records.push(`${T2} stdout P open\n`);
  await withFile(records.join(''), async (file) => {
    const lineCount = async (tail: number) => {
      const got = await collect(readConmonLog(file, { follow: false, signal: never(), tail }));
      return { lines: got.filter((r) => r.split(':')[1] === 'F').length, first: got[0], last: got[got.length - 1] };
    };
    for (const tail of [1, 2, 3, 7, 100, 2999]) {
      const r = await lineCount(tail);
      assert.equal(r.lines, tail, `tail=${tail}`);
      // The output starts at the first part of a line, never in the middle of one.
      assert.match(r.first!, new RegExp(`^std(out|err):[PF]:l${3000 - tail}(p1|end)`), `tail=${tail}`);
      assert.equal(r.last, 'stdout:P:open');
    }
    assert.equal((await lineCount(3000)).lines, 3000);
    assert.equal((await lineCount(5000)).lines, 3000);
  });
});

test('long logs keep every record across chunk boundaries, also in batches', async () => {
  const lines: string[] = [];
  let expectedBytes = 0;
  for (let i = 0; i < 40000; i++) {
    const msg = `${i}:${'y'.repeat(i % 97)}`;
    expectedBytes += msg.length;
    lines.push(`${T1} ${i % 2 ? 'stderr' : 'stdout'} F ${msg}\n`);
  }
  await withFile(lines.join(''), async (file) => {
    let n = 0;
    let bytes = 0;
    let batches = 0;
    for await (const batch of readConmonLogBatches(file, { follow: false, signal: never() })) {
      batches++;
      for (const r of batch) {
        assert.equal(r.data.toString().split(':')[0], String(n));
        n++;
        bytes += r.data.length;
      }
    }
    assert.equal(n, 40000);
    assert.equal(bytes, expectedBytes);
    assert.ok(batches >= 2, 'a 2 MiB log spans several chunks');
  });
});

test('follow delivers records as they are written, completes fragments, and ends once stopped and drained', async () => {
  await withFile(`${T1} stdout F first\n`, async (file) => {
    let stopped = false;
    const seen: string[] = [];
    const reading = (async () => {
      for await (const r of readConmonLog(file, { follow: true, signal: never(), until: () => stopped })) seen.push(r.data.toString());
    })();
    await new Promise((r) => setTimeout(r, 100));
    assert.deepEqual(seen, ['first']);
    appendFileSync(file, `${T1} stdout F sec`);
    await new Promise((r) => setTimeout(r, 100));
    assert.deepEqual(seen, ['first'], 'a fragment waits for its newline');
    appendFileSync(file, `ond\n${T2} stderr F third\n`);
    stopped = true;
    await reading;
    assert.deepEqual(seen, ['first', 'second', 'third']);
  });
});

test('follow ends when the signal aborts, and waits for a log that does not exist yet', async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'berth-log-'));
  try {
    const file = path.join(dir, 'later.log');
    const ac = new AbortController();
    const seen: string[] = [];
    const reading = (async () => {
      for await (const r of readConmonLog(file, { follow: true, signal: ac.signal })) seen.push(r.data.toString());
    })();
    await new Promise((r) => setTimeout(r, 50));
    writeFileSync(file, `${T1} stdout F born\n`);
    const deadline = Date.now() + 3000;
    while (seen.length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    ac.abort();
    await reading;
    assert.deepEqual(seen, ['born']);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('breaking out of the loop closes the reader', async () => {
  await withFile(`${T1} stdout F a\n${T1} stdout F b\n`, async (file) => {
    const seen: string[] = [];
    for await (const r of readConmonLog(file, { follow: true, signal: never() })) {
      seen.push(r.data.toString());
      break;
    }
    assert.deepEqual(seen, ['a']);
  });
});

test('tail with follow: the last records, then what is written next', async () => {
  await withFile(`${T1} stdout F a\n${T1} stdout F b\n${T1} stdout F c\n`, async (file) => {
    let stopped = false;
    const seen: string[] = [];
    const reading = (async () => {
      for await (const r of readConmonLog(file, { follow: true, signal: never(), tail: 1, until: () => stopped })) seen.push(r.data.toString());
    })();
    await new Promise((r) => setTimeout(r, 50));
    appendFileSync(file, `${T2} stdout F d\n`);
    stopped = true;
    await reading;
    assert.deepEqual(seen, ['c', 'd']);
  });
});
