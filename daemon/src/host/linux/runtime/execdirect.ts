/**
 * Exec sessions without a monitor (see exec.ts): `<runtime> exec` in the foreground as the daemon's child,
 * with pipes for stdout and stderr, started with posix_spawn through the native addon when it is built.
 */
import { spawn } from 'node:child_process';
import { closeSync, promises as fs, readFileSync, rmSync, watch } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { Readable, Writable } from 'node:stream';
import { linuxSys } from '../sys.js';
import { runtimeStartError } from './errors.js';
import type { ExecEnvironment, ExecOptions, ExecSession } from './exec.js';

/** How long the output may stay open after the process ended (a child of it holding stdout). */
const OUTPUT_GRACE_MS = 2000;

/** The first line of a runtime's JSON log (`{"msg": ..., "level": "error"}`), or its plain text. */
async function runtimeLogMessage(file: string): Promise<string> {
  const text = (await fs.readFile(file, 'utf8').catch(() => '')).trim();
  const messages: string[] = [];
  for (const line of text.split('\n')) {
    try {
      const entry = JSON.parse(line) as { msg?: unknown; level?: unknown };
      if (typeof entry.msg === 'string' && entry.level !== 'warning' && entry.level !== 'info') messages.push(entry.msg);
    } catch {
      if (line.trim()) messages.push(line.trim());
    }
  }
  return messages.join('; ');
}

/**
 * The output of the runtime's stdout and stderr pipes as one object stream of `{ stream, data }`, with
 * backpressure (a reader that stops reading stops the pipes, and so the process). Closing it stops the
 * forwarding: the pipes are drained and their bytes dropped, the process runs on.
 */
function pipeOutput(pipes: [Readable, Readable]): { output: Readable; close(): void; ended: Promise<void> } {
  let closed = false;
  let open = 2;
  let markEnded!: () => void;
  const ended = new Promise<void>((r) => (markEnded = r));
  const output = new Readable({
    objectMode: true,
    read() {
      for (const p of pipes) p.resume();
    },
  });
  pipes.forEach((pipe, i) => {
    const stream = i === 0 ? 'stdout' : 'stderr';
    pipe.on('data', (data: Buffer) => {
      if (closed) return;
      if (!output.push({ stream, data })) for (const p of pipes) p.pause();
    });
    pipe.on('error', () => undefined);
    pipe.once('close', () => {
      if (--open > 0) return;
      markEnded();
      if (!closed) output.push(null);
    });
  });
  return {
    output,
    ended,
    close() {
      if (closed) return;
      closed = true;
      for (const p of pipes) p.resume();
      output.push(null);
    },
  };
}

/** Waits until the runtime wrote the process's pid (it runs), or exited without (it failed to start). */
function waitForPid(pidFile: string, dir: string, exited: Promise<unknown>): Promise<number | undefined> {
  return new Promise((resolve) => {
    let done = false;
    let timer: NodeJS.Timeout | undefined;
    const readPid = () => {
      try {
        const text = readFileSync(pidFile, 'utf8').trim();
        return /^\d+$/.test(text) ? Number(text) : undefined;
      } catch {
        return undefined;
      }
    };
    const finish = (pid: number | undefined) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      watcher?.close();
      resolve(pid);
    };
    const check = () => {
      const pid = readPid();
      if (pid !== undefined) finish(pid);
    };
    let watcher: ReturnType<typeof watch> | undefined;
    try {
      watcher = watch(dir, { persistent: false }, check);
      watcher.on('error', () => undefined);
    } catch {
      // the timer alone will do
    }
    // A slow timer besides the watch, for a write the watch saw before the file held the whole pid.
    const poll = () => {
      check();
      if (!done) timer = setTimeout(poll, 10);
    };
    poll();
    void exited.then(() => finish(readPid()));
  });
}

/** A foreground runtime: its stdout and stderr, and its exit code (128+n for signal n, 255 when it was lost). */
interface RuntimeChild {
  stdout: Readable;
  stderr: Readable;
  exited: Promise<number>;
}

/**
 * Starts `file` with `args` in a session of its own (as `detached`), stdin on /dev/null, stdout and stderr on
 * pipes. With the native addon it is a posix_spawn on a thread of the pool: libuv's fork copies the daemon's page
 * tables on the event loop, milliseconds per exec. The pipes' read ends become non-blocking sockets of the event
 * loop. The child's fd 3 is a third pipe nobody writes to: its end means the runtime exited (the runtime closes
 * any fd above 2 in the container's process), and only then the child is reaped on a thread of the pool, which a
 * wait for a long-running process would otherwise hold.
 */
async function spawnRuntime(file: string, args: string[], cwd: string, argv0 = file): Promise<RuntimeChild> {
  const sys = linuxSys();
  if (sys?.spawnAsync && sys.pipe && sys.waitpid) {
    const { spawnAsync, waitpid } = sys;
    // [read, write] of stdout, stderr and the exit notice.
    const fds: number[] = [];
    const readEnds = () => fds.filter((_, i) => i % 2 === 0);
    let pid: number;
    try {
      for (let i = 0; i < 3; i++) fds.push(...sys.pipe());
      const env = Object.entries(process.env).flatMap(([k, v]) => (v === undefined ? [] : [`${k}=${v}`]));
      pid = await new Promise<number>((resolve, reject) =>
        spawnAsync(file, [argv0, ...args], env, cwd, [-1, fds[1], fds[3], fds[5]], true, (err, p) => (err ? reject(err) : resolve(p!))),
      );
    } catch (err) {
      for (const fd of readEnds()) closeSync(fd);
      throw err;
    } finally {
      // The write ends are the child's alone now.
      fds.forEach((fd, i) => i % 2 === 1 && closeSync(fd));
    }
    const [stdout, stderr, notice] = readEnds().map((fd) => new net.Socket({ fd, readable: true, writable: false }));
    const exited = new Promise<number>((resolve) => {
      let waited = false;
      const reap = () => {
        if (waited) return;
        waited = true;
        notice.destroy();
        waitpid(pid, (code) => resolve(code >= 0 ? code : 255));
      };
      notice.on('end', reap);
      notice.on('close', reap);
      notice.on('error', reap);
      notice.resume();
    });
    return { stdout, stderr, exited };
  }
  const child = spawn(file, args, { argv0, cwd, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  child.unref();
  const exited = new Promise<number>((resolve) => {
    // The runtime exits with the process's status, 128+n for a signal; killed itself, it says so by its signal.
    child.once('exit', (code, signal) => resolve(code ?? 128 + (signal ? (os.constants.signals[signal] ?? 0) : 127)));
    child.once('error', () => resolve(255));
  });
  return { stdout: child.stdout!, stderr: child.stderr!, exited };
}

/** Runs the process with `<runtime> exec` in the foreground (see the module comment), attached by pipes. */
export async function startDirectExec(env: ExecEnvironment, o: ExecOptions): Promise<ExecSession> {
  const key = o.execId.slice(0, 16);
  const dir = path.join(env.execDir, key);
  const processFile = path.join(dir, 'process.json');
  const pidFile = path.join(dir, 'pid');
  const logFile = path.join(dir, 'runtime.log');
  // Exec ids are new: a folder of that name is a leftover.
  await fs.mkdir(dir, { mode: 0o700 }).catch(async (err: NodeJS.ErrnoException) => {
    if (err.code !== 'EEXIST') throw err;
    await fs.rm(dir, { recursive: true, force: true });
    await fs.mkdir(dir, { mode: 0o700 });
  });
  await fs.writeFile(processFile, JSON.stringify({ ...o.process, terminal: false }), { mode: 0o600 });
  let child: RuntimeChild;
  try {
    child = await spawnRuntime(
      env.runtimePath,
      [`--root=${env.runtimeState}`, `--log=${logFile}`, '--log-format=json', 'exec', '--process', processFile, '--pid-file', pidFile, o.containerId],
      dir,
      env.runtimeName,
    );
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    throw runtimeStartError(`the runtime could not start the exec process: ${(err as Error).message}`);
  }
  const { exited } = child;
  const piped = pipeOutput([child.stdout, child.stderr]);
  const pid = await waitForPid(pidFile, dir, exited);
  if (pid === undefined) {
    piped.close();
    await exited;
    const message = (await runtimeLogMessage(logFile)) || 'the runtime could not start the exec process';
    rmSync(dir, { recursive: true, force: true });
    throw runtimeStartError(message);
  }
  let ended = false;
  const exit = exited.then(async (code) => {
    ended = true;
    // All the output is in `streams.output` once the pipes closed. A child of the process may hold them open:
    // as Docker, the streams are given two seconds after the exit, then closed.
    await Promise.race([piped.ended, new Promise((r) => setTimeout(r, OUTPUT_GRACE_MS).unref())]);
    piped.close();
    return code;
  });
  const input = new Writable({
    write(_chunk, _enc, cb) {
      cb(); // no stdin was asked for
    },
  });
  return {
    pid,
    streams: { output: piped.output, input, close: () => piped.close() },
    exit,
    async resize() {
      // no terminal
    },
    async kill(signal: number) {
      if (ended) return;
      try {
        process.kill(pid, signal);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'ESRCH') throw err;
      }
    },
  };
}
