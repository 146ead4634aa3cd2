/**
 * System calls of the native addon `daemon/native/linuxsys`: mount and umount, each sparing a process spawn
 * on the path of a container start; and file system work done
 * as one task of the thread pool (state files, the small steps of a start or removal, folder trees). Callers
 * fall back to the command-line tools or to node:fs when the addon is not built.
 */
import { promises as fs } from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { mkdirOrExisting, writeFreshFile, writeNewFileSynced, type AtomicWriter, type FreshFilesWriter, type NewFileWriter } from '../../util/atomic.js';

export interface LinuxSys {
  mountOverlay(target: string, options: string): void;
  unmount(target: string, lazy: boolean): void;
  /** umount2 on a thread of the pool (an overlay's unmount syncs its upper filesystem); absent in older builds. */
  unmountAsync?(target: string, lazy: boolean, done: (err: NodeJS.ErrnoException | null) => void): void;
  /** mountOverlay on a thread of the pool; absent in older builds. */
  mountOverlayAsync?(target: string, options: string, done: (err: NodeJS.ErrnoException | null) => void): void;
  /** A close-on-exec memfd holding a copy of the file, sealed against any change. Absent in older builds. */
  sealedCopy?(file: string): number;
  /** SO_PEERCRED of a connected unix socket: who connected. Absent in older builds. */
  peerCredentials?(fd: number): { pid: number; uid: number; gid: number };
  /** A pipe, both ends close-on-exec: [readFd, writeFd]. Absent in older builds, as spawn and waitpid. */
  pipe?(): [number, number];
  /**
   * posix_spawn (a vfork: unlike libuv's fork, it copies none of the daemon's page tables, which blocks the
   * event loop for milliseconds per spawn). Child fd i is fds[i] (-1: /dev/null); signals default and
   * unblocked; `cwd` '' keeps the daemon's. Returns the pid; the caller must reap it with waitpid.
   */
  spawn?(file: string, args: string[], env: string[], cwd: string, fds: number[], setsid: boolean): number;
  /** spawn on a thread of the pool (the vfork suspends that thread until the exec, not the event loop). */
  spawnAsync?(file: string, args: string[], env: string[], cwd: string, fds: number[], setsid: boolean, done: (err: NodeJS.ErrnoException | null, pid: number | null) => void): void;
  /** Waits for a child started by spawn on the thread pool: its exit code, 128+n for signal n, -1 if lost. */
  waitpid?(pid: number, done: (code: number) => void): void;
  /**
   * `rm -rf --one-file-system` of an absolute path as one task of the pool; symlinks are never followed and a
   * mount point below the path is an error (EXDEV). Absent in older builds.
   */
  removeTreeAsync?(target: string, done: (err: NodeJS.ErrnoException | null) => void): void;
  /** syncfs(2) of the file system holding the path, on the thread pool. Absent in older builds. */
  syncfsAsync?(target: string, done: (err: NodeJS.ErrnoException | null) => void): void;
  /** FsStep lists as one task of the pool: each step's errno (0 done, -1 not run). Absent in older builds. */
  fsBatchAsync?(steps: FsStep[], done: (results: number[]) => void): void;
  /** The steps of util/atomic's writeFileAtomic as one task of the pool. Absent in older builds. */
  writeFileAtomicAsync?(tmp: string, target: string, data: Buffer, mode: number, durable: boolean, done: (err: NodeJS.ErrnoException | null) => void): void;
  /** malloc_trim(0): the free memory of every malloc arena back to the kernel. Absent in older builds. */
  mallocTrim?(): boolean;
  /** V8's LowMemoryNotification: full collections that shrink the heap and return its free pages. Absent in older builds. */
  lowMemoryNotification?(): void;
}

let loaded: LinuxSys | null | undefined;

/** The addon, or null when it is not built (or BERTH_LINUXSYS_ADDON=none). */
export function linuxSys(): LinuxSys | null {
  if (loaded !== undefined) return loaded;
  loaded = null;
  if (process.env.BERTH_LINUXSYS_ADDON === 'none') return loaded;
  // daemon/ from dist/src/host/linux (compiled)
  const daemonDir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..', '..');
  try {
    loaded = createRequire(import.meta.url)(path.join(daemonDir, 'native', 'linuxsys', 'build', 'Release', 'linuxsys.node')) as LinuxSys;
  } catch {
    loaded = null;
  }
  return loaded;
}

/**
 * Removes a file or a folder with everything in it (nothing when it does not exist). With the addon it is one
 * task of the thread pool that never enters a mount point; else fs.rm, a trip through the pool per entry.
 */
export function removeTree(target: string): Promise<void> {
  const remove = linuxSys()?.removeTreeAsync;
  if (!remove || !path.isAbsolute(target)) return fs.rm(target, { recursive: true, force: true });
  return new Promise((resolve, reject) => remove(target, (err) => (err ? reject(err) : resolve())));
}

/**
 * Gives back to the kernel what the daemon holds and no longer uses: V8's free heap pages (after full
 * collections), then what malloc's arenas keep of freed memory (the collections free buffers). Undefined
 * without the addon.
 */
export function nativeReleaseMemory(): (() => void) | undefined {
  const sys = linuxSys();
  if (!sys?.mallocTrim || !sys.lowMemoryNotification) return undefined;
  return () => {
    sys.lowMemoryNotification!();
    sys.mallocTrim!();
  };
}

/** util/atomic's writer as one native task, when the addon has it. */
export function nativeAtomicWriter(): AtomicWriter | undefined {
  const write = linuxSys()?.writeFileAtomicAsync;
  if (!write) return undefined;
  return (tmp, file, data, mode, durable) => new Promise((resolve, reject) => write(tmp, file, data, mode, durable, (err) => (err ? reject(err) : resolve())));
}

/** createFileDurable's native writer: the folder and the file as one task of the pool. */
export function nativeNewFileWriter(): NewFileWriter | undefined {
  if (!linuxSys()?.fsBatchAsync) return undefined;
  return async (file, data, mode, dirMode) => {
    await fsSteps([['mkdir', path.dirname(file), dirMode], ['create', file, data, mode]]);
  };
}

/** util/atomic's writeFreshFiles as one native task (each file a 'write' step), when the addon has batches. */
export function nativeFreshFilesWriter(): FreshFilesWriter | undefined {
  if (!linuxSys()?.fsBatchAsync) return undefined;
  return async (files) => {
    await fsSteps(files.map(({ file, data, mode }): FsStep => ['write', file, data, mode]));
  };
}

/**
 * A small file system step: a folder made (an existing one is fine), a file unlinked (a missing one is fine), a
 * new file written (unlinked first: never a truncation in place), a file created that must not exist yet and
 * fsynced (on a journaling file system that also commits its name and the folders made before it), a rename (a
 * missing source is reported as ENOENT), an existence check (ENOENT when missing).
 */
export type FsStep =
  | ['mkdir', string, number]
  | ['unlink', string]
  | ['write', string, Buffer, number]
  | ['create', string, Buffer, number]
  | ['rename', string, string]
  | ['exists', string];

/** fsSteps without the rejection: each step's errno (0 done, -1 not run after an earlier failure). */
export function fsStepResults(steps: FsStep[]): Promise<number[]> {
  const batch = linuxSys()?.fsBatchAsync;
  return batch ? new Promise<number[]>((resolve) => batch(steps, resolve)) : portableSteps(steps);
}

const ENOENT = os.constants.errno.ENOENT;
const errnoNames = new Map(Object.entries(os.constants.errno).map(([name, n]) => [n, name]));

/** Whether a step's result is a path found missing where that is an answer, not a failure. */
function missingIsFine(step: FsStep, result: number): boolean {
  return result === ENOENT && (step[0] === 'rename' || step[0] === 'exists');
}

/**
 * Runs the steps in order as one task of the thread pool (a trip through the pool each otherwise; and done
 * synchronously they would stall the event loop whenever the file system's journal is busy). Resolves with one
 * result per step: 0, or ENOENT's number for a rename or check of a missing path. The first failure rejects
 * with an error naming the step and its errno as `code`.
 */
export async function fsSteps(steps: FsStep[]): Promise<number[]> {
  const results = await fsStepResults(steps);
  const failed = results.findIndex((r, i) => r !== 0 && !missingIsFine(steps[i], r));
  if (failed >= 0) {
    const [kind, target] = steps[failed];
    const code = errnoNames.get(results[failed]) ?? 'EIO';
    throw Object.assign(new Error(`${kind} ${target}: ${code}`), { code, errno: -results[failed], path: target });
  }
  return results;
}

async function portableSteps(steps: FsStep[]): Promise<number[]> {
  const results = steps.map(() => -1);
  for (const [i, step] of steps.entries()) {
    try {
      if (step[0] === 'mkdir') await mkdirOrExisting(step[1], step[2]);
      else if (step[0] === 'unlink') await fs.rm(step[1], { force: true });
      else if (step[0] === 'write') await writeFreshFile(step[1], step[2], step[3]);
      else if (step[0] === 'create') await writeNewFileSynced(step[1], step[2], step[3]);
      else if (step[0] === 'rename') await fs.rename(step[1], step[2]);
      else await fs.lstat(step[1]);
      results[i] = 0;
    } catch (err) {
      results[i] = (os.constants.errno as Record<string, number>)[(err as NodeJS.ErrnoException).code ?? ''] ?? os.constants.errno.EIO;
      if (!missingIsFine(step, results[i])) break;
    }
  }
  return results;
}
