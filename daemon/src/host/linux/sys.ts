/**
 * System calls of the native addon `daemon/native/linuxsys` (mount, umount, loopback up in a container's
 * network namespace): each spares a process spawn on the path of a container start. Callers fall back to
 * the command-line tools when the addon is not built.
 */
import { promises as fs } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { AtomicWriter } from '../../util/atomic.js';

export interface LinuxSys {
  mountOverlay(target: string, options: string): void;
  unmount(target: string, lazy: boolean): void;
  loopbackUp(pid: number): void;
  /** umount2 on a thread of the pool (an overlay's unmount syncs its upper filesystem); absent in older builds. */
  unmountAsync?(target: string, lazy: boolean, done: (err: NodeJS.ErrnoException | null) => void): void;
  /** mountOverlay on a thread of the pool; absent in older builds. */
  mountOverlayAsync?(target: string, options: string, done: (err: NodeJS.ErrnoException | null) => void): void;
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
  /** The steps of util/atomic's writeFileAtomic as one task of the pool. Absent in older builds. */
  writeFileAtomicAsync?(tmp: string, target: string, data: Buffer, mode: number, durable: boolean, done: (err: NodeJS.ErrnoException | null) => void): void;
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

/** util/atomic's writer as one native task, when the addon has it. */
export function nativeAtomicWriter(): AtomicWriter | undefined {
  const write = linuxSys()?.writeFileAtomicAsync;
  if (!write) return undefined;
  return (tmp, file, data, mode, durable) => new Promise((resolve, reject) => write(tmp, file, data, mode, durable, (err) => (err ? reject(err) : resolve())));
}
