/**
 * The StateStore (state.ts) on this machine's file system, under the data root: atomic writes through
 * util/atomic (a temporary file, fsync, rename, fsync of the folder; the host's native writer when set),
 * durable creations with one fsync, durable renames, and a lock file holding its owner's PID.
 */
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { createFileDurable, syncFolder, writeFileAtomic } from '../util/atomic.js';
import type { StateStore, StateWriteOptions } from './state.js';

export class FsStateStore implements StateStore {
  readonly root: string;

  constructor(root: string) {
    this.root = path.resolve(root);
  }

  /** The file of a name, refused when it leaves the root. */
  path(name: string): string {
    const file = path.resolve(this.root, name);
    if (file !== this.root && !file.startsWith(this.root === path.sep ? this.root : this.root + path.sep)) {
      throw new Error(`state name ${JSON.stringify(name)} leaves ${this.root}`);
    }
    return file;
  }

  async read(name: string): Promise<Buffer | undefined> {
    try {
      return await fs.readFile(this.path(name));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw err;
    }
  }

  async write(name: string, data: string | Uint8Array, opts: StateWriteOptions = {}): Promise<void> {
    await writeFileAtomic(this.path(name), data, opts);
  }

  async create(name: string, data: string | Uint8Array, opts: { mode?: number; dirMode?: number } = {}): Promise<void> {
    await createFileDurable(this.path(name), typeof data === 'string' ? data : Buffer.from(data.buffer, data.byteOffset, data.byteLength), opts);
  }

  async list(folder: string, opts: { mode?: number } = {}): Promise<string[]> {
    const dir = this.path(folder);
    await fs.mkdir(dir, { recursive: true, mode: opts.mode ?? 0o700 });
    return fs.readdir(dir);
  }

  async makeFolder(folder: string, opts: { mode?: number } = {}): Promise<void> {
    await fs.mkdir(this.path(folder), { recursive: true, mode: opts.mode });
  }

  async remove(name: string): Promise<void> {
    await fs.rm(this.path(name), { recursive: true, force: true });
  }

  async rename(from: string, to: string): Promise<boolean> {
    const source = this.path(from);
    try {
      await fs.rename(source, this.path(to));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return false;
      throw err;
    }
    await syncFolder(path.dirname(source));
    return true;
  }

  async stamp(name: string): Promise<string> {
    try {
      const st = await fs.stat(this.path(name), { bigint: true });
      return `${st.ino}:${st.size}:${st.mtimeNs}`;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return 'missing';
      throw err;
    }
  }

  async lock(name: string, opts: { timeoutMs?: number } = {}): Promise<() => Promise<void>> {
    const file = this.path(name);
    const deadline = Date.now() + (opts.timeoutMs ?? 10_000);
    for (;;) {
      try {
        await fs.writeFile(file, `${process.pid}\n`, { flag: 'wx', mode: 0o600 });
        return () => fs.rm(file, { force: true });
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      }
      const owner = Number((await fs.readFile(file, 'utf8').catch(() => '')).trim());
      if (owner > 0 && !alive(owner)) {
        await fs.rm(file, { force: true });
        continue;
      }
      if (Date.now() > deadline) throw new Error(`${file} is held by process ${owner || 'unknown'}`);
      await new Promise((r) => setTimeout(r, 20));
    }
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}
