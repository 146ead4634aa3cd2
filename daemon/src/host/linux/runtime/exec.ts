/**
 * Exec sessions under conmon (`conmon -e --exec-attach`), as podman runs them: conmon runs `<runtime> exec`
 * in the container, holds the process's stdio behind its own attach socket, and reports the pid and then
 * the exit code on the sync pipe.
 *
 * Protocol: conmon first waits for a write on the start pipe (`_OCI_STARTPIPE`), forks and prepares its
 * attach socket, says so on the attach pipe (`_OCI_ATTACHPIPE`), then waits for a second write on the start
 * pipe before running the runtime: the caller attaches in between, so no output is lost. The sync pipe
 * (`_OCI_SYNCPIPE`) then carries `{"data": <pid>}` (or a negative value and a message on failure) and,
 * when the process ended, `{"data": <exit code>}`.
 *
 * Files: exec root `execs/<key>/` holds process.json, conmon's pid files, its `ctl`/`winsz` FIFOs and attach
 * socket, and `exit` (the exit code; also in `exits/<container id>`); the folder is removed when the session is released.
 *
 * Without a terminal, stdin or detach (the output is read by a client until the end: `docker exec` of a command,
 * health probes), no monitor is needed: `<runtime> exec` runs in the foreground as the daemon's child with pipes
 * for stdout and stderr, forwards signals to the process, and exits with its status (128+n for signal n). That
 * spares conmon's start-up and the attach socket. The runtime writes the process's pid to `pid` once it runs, and
 * its own errors (a command not found) to `runtime.log`: a runtime that exits without a pid file failed to start.
 * The runtime is started with posix_spawn through the native addon when it is built (execdirect.ts).
 */
import { spawn } from 'node:child_process';
import { promises as fs, rmSync } from 'node:fs';
import path from 'node:path';
import { Readable, Writable } from 'node:stream';
import type { AttachStreams } from '../../host.js';
import { connectAttach, type ConmonAttachStreams } from './attach.js';
import { runtimeStartError } from './errors.js';
import { startDirectExec } from './execdirect.js';
import { UNIX_PATH_MAX } from './layout.js';

export interface ExecOptions {
  containerId: string;
  /** The session's id: names its folder and attach socket (the first 16 characters). */
  execId: string;
  /** An OCI runtime-spec `process` object (args, env, cwd, user, terminal...). */
  process: object;
  tty: boolean;
  openStdin: boolean;
  /** Nobody will read the output (exec start with Detach): the session needs a monitor of its own. */
  detach?: boolean;
}

export interface ExecSession {
  pid: number;
  /** The process's stdio (attached before the process started: no output is lost). */
  streams: AttachStreams;
  /** Resolves with the exit code (128+n for death by signal n). */
  exit: Promise<number>;
  resize(height: number, width: number): Promise<void>;
  /** Sends a signal to the process (nothing once it ended). */
  kill(signal: number): Promise<void>;
}

export interface ExecEnvironment {
  conmonPath: string;
  runtimePath: string;
  /** argv[0] of the runtime where the daemon starts it itself: its name, when runtimePath is its sealed copy. */
  runtimeName?: string;
  runtimeState: string;
  execDir: string;
  socketDir: string;
}

/** Reads newline-terminated JSON messages from one of conmon's pipes. */
class MessageReader {
  private buffer = '';
  private readonly lines: string[] = [];
  private waiting: ((line: string | undefined) => void) | undefined;
  private ended = false;

  constructor(stream: Readable) {
    stream.setEncoding('utf8');
    stream.on('data', (chunk: string) => {
      this.buffer += chunk;
      let nl;
      while ((nl = this.buffer.indexOf('\n')) >= 0) {
        this.lines.push(this.buffer.slice(0, nl));
        this.buffer = this.buffer.slice(nl + 1);
      }
      this.flush();
    });
    const end = () => {
      this.ended = true;
      this.flush();
    };
    stream.on('end', end);
    stream.on('error', end);
    stream.on('close', end);
  }

  private flush(): void {
    if (!this.waiting) return;
    if (this.lines.length > 0) {
      const w = this.waiting;
      this.waiting = undefined;
      w(this.lines.shift());
    } else if (this.ended) {
      const w = this.waiting;
      this.waiting = undefined;
      w(undefined);
    }
  }

  /** The next message's `data` and `message`, or undefined when the pipe closed first. */
  next(): Promise<{ data: number; message?: string } | undefined> {
    return new Promise<string | undefined>((resolve) => {
      this.waiting = resolve;
      this.flush();
    }).then((line) => {
      if (line === undefined) return undefined;
      try {
        const msg = JSON.parse(line) as { data?: unknown; message?: unknown };
        return { data: Number(msg.data), message: typeof msg.message === 'string' ? msg.message : undefined };
      } catch {
        return { data: -1, message: `unreadable message from conmon: ${line.slice(0, 200)}` };
      }
    });
  }
}

export function execConmonArgs(env: ExecEnvironment, o: ExecOptions, dir: string, key: string): string[] {
  const args = [
    '--api-version', '1',
    '-c', o.containerId,
    '-u', key,
    '-n', o.containerId,
    '-r', env.runtimePath,
    '-b', dir,
    '-p', path.join(dir, 'pid'),
    '--conmon-pidfile', path.join(dir, 'conmon.pid'),
    // conmon writes `<persist dir>/exit` and `<exit dir>/<container id>`.
    '--exit-dir', path.join(dir, 'exits'),
    '--persist-dir', dir,
    '--socket-dir-path', env.socketDir,
    // Docker keeps no log of exec output.
    '-l', 'none:',
    '--log-level', 'error',
    '--runtime-arg', `--root=${env.runtimeState}`,
    '-e', '--exec-attach',
    '--exec-process-spec', path.join(dir, 'process.json'),
  ];
  if (o.tty) args.push('-t');
  if (o.openStdin) args.push('-i');
  return args;
}

export async function startExec(env: ExecEnvironment, o: ExecOptions): Promise<ExecSession> {
  if (!/^[A-Za-z0-9_-]{1,128}$/.test(o.execId)) throw new Error(`invalid exec id ${JSON.stringify(o.execId)}`);
  if (!o.tty && !o.openStdin && !o.detach) return startDirectExec(env, o);
  const key = o.execId.slice(0, 16);
  const dir = path.join(env.execDir, key);
  const socketPath = path.join(env.socketDir, key, 'attach');
  if (Buffer.byteLength(socketPath) >= UNIX_PATH_MAX) throw new Error(`the attach socket path ${socketPath} is too long`);
  await fs.rm(dir, { recursive: true, force: true });
  await fs.mkdir(path.join(dir, 'exits'), { recursive: true, mode: 0o700 });
  await fs.writeFile(path.join(dir, 'process.json'), JSON.stringify({ ...o.process, terminal: o.tty }), { mode: 0o600 });
  const release = () => {
    rmSync(dir, { recursive: true, force: true });
    rmSync(path.join(env.socketDir, key), { force: true });
  };

  const errHandle = await fs.open(path.join(dir, 'conmon.err'), 'w', 0o600);
  let child;
  try {
    child = spawn(env.conmonPath, execConmonArgs(env, o, dir, key), {
      cwd: dir,
      stdio: ['ignore', 'ignore', errHandle.fd, 'pipe', 'pipe', 'pipe'],
      env: {
        PATH: process.env.PATH ?? '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
        _OCI_SYNCPIPE: '3',
        _OCI_STARTPIPE: '4',
        _OCI_ATTACHPIPE: '5',
      },
      detached: true,
    });
  } finally {
    await errHandle.close();
  }
  child.on('error', () => undefined);
  child.unref();
  const pipes = child.stdio as unknown as Array<Readable & Writable>;
  // conmon may exit with our start message unread, which resets the socket pair (ECONNRESET): expected.
  for (const fd of [3, 4, 5]) pipes[fd].on('error', () => undefined);
  const sync = new MessageReader(pipes[3]);
  const startPipe = pipes[4];
  const attachPipe = new MessageReader(pipes[5]);
  const closePipes = () => {
    for (const fd of [3, 4, 5]) pipes[fd]?.destroy();
  };
  const conmonFailure = async (what: string) => {
    const text = (await fs.readFile(path.join(dir, 'conmon.err'), 'utf8').catch(() => '')).trim();
    return new Error(`conmon failed ${what}${text ? `: ${text}` : ''}`);
  };

  let streams: ConmonAttachStreams | undefined;
  try {
    startPipe.write('0');
    const attachReady = await attachPipe.next();
    if (!attachReady) throw await conmonFailure('before the exec attach socket was ready');
    streams = await connectAttach(socketPath);
    startPipe.write('0');
    const started = await sync.next();
    if (!started) throw await conmonFailure('before the exec process started');
    if (!(started.data > 0)) throw runtimeStartError((started.message ?? `exec failed (status ${started.data})`).trim());
    const pid = started.data;
    const attached = streams;
    let ended = false;
    const exit = sync.next().then(async (msg) => {
      ended = true;
      closePipes();
      // conmon closes the attach socket before it reports the exit; resolving after the socket ended
      // means all the output is in `streams.output` when the exit is known.
      await Promise.race([attached.remoteEnded, new Promise((r) => setTimeout(r, 2000))]);
      let code = msg && msg.data >= 0 ? msg.data : undefined;
      if (code === undefined) {
        const text = await fs.readFile(path.join(dir, 'exit'), 'utf8').catch(() => '');
        code = /^\d+$/.test(text.trim()) ? Number(text.trim()) : 255;
      }
      return code;
    });
    return {
      pid,
      streams,
      exit,
      async resize(height: number, width: number) {
        const handle = await fs.open(path.join(dir, 'ctl'), fs.constants.O_WRONLY | fs.constants.O_NONBLOCK);
        try {
          await handle.write(`1 ${height} ${width}\n`);
        } finally {
          await handle.close();
        }
      },
      async kill(signal: number) {
        // Once conmon reported the exit the pid may belong to another process.
        if (ended) return;
        try {
          process.kill(pid, signal);
        } catch (err) {
          if ((err as NodeJS.ErrnoException).code !== 'ESRCH') throw err;
        }
      },
    };
  } catch (err) {
    if (streams) {
      // conmon exits on a failed exec: let it close the socket first (the fallback socket binding does not
      // like being closed under a live peer).
      await Promise.race([streams.remoteEnded, new Promise((r) => setTimeout(r, 1000))]);
      streams.close();
    }
    closePipes();
    release();
    throw err;
  }
}

/** Removes what an ended exec session left (its folder). */
export async function releaseExec(env: ExecEnvironment, execId: string): Promise<void> {
  const key = execId.slice(0, 16);
  await fs.rm(path.join(env.execDir, key), { recursive: true, force: true });
  // conmon removes its socket link when it exits normally; not when it failed early.
  await fs.rm(path.join(env.socketDir, key), { force: true });
}
