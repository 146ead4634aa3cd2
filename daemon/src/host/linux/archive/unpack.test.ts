import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { Readable } from 'node:stream';
import { after, test } from 'node:test';
import tar from 'tar-stream';
import { Forbidden, InvalidParameter } from '../../../errors.js';
import { ContainerFilesystem } from './resolve.js';
import { entryComponents, extractArchive } from './unpack.js';

const base = mkdtempSync('/tmp/unpack-');
after(() => rmSync(base, { recursive: true, force: true }));

async function tarOf(entries: Array<Partial<tar.Header> & { name: string; content?: string }>): Promise<Readable> {
  const pack = tar.pack();
  for (const { content, ...header } of entries) pack.entry({ type: 'file', ...header }, (header.type && header.type !== 'file' ? undefined : (content ?? '')) as string);
  pack.finalize();
  const chunks: Buffer[] = [];
  for await (const c of pack) chunks.push(c as Buffer);
  return Readable.from([Buffer.concat(chunks)]);
}

function rootWithSecret(name: string) {
  const root = path.join(base, name, 'root');
  mkdirSync(path.join(root, 'tmp'), { recursive: true });
  writeFileSync(path.join(base, name, 'secret'), 'host');
  return root;
}

test('entry names: leading slashes dropped, .. refused', () => {
  assert.deepEqual(entryComponents('/a/./b/'), ['a', 'b']);
  assert.throws(() => entryComponents('a/../../b'), InvalidParameter);
  assert.throws(() => entryComponents('..'), InvalidParameter);
});

test('files, folders, links and hard links land below the target; modes and owners kept', async () => {
  const root = rootWithSecret('ok');
  const fsys = await ContainerFilesystem.open({ root, mounts: [], readonlyRootfs: false });
  const target = await fsys.resolve('/tmp', true);
  await extractArchive(fsys, target, await tarOf([
    { name: 'd', type: 'directory', mode: 0o750 },
    { name: 'd/f', content: 'hello', mode: 0o640, uid: 1000, gid: 1000 },
    { name: '/abs/g', content: 'abs' },
    { name: 'l', type: 'symlink', linkname: '/etc/shadow' },
    { name: 'h', type: 'link', linkname: 'd/f' },
  ]), { noOverwriteDirNonDir: false });
  assert.equal(readFileSync(path.join(root, 'tmp/d/f'), 'utf8'), 'hello');
  assert.equal(statSync(path.join(root, 'tmp/d/f')).mode & 0o777, 0o640);
  assert.equal(statSync(path.join(root, 'tmp/d/f')).uid, 1000);
  assert.equal(statSync(path.join(root, 'tmp/d')).mode & 0o777, 0o750);
  assert.equal(readFileSync(path.join(root, 'tmp/abs/g'), 'utf8'), 'abs');
  assert.equal(statSync(path.join(root, 'tmp/h')).nlink, 2);
});

test('escapes write nothing outside the root', async () => {
  const root = rootWithSecret('escape');
  const outside = path.dirname(root);
  const fsys = await ContainerFilesystem.open({ root, mounts: [], readonlyRootfs: false });
  const target = await fsys.resolve('/tmp', true);
  await assert.rejects(extractArchive(fsys, target, await tarOf([{ name: '../../../pwned', content: 'x' }]), { noOverwriteDirNonDir: false }), InvalidParameter);
  await assert.rejects(extractArchive(fsys, target, await tarOf([{ name: 'hl', type: 'link', linkname: '../../secret' }]), { noOverwriteDirNonDir: false }), InvalidParameter);
  await assert.rejects(extractArchive(fsys, target, await tarOf([{ name: 'hl2', type: 'link', linkname: path.join(outside, 'secret') }]), { noOverwriteDirNonDir: false }), InvalidParameter);
  // A link of the archive climbing up stops at the container root: the entry lands there.
  await extractArchive(fsys, target, await tarOf([
    { name: 'up', type: 'symlink', linkname: '../../..' },
    { name: 'up/pwned', content: 'x' },
  ]), { noOverwriteDirNonDir: false });
  assert.equal(existsSync(path.join(outside, 'pwned')), false);
  assert.equal(readFileSync(path.join(root, 'pwned'), 'utf8'), 'x');
  assert.equal(statSync(path.join(outside, 'secret')).nlink, 1);
});

test('a read-only root refuses every entry', async () => {
  const root = rootWithSecret('ro');
  const fsys = await ContainerFilesystem.open({ root, mounts: [], readonlyRootfs: true });
  const target = await fsys.resolve('/tmp', true);
  await assert.rejects(extractArchive(fsys, target, await tarOf([{ name: 'x', content: 'x' }]), { noOverwriteDirNonDir: false }), Forbidden);
  assert.equal(existsSync(path.join(root, 'tmp', 'x')), false);
});
