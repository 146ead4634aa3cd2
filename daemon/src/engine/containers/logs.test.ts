import { test } from 'node:test';
import assert from 'node:assert/strict';
import { LOG_COMPLETE, LOG_STDERR, type LogRecordBlock } from '../../host/host.js';
import { logBytes, type LogOptions, type RecordFraming } from './logs.js';

const FRAMING: RecordFraming = {
  headerBytes: 8,
  writeHeader(out, at, stream, length) {
    out.fill(0, at, at + 8);
    out[at] = stream === 'stdout' ? 1 : 2;
    out.writeUInt32BE(length, at + 4);
  },
};

const ALL: LogOptions = { stdout: true, stderr: true, timestamps: false, follow: false };

/**
 * A column block over conmon's lines (`<RFC 3339 time> <stdout|stderr> <F|P> <text>`), as a Host's log reader
 * gives them: record i's line starts at offsets[3i], its text at offsets[3i+1], its newline at offsets[3i+2].
 */
function parseLines(buf: Buffer): LogRecordBlock {
  const starts: number[] = [];
  const flags: number[] = [];
  const times: Array<{ seconds: number; nanos: number }> = [];
  let pos = 0;
  for (let nl = buf.indexOf(0x0a, pos); nl >= 0; pos = nl + 1, nl = buf.indexOf(0x0a, pos)) {
    const sp = buf.indexOf(0x20, pos);
    const time = buf.toString('latin1', pos, sp);
    const fraction = /\.(\d+)/.exec(time)?.[1] ?? '';
    times.push({ seconds: Date.parse(time.replace(/\.\d+/, '')) / 1000, nanos: Number(fraction.padEnd(9, '0').slice(0, 9)) });
    flags.push((buf.toString('latin1', sp + 1, sp + 7) === 'stderr' ? LOG_STDERR : 0) | (buf[sp + 8] === 0x46 ? LOG_COMPLETE : 0));
    starts.push(pos, Math.min(sp + 10, nl), nl);
  }
  return {
    buf,
    count: flags.length,
    offsets: Int32Array.from(starts),
    flags: Uint8Array.from(flags),
    seconds: (i) => times[i].seconds,
    nanos: (i) => times[i].nanos,
  };
}

/** Blocks of the given k8s-file text, cut after the given record counts (to cross block boundaries). */
function blocksOf(text: string, cuts: number[] = []): LogRecordBlock[] {
  const lines = text.split(/(?<=\n)/);
  const blocks: LogRecordBlock[] = [];
  let from = 0;
  for (const cut of [...cuts, lines.length]) {
    if (cut <= from) continue;
    const buf = Buffer.from(lines.slice(from, cut).join(''));
    blocks.push(parseLines(buf));
    from = cut;
  }
  return blocks;
}

async function* iterate<T>(items: T[]): AsyncGenerator<T> {
  for (const item of items) yield item;
}

/** The frames of the output: [stream id, payload]. */
async function frames(blocks: LogRecordBlock[], opts: LogOptions): Promise<Array<[number, string]>> {
  const parts: Buffer[] = [];
  for await (const b of logBytes(iterate(blocks), opts, FRAMING)) parts.push(Buffer.from(b));
  const all = Buffer.concat(parts);
  const out: Array<[number, string]> = [];
  for (let at = 0; at < all.length; ) {
    const len = all.readUInt32BE(at + 4);
    out.push([all[at], all.subarray(at + 8, at + 8 + len).toString()]);
    at += 8 + len;
  }
  return out;
}

const T = (s: number, ns = 0) => `2026-11-22T01:57:${String(s).padStart(2, '0')}.${String(ns).padStart(9, '0')}+00:00`;

test('one frame per line, streams apart, the parts of a line in one frame (also across blocks)', async () => {
  const text = [
    `${T(1)} stdout F one`,
    `${T(1)} stderr P tw`,
    `${T(1)} stdout F three`,
    `${T(1)} stderr F o`,
    `${T(2)} stdout P fo`,
    `${T(2)} stdout P u`,
    `${T(2)} stdout F r`,
    `${T(2)} stdout F `,
    `${T(3)} stdout P open`,
  ].join('\n') + '\n';
  const expected: Array<[number, string]> = [[1, 'one\n'], [2, 'tw'], [1, 'three\n'], [2, 'o\n'], [1, 'four\n'], [1, '\n'], [1, 'open']];
  assert.deepEqual(await frames(blocksOf(text), ALL), expected);
  // Cut inside the line "four": the line stays one frame.
  assert.deepEqual(await frames(blocksOf(text, [5]), ALL), expected);
  assert.deepEqual(await frames(blocksOf(text, [1, 2, 3, 4, 5, 6, 7, 8]), ALL), expected);
  assert.deepEqual(await frames(blocksOf(text), { ...ALL, stderr: false }), expected.filter(([s]) => s === 1));
  // With stdout left out, nothing comes between the parts of the stderr line.
  assert.deepEqual(await frames(blocksOf(text), { ...ALL, stdout: false }), [[2, 'two\n']]);
});

test('timestamps: Docker form in UTC with nine digits, once per line, from any zone', async () => {
  const text = [
    `${T(1, 5)} stdout F a`,
    `${T(2, 120000000)} stdout P b`,
    `${T(3)} stdout F c`,
    // Another zone and fewer digits: converted.
    `2026-11-22T03:57:04.5+02:00 stderr F d`,
  ].join('\n') + '\n';
  assert.deepEqual(await frames(blocksOf(text), { ...ALL, timestamps: true }), [
    [1, '2026-11-22T01:57:01.000000005Z a\n'],
    [1, '2026-11-22T01:57:02.120000000Z bc\n'],
    [2, '2026-11-22T01:57:04.500000000Z d\n'],
  ]);
});

test('since and until select by time, to the nanosecond, within a block and by whole blocks', async () => {
  const records: string[] = [];
  for (let s = 0; s < 10; s++) for (let n = 0; n < 3; n++) records.push(`${T(s, n)} stdout F ${s}.${n}`);
  const text = records.join('\n') + '\n';
  const base = BigInt(Date.parse('2026-11-22T01:57:00Z')) * 1_000_000n;
  const at = (s: number, n: number) => base + BigInt(s) * 1_000_000_000n + BigInt(n);
  for (const cuts of [[], [3, 6, 9, 12, 15, 18, 21, 24, 27]]) {
    const got = async (o: Partial<LogOptions>) => (await frames(blocksOf(text, cuts), { ...ALL, ...o })).map(([, p]) => p.trim());
    assert.deepEqual(await got({ sinceNano: at(8, 1) }), ['8.1', '8.2', '9.0', '9.1', '9.2']);
    assert.deepEqual(await got({ untilNano: at(1, 1) }), ['0.0', '0.1', '0.2', '1.0', '1.1']);
    assert.deepEqual(await got({ sinceNano: at(4, 2), untilNano: at(5, 0) }), ['4.2', '5.0']);
    assert.deepEqual(await got({ sinceNano: at(20, 0) }), []);
  }
});

test('without framing (a TTY container) the bytes are the output itself', async () => {
  const text = `${T(1)} stdout P ab\n${T(1)} stdout F c\n${T(2)} stdout F d\n`;
  const parts: Buffer[] = [];
  for await (const b of logBytes(iterate(blocksOf(text, [1])), ALL)) parts.push(Buffer.from(b));
  assert.equal(Buffer.concat(parts).toString(), 'abc\nd\n');
});

test('a part of a line carried to the next block is sent even when until ends the log there', async () => {
  const text = `${T(1)} stdout F a\n${T(1)} stdout P par\n${T(5)} stdout F tial\n`;
  const base = BigInt(Date.parse('2026-11-22T01:57:00Z')) * 1_000_000n;
  const untilNano = base + 2_000_000_000n;
  assert.deepEqual(await frames(blocksOf(text, [2]), { ...ALL, untilNano }), [[1, 'a\n'], [1, 'par']]);
  assert.deepEqual(await frames(blocksOf(text, [2]), ALL), [[1, 'a\n'], [1, 'partial\n']]);
});
