/**
 * A newc ("070701") cpio archive of a folder, the format the Linux kernel unpacks as its initramfs. Written
 * reproducibly: entries in byte order of their paths, parents first, every mtime the same, owner root,
 * inode numbers counted from 1, hard links stored as separate files. Streamed: file contents are read as
 * they are written.
 */
import { createReadStream, promises as fs } from 'node:fs';
import path from 'node:path';
import { Readable } from 'node:stream';

const S_IFMT = 0o170000;

function hex8(n: number): string {
  return n.toString(16).padStart(8, '0');
}

function pad4(n: number): Buffer {
  const r = n % 4;
  return Buffer.alloc(r ? 4 - r : 0);
}

export function cpioHeader(e: { name: string; ino: number; mode: number; size: number; mtime: number; nlink?: number; rdevMajor?: number; rdevMinor?: number }): Buffer {
  const name = Buffer.from(e.name + '\0', 'utf8');
  const fields = [
    e.ino,
    e.mode,
    0, // uid
    0, // gid
    e.nlink ?? 1,
    e.mtime,
    e.size,
    0, // devmajor
    0, // devminor
    e.rdevMajor ?? 0,
    e.rdevMinor ?? 0,
    name.length,
    0, // check
  ];
  const head = Buffer.from('070701' + fields.map(hex8).join(''), 'ascii');
  const both = Buffer.concat([head, name]);
  return Buffer.concat([both, pad4(both.length)]);
}

/** Paths under root (relative, POSIX), parents before children, siblings in byte order. */
async function* walk(root: string, rel = ''): AsyncGenerator<string> {
  const names = (await fs.readdir(path.join(root, rel))).sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)));
  for (const name of names) {
    const r = rel ? `${rel}/${name}` : name;
    yield r;
    const st = await fs.lstat(path.join(root, r));
    if (st.isDirectory()) yield* walk(root, r);
  }
}

/** The archive of root's contents as a stream of buffers. */
export function cpioStream(root: string, mtime: number): Readable {
  async function* entries(): AsyncGenerator<Buffer> {
    let ino = 0;
    for await (const rel of walk(root)) {
      const full = path.join(root, rel);
      const st = await fs.lstat(full);
      ino += 1;
      const type = st.mode & S_IFMT;
      const mode = type | (st.mode & 0o7777);
      if (st.isSymbolicLink()) {
        const target = Buffer.from(await fs.readlink(full), 'utf8');
        yield cpioHeader({ name: rel, ino, mode, size: target.length, mtime });
        yield Buffer.concat([target, pad4(target.length)]);
      } else if (st.isFile()) {
        yield cpioHeader({ name: rel, ino, mode, size: st.size, mtime });
        let n = 0;
        for await (const chunk of createReadStream(full)) {
          n += (chunk as Buffer).length;
          yield chunk as Buffer;
        }
        if (n !== st.size) throw new Error(`${full} changed while it was archived`);
        yield pad4(st.size);
      } else if (st.isDirectory()) {
        yield cpioHeader({ name: rel, ino, mode, size: 0, mtime, nlink: 2 });
      } else if (st.isCharacterDevice() || st.isBlockDevice()) {
        const rdev = st.rdev;
        yield cpioHeader({ name: rel, ino, mode, size: 0, mtime, rdevMajor: Math.floor(rdev / 256) & 0xfff, rdevMinor: (rdev & 0xff) | ((rdev >> 12) & 0xfff00) });
      } else if (st.isFIFO()) {
        yield cpioHeader({ name: rel, ino, mode, size: 0, mtime });
      }
      // Sockets are not archived.
    }
    yield cpioHeader({ name: 'TRAILER!!!', ino: 0, mode: 0, size: 0, mtime: 0, nlink: 1 });
  }
  return Readable.from(entries(), { objectMode: false });
}
