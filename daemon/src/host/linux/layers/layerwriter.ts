/**
 * The writing side of a layer's unpacking (unpack.ts): each tar entry made in the layer's folder, whiteouts as
 * overlay wants them, small files written whole on the thread pool while the next entries are read.
 */
import { once } from 'node:events';
import { constants, promises as fs } from 'node:fs';
import path from 'node:path';
import type { Readable } from 'node:stream';
import type tar from 'tar-stream';
import { InvalidParameter } from '../../../errors.js';
import { lsetxattr, mknod, S_IFBLK, S_IFCHR, S_IFIFO, writeNewFile } from './native.js';
import type { SplitRecorder } from './split.js';

/** Where the tar split of the layer goes, and the folder for files a later entry displaces. */
export interface SplitTarget {
  recorder: SplitRecorder;
  /** Absolute folder (existing) for displaced files; the recorder's paths name it `aside/<id>`. */
  asideDir: string;
}

const WHITEOUT_PREFIX = '.wh.';
const WHITEOUT_META_PREFIX = '.wh..wh.';
const WHITEOUT_OPAQUE = '.wh..wh..opq';
export const XATTR_PREFIX = 'SCHILY.xattr.';
/** Files up to this size are held whole and written by one call. */
const SMALL_FILE = 1 << 20;
/**
 * Small-file writes running at once in the whole daemon, all layers together (each holds at most
 * SMALL_FILE bytes): more only contend for the folder locks and leave the thread pool no room for the
 * rest of the daemon (the layers of a pull unpack three at a time).
 */
const IN_FLIGHT = 4;
let activeWrites = 0;
const writeWaiters: Array<() => void> = [];

async function acquireWriteSlot(): Promise<void> {
  if (activeWrites < IN_FLIGHT) {
    activeWrites++;
    return;
  }
  // The slot is handed over by releaseWriteSlot without being counted down.
  await new Promise<void>((resolve) => writeWaiters.push(resolve));
}

function releaseWriteSlot(): void {
  const next = writeWaiters.shift();
  if (next) next();
  else activeWrites--;
}
/** Larger files are written in pieces of up to this size. */
const LARGE_WRITE = 1 << 20;

type Kind = 'dir' | 'file' | 'symlink' | 'other';

/** Normalises a tar entry name to a relative path inside the layer; refuses names that leave it. */
export function cleanEntryName(name: string): string {
  const parts: string[] = [];
  for (const part of name.split('/')) {
    if (part === '' || part === '.') continue;
    if (part === '..') {
      if (parts.length === 0) throw new InvalidParameter(`invalid layer: entry ${JSON.stringify(name)} points outside the layer`);
      // "a/../b" stays inside; tar tools never write it, but it is harmless once resolved.
      parts.pop();
      continue;
    }
    parts.push(part);
  }
  return parts.join('/');
}

function refuseDotDot(name: string): void {
  if (name.split('/').includes('..')) throw new InvalidParameter(`invalid layer: entry ${JSON.stringify(name)} has a ".." component`);
}

async function drain(stream: Readable): Promise<void> {
  stream.resume();
  if ((stream as Readable & { readableEnded?: boolean }).readableEnded) return;
  await once(stream, 'end');
}

/** Writes the entries of one layer tar into its folder (see unpack.ts for the rules it keeps). */
export class LayerWriter {
  private readonly kinds = new Map<string, Kind>();
  private readonly dirTimes = new Map<string, Date>();
  /** Files whose contents the tar split refers to, by path, with their reference id. */
  private readonly fileRefs = new Map<string, number>();
  /** Small-file writes running; each resolves (never rejects) when it is over. */
  private readonly running = new Set<Promise<void>>();
  private writeFailure: unknown;
  diskSize = 0;
  entries = 0;

  constructor(
    private readonly root: string,
    private readonly split?: SplitTarget,
  ) {}

  /** Keeps the contents of files the split refers to: moved aside rather than deleted. */
  private async setAside(rel: string, kind: Kind): Promise<void> {
    if (!this.split) return;
    const keys = kind === 'dir' ? [...this.fileRefs.keys()].filter((k) => k.startsWith(rel + '/')) : [rel];
    for (const key of keys) {
      const id = this.fileRefs.get(key);
      if (id === undefined) continue;
      await fs.rename(this.abs(key), path.join(this.split.asideDir, String(id)));
      this.split.recorder.relocate(id, `aside/${id}`);
      this.fileRefs.delete(key);
    }
  }

  /** Starts a small-file write without waiting for it to end (once one of the IN_FLIGHT slots is free). */
  private async launch(work: () => Promise<void>): Promise<void> {
    await acquireWriteSlot();
    if (this.writeFailure !== undefined) {
      releaseWriteSlot();
      throw this.writeFailure;
    }
    let started: Promise<void>;
    try {
      started = work();
    } catch (err) {
      started = Promise.reject(err);
    }
    const task: Promise<void> = started.then(
      () => {
        releaseWriteSlot();
        this.running.delete(task);
      },
      (err: unknown) => {
        releaseWriteSlot();
        this.writeFailure ??= err;
        this.running.delete(task);
      },
    );
    this.running.add(task);
  }

  private throwWriteFailure(): void {
    if (this.writeFailure !== undefined) throw this.writeFailure;
  }

  /** Waits for every write in flight; throws the first failure among them. */
  async barrier(): Promise<void> {
    while (this.running.size > 0) await Promise.all([...this.running]);
    this.throwWriteFailure();
  }

  /** Waits for every write in flight, ignoring failures (before the caller removes the folder). */
  async settle(): Promise<void> {
    while (this.running.size > 0) await Promise.all([...this.running]);
  }

  private abs(rel: string): string {
    return rel === '' ? this.root : path.join(this.root, rel);
  }

  /** Makes sure every parent of `rel` is a real folder of this layer (creating missing ones). */
  private async ensureParents(rel: string, original: string): Promise<void> {
    const parts = rel.split('/');
    let current = '';
    for (let i = 0; i < parts.length - 1; i++) {
      current = current ? `${current}/${parts[i]}` : parts[i];
      const kind = this.kinds.get(current);
      if (kind === 'dir') continue;
      if (kind === 'symlink') throw new InvalidParameter(`invalid layer: entry ${JSON.stringify(original)} would be written through the symlink ${current}`);
      if (kind !== undefined) throw new InvalidParameter(`invalid layer: entry ${JSON.stringify(original)} has a parent ${current} that is not a folder`);
      await fs.mkdir(this.abs(current), { mode: 0o755 });
      this.kinds.set(current, 'dir');
    }
  }

  /** Removes what is at `rel` (a later entry replaces an earlier one), keeping folders when `keepDir`. */
  private async clear(rel: string, keepDir: boolean): Promise<boolean> {
    const kind = this.kinds.get(rel);
    if (kind === undefined) return false;
    await this.barrier();
    if (kind === 'dir' && keepDir) return true;
    await this.setAside(rel, kind);
    await fs.rm(this.abs(rel), { recursive: true, force: true });
    this.kinds.delete(rel);
    this.dirTimes.delete(rel);
    if (kind === 'dir') {
      for (const key of [...this.kinds.keys()]) if (key.startsWith(rel + '/')) this.kinds.delete(key);
      for (const key of [...this.dirTimes.keys()]) if (key.startsWith(rel + '/')) this.dirTimes.delete(key);
    }
    return false;
  }

  private async applyXattrs(file: string, header: tar.Header): Promise<void> {
    const pax = header.pax as Record<string, string> | null | undefined;
    if (!pax) return;
    for (const [key, value] of Object.entries(pax)) {
      if (!key.startsWith(XATTR_PREFIX)) continue;
      const name = key.slice(XATTR_PREFIX.length);
      // Overlay's own attributes inside a layer would change how the stack is merged: not from an image.
      if (name.startsWith('trusted.overlay.')) continue;
      await lsetxattr(file, name, Buffer.from(value, 'latin1'));
    }
  }

  async entry(header: tar.Header, stream: Readable): Promise<void> {
    this.throwWriteFailure();
    this.entries++;
    // Registered before anything is awaited: the split recorder needs content ranges in tar order.
    const refId = this.registerContent(header);
    refuseDotDot(header.name);
    const rel = cleanEntryName(header.name);
    if (rel === '') {
      // The layer's root folder itself ("./"): nothing to create.
      await drain(stream);
      return;
    }
    const base = path.posix.basename(rel);
    const parent = path.posix.dirname(rel) === '.' ? '' : path.posix.dirname(rel);

    if (base.startsWith(WHITEOUT_PREFIX)) {
      await drain(stream);
      await this.barrier();
      await this.ensureParents(rel, header.name);
      if (base === WHITEOUT_OPAQUE) {
        await lsetxattr(this.abs(parent), 'trusted.overlay.opaque', Buffer.from('y'));
        return;
      }
      if (base.startsWith(WHITEOUT_META_PREFIX)) return;
      const hidden = parent ? `${parent}/${base.slice(WHITEOUT_PREFIX.length)}` : base.slice(WHITEOUT_PREFIX.length);
      await this.clear(hidden, false);
      const target = this.abs(hidden);
      await mknod(target, S_IFCHR | 0o600, 0, 0);
      await fs.lchown(target, header.uid ?? 0, header.gid ?? 0);
      this.kinds.set(hidden, 'other');
      return;
    }

    await this.ensureParents(rel, header.name);
    const target = this.abs(rel);
    const mode = (header.mode ?? 0o644) & 0o7777;
    const uid = header.uid ?? 0;
    const gid = header.gid ?? 0;
    const mtime = header.mtime ?? new Date(0);

    switch (header.type) {
      case 'directory': {
        await drain(stream);
        const exists = await this.clear(rel, true);
        if (!exists) await fs.mkdir(target, { mode: 0o700 });
        this.kinds.set(rel, 'dir');
        await fs.lchown(target, uid, gid);
        await fs.chmod(target, mode);
        await this.applyXattrs(target, header);
        this.dirTimes.set(rel, mtime);
        return;
      }
      case 'file':
      case 'contiguous-file': {
        await this.clear(rel, false);
        const size = header.size ?? 0;
        if (size <= SMALL_FILE) {
          const chunks: Buffer[] = [];
          let length = 0;
          for await (const chunk of stream) {
            chunks.push(chunk as Buffer);
            length += (chunk as Buffer).length;
          }
          const data = chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, length);
          this.kinds.set(rel, 'file');
          if (refId !== undefined) {
            this.split!.recorder.relocate(refId, `diff/${rel}`);
            this.fileRefs.set(rel, refId);
          }
          this.diskSize += length;
          await this.launch(async () => {
            await writeNewFile(target, data, mode, uid, gid, mtime);
            await this.applyXattrs(target, header);
          });
          return;
        }
        const handle = await fs.open(target, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600);
        this.kinds.set(rel, 'file');
        if (refId !== undefined) {
          this.split!.recorder.relocate(refId, `diff/${rel}`);
          this.fileRefs.set(rel, refId);
        }
        try {
          // One piece is written while the next is read.
          let writing: Promise<void> | undefined;
          const writePiece = async (piece: Buffer[], length: number): Promise<void> => {
            const { bytesWritten } = await handle.writev(piece);
            if (bytesWritten < length) {
              const rest = Buffer.concat(piece, length).subarray(bytesWritten);
              for (let done = 0; done < rest.length; ) done += (await handle.write(rest, done)).bytesWritten;
            }
            this.diskSize += length;
          };
          try {
            let batch: Buffer[] = [];
            let batched = 0;
            for await (const chunk of stream) {
              batch.push(chunk as Buffer);
              batched += (chunk as Buffer).length;
              if (batched >= LARGE_WRITE) {
                await writing;
                writing = writePiece(batch, batched);
                // Seen by the next `await writing`; until then a failure must not count as unhandled.
                writing.catch(() => undefined);
                batch = [];
                batched = 0;
              }
            }
            await writing;
            if (batched > 0) await writePiece(batch, batched);
          } finally {
            await writing?.catch(() => undefined);
          }
          await handle.chown(uid, gid);
          await handle.chmod(mode);
          await handle.utimes(mtime, mtime);
        } finally {
          await handle.close();
        }
        await this.applyXattrs(target, header);
        return;
      }
      case 'symlink': {
        await drain(stream);
        await this.clear(rel, false);
        if (!header.linkname) throw new InvalidParameter(`invalid layer: symlink ${JSON.stringify(header.name)} has no target`);
        await fs.symlink(header.linkname, target);
        this.kinds.set(rel, 'symlink');
        await fs.lchown(target, uid, gid);
        await fs.lutimes(target, mtime, mtime);
        await this.applyXattrs(target, header);
        return;
      }
      case 'link': {
        await drain(stream);
        await this.barrier();
        const linkname = header.linkname ?? '';
        refuseDotDot(linkname);
        const source = cleanEntryName(linkname);
        const kind = this.kinds.get(source);
        if (source === '' || kind === undefined) {
          throw new InvalidParameter(`invalid layer: hard link ${JSON.stringify(header.name)} names ${JSON.stringify(linkname)}, which is not an earlier entry of the layer`);
        }
        if (kind === 'dir') throw new InvalidParameter(`invalid layer: hard link ${JSON.stringify(header.name)} names the folder ${JSON.stringify(linkname)}`);
        if (source === rel) return;
        await this.clear(rel, false);
        await fs.link(this.abs(source), target);
        this.kinds.set(rel, kind);
        return;
      }
      case 'character-device':
      case 'block-device':
      case 'fifo': {
        await drain(stream);
        await this.clear(rel, false);
        const typeBits = header.type === 'fifo' ? S_IFIFO : header.type === 'block-device' ? S_IFBLK : S_IFCHR;
        await mknod(target, typeBits | 0o600, header.devmajor ?? 0, header.devminor ?? 0);
        this.kinds.set(rel, 'other');
        await fs.lchown(target, uid, gid);
        await fs.chmod(target, mode);
        await fs.lutimes(target, mtime, mtime);
        await this.applyXattrs(target, header);
        return;
      }
      default:
        await drain(stream);
        throw new InvalidParameter(`invalid layer: entry ${JSON.stringify(header.name)} has an unsupported type ${String(header.type)}`);
    }
  }

  private registerContent(header: tar.Header): number | undefined {
    if (!this.split || (header.type !== 'file' && header.type !== 'contiguous-file')) return undefined;
    const start = (header as tar.Header & { byteOffset?: number }).byteOffset;
    if (typeof start !== 'number') return undefined;
    try {
      const rel = cleanEntryName(header.name);
      if (rel === '' || path.posix.basename(rel).startsWith(WHITEOUT_PREFIX)) return undefined;
    } catch {
      return undefined;
    }
    return this.split.recorder.addContent(start, header.size ?? 0, '');
  }

  /** Folder mtimes last: creating their children changed them. */
  async finish(): Promise<void> {
    await this.barrier();
    const dirs = [...this.dirTimes.entries()].sort((a, b) => b[0].length - a[0].length);
    for (const [rel, mtime] of dirs) await fs.lutimes(this.abs(rel), mtime, mtime);
  }
}
