import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
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
