import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { after, test } from 'node:test';
import tar from 'tar-stream';
import { FsBuildScratch } from './fs-scratch.js';

const roots: string[] = [];
after(() => roots.forEach((r) => rmSync(r, { recursive: true, force: true })));

function scratch(): FsBuildScratch {
  const root = mkdtempSync(path.join(os.tmpdir(), 'berth-scratch-'));
  roots.push(root);
  return new FsBuildScratch(path.join(root, 'build', 'tmp'));
}

async function tarOf(entries: Array<{ header: Partial<tar.Header> & { name: string }; body?: string }>): Promise<Readable> {
  const pack = tar.pack();
  for (const { header, body } of entries) pack.entry(header, body ?? '');
  pack.finalize();
  const chunks: Buffer[] = [];
  for await (const chunk of pack as unknown as AsyncIterable<Buffer>) chunks.push(chunk);
  return Readable.from([Buffer.concat(chunks)]);
}

async function text(stream: Readable): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString();
}

test('a context is unpacked into a workspace and read back by relative paths; dispose removes it', async () => {
  const s = scratch();
  await s.reset();
  const ws = await s.workspace();
  await ws.unpackContext(
    await tarOf([
      { header: { name: 'dir/', type: 'directory', mode: 0o750 } },
      { header: { name: 'dir/a.txt', mode: 0o640 }, body: 'a\n' },
      { header: { name: 'link', type: 'symlink', linkname: 'dir/a.txt' } },
      { header: { name: 'hard', type: 'link', linkname: 'dir/a.txt' } },
    ]),
  );
  assert.deepEqual(await ws.context.readdir(''), ['dir', 'hard', 'link']);
  assert.equal((await ws.context.lstat('dir'))?.type, 'directory');
  assert.equal((await ws.context.lstat('dir'))!.mode & 0o777, 0o750);
  assert.equal((await ws.context.lstat('link'))?.type, 'symlink');
  assert.equal(await ws.context.readlink('link'), 'dir/a.txt');
  assert.equal(await text(ws.context.open('hard')), 'a\n');
  await ws.saveDownload('download-1', Readable.from([Buffer.from('fetched')]));
  assert.equal(await text(ws.downloads.open('download-1')), 'fetched');
  await assert.rejects(ws.saveDownload('../escape', Readable.from([Buffer.from('x')])), { name: 'InvalidParameter' });
  await ws.context.remove('dir');
  assert.equal(await ws.context.lstat('dir/a.txt'), undefined);
  await ws.dispose();
  assert.deepEqual(readdirSync(s.dir), []);
});

test('entries outside the context, or below a link, are refused and nothing is written outside', async () => {
  const s = scratch();
  const outside = await s.workspace();
  await assert.rejects(outside.unpackContext(await tarOf([{ header: { name: '../evil' }, body: 'x' }])), (err: Error) => err.name === 'InvalidParameter' && /points outside the context/.test(err.message));
  const below = await s.workspace();
  await assert.rejects(
    below.unpackContext(await tarOf([{ header: { name: 'up', type: 'symlink', linkname: '..' } }, { header: { name: 'up/evil' }, body: 'x' }])),
    (err: Error) => err.name === 'InvalidParameter' && /lies below a link or a file/.test(err.message),
  );
  for (const name of readdirSync(s.dir)) assert.equal(existsSync(path.join(s.dir, name, 'evil')), false);
  await s.reset();
  assert.deepEqual(readdirSync(s.dir), []);
});
