/**
 * Extracting a client's tar into a container folder (PUT archive). Safety rules, entry by entry:
 * - names are taken relative to the target folder: a leading `/` is dropped, and a name with a `..`
 *   component is refused (InvalidParameter), so no entry can name a path above the target;
 * - the parent folder of each entry is resolved like any container path (symlinks, including those the
 *   archive itself created, are resolved against the container root; mounts lead to their source), so a
 *   link in the container or in the archive can never make us write outside the root and its mounts;
 * - the entry itself is never followed: what is in the way is removed first (a link is replaced, not
 *   written through), and files are created with O_EXCL | O_NOFOLLOW and checked to lie inside their
 *   boundary before a byte is written;
 * - hard links must name a file of the same archive target, resolved the same way: never a host file;
 * - entries in a read-only mount (or a read-only root) are Forbidden.
 */
import { constants, promises as fs, type Stats } from 'node:fs';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type tar from 'tar-stream';
import { tarStream } from '../../../util/tar.js';
import { Forbidden, InvalidParameter, NotFound } from '../../../errors.js';
import { mknod, S_IFBLK, S_IFCHR, S_IFIFO } from '../layers/native.js';
import { components, ContainerFilesystem, type Location } from './resolve.js';

export interface ExtractOptions {
  /** Refuse to replace a folder by a non-folder or the reverse. */
  noOverwriteDirNonDir: boolean;
  /** Owner for every extracted file; the archive's uid/gid when absent. */
  chown?: { uid: number; gid: number };
  signal?: AbortSignal;
}

function errno(err: unknown): string | undefined {
  return (err as NodeJS.ErrnoException | undefined)?.code;
}

/** The components of a tar entry name relative to the target; refuses `..`. */
export function entryComponents(name: string): string[] {
  const parts = components(name.replace(/\\/g, '/'));
  if (parts.includes('..')) throw new InvalidParameter(`invalid tar entry ${JSON.stringify(name)}: a name with ".." could lead outside the target folder`);
  return parts;
}

function describe(st: Stats | 'directory' | 'other'): string {
  const dir = st === 'directory' || (typeof st === 'object' && st.isDirectory());
  return dir ? 'directory' : 'non-directory';
}

async function lstatOrUndefined(p: string): Promise<Stats | undefined> {
  try {
    return await fs.lstat(p);
  } catch (err) {
    if (errno(err) === 'ENOENT') return undefined;
    throw err;
  }
}

/**
 * Runs `fn` with the folder `loc` held open (checked to lie inside its boundary); `at(name)` names an entry
 * of that very folder through /proc/self/fd, whatever happens to the path meanwhile.
 */
async function withPinned<T>(loc: Location, fn: (at: (name: string) => string) => Promise<T>): Promise<T> {
  const dir = await fs.open(loc.hostPath, constants.O_RDONLY | constants.O_DIRECTORY);
  try {
    await ContainerFilesystem.checkOpened(dir.fd, loc.boundary, loc.containerPath);
    // By the daemon's pid rather than /proc/self, so that a helper command (mknod) reaches the same folder.
    return await fn((name) => `/proc/${process.pid}/fd/${dir.fd}/${name}`);
  } finally {
    await dir.close();
  }
}

export class Extractor {
  private readonly dirTimes: Array<{ containerPath: string; mtime: Date; mode: number }> = [];

  constructor(
    private readonly fsys: ContainerFilesystem,
    private readonly target: Location,
    private readonly opts: ExtractOptions,
  ) {}

  private writable(loc: Location): void {
    if (loc.readOnly) {
      throw new Forbidden(loc.mount ? `mounted volume is marked read-only: ${loc.containerPath}` : `container rootfs is marked read-only`);
    }
  }

  /** Resolves (creating missing folders) the folder `parts` below the target. */
  private async folder(parts: string[]): Promise<Location> {
    let current = this.target;
    for (const part of parts) {
      const wanted = path.posix.join(current.containerPath, part);
      const next = await this.fsys.resolve(wanted, true, true).catch((err) => {
        // A link (of the container or of the archive) to a folder that does not exist in the container.
        if (err instanceof NotFound) throw new InvalidParameter(`cannot extract into ${wanted}: it leads to a folder that does not exist in the container`);
        throw err;
      });
      const st = await lstatOrUndefined(next.hostPath);
      if (!st) {
        this.writable(next);
        const parent = await this.fsys.resolve(path.posix.dirname(next.containerPath), true);
        await withPinned(parent, (at) => fs.mkdir(at(path.posix.basename(next.containerPath)), { mode: 0o755 }));
      } else if (!st.isDirectory()) {
        throw new InvalidParameter(`cannot extract into ${next.containerPath}: not a directory`);
      }
      current = next;
    }
    return current;
  }

  private owner(header: tar.Header): { uid: number; gid: number } {
    return this.opts.chown ?? { uid: header.uid ?? 0, gid: header.gid ?? 0 };
  }

  async entry(header: tar.Header, body: Readable): Promise<void> {
    const parts = entryComponents(header.name);
    if (parts.length === 0) {
      // The archive's own root (`./`): nothing to create.
      body.resume();
      return;
    }
    const parent = await this.folder(parts.slice(0, -1));
    // Every change below goes through the parent folder opened once and checked to lie inside: a folder
    // swapped for a link meanwhile cannot redirect it.
    await withPinned(parent, (at) => this.create(header, body, parts, parent, at));
  }

  private async create(header: tar.Header, body: Readable, parts: string[], parent: Location, at: (name: string) => string): Promise<void> {
    const type = header.type ?? 'file';
    const name = parts[parts.length - 1];
    const containerPath = path.posix.join(parent.containerPath, name);
    const loc = this.fsys.locate(containerPath);
    this.writable(loc);
    const hostPath = at(name);
    const existing = await lstatOrUndefined(hostPath);
    if (existing) {
      const keep = existing.isDirectory() && type === 'directory';
      if (!keep) {
        if (this.opts.noOverwriteDirNonDir && existing.isDirectory() !== (type === 'directory')) {
          throw new InvalidParameter(`cannot overwrite ${describe(existing)} "${containerPath}" with ${describe(type === 'directory' ? 'directory' : 'other')}`);
        }
        if (this.fsys.mountAt(containerPath)) throw new InvalidParameter(`cannot replace ${containerPath}: it is a mount point`);
        await fs.rm(hostPath, { recursive: true, force: true });
      }
    }
    const { uid, gid } = this.owner(header);
    const mode = (header.mode ?? 0o644) & 0o7777;
    const mtime = header.mtime ?? new Date();
    switch (type) {
      case 'directory': {
        if (!existing?.isDirectory()) await fs.mkdir(hostPath, { mode: 0o700 });
        await fs.lchown(hostPath, uid, gid);
        this.dirTimes.push({ containerPath, mtime, mode });
        body.resume();
        return;
      }
      case 'file':
      case 'contiguous-file': {
        const handle = await fs.open(hostPath, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600);
        try {
          await ContainerFilesystem.checkOpened(handle.fd, loc.boundary, containerPath);
          for await (const chunk of body) {
            const data = chunk as Buffer;
            let off = 0;
            while (off < data.length) off += (await handle.write(data, off, data.length - off)).bytesWritten;
          }
          await handle.chown(uid, gid);
          await handle.chmod(mode);
          await handle.utimes(mtime, mtime);
        } finally {
          await handle.close();
        }
        return;
      }
      case 'symlink': {
        body.resume();
        await fs.symlink(header.linkname ?? '', hostPath);
        await fs.lchown(hostPath, uid, gid);
        await fs.lutimes(hostPath, mtime, mtime);
        return;
      }
      case 'link': {
        body.resume();
        const targetParts = entryComponents(header.linkname ?? '');
        if (targetParts.length === 0) throw new InvalidParameter(`invalid hard link ${JSON.stringify(header.name)}: empty target`);
        const targetParent = await this.fsys.resolve(path.posix.join(this.target.containerPath, ...targetParts.slice(0, -1)), true).catch((err) => {
          if (err instanceof NotFound) throw new InvalidParameter(`invalid hard link ${JSON.stringify(header.name)}: target ${JSON.stringify(header.linkname)} does not exist`);
          throw err;
        });
        await withPinned(targetParent, async (targetAt) => {
          const targetHost = targetAt(targetParts[targetParts.length - 1]);
          const targetStat = await lstatOrUndefined(targetHost);
          if (!targetStat || targetStat.isDirectory()) {
            throw new InvalidParameter(`invalid hard link ${JSON.stringify(header.name)}: target ${JSON.stringify(header.linkname)} is not a file of the archive's target`);
          }
          try {
            await fs.link(targetHost, hostPath);
          } catch (err) {
            if (errno(err) === 'EXDEV') throw new InvalidParameter(`invalid hard link ${JSON.stringify(header.name)}: target is on another mount`);
            throw err;
          }
        });
        return;
      }
      case 'character-device':
      case 'block-device':
      case 'fifo': {
        body.resume();
        const kind = type === 'fifo' ? S_IFIFO : type === 'character-device' ? S_IFCHR : S_IFBLK;
        await mknod(hostPath, kind | mode, header.devmajor ?? 0, header.devminor ?? 0);
        await fs.lchown(hostPath, uid, gid);
        return;
      }
      default:
        // pax and GNU extension headers are consumed by the parser; anything else is skipped.
        body.resume();
    }
  }

  /** Folder modes and times are set last: creating their contents would change the times again. */
  async finish(): Promise<void> {
    for (const d of this.dirTimes.reverse()) {
      // Opened without following a link and checked, so that a folder swapped for a link is not chmodded.
      const loc = await this.fsys.resolve(d.containerPath, false);
      const dir = await fs.open(loc.hostPath, constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW);
      try {
        await ContainerFilesystem.checkOpened(dir.fd, loc.boundary, loc.containerPath);
        await dir.chmod(d.mode);
        await dir.utimes(d.mtime, d.mtime);
      } finally {
        await dir.close();
      }
    }
  }
}

/** Extracts the tar stream `input` into the resolved folder `target`. */
export async function extractArchive(fsys: ContainerFilesystem, target: Location, input: Readable, opts: ExtractOptions): Promise<void> {
  const extractor = new Extractor(fsys, target, opts);
  const extract = tarStream().extract();
  const feeding = pipeline(input, extract as unknown as NodeJS.WritableStream);
  feeding.catch(() => undefined);
  try {
    for await (const entry of extract) {
      if (opts.signal?.aborted) throw opts.signal.reason ?? new Error('aborted');
      await extractor.entry(entry.header, entry as unknown as Readable);
    }
    await feeding;
  } catch (err) {
    extract.destroy();
    input.resume();
    if (err instanceof Error && /Invalid tar header|Unexpected end of data|tar/i.test(err.message) && !(err as { code?: string }).code && err.constructor === Error) {
      throw new InvalidParameter(`invalid tar archive: ${err.message}`, { cause: err });
    }
    if ((err as NodeJS.ErrnoException).code === 'ENAMETOOLONG') {
      throw new InvalidParameter('invalid tar archive: an entry has a file name or path too long for the file system', { cause: err });
    }
    throw err;
  }
  await extractor.finish();
}
