import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, lstatSync, mkdtempSync, readFileSync, readlinkSync, rmSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { after, describe, it } from 'node:test';
import { gzipSync } from 'node:zlib';
import tar from 'tar-stream';
import { InvalidParameter } from '../../../errors.js';
import { haveNativeAddon } from './native.js';
import { LinuxLayerStore } from './store.js';
import { unpackLayer } from './unpack.js';

type Entry = Partial<tar.Header> & { name: string; content?: string | Buffer };

async function tarOf(entries: Entry[]): Promise<Buffer> {
  const pack = tar.pack();
  const chunks: Buffer[] = [];
  pack.on('data', (c: unknown) => {
    chunks.push(c as Buffer);
  });
  const ended = new Promise<void>((r) => pack.on('end', () => r()));
  for (const { content, ...header } of entries) {
    await new Promise<void>((resolve, reject) => pack.entry({ mtime: new Date('2020-02-02T00:00:00Z'), ...header }, content ?? '', (err) => (err ? reject(err) : resolve())));
  }
  pack.finalize();
  await ended;
  return Buffer.concat(chunks);
}

const scratch = mkdtempSync(path.join(os.tmpdir(), 'berth-unpack-'));
after(() => rmSync(scratch, { recursive: true, force: true }));
let n = 0;
function freshDir(): string {
  const dir = path.join(scratch, `l${n++}`);
  execFileSync('mkdir', ['-p', dir]);
  return dir;
}

function getfattr(file: string, name: string): string | undefined {
  // python3 is on the machine; it reads xattrs without the attr package.
  try {
    return execFileSync('python3', ['-c', `import os,sys; sys.stdout.write(os.getxattr(sys.argv[1], sys.argv[2], follow_symlinks=False).hex())`, file, name], { encoding: 'utf8' });
  } catch {
    return undefined;
  }
}

describe('layer unpacking', () => {
  it('keeps modes, owners, mtimes, symlinks, hard links and device nodes', async () => {
    const dir = freshDir();
    const layer = await tarOf([
      { name: 'bin/', type: 'directory', mode: 0o755 },
      { name: 'bin/tool', type: 'file', mode: 0o4755, uid: 1000, gid: 1001, content: 'tool' },
      { name: 'bin/alias', type: 'symlink', linkname: 'tool' },
      { name: 'bin/hard', type: 'link', linkname: 'bin/tool' },
      { name: 'dev/null', type: 'character-device', mode: 0o666, devmajor: 1, devminor: 3 },
      { name: 'run/fifo', type: 'fifo', mode: 0o600 },
      { name: 'tmp/', type: 'directory', mode: 0o1777 },
    ]);
    const result = await unpackLayer(Readable.from([layer]), dir);
    assert.equal(result.diskSize, 4);
    const tool = statSync(path.join(dir, 'bin/tool'));
    assert.equal(tool.mode & 0o7777, 0o4755);
    assert.equal(tool.uid, 1000);
    assert.equal(tool.gid, 1001);
    assert.equal(tool.mtime.toISOString(), '2020-02-02T00:00:00.000Z');
    assert.equal(readlinkSync(path.join(dir, 'bin/alias')), 'tool');
    assert.equal(statSync(path.join(dir, 'bin/hard')).ino, tool.ino);
    const devNull = statSync(path.join(dir, 'dev/null'));
    assert.ok(devNull.isCharacterDevice());
    assert.equal(devNull.rdev, (1 << 8) | 3);
    assert.ok(lstatSync(path.join(dir, 'run/fifo')).isFIFO());
    assert.equal(statSync(path.join(dir, 'tmp')).mode & 0o7777, 0o1777);
    assert.equal(statSync(path.join(dir, 'bin')).mtime.toISOString(), '2020-02-02T00:00:00.000Z');
  });

  it(`turns .wh. entries into overlay whiteouts and .wh..wh..opq into an opaque folder (${haveNativeAddon() ? 'addon' : 'command fallbacks'})`, async () => {
    const dir = freshDir();
    const layer = await tarOf([
      { name: 'etc/', type: 'directory', mode: 0o755 },
      { name: 'etc/.wh.motd', type: 'file' },
      { name: 'var/cache/', type: 'directory', mode: 0o755 },
      { name: 'var/cache/.wh..wh..opq', type: 'file' },
      { name: 'var/cache/kept', type: 'file', content: 'k' },
    ]);
    await unpackLayer(Readable.from([layer]), dir);
    const whiteout = lstatSync(path.join(dir, 'etc/motd'));
    assert.ok(whiteout.isCharacterDevice());
    assert.equal(whiteout.rdev, 0);
    assert.equal(existsSync(path.join(dir, 'etc/.wh.motd')), false);
    assert.equal(getfattr(path.join(dir, 'var/cache'), 'trusted.overlay.opaque'), Buffer.from('y').toString('hex'));
    assert.equal(existsSync(path.join(dir, 'var/cache/.wh..wh..opq')), false);
    assert.equal(readFileSync(path.join(dir, 'var/cache/kept'), 'utf8'), 'k');
  });

  it(`keeps binary xattrs from PAX headers (${haveNativeAddon() ? 'addon' : 'command fallbacks'})`, async () => {
    const dir = freshDir();
    // Shaped like a file capability value: binary, with bytes above 0x7f and zeros.
    const value = Buffer.from([0x01, 0x00, 0x00, 0x02, 0x00, 0x04, 0x00, 0x00, 0xff, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xc3, 0x28, 0x00, 0x00]);
    // GNU tar writes the binary value byte for byte in a PAX record, as real image layers have it.
    const src = freshDir();
    execFileSync('sh', ['-c', 'echo x > "$1/ping"', 'sh', src]);
    execFileSync('python3', ['-c', 'import os,sys; os.setxattr(sys.argv[1], "user.note", bytes.fromhex(sys.argv[2]))', path.join(src, 'ping'), value.toString('hex')]);
    const layer = execFileSync('tar', ['--xattrs', '--xattrs-include=*', '-C', src, '-cf', '-', 'ping']);
    await unpackLayer(Readable.from([layer]), dir);
    assert.equal(getfattr(path.join(dir, 'ping'), 'user.note'), value.toString('hex'));
  });

  const refused: Array<[string, Entry[]]> = [
    ['a ../ entry', [{ name: '../escape', type: 'file', content: 'x' }]],
    ['a nested ../ entry', [{ name: 'a/../../escape', type: 'file', content: 'x' }]],
    ['a file written through a symlink to /', [
      { name: 'link', type: 'symlink', linkname: '/' },
      { name: 'link/tmp/escape', type: 'file', content: 'x' },
    ]],
    ['a file written through a relative symlink', [
      { name: 'up', type: 'symlink', linkname: '../../..' },
      { name: 'up/escape', type: 'file', content: 'x' },
    ]],
    ['a hard link to a path outside', [{ name: 'passwd', type: 'link', linkname: '../../../../etc/passwd' }]],
    ['a hard link to an absolute path', [{ name: 'passwd', type: 'link', linkname: '/etc/passwd' }]],
  ];
  for (const [what, entries] of refused) {
    it(`refuses ${what}`, async () => {
      const root = freshDir();
      const dir = path.join(root, 'layer');
      execFileSync('mkdir', ['-p', dir]);
      const layer = await tarOf(entries);
      await assert.rejects(unpackLayer(Readable.from([layer]), dir), InvalidParameter);
      assert.equal(existsSync(path.join(root, 'escape')), false);
      assert.equal(existsSync('/escape'), false);
      assert.equal(existsSync('/tmp/escape'), false);
    });
  }

  it(`writes small files while the next entries are read, with the same result as one after the other (${haveNativeAddon() ? 'addon' : 'fs fallback'})`, async () => {
    const dir = freshDir();
    const entries: Entry[] = [{ name: 'many/', type: 'directory', mode: 0o750, mtime: new Date('2001-01-01T00:00:00Z') }];
    for (let i = 0; i < 300; i++) {
      entries.push({ name: `many/f${i}`, type: 'file', mode: i % 2 ? 0o2640 : 0o600, uid: 1000 + i, gid: 2000 + i, mtime: new Date(Date.UTC(2010, 0, 1, 0, 0, i)), content: `file ${i} `.repeat(i * 10) });
    }
    const big = Buffer.alloc(3 * 1024 * 1024 + 17);
    for (let i = 0; i < big.length; i += 4096) big.writeUInt32BE(i, i);
    entries.push(
      // Each of these touches a file written just before.
      { name: 'many/f10', type: 'file', mode: 0o644, content: 'replaced' },
      { name: 'many/link', type: 'link', linkname: 'many/f11' },
      { name: 'many/.wh.f12', type: 'file' },
      { name: 'many/f13', type: 'symlink', linkname: 'f14' },
      { name: 'big', type: 'file', mode: 0o755, content: big },
    );
    const result = await unpackLayer(Readable.from([await tarOf(entries)]), dir);
    assert.equal(result.entries, entries.length);
    for (let i = 0; i < 300; i++) {
      if (i >= 10 && i <= 13) continue;
      const file = path.join(dir, `many/f${i}`);
      const st = statSync(file);
      assert.equal(readFileSync(file, 'utf8'), `file ${i} `.repeat(i * 10), `contents of f${i}`);
      assert.equal(st.mode & 0o7777, i % 2 ? 0o2640 : 0o600, `mode of f${i}`);
      assert.equal(st.uid, 1000 + i);
      assert.equal(st.gid, 2000 + i);
      assert.equal(st.mtime.toISOString(), new Date(Date.UTC(2010, 0, 1, 0, 0, i)).toISOString());
    }
    assert.equal(readFileSync(path.join(dir, 'many/f10'), 'utf8'), 'replaced');
    assert.equal(statSync(path.join(dir, 'many/f10')).mode & 0o7777, 0o644);
    assert.equal(statSync(path.join(dir, 'many/link')).ino, statSync(path.join(dir, 'many/f11')).ino);
    assert.ok(lstatSync(path.join(dir, 'many/f12')).isCharacterDevice());
    assert.equal(readlinkSync(path.join(dir, 'many/f13')), 'f14');
    assert.ok(readFileSync(path.join(dir, 'big')).equals(big));
    assert.equal(statSync(path.join(dir, 'big')).mode & 0o7777, 0o755);
    // The folder's mtime is set after every write into it has ended.
    assert.equal(statSync(path.join(dir, 'many')).mtime.toISOString(), '2001-01-01T00:00:00.000Z');
    assert.equal(statSync(path.join(dir, 'many')).mode & 0o7777, 0o750);
  });

  it('fails the whole layer when one small-file write fails, after every write has ended', async () => {
    const dir = freshDir();
    const entries: Entry[] = [];
    for (let i = 0; i < 50; i++) entries.push({ name: `f${i}`, type: 'file', content: `x${i}` });
    // A name longer than the file system allows: the write of this file fails.
    entries.push({ name: 'n'.repeat(300), type: 'file', content: 'too long' });
    for (let i = 50; i < 100; i++) entries.push({ name: `f${i}`, type: 'file', content: `x${i}` });
    await assert.rejects(unpackLayer(Readable.from([await tarOf(entries)]), dir), (err: Error) => {
      assert.ok(err instanceof InvalidParameter, `${err.name}: ${err.message}`);
      assert.match(err.message, /name too long/i);
      return true;
    });
    // Nothing is still being written once the unpack has failed: the folder can be removed.
    const before = execFileSync('ls', [dir], { encoding: 'utf8' });
    await new Promise((r) => setTimeout(r, 200));
    assert.equal(execFileSync('ls', [dir], { encoding: 'utf8' }), before);
    rmSync(dir, { recursive: true });
    assert.equal(existsSync(dir), false);
  });

  it('refuses garbage and truncated tars with InvalidParameter', async () => {
    await assert.rejects(unpackLayer(Readable.from([Buffer.alloc(1024, 7)]), freshDir()), InvalidParameter);
    const layer = await tarOf([{ name: 'big', type: 'file', content: Buffer.alloc(5000, 1) }]);
    await assert.rejects(unpackLayer(Readable.from([layer.subarray(0, 2000)]), freshDir()), InvalidParameter);
    // A large file (written in pieces while the next is read) cut in its middle.
    const large = await tarOf([{ name: 'large', type: 'file', content: Buffer.alloc(5 * 1024 * 1024, 2) }]);
    const cut = large.subarray(0, 3 * 1024 * 1024 + 100);
    const pieces: Buffer[] = [];
    for (let i = 0; i < cut.length; i += 64 * 1024) pieces.push(cut.subarray(i, i + 64 * 1024));
    await assert.rejects(unpackLayer(Readable.from(pieces), freshDir()), InvalidParameter);
  });
});

describe('layer store', () => {
  it('stages gzip layers, commits them by chain id, keeps the tar, and cleans up after a bad one', async () => {
    const root = freshDir();
    const store = new LinuxLayerStore(root);
    const layer = await tarOf([{ name: 'hello', type: 'file', content: 'world' }]);
    const gz = gzipSync(layer);
    const staged = await store.stage(Readable.from([gz]));
    const { createHash } = await import('node:crypto');
    assert.equal(staged.diffId, `sha256:${createHash('sha256').update(layer).digest('hex')}`);
    await store.commit(staged, staged.diffId, null);
    const [dir] = store.lowerDirs([staged.diffId]);
    assert.equal(readFileSync(path.join(dir, 'hello'), 'utf8'), 'world');
    const back: Buffer[] = [];
    for await (const c of store.openTar(staged.diffId)) back.push(c as Buffer);
    assert.ok(Buffer.concat(back).equals(layer));

    await assert.rejects(store.stage(Readable.from([await tarOf([{ name: '../x', type: 'file' }])])), InvalidParameter);
    assert.deepEqual(execFileSync('ls', [path.join(root, 'staging')], { encoding: 'utf8' }), '');

    // A restarted store finds the layer again.
    const again = new LinuxLayerStore(root);
    assert.equal(again.has(staged.diffId), true);
    assert.equal(again.info(staged.diffId)?.tarSize, layer.length);
  });

  it('rebuilds byte-identical tars from the unpacked folder and the split, whatever the tar holds', async () => {
    const root = freshDir();
    const store = new LinuxLayerStore(root);
    // GNU tar: long names, PAX xattrs, hard links, a big file, the 10 KiB record padding.
    const src = freshDir();
    execFileSync('sh', ['-c', [
      'cd "$1"',
      'mkdir -p a/very/long/path/that/goes/on/and/on/for/more/than/one/hundred/characters/in/total/so/that/gnu/tar/needs/an/extension',
      'echo deep > a/very/long/path/that/goes/on/and/on/for/more/than/one/hundred/characters/in/total/so/that/gnu/tar/needs/an/extension/file-with-a-long-name-too.txt',
      'head -c 3000000 /dev/urandom > big',
      'echo one > f && ln f hard && ln -s f soft',
      'touch empty',
    ].join(' && '), 'sh', src]);
    execFileSync('python3', ['-c', 'import os,sys; os.setxattr(sys.argv[1], "user.k", b"\\xff\\x00v")', path.join(src, 'f')]);
    const gnu = execFileSync('tar', ['--xattrs', '--xattrs-include=*', '--format=posix', '-C', src, '-cf', '-', '.'], { maxBuffer: 64 << 20 });
    // tar-stream: the same path twice, a whiteout of a file of the same layer, a folder replaced by a file.
    const tricky = await tarOf([
      { name: 'dup', type: 'file', content: 'first' },
      { name: 'dup', type: 'file', content: 'second, longer' },
      { name: 'gone', type: 'file', content: 'soon hidden' },
      { name: '.wh.gone', type: 'file' },
      { name: 'd/', type: 'directory' },
      { name: 'd/inner', type: 'file', content: 'inner' },
      { name: 'd', type: 'file', content: 'now a file' },
      { name: 'link-to-dup', type: 'link', linkname: 'dup' },
    ]);
    for (const layer of [gnu, tricky, await tarOf([])]) {
      const staged = await store.stage(Readable.from([layer]));
      const chainId = `sha256:${(await import('node:crypto')).createHash('sha256').update(layer).digest('hex')}`;
      assert.equal(staged.diffId, chainId);
      await store.commit(staged, chainId, null);
      const back: Buffer[] = [];
      for await (const c of store.openTar(chainId)) back.push(c as Buffer);
      assert.ok(Buffer.concat(back).equals(layer), `rebuilt tar of ${layer.length} bytes differs`);
    }
    // Contents are stored once: the split holds the metadata only.
    const splitSize = statSync(path.join(store.lowerDirs([`sha256:${(await import('node:crypto')).createHash('sha256').update(gnu).digest('hex')}`])[0], '..', 'layer.split')).size;
    assert.ok(splitSize < 64 * 1024, `split data is ${splitSize} bytes`);
  });

  it('stages a gzip layer larger than the gunzip pieces and rebuilds the same tar', async () => {
    const root = freshDir();
    const store = new LinuxLayerStore(root);
    const { createHash, randomBytes } = await import('node:crypto');
    const entries: Entry[] = [{ name: 'data/', type: 'directory' }];
    for (let i = 0; i < 200; i++) entries.push({ name: `data/t${i}.log`, type: 'file', content: `line ${i}\n`.repeat(200 + i) });
    entries.push({ name: 'data/random.bin', type: 'file', content: randomBytes(2 * 1024 * 1024 + 5) });
    const layer = await tarOf(entries);
    const gz = gzipSync(layer);
    // Fed in small pieces, the way a network stream comes.
    const pieces: Buffer[] = [];
    for (let i = 0; i < gz.length; i += 7000) pieces.push(gz.subarray(i, i + 7000));
    const staged = await store.stage(Readable.from(pieces));
    assert.equal(staged.diffId, `sha256:${createHash('sha256').update(layer).digest('hex')}`);
    assert.equal(staged.size, layer.length);
    await store.commit(staged, staged.diffId, null);
    const [dir] = store.lowerDirs([staged.diffId]);
    assert.equal(readFileSync(path.join(dir, 'data/t7.log'), 'utf8'), 'line 7\n'.repeat(207));
    const back: Buffer[] = [];
    for await (const c of store.openTar(staged.diffId)) back.push(c as Buffer);
    assert.ok(Buffer.concat(back).equals(layer));
  });

  it('refuses to rebuild a layer whose files were changed', async () => {
    const root = freshDir();
    const store = new LinuxLayerStore(root);
    const layer = await tarOf([{ name: 'f', type: 'file', content: 'original' }]);
    const staged = await store.stage(Readable.from([layer]));
    await store.commit(staged, staged.diffId, null);
    const [dir] = store.lowerDirs([staged.diffId]);
    execFileSync('sh', ['-c', 'printf tampered > "$1/f"', 'sh', dir]);
    await assert.rejects(async () => {
      for await (const _ of store.openTar(staged.diffId)) void _;
    }, /not its diff id/);
  });
});
