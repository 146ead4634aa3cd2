/**
 * A container's writable layer as a layer tar (what `docker commit` and the image builder store): the
 * overlay upper folder walked with lstat, links stored as links, files streamed with backpressure, and the
 * overlay markers turned into the layer format's:
 * - a whiteout (character device 0/0) becomes an empty `.wh.<name>` entry;
 * - an opaque folder (xattr trusted.overlay.opaque = y) gets a `.wh..wh..opq` entry inside it.
 * Mount points the runtime created (`ignoreAdded`, when no layer below has them) are left out, as Docker
 * keeps them in an init layer that is never committed.
 */
import { constants, promises as fs, type Stats } from 'node:fs';
import path from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type tar from 'tar-stream';
import { lazyPack } from '../../../util/tar.js';
import { opaqueFolders } from './changes.js';
import { devMajor, devMinor } from '../../../util/devnum.js';
import { exactBytes } from './pack.js';

const CHUNK = 256 * 1024;

function isWhiteout(st: Stats): boolean {
  return st.isCharacterDevice() && st.rdev === 0;
}

async function inLowerLayers(topFirst: string[], rel: string): Promise<boolean> {
  for (const layer of topFirst) {
    const st = await fs.lstat(path.join(layer, rel)).catch(() => undefined);
    if (st) return !isWhiteout(st);
    if (await fs.lstat(path.join(layer, path.dirname(rel), `.wh.${path.basename(rel)}`)).catch(() => undefined)) return false;
  }
  return false;
}

/** A layer tar of the overlay upper folder `upper` over `lowerDirs` (bottom first). */
export function upperDiffTar(upper: string, lowerDirs: string[], ignoreAdded: ReadonlySet<string>, signal?: AbortSignal): Readable {
  return lazyPack(async (pack) => {
    const topFirst = lowerDirs.map((d) => path.resolve(d)).reverse();
    const hardLinks = new Map<string, string>();
    const entry = (header: Partial<tar.Header> & { name: string }): Promise<void> =>
      new Promise((resolve, reject) => pack.entry(header, '', (err) => (err ? reject(err) : resolve())));

    const header = (name: string, st: Stats): Partial<tar.Header> & { name: string } => ({ name, mode: st.mode & 0o7777, uid: st.uid, gid: st.gid, mtime: st.mtime, size: 0 });

    // Folders are held open (O_NOFOLLOW) and their entries named through the descriptor, so that a running
    // container (commit with pause=false) that swaps a folder for a link cannot lead the walk outside.
    const walk = async (rel: string, dirPath: string, opaque: Set<string>): Promise<void> => {
      const dir = await fs.open(dirPath, constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW);
      try {
        const pinned = `/proc/self/fd/${dir.fd}`;
        const names = (await fs.readdir(pinned).catch(() => [] as string[])).sort();
        for (const name of names) {
          if (signal?.aborted) throw signal.reason ?? new Error('aborted');
          const childRel = rel ? `${rel}/${name}` : name;
          const hostPath = `${pinned}/${name}`;
          const st = await fs.lstat(hostPath).catch(() => undefined);
          if (!st) continue;
          if (isWhiteout(st)) {
            await entry({ ...header(rel ? `${rel}/.wh.${name}` : `.wh.${name}`, st), mode: 0o644, type: 'file' });
            continue;
          }
          if (ignoreAdded.has('/' + childRel) && !(await inLowerLayers(topFirst, childRel))) {
            // A mount point of the runtime: left out, unless something was written below a folder one.
            if (!st.isDirectory() || (await fs.readdir(hostPath).catch(() => [])).length === 0) continue;
          }
          if (st.isDirectory()) {
            await entry({ ...header(`${childRel}/`, st), type: 'directory' });
            if (opaque.has(childRel)) await entry({ name: `${childRel}/.wh..wh..opq`, mode: 0o644, size: 0, mtime: st.mtime, type: 'file' });
            await walk(childRel, hostPath, opaque).catch((err) => {
              // Removed or replaced while the tree is walked: skipped, as tar does.
              if ((err as NodeJS.ErrnoException).code !== 'ENOENT' && (err as NodeJS.ErrnoException).code !== 'ELOOP' && (err as NodeJS.ErrnoException).code !== 'ENOTDIR') throw err;
            });
          } else if (st.isSymbolicLink()) {
            await entry({ ...header(childRel, st), type: 'symlink', linkname: await fs.readlink(hostPath) });
          } else if (st.isFile()) {
            const key = `${st.dev}:${st.ino}`;
            const first = st.nlink > 1 ? hardLinks.get(key) : undefined;
            if (first !== undefined) {
              await entry({ ...header(childRel, st), type: 'link', linkname: first });
              continue;
            }
            const handle = await fs.open(hostPath, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK).catch(() => undefined);
            if (!handle) continue;
            try {
              const fst = await handle.stat();
              if (!fst.isFile()) continue;
              if (fst.nlink > 1) hardLinks.set(`${fst.dev}:${fst.ino}`, childRel);
              const sink = pack.entry({ ...header(childRel, fst), type: 'file', size: fst.size });
              await pipeline(Readable.from(exactBytes(handle, fst.size, signal, CHUNK)), sink);
            } finally {
              await handle.close();
            }
          } else if (st.isCharacterDevice() || st.isBlockDevice()) {
            await entry({ ...header(childRel, st), type: st.isCharacterDevice() ? 'character-device' : 'block-device', devmajor: devMajor(st.rdev), devminor: devMinor(st.rdev) });
          } else if (st.isFIFO()) {
            await entry({ ...header(childRel, st), type: 'fifo' });
          }
        }
      } finally {
        await dir.close();
      }
    };

    // A container never started (nor copied into) has no upper folder yet: its layer is empty.
    const hasUpper = await fs.stat(upper).then(() => true, (err: NodeJS.ErrnoException) => {
      if (err.code === 'ENOENT') return false;
      throw err;
    });
    if (!hasUpper) {
      pack.finalize();
      return;
    }
    const opaque = await opaqueFolders(upper);
    await walk('', upper, opaque);
    pack.finalize();
  });
}
