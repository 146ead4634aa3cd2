import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { test } from 'node:test';
import { ToolFailure } from '../../errors.js';
import { LinuxTools } from './tools.js';

async function decode(format: 'bzip2' | 'xz' | 'zstd', input: Buffer): Promise<Buffer> {
  const parts: Buffer[] = [];
  await pipeline(Readable.from([input]), new LinuxTools().decompressor(format), async (source: AsyncIterable<Buffer>) => {
    for await (const chunk of source) parts.push(chunk);
  });
  return Buffer.concat(parts);
}

test('tools: each decompressor gives back the bytes its tool compressed', async () => {
  const plain = Buffer.from('berth '.repeat(50_000));
  for (const format of ['bzip2', 'xz', 'zstd'] as const) {
    const packed = spawnSync(format, ['-c', '-q'], { input: plain, maxBuffer: 1 << 26 });
    assert.equal(packed.status, 0, `${format} -c`);
    assert.ok((await decode(format, packed.stdout)).equals(plain), format);
  }
});

test('tools: bytes the tool cannot decode fail the stream with its exit code and stderr', async () => {
  await assert.rejects(decode('xz', Buffer.from('not xz at all')), (err: unknown) => {
    assert.ok(err instanceof ToolFailure, String(err));
    assert.equal(err.tool, 'xz');
    assert.notEqual(err.failure.exitCode, 0);
    assert.ok(err.failure.exitCode !== undefined);
    assert.match(err.failure.detail, /format|xz/i);
    return true;
  });
});

test('tools: a folder packed by tar unpacks into another; bytes that are no tar fail with tar\'s words', async () => {
  const root = mkdtempSync(path.join(os.tmpdir(), 'berth-tools-'));
  try {
    mkdirSync(path.join(root, 'from', 'sub'), { recursive: true });
    mkdirSync(path.join(root, 'to'));
    writeFileSync(path.join(root, 'from', 'sub', 'file'), 'packed\n');
    const tools = new LinuxTools();
    await tools.unpackInto(path.join(root, 'to'), tools.packFolder(path.join(root, 'from')));
    assert.equal(readFileSync(path.join(root, 'to', 'sub', 'file'), 'utf8'), 'packed\n');
    await assert.rejects(tools.unpackInto(path.join(root, 'to'), Readable.from([Buffer.alloc(1024, 'x')])), (err: unknown) => {
      assert.ok(err instanceof ToolFailure, String(err));
      assert.equal(err.tool, 'tar');
      assert.ok(err.failure.exitCode);
      return true;
    });
    const missing = tools.packFolder(path.join(root, 'none'));
    await assert.rejects(pipeline(missing, async (source: AsyncIterable<Buffer>) => {
      for await (const _ of source);
    }), ToolFailure);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});
