import { promises as fs } from 'node:fs';
import path from 'node:path';

export interface WriteOptions {
  mode?: number;
  /**
   * Durable (the default): fsync the file and its folder, so that the new content survives a power loss.
   * Not durable: still atomic against a crash of the process (the rename), several times cheaper; for state
   * that recovery can rebuild from elsewhere.
   */
  durable?: boolean;
}

/**
 * Does the steps of writeFileAtomic in one go (a native task of the thread pool, where the steps below cost a
 * trip through the pool each): writes `data` to `tmp`, fsyncs it when durable, renames it over `file` and
 * fsyncs the folder when durable; removes `tmp` when it fails.
 */
export type AtomicWriter = (tmp: string, file: string, data: Buffer, mode: number, durable: boolean) => Promise<void>;

let writer: AtomicWriter | undefined;

/** Sets the writer writeFileAtomic uses (the host's native one), or goes back to the portable steps. */
export function useAtomicWriter(w: AtomicWriter | undefined): void {
  writer = w;
}

/**
 * Writes a file atomically: a temporary file beside it, fsync, rename over the target, fsync of the
 * folder. A crash leaves either the old or the new content, never a torn file.
 */
export async function writeFileAtomic(file: string, data: string | Uint8Array, opts: WriteOptions | number = {}): Promise<void> {
  const { mode = 0o600, durable = true } = typeof opts === 'number' ? { mode: opts } : opts;
  const tmp = path.join(path.dirname(file), `.${path.basename(file)}.${process.pid}.${Math.random().toString(36).slice(2)}.tmp`);
  if (writer) return writer(tmp, file, typeof data === 'string' ? Buffer.from(data) : Buffer.from(data.buffer, data.byteOffset, data.byteLength), mode, durable);
  const handle = await fs.open(tmp, 'w', mode);
  try {
    await handle.writeFile(data);
    if (durable) await handle.sync();
  } finally {
    await handle.close();
  }
  try {
    await fs.rename(tmp, file);
  } catch (err) {
    await fs.rm(tmp, { force: true });
    throw err;
  }
  if (durable) await syncFolder(path.dirname(file));
}

/** fsync of a folder: the renames and unlinks in it survive a crash of the machine. */
export async function syncFolder(dir: string): Promise<void> {
  const handle = await fs.open(dir, 'r');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/**
 * Writes FILE, which must not exist yet (EEXIST otherwise), in a folder made for it when missing (not its
 * parents), durably and with one fsync: no temporary file, no rename. A crash before it returns leaves no file or
 * a torn one, which the reader of such a file must take for an unfinished creation. On a journaling file system
 * (ext4, xfs) the fsync of a new file also commits its name and the folder made before it.
 */
export type NewFileWriter = (file: string, data: Buffer, mode: number, dirMode: number) => Promise<void>;

let newFileWriter: NewFileWriter | undefined;

/** Sets the writer createFileDurable uses (the host's native one), or goes back to the portable steps. */
export function useNewFileWriter(w: NewFileWriter | undefined): void {
  newFileWriter = w;
}

/** See NewFileWriter. */
export async function createFileDurable(file: string, data: string | Buffer, opts: { mode?: number; dirMode?: number } = {}): Promise<void> {
  const { mode = 0o600, dirMode = 0o700 } = opts;
  const bytes = typeof data === 'string' ? Buffer.from(data) : data;
  if (newFileWriter) return newFileWriter(file, bytes, mode, dirMode);
  await mkdirOrExisting(path.dirname(file), dirMode);
  await writeNewFileSynced(file, bytes, mode);
}

/** Writes small files anew: each one unlinked, then created (never truncated and rewritten in place). */
export type FreshFilesWriter = (files: ReadonlyArray<{ file: string; data: Buffer; mode: number }>) => Promise<void>;

let freshFilesWriter: FreshFilesWriter | undefined;

/** Sets the writer writeFreshFiles uses (the host's native one: all the files as one task of the pool). */
export function useFreshFilesWriter(w: FreshFilesWriter | undefined): void {
  freshFilesWriter = w;
}

/**
 * See FreshFilesWriter. Not atomic and not durable: for files that are written again before they are read
 * (those of a container's start). On ext4 a file truncated and rewritten in place is flushed when closed.
 */
export async function writeFreshFiles(files: ReadonlyArray<{ file: string; data: string | Buffer; mode?: number }>): Promise<void> {
  const all = files.map(({ file, data, mode = 0o644 }) => ({ file, data: typeof data === 'string' ? Buffer.from(data) : data, mode }));
  if (freshFilesWriter) return freshFilesWriter(all);
  await Promise.all(all.map(({ file, data, mode }) => writeFreshFile(file, data, mode)));
}

/** One file of writeFreshFiles: unlinked (a missing one is fine), then created with `data`. */
export async function writeFreshFile(file: string, data: Uint8Array, mode: number): Promise<void> {
  await fs.rm(file, { force: true });
  await fs.writeFile(file, data, { flag: 'wx', mode });
}

/** Makes a folder; an existing folder is fine, anything else in its place is not (EEXIST). */
export async function mkdirOrExisting(dir: string, mode: number): Promise<void> {
  await fs.mkdir(dir, { mode }).catch(async (err: NodeJS.ErrnoException) => {
    if (err.code !== 'EEXIST' || !(await fs.stat(dir)).isDirectory()) throw err;
  });
}

/** Writes a file that must not exist yet (EEXIST otherwise) and fsyncs it. */
export async function writeNewFileSynced(file: string, data: Uint8Array, mode: number): Promise<void> {
  const handle = await fs.open(file, 'wx', mode);
  try {
    await handle.writeFile(data);
    await handle.sync();
  } finally {
    await handle.close();
  }
}

export async function writeJSONAtomic(file: string, value: unknown, opts: WriteOptions = {}): Promise<void> {
  await writeFileAtomic(file, JSON.stringify(value), opts);
}

/** Reads a JSON file, or returns undefined when it does not exist. */
export async function readJSONIfExists<T>(file: string): Promise<T | undefined> {
  try {
    return JSON.parse(await fs.readFile(file, 'utf8')) as T;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
}
