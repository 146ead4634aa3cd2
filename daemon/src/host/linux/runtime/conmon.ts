/**
 * conmon: the per-container monitor. It runs `<runtime> create`, holds the container's stdio, writes the
 * k8s-file log, serves the attach socket and the `ctl` FIFO, and writes the exit code to the exit dir when the
 * container ends. It detaches from the daemon (double fork + setsid), so containers survive daemon restarts.
 *
 * Protocol (API version 1): the launcher inherits a pipe named by `_OCI_SYNCPIPE`; once `<runtime> create`
 * returned, conmon writes one JSON line `{"data": <container pid>}`, or `{"data": -1, "message": "<the
 * runtime's stderr>"}` when create failed. Only after that message may `<runtime> start` run.
 */
import { spawn } from 'node:child_process';
import { closeSync, openSync, promises as fs } from 'node:fs';
import net from 'node:net';
import type { Readable } from 'node:stream';
import { linuxSys } from '../sys.js';

export interface ConmonOptions {
  id: string;
  /** conmon's --cuuid: names the attach socket's folder under socketDir (kept short for the 108-byte limit). */
  socketKey: string;
  runtimePath: string;
  runtimeState: string;
  bundle: string;
  containerPidFile: string;
  conmonPidFile: string;
  exitDir: string;
  persistDir: string;
  socketDir: string;
  /** Undefined: no log is kept. */
  logPath?: string;
  tty: boolean;
  openStdin: boolean;
  stdinOnce: boolean;
  logLevel?: 'error' | 'warning' | 'info' | 'debug';
}

/** conmon's command line, as podman builds it. */
export function conmonArgs(o: ConmonOptions): string[] {
  const args = [
    '--api-version', '1',
    '-c', o.id,
    '-u', o.socketKey,
    '-n', o.id,
    '-r', o.runtimePath,
    '-b', o.bundle,
    '-p', o.containerPidFile,
    '--conmon-pidfile', o.conmonPidFile,
    '--exit-dir', o.exitDir,
    '--persist-dir', o.persistDir,
    '--socket-dir-path', o.socketDir,
    '-l', o.logPath === undefined ? 'none:' : `k8s-file:${o.logPath}`,
    // No fsync of the log when the container ends (on the path of every exit to its waiters), as Docker's log
    // drivers: the log is output kept for reading, not state that recovery needs (the exit file is).
    '--no-sync-log',
    '--log-level', o.logLevel ?? 'error',
    '--runtime-arg', `--root=${o.runtimeState}`,
  ];
  if (o.tty) args.push('-t');
  if (o.openStdin) {
    args.push('-i');
    // conmon closes the container's stdin when an attach socket closes, unless told to leave it open. As
    // Docker: only a StdinOnce container without a TTY has its stdin closed by the end of an attached client's
    // stdin; with a TTY, the end of a client (a detach included) never closes it.
    if (!o.stdinOnce || o.tty) args.push('--leave-stdin-open');
  }
  return args;
}

/** The first sync-pipe message. */
export type SyncMessage = { pid: number } | { error: string };

export function parseSyncMessage(line: string): SyncMessage {
  let msg: { data?: unknown; message?: unknown };
  try {
    msg = JSON.parse(line) as typeof msg;
  } catch {
    return { error: `conmon sent an unreadable sync message: ${JSON.stringify(line.slice(0, 200))}` };
  }
  if (typeof msg.data === 'number' && msg.data > 0) return { pid: msg.data };
  const text = typeof msg.message === 'string' ? msg.message.trim() : '';
  return { error: text || `the runtime failed to create the container (status ${String(msg.data)})` };
}

/**
 * Starts conmon and resolves with its first sync message. conmon's own stderr (before it detaches) goes to
 * `stderrFile`, read when conmon fails without a message.
 */
export async function launchConmon(conmonPath: string, o: ConmonOptions, stderrFile: string, timeoutMs = 120_000): Promise<SyncMessage> {
  const env = { PATH: process.env.PATH ?? '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin', _OCI_SYNCPIPE: '3' };
  // Opened and closed synchronously: a local file, on the path of every start.
  const errFd = openSync(stderrFile, 'w', 0o600);
  let sync: Readable;
  let launcherExit: Promise<number | null>;
  try {
    const sys = linuxSys();
    if (sys?.spawnAsync && sys.pipe && sys.waitpid) {
      // posix_spawn on the thread pool through the addon: libuv's fork would block the event loop while it
      // copies the daemon's page tables (milliseconds per start, more under load).
      const [readFd, writeFd] = sys.pipe();
      const spawnAsync = sys.spawnAsync;
      let pid: number;
      try {
        // Some conmon versions write the `oom` file relative to their working directory: make it the bundle.
        const args = [conmonPath, ...conmonArgs(o)];
        const envList = Object.entries(env).map(([k, v]) => `${k}=${v}`);
        pid = await new Promise<number>((resolve, reject) =>
          spawnAsync(conmonPath, args, envList, o.bundle, [-1, -1, errFd, writeFd], true, (err, p) => (err ? reject(err) : resolve(p!))),
        );
      } catch (err) {
        closeSync(readFd);
        throw err;
      } finally {
        closeSync(writeFd);
      }
      const waitpid = sys.waitpid;
      launcherExit = new Promise((resolve) => waitpid(pid, resolve));
      sync = new net.Socket({ fd: readFd, readable: true, writable: false });
    } else {
      const child = spawn(conmonPath, conmonArgs(o), {
        cwd: o.bundle,
        // fd 3 is the sync pipe (a socket pair, which conmon writes to like a pipe).
        stdio: ['ignore', 'ignore', errFd, 'pipe'],
        env,
        detached: true,
      });
      sync = child.stdio[3] as Readable;
      launcherExit = new Promise<number | null>((resolve) => {
        child.once('error', () => resolve(-1));
        child.once('exit', (code) => resolve(code));
      });
      child.unref();
    }
  } finally {
    closeSync(errFd);
  }

  let timedOut = false;
  const line = await new Promise<string | undefined>((resolve) => {
    let text = '';
    const timer = setTimeout(() => {
      timedOut = true;
      done(undefined);
    }, timeoutMs);
    const done = (value: string | undefined) => {
      clearTimeout(timer);
      sync.removeAllListeners('data');
      sync.destroy();
      resolve(value);
    };
    sync.setEncoding('utf8');
    sync.on('data', (chunk: string) => {
      text += chunk;
      const nl = text.indexOf('\n');
      if (nl >= 0) done(text.slice(0, nl));
    });
    sync.once('end', () => done(text || undefined));
    sync.on('error', () => done(text || undefined));
    // A launcher that fails never hands the pipe to a detached child: its exit ends the wait too.
    void launcherExit.then((code) => {
      if (code !== 0) setImmediate(() => done(text || undefined));
    });
  });
  if (line) return parseSyncMessage(line);
  if (timedOut) return { error: `the runtime did not create the container within ${timeoutMs / 1000} s` };
  const code = await launcherExit;
  const stderr = (await fs.readFile(stderrFile, 'utf8').catch(() => '')).trim();
  return { error: `conmon failed${code ? ` (exit status ${code})` : ''}${stderr ? `: ${stderr}` : ' before the container was created'}` };
}
