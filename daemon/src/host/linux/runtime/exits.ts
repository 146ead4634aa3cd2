/**
 * Waiting for container exits: conmon writes `<exit dir>/<id>` (the exit code as text) once the container
 * ended and its output was drained into the log. One fs.watch on the exit dir serves every waiter; each wait
 * also reads the file once after it is registered (closing the race with an exit that happened before), and a
 * slow check of conmon's liveness ends the wait of a container whose conmon died without writing the file.
 */
import { closeSync, existsSync, fstatSync, openSync, promises as fs, readSync, watch, type FSWatcher } from 'node:fs';
import path from 'node:path';
import type { ExitInfo } from '../../host.js';

export interface ExitSource {
  exitFile(id: string): string;
  /** Files whose presence says the container was killed by the OOM killer. */
  oomFiles(id: string): string[];
  /** False once the monitor of a container is gone (then no exit file will ever come). */
  monitorAlive(id: string): Promise<boolean>;
}

/** Exit code recorded when conmon vanished without writing one (Docker's "unknown" exit). */
export const LOST_EXIT_CODE = 255;

/**
 * The exit conmon recorded, or undefined while there is none. Read synchronously: a few bytes of a local file
 * (on the exec root's tmpfs), on the path from a container's exit to its waiters' answer.
 */
export async function readExitFile(src: ExitSource, id: string): Promise<ExitInfo | undefined> {
  let text: string;
  let mtimeNs: bigint;
  const file = src.exitFile(id);
  let fd: number;
  try {
    fd = openSync(file, 'r');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
  try {
    mtimeNs = fstatSync(fd, { bigint: true }).mtimeNs;
    const buffer = Buffer.alloc(64);
    text = buffer.toString('utf8', 0, readSync(fd, buffer, 0, buffer.length, 0)).trim();
  } finally {
    closeSync(fd);
  }
  // conmon writes the file with g_file_set_contents (a rename): it is whole or absent.
  const code = /^-?\d+$/.test(text) ? Number(text) : LOST_EXIT_CODE;
  return { exitCode: code < 0 ? LOST_EXIT_CODE : code, finishedAtNano: mtimeNs, oomKilled: src.oomFiles(id).some((f) => existsSync(f)) };
}

interface Waiter {
  resolve(info: ExitInfo): void;
  reject(err: unknown): void;
}

export class ExitWatcher {
  private watcher: FSWatcher | undefined;
  private readonly waiters = new Map<string, Waiter[]>();
  private livenessTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly dir: string,
    private readonly src: ExitSource,
    private readonly livenessIntervalMs = 1000,
  ) {}

  wait(id: string): Promise<ExitInfo> {
    return new Promise<ExitInfo>((resolve, reject) => {
      const list = this.waiters.get(id) ?? [];
      list.push({ resolve, reject });
      this.waiters.set(id, list);
      this.ensureWatching().then(
        () => {
          this.ensureLivenessTimer();
          return this.check(id);
        },
        (err) => this.settle(id, undefined, err),
      );
    });
  }

  /** Stops watching; pending waits stay pending (a new instance can wait again). */
  close(): void {
    this.watcher?.close();
    this.watcher = undefined;
    if (this.livenessTimer) clearInterval(this.livenessTimer);
    this.livenessTimer = undefined;
  }

  private async ensureWatching(): Promise<void> {
    if (this.watcher) return;
    await fs.mkdir(this.dir, { recursive: true, mode: 0o700 });
    if (this.watcher) return;
    const w = watch(this.dir, { persistent: false });
    w.on('change', (_event, name) => {
      const id = typeof name === 'string' ? path.basename(name) : undefined;
      if (id && this.waiters.has(id)) void this.check(id);
      else if (!id) for (const key of this.waiters.keys()) void this.check(key);
    });
    w.on('error', () => {
      // The folder went away (exec root removed): rely on the liveness checks.
      if (this.watcher === w) this.watcher = undefined;
    });
    this.watcher = w;
  }

  private ensureLivenessTimer(): void {
    if (this.livenessTimer) return;
    // Referenced while someone waits: a pending wait keeps the process alive, as any pending I/O would.
    this.livenessTimer = setInterval(() => void this.checkLiveness(), this.livenessIntervalMs);
  }

  private async check(id: string): Promise<void> {
    if (!this.waiters.has(id)) return;
    try {
      const info = await readExitFile(this.src, id);
      if (info) this.settle(id, info);
    } catch (err) {
      this.settle(id, undefined, err);
    }
  }

  private async checkLiveness(): Promise<void> {
    for (const id of [...this.waiters.keys()]) {
      await this.check(id);
      if (!this.waiters.has(id)) continue;
      if (await this.src.monitorAlive(id)) continue;
      // Read once more: conmon may have written the file just before it exited.
      const info = await readExitFile(this.src, id).catch(() => undefined);
      this.settle(id, info ?? { exitCode: LOST_EXIT_CODE, finishedAtNano: BigInt(Date.now()) * 1_000_000n, oomKilled: false });
    }
    if (this.waiters.size === 0 && this.livenessTimer) {
      // Nothing to wait for: keep the watcher, stop the timer until the next wait.
      clearInterval(this.livenessTimer);
      this.livenessTimer = undefined;
    }
  }

  private settle(id: string, info: ExitInfo | undefined, err?: unknown): void {
    const list = this.waiters.get(id);
    if (!list) return;
    this.waiters.delete(id);
    for (const w of list) {
      if (info) w.resolve(info);
      else w.reject(err);
    }
  }
}
