import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { createFileDurable, writeFileAtomic, writeFreshFiles, writeJSONAtomic, useAtomicWriter, useFreshFilesWriter, useNewFileWriter } from '../../util/atomic.js';
import { fsStepResults, fsSteps, linuxSys, nativeAtomicWriter, nativeFreshFilesWriter, nativeNewFileWriter, removeTree, type FsStep } from './sys.js';


/** A temporary folder for the tests of the enclosing describe, removed after them. */
function tempRoot(): () => string {
  let root = '';
  before(async () => {
    root = await fs.mkdtemp(path.join(os.tmpdir(), 'bt-sys-'));
  });
  after(async () => {
    await fs.rm(root, { recursive: true, force: true });
  });
  return () => root;
}

describe('removeTree', () => {
  const root = tempRoot();

  test('the native removal is built', () => {
    assert.equal(typeof linuxSys()?.removeTreeAsync, 'function');
  });

  test('removes a tree of folders, files, symlinks, fifos and folders without permissions; nothing when absent', async () => {
    const tree = path.join(root(), 'tree');
    await fs.mkdir(path.join(tree, 'a', 'b', 'c'), { recursive: true });
    for (let i = 0; i < 300; i++) await fs.writeFile(path.join(tree, 'a', `f${i}`), 'x');
    await fs.writeFile(path.join(tree, 'a', 'b', 'c', 'deep'), 'y');
    await fs.symlink('/etc', path.join(tree, 'etc-link'));
    await fs.symlink('nowhere', path.join(tree, 'dangling'));
    execFileSync('mkfifo', [path.join(tree, 'fifo')]);
    await fs.chmod(path.join(tree, 'a', 'b'), 0);
    await removeTree(tree);
    assert.equal(existsSync(tree), false);
    assert.equal(existsSync('/etc/passwd'), true);
    await removeTree(tree);
    await removeTree(path.join(root(), 'never-was'));
  });

  test('a symlink is removed, never followed', async () => {
    const kept = path.join(root(), 'kept');
    await fs.mkdir(kept);
    await fs.writeFile(path.join(kept, 'file'), 'keep me');
    const tree = path.join(root(), 'links');
    await fs.mkdir(tree);
    await fs.symlink(kept, path.join(tree, 'to-kept'));
    await fs.symlink(kept, path.join(root(), 'top-link'));
    await removeTree(tree);
    await removeTree(path.join(root(), 'top-link'));
    assert.equal(await fs.readFile(path.join(kept, 'file'), 'utf8'), 'keep me');
    assert.equal(existsSync(path.join(root(), 'top-link')), false);
  });

  test('never enters a mount point below the path: EXDEV, and the mounted content stays', async () => {
    const tree = path.join(root(), 'mounted');
    const mnt = path.join(tree, 'mnt');
    await fs.mkdir(mnt, { recursive: true });
    await fs.writeFile(path.join(tree, 'beside'), 'z');
    execFileSync('mount', ['-t', 'tmpfs', 'tmpfs', mnt]);
    try {
      await fs.writeFile(path.join(mnt, 'inside'), 'stay');
      await assert.rejects(removeTree(tree), (err: NodeJS.ErrnoException) => err.code === 'EXDEV');
      assert.equal(await fs.readFile(path.join(mnt, 'inside'), 'utf8'), 'stay');
      assert.equal(existsSync(path.join(tree, 'beside')), false);
    } finally {
      execFileSync('umount', [mnt]);
    }
    await removeTree(tree);
    assert.equal(existsSync(tree), false);
  });
});

describe('nativeAtomicWriter', () => {
  const root = tempRoot();
  before(() => useAtomicWriter(nativeAtomicWriter()));
  after(() => useAtomicWriter(undefined));

  test('is built, and writeFileAtomic goes through it: new files, replacements, modes, durable or not', async () => {
    assert.equal(typeof nativeAtomicWriter(), 'function');
    const file = path.join(root(), 'state.json');
    await writeJSONAtomic(file, { a: 1 });
    assert.deepEqual(JSON.parse(await fs.readFile(file, 'utf8')), { a: 1 });
    assert.equal((await fs.stat(file)).mode & 0o777, 0o600);
    await writeFileAtomic(file, new TextEncoder().encode('second'), { durable: false, mode: 0o640 });
    assert.equal(await fs.readFile(file, 'utf8'), 'second');
    assert.equal((await fs.stat(file)).mode & 0o777, 0o640);
    const big = Buffer.alloc(3 * 1024 * 1024, 7);
    await writeFileAtomic(file, big);
    assert.ok((await fs.readFile(file)).equals(big));
    // No temporary file is left beside it.
    assert.deepEqual(await fs.readdir(root()), ['state.json']);
  });

  test('a failure rejects with the errno and leaves no temporary file', async () => {
    await assert.rejects(writeFileAtomic(path.join(root(), 'missing', 'x.json'), 'x'), (err: NodeJS.ErrnoException) => err.code === 'ENOENT');
    await fs.mkdir(path.join(root(), 'target-is-dir', 'inner'), { recursive: true });
    await assert.rejects(writeFileAtomic(path.join(root(), 'target-is-dir'), 'x'), (err: NodeJS.ErrnoException) => err.code === 'EISDIR');
    assert.deepEqual((await fs.readdir(root())).filter((n) => n.endsWith('.tmp')), []);
  });
});

describe('fsSteps', () => {
  const root = tempRoot();

  test('runs every kind of step in order, in one native task', async () => {
    assert.equal(typeof linuxSys()?.fsBatchAsync, 'function');
    const dir = path.join(root(), 'a');
    await fs.mkdir(dir);
    await fs.writeFile(path.join(dir, 'old'), 'old content that is longer');
    const results = await fsSteps([
      ['mkdir', dir, 0o700],
      ['mkdir', path.join(dir, 'b'), 0o700],
      ['write', path.join(dir, 'old'), Buffer.from('new'), 0o640],
      ['unlink', path.join(dir, 'missing')],
      ['exists', path.join(dir, 'missing')],
      ['exists', path.join(dir, 'b')],
      ['rename', path.join(dir, 'b'), path.join(dir, 'c')],
      ['rename', path.join(dir, 'b'), path.join(dir, 'd')],
    ]);
    assert.deepEqual(results, [0, 0, 0, 0, os.constants.errno.ENOENT, 0, 0, os.constants.errno.ENOENT]);
    assert.equal(await fs.readFile(path.join(dir, 'old'), 'utf8'), 'new');
    assert.equal((await fs.stat(path.join(dir, 'old'))).mode & 0o777, 0o640);
    assert.equal((await fs.stat(path.join(dir, 'c'))).mode & 0o777, 0o700);
  });

  test('stops at the first failure and names it; fsStepResults reports without throwing', async () => {
    const steps: FsStep[] = [
      ['mkdir', path.join(root(), 'x'), 0o755],
      ['mkdir', path.join(root(), 'no', 'such'), 0o755],
      ['mkdir', path.join(root(), 'y'), 0o755],
    ];
    await assert.rejects(fsSteps(steps), (err: NodeJS.ErrnoException) => err.code === 'ENOENT' && err.message.includes(path.join(root(), 'no', 'such')));
    assert.equal(existsSync(path.join(root(), 'y')), false);
    assert.deepEqual(await fsStepResults(steps), [0, os.constants.errno.ENOENT, -1]);
    // A file where a folder is asked for is a failure, not "already there".
    await fs.writeFile(path.join(root(), 'file'), '');
    await assert.rejects(fsSteps([['mkdir', path.join(root(), 'file'), 0o755]]), (err: NodeJS.ErrnoException) => err.code === 'EEXIST');
    assert.throws(() => linuxSys()!.fsBatchAsync!([['chmod', '/x'] as unknown as FsStep], () => undefined), /each step is/);
  });
});

describe('createFileDurable', () => {
  const root = tempRoot();
  after(() => useNewFileWriter(undefined));

  for (const kind of ['native', 'portable'] as const) {
    test(`${kind}: makes the folder and the file; refuses a file that exists, a missing parent, a file in the folder's place`, async () => {
      const writer = kind === 'native' ? nativeNewFileWriter() : undefined;
      if (kind === 'native') assert.equal(typeof writer, 'function');
      useNewFileWriter(writer);
      const dir = path.join(root(), kind);
      const file = path.join(dir, 'record.json');
      await createFileDurable(file, '{"a":1}', { mode: 0o640, dirMode: 0o710 });
      assert.equal(await fs.readFile(file, 'utf8'), '{"a":1}');
      assert.equal((await fs.stat(file)).mode & 0o777, 0o640);
      assert.equal((await fs.stat(dir)).mode & 0o777, 0o710);
      // Never a replacement: the first content stays.
      await assert.rejects(createFileDurable(file, 'other'), (err: NodeJS.ErrnoException) => err.code === 'EEXIST');
      assert.equal(await fs.readFile(file, 'utf8'), '{"a":1}');
      // An existing folder is fine.
      await createFileDurable(path.join(dir, 'second'), Buffer.from('2'));
      assert.deepEqual((await fs.readdir(dir)).sort(), ['record.json', 'second']);
      // Only the last folder is made.
      await assert.rejects(createFileDurable(path.join(root(), `${kind}-no`, 'such', 'f'), 'x'), (err: NodeJS.ErrnoException) => err.code === 'ENOENT');
      await fs.writeFile(path.join(root(), `${kind}-file`), '');
      await assert.rejects(createFileDurable(path.join(root(), `${kind}-file`, 'f'), 'x'), (err: NodeJS.ErrnoException) => err.code === 'EEXIST' || err.code === 'ENOTDIR');
    });
  }

  test('the create step of a batch is exclusive and stops the batch when the file exists', async () => {
    const file = path.join(root(), 'batch-file');
    assert.deepEqual(await fsStepResults([['create', file, Buffer.from('one'), 0o600], ['mkdir', path.join(root(), 'after'), 0o700]]), [0, 0]);
    assert.deepEqual(await fsStepResults([['create', file, Buffer.from('two'), 0o600], ['mkdir', path.join(root(), 'after2'), 0o700]]), [os.constants.errno.EEXIST, -1]);
    assert.equal(await fs.readFile(file, 'utf8'), 'one');
    assert.equal(existsSync(path.join(root(), 'after2')), false);
  });
});

describe('writeFreshFiles', () => {
  const root = tempRoot();
  after(() => useFreshFilesWriter(undefined));

  for (const kind of ['native', 'portable'] as const) {
    test(`${kind}: writes each file as a new one (a link to the old one keeps the old content); a missing folder fails`, async () => {
      const writer = kind === 'native' ? nativeFreshFilesWriter() : undefined;
      if (kind === 'native') assert.equal(typeof writer, 'function');
      useFreshFilesWriter(writer);
      const dir = path.join(root(), kind);
      await fs.mkdir(dir);
      const hosts = path.join(dir, 'hosts');
      await fs.writeFile(hosts, 'old hosts\n');
      // What a running container's bind mount of the file holds: the old inode.
      await fs.link(hosts, path.join(dir, 'mounted'));
      await writeFreshFiles([
        { file: hosts, data: 'new hosts\n' },
        { file: path.join(dir, 'hostname'), data: Buffer.from('box\n'), mode: 0o600 },
      ]);
      assert.equal(await fs.readFile(hosts, 'utf8'), 'new hosts\n');
      assert.equal(await fs.readFile(path.join(dir, 'mounted'), 'utf8'), 'old hosts\n');
      assert.equal(await fs.readFile(path.join(dir, 'hostname'), 'utf8'), 'box\n');
      assert.equal((await fs.stat(path.join(dir, 'hostname'))).mode & 0o777, 0o600);
      await assert.rejects(writeFreshFiles([{ file: path.join(dir, 'missing', 'resolv.conf'), data: 'x' }]), (err: NodeJS.ErrnoException) => err.code === 'ENOENT');
    });
  }
});
