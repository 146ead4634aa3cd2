/**
 * Tar streams of container files (GET archive, export). The tree is walked with lstat: links are stored as
 * links, never followed; a folder that is a mount's destination is read from the mount's source. Each file
 * is opened with O_NOFOLLOW and checked to lie inside its boundary before a byte is read, and exactly the
 * size announced in its header is sent (a file that shrinks meanwhile is padded with zeros, one that grows
 * is cut), so the archive stays well-formed while the container writes. Files stream with backpressure.
 */
import { constants, promises as fs, type Stats } from 'node:fs';
import path from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type tar from 'tar-stream';
import { devMajor, devMinor } from '../../../util/devnum.js';
import { lazyPack } from '../../../util/tar.js';
import { ContainerFilesystem, type FilesystemMount } from './resolve.js';

const CHUNK = 64 * 1024;

/**
 * A file's first `size` bytes in pieces of `chunk`. A file that shrank while it was read is padded with
 * zeros, so that a tar entry keeps the size its header announced.
 */
export async function* exactBytes(handle: fs.FileHandle, size: number, signal?: AbortSignal, chunk = CHUNK): AsyncGenerator<Buffer> {
  let offset = 0;
  while (offset < size) {
    if (signal?.aborted) throw signal.reason ?? new Error('aborted');
    const want = Math.min(chunk, size - offset);
    const buf = Buffer.allocUnsafe(want);
    const { bytesRead } = await handle.read(buf, 0, want, offset);
    if (bytesRead === 0) {
      yield Buffer.alloc(size - offset);
      return;
    }
    offset += bytesRead;
    yield buf.subarray(0, bytesRead);
  }
}

export interface PackSource {
  /** Container path of the item (for mounts below it). */
  containerPath: string;
  /** Host path of the item. */
  hostPath: string;
  /** Folder that bounds hostPath (container root or mount source). */
  boundary: string;
  /** Name of the item in the archive ('' or '.' names the contents of a folder, without the folder itself). */
  name: string;
}

export interface PackOptions {
  /** Used to continue into mounts below folders; without it mounts are not crossed (export). */
  fs?: ContainerFilesystem;
  signal?: AbortSignal;
}

type Header = Partial<tar.Header> & { name: string };

class Packer {
  private readonly hardLinks = new Map<string, string>();

  constructor(
    private readonly pack: tar.Pack,
    private readonly opts: PackOptions,
  ) {}

  private entry(header: Header): Promise<void> {
    return new Promise((resolve, reject) => {
      this.pack.entry(header, (err) => (err ? reject(err) : resolve()));
    });
  }

  private header(name: string, st: Stats): Header {
    return {
      name,
      mode: st.mode & 0o7777,
      uid: st.uid,
      gid: st.gid,
      mtime: st.mtime,
      size: 0,
    };
  }

  async add(source: PackSource): Promise<void> {
    if (this.opts.signal?.aborted) throw this.opts.signal.reason ?? new Error('aborted');
    const st = await fs.lstat(source.hostPath);
    const contentsOnly = source.name === '' || source.name === '.';
    if (st.isDirectory()) {
      if (!contentsOnly) await this.entry({ ...this.header(source.name + '/', st), type: 'directory' });
      // The folder is held open and checked to lie inside; its entries are named through that descriptor,
      // so a folder swapped for a link while the tree is walked cannot lead the walk outside.
      const dir = await fs.open(source.hostPath, constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW);
      try {
        await ContainerFilesystem.checkOpened(dir.fd, source.boundary, source.containerPath);
        const pinned = `/proc/${process.pid}/fd/${dir.fd}`;
        const children = (await fs.readdir(pinned)).sort();
        for (const child of children) {
          const containerPath = path.posix.join(source.containerPath, child);
          const mount: FilesystemMount | undefined = this.opts.fs?.mountAt(containerPath);
          await this.add({
            containerPath,
            hostPath: mount ? mount.source : `${pinned}/${child}`,
            boundary: mount ? mount.source : source.boundary,
            name: contentsOnly ? child : `${source.name}/${child}`,
          }).catch((err) => {
            // A file removed while the tree is walked is skipped, as tar does.
            if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
          });
        }
      } finally {
        await dir.close();
      }
      return;
    }
    const name = contentsOnly ? path.posix.basename(source.containerPath) : source.name;
    const header = this.header(name, st);
    if (st.isSymbolicLink()) {
      await this.entry({ ...header, type: 'symlink', linkname: await fs.readlink(source.hostPath) });
    } else if (st.isFile()) {
      const key = `${st.dev}:${st.ino}`;
      const first = st.nlink > 1 ? this.hardLinks.get(key) : undefined;
      if (first !== undefined) {
        await this.entry({ ...header, type: 'link', linkname: first });
        return;
      }
      if (st.nlink > 1) this.hardLinks.set(key, name);
      const handle = await fs.open(source.hostPath, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
      try {
        await ContainerFilesystem.checkOpened(handle.fd, source.boundary, source.containerPath);
        const fst = await handle.stat();
        if (!fst.isFile()) return;
        const sink = this.pack.entry({ ...header, type: 'file', size: fst.size, mode: fst.mode & 0o7777 });
        await pipeline(Readable.from(exactBytes(handle, fst.size, this.opts.signal)), sink);
      } finally {
        await handle.close();
      }
    } else if (st.isCharacterDevice() || st.isBlockDevice()) {
      await this.entry({
        ...header,
        type: st.isCharacterDevice() ? 'character-device' : 'block-device',
        devmajor: devMajor(st.rdev),
        devminor: devMinor(st.rdev),
      });
    } else if (st.isFIFO()) {
      await this.entry({ ...header, type: 'fifo' });
    }
    // Sockets have no tar form: left out, as tar does.
  }
}

/**
 * A tar stream of `sources` (in order). Errors after the stream started destroy it (the client sees a
 * truncated archive); a client that goes away aborts the walk through `opts.signal`.
 */
export function packFiles(sources: PackSource[], opts: PackOptions = {}): Readable {
  return lazyPack(async (pack) => {
    const packer = new Packer(pack, opts);
    for (const source of sources) await packer.add(source);
    pack.finalize();
  });
}
