/**
 * The plugins part of this machine's Host (host/plugins.ts): plugin folders with node's fs, plugins run
 * with the OCI runtime binary (`<runtime> --root=<runtimeRoot> run --bundle <bundle> <id>`, in the foreground
 * of a child process whose exit is the plugin's), and connections to their sockets.
 */
import type { Duplex } from 'node:stream';
import { spawn, type ChildProcess } from 'node:child_process';
import { promises as fs, type Dirent, type Stats } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { EngineError, InvalidParameter } from '../../errors.js';
import { writeJSONAtomic } from '../../util/atomic.js';
import type { PathKind, PluginDialAddress, PluginExit, PluginHost, PluginRunSpec } from '../plugins.js';

interface Running {
  child: ChildProcess;
  exited: Promise<PluginExit>;
  runtimeRoot: string;
}

function kind(s: Stats | Dirent): PathKind {
  return s.isDirectory() ? 'dir' : s.isFile() ? 'file' : s.isSocket() ? 'socket' : 'other';
}

const missing = (err: unknown) => (err as NodeJS.ErrnoException).code === 'ENOENT' || (err as NodeJS.ErrnoException).code === 'ENOTDIR';

function canConnect(socket: string): Promise<boolean> {
  return new Promise((resolve) => {
    const c = net.connect(socket);
    c.once('connect', () => {
      c.destroy();
      resolve(true);
    });
    c.once('error', () => resolve(false));
  });
}

export class LinuxPluginHost implements PluginHost {
  private readonly running = new Map<string, Running>();

  constructor(
    private readonly runtimePath: string,
    readonly pluginsRoot: string,
    readonly pluginsRunRoot: string,
  ) {}

  dial(address: PluginDialAddress): Promise<Duplex> {
    return new Promise((resolve, reject) => {
      const socket = 'socketPath' in address ? net.connect(address.socketPath) : net.connect(address.port, address.host);
      const failed = (err: Error) => reject(err);
      socket.once('error', failed);
      socket.once('connect', () => {
        socket.off('error', failed);
        resolve(socket);
      });
    });
  }

  async makeDir(dir: string): Promise<void> {
    await fs.mkdir(dir, { recursive: true, mode: 0o700 });
  }

  async entries(dir: string): Promise<Array<{ name: string; kind: PathKind }>> {
    let list: Dirent[];
    try {
      list = await fs.readdir(dir, { withFileTypes: true });
    } catch (err) {
      if (missing(err)) return [];
      throw err;
    }
    const out: Array<{ name: string; kind: PathKind }> = [];
    for (const entry of list) {
      // A symlink is what it points at.
      const k = entry.isSymbolicLink() ? await this.kindOf(path.join(dir, entry.name)) : kind(entry);
      if (k) out.push({ name: entry.name, kind: k });
    }
    return out;
  }

  async kindOf(p: string): Promise<PathKind | undefined> {
    try {
      return kind(await fs.stat(p));
    } catch (err) {
      if (missing(err)) return undefined;
      throw err;
    }
  }

  async readText(file: string, maxBytes: number): Promise<string | undefined> {
    let handle: fs.FileHandle;
    try {
      handle = await fs.open(file, 'r');
    } catch (err) {
      if (missing(err)) return undefined;
      throw err;
    }
    try {
      const { size } = await handle.stat();
      if (size > maxBytes) throw new InvalidParameter(`${path.basename(file)} is larger than ${maxBytes} bytes`);
      return await handle.readFile('utf8');
    } finally {
      await handle.close();
    }
  }

  async rename(from: string, to: string): Promise<void> {
    await fs.rename(from, to);
  }

  async remove(p: string): Promise<void> {
    await fs.rm(p, { recursive: true, force: true });
  }

  private runtime(root: string, args: string[]): Promise<void> {
    return new Promise((resolve, reject) => {
      const child = spawn(this.runtimePath, [`--root=${root}`, ...args], { stdio: 'ignore' });
      child.once('error', reject);
      child.once('exit', (code) => (code === 0 ? resolve() : reject(new Error(`${args[0]} exited with ${code}`))));
    });
  }

  async run(spec: PluginRunSpec): Promise<void> {
    if (this.running.has(spec.id) || (await this.leftover(spec.id))) {
      if (await canConnect(spec.socket)) return;
      await this.stop(spec.id);
    }
    await fs.mkdir(spec.runtimeRoot, { recursive: true, mode: 0o700 });
    await fs.mkdir(spec.bundle, { recursive: true, mode: 0o700 });
    await writeJSONAtomic(path.join(spec.bundle, 'config.json'), spec.spec);
    await this.runtime(spec.runtimeRoot, ['delete', '--force', spec.id]).catch(() => undefined);
    // A socket left by an earlier run would keep the plugin from listening.
    await fs.rm(spec.socket, { force: true });
    const out = await fs.open(spec.logFile, 'a');
    let child: ChildProcess;
    try {
      child = spawn(this.runtimePath, [`--root=${spec.runtimeRoot}`, 'run', '--bundle', spec.bundle, spec.id], { stdio: ['ignore', out.fd, out.fd], detached: true });
    } finally {
      await out.close();
    }
    let ended = false;
    const exited = new Promise<PluginExit>((resolve) => {
      child.once('exit', (code, signal) => resolve({ code, signal }));
      child.once('error', () => resolve({ code: null, signal: null }));
    }).then((exit) => {
      ended = true;
      if (this.running.get(spec.id)?.child === child) this.running.delete(spec.id);
      return exit;
    });
    this.running.set(spec.id, { child, exited, runtimeRoot: spec.runtimeRoot });
    const deadline = Date.now() + spec.timeoutMs;
    for (;;) {
      if (await canConnect(spec.socket)) return;
      if (ended || Date.now() > deadline) {
        await this.stop(spec.id);
        const logText = await fs.readFile(spec.logFile, 'utf8').catch(() => '');
        const tail = logText.trim().split('\n').slice(-5).join('; ');
        throw new EngineError(`${ended ? 'exited' : `did not listen on ${path.basename(spec.socket)} within ${spec.timeoutMs} ms`}${tail ? `: ${tail}` : ''}`);
      }
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  /** Whether a plugin an earlier Host object ran (an agent that restarted) still runs under the usual runtime root. */
  private leftover(id: string): Promise<boolean> {
    return new Promise((resolve) => {
      const child = spawn(this.runtimePath, [`--root=${path.join(this.pluginsRunRoot, 'runtime')}`, 'state', id], { stdio: ['ignore', 'pipe', 'ignore'] });
      let out = '';
      child.stdout!.on('data', (c: Buffer) => (out += c.toString()));
      child.once('error', () => resolve(false));
      child.once('close', (code) => {
        try {
          resolve(code === 0 && (JSON.parse(out) as { status?: string }).status === 'running');
        } catch {
          resolve(false);
        }
      });
    });
  }

  async waitExit(id: string): Promise<PluginExit> {
    const run = this.running.get(id);
    if (run) return run.exited;
    // One an earlier Host object ran: its exit is seen by looking.
    while (!this.running.has(id) && (await this.leftover(id))) await new Promise((r) => setTimeout(r, 2000));
    return { code: null, signal: null };
  }

  async stop(id: string): Promise<void> {
    const run = this.running.get(id);
    if (!run) {
      if (!(await this.leftover(id))) return;
      const root = path.join(this.pluginsRunRoot, 'runtime');
      await this.runtime(root, ['kill', id, 'KILL']).catch(() => undefined);
      await this.runtime(root, ['delete', '--force', id]).catch(() => undefined);
      return;
    }
    await this.runtime(run.runtimeRoot, ['kill', id, 'TERM']).catch(() => undefined);
    const timer = setTimeout(() => void this.runtime(run.runtimeRoot, ['kill', id, 'KILL']).catch(() => undefined), 5000);
    await Promise.race([run.exited, new Promise((r) => setTimeout(r, 10_000))]);
    clearTimeout(timer);
    await this.runtime(run.runtimeRoot, ['delete', '--force', id]).catch(() => undefined);
    if (this.running.get(id) === run) this.running.delete(id);
  }
}
