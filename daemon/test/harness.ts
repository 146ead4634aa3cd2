/**
 * Test harness: real `berthd` processes in temporary roots, driven by real clients (the docker CLI,
 * dockerode, plain HTTP over the unix socket). Every engine a test starts is stopped and everything it
 * left (containers, mounts, bridge, firewall rules, files) is removed by `cleanup()`, by PID and by path,
 * never by process name.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, promises as fs, readdirSync, readFileSync, rmSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { after, before } from 'node:test';
import { fileURLToPath } from 'node:url';
import Docker from 'dockerode';

const here = path.dirname(fileURLToPath(import.meta.url));
/** daemon/ (this file runs from daemon/dist/test). */
export const DAEMON_DIR = path.resolve(here, '..', '..');
export const BERTHD = path.join(DAEMON_DIR, 'bin', 'berthd');

export interface RunResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

export interface HttpResult {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
  text: string;
  json<T = any>(): T;
}

export interface EngineOptions {
  /** Extra daemon flags. */
  args?: string[];
  runtime?: 'crun' | 'runc';
  /** Inherit the daemon's stderr (for debugging a test). */
  verbose?: boolean;
  /** Extra environment of the daemon. */
  env?: Record<string, string>;
  /** Options for node itself, before the daemon's script (--import ...). */
  nodeArgs?: string[];
  /** A command the daemon runs under, e.g. `nsenter --net=/run/netns/X` for a network namespace of its own. */
  wrapper?: string[];
}

export class Engine {
  readonly root: string;
  readonly socket: string;
  readonly dataRoot: string;
  readonly execRoot: string;
  readonly pidfile: string;
  readonly bridge: string;
  readonly dockerConfig: string;
  private child?: ChildProcess;
  private logChunks: Buffer[] = [];

  constructor(private readonly opts: EngineOptions = {}) {
    // Short paths: conmon's attach socket path under the exec root must fit in 108 bytes.
    this.root = mkdtempSync('/tmp/bt-');
    this.socket = path.join(this.root, 'engine.sock');
    this.dataRoot = path.join(this.root, 'data');
    this.execRoot = path.join(this.root, 'x');
    this.pidfile = path.join(this.root, 'berthd.pid');
    this.bridge = `bt${randomBytes(4).toString('hex')}`;
    this.dockerConfig = path.join(this.root, 'docker-config');
  }

  get host(): string {
    return `unix://${this.socket}`;
  }

  get pid(): number | undefined {
    return this.child?.pid;
  }

  /** What the daemon wrote to stderr so far. */
  get daemonLog(): string {
    return Buffer.concat(this.logChunks).toString('utf8');
  }

  async start(): Promise<this> {
    if (this.child) throw new Error('engine already running');
    await fs.mkdir(this.dockerConfig, { recursive: true });
    const args = [
      ...(this.opts.nodeArgs ?? []),
      BERTHD,
      '-H', this.host,
      '--data-root', this.dataRoot,
      '--exec-root', this.execRoot,
      '--pidfile', this.pidfile,
      '--bridge', this.bridge,
      '--runtime', this.opts.runtime ?? 'crun',
      ...(this.opts.args ?? []),
    ];
    const [command, ...prefix] = [...(this.opts.wrapper ?? []), process.execPath];
    const child = spawn(command!, [...prefix, ...args], { stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, ...this.opts.env } });
    this.child = child;
    child.stderr!.on('data', (chunk: Buffer) => {
      this.logChunks.push(chunk);
      if (this.opts.verbose) process.stderr.write(chunk);
    });
    const exited = new Promise<never>((_, reject) =>
      child.once('exit', (code, signal) => reject(new Error(`berthd exited during start (code ${code}, signal ${signal}):\n${this.daemonLog}`))),
    );
    const deadline = Date.now() + 20_000;
    const ready = (async () => {
      for (;;) {
        if (Date.now() > deadline) throw new Error(`berthd did not answer within 20 s:\n${this.daemonLog}`);
        try {
          await this.request('GET', '/_ping');
          // The daemon answers /_ping as soon as it listens; a test starts once it has restored its state too
          // (the list waits for that).
          const listed = await this.request('GET', '/containers/json?limit=1');
          if (listed.status !== 200) throw new Error(`berthd answered ${listed.status} to its first list: ${listed.text}`);
          return;
        } catch (err) {
          if ((err as Error).message.startsWith('berthd answered')) throw err;
          await new Promise((r) => setTimeout(r, 50));
        }
      }
    })();
    await Promise.race([ready, exited]);
    child.removeAllListeners('exit');
    child.once('exit', () => {
      if (this.child === child) this.child = undefined;
    });
    return this;
  }

  private async waitExit(signal: NodeJS.Signals, timeoutMs: number): Promise<void> {
    const child = this.child;
    if (!child) return;
    const gone = new Promise<void>((resolve) => {
      if (child.exitCode !== null || child.signalCode !== null) resolve();
      else child.once('exit', () => resolve());
    });
    child.kill(signal);
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    await gone;
    clearTimeout(timer);
    this.child = undefined;
  }

  /** SIGTERM: a clean shutdown (containers keep running). */
  async stop(): Promise<void> {
    await this.waitExit('SIGTERM', 15_000);
  }

  /** SIGKILL: a crash. */
  async crash(): Promise<void> {
    await this.waitExit('SIGKILL', 5_000);
  }

  async restart(): Promise<this> {
    await this.stop();
    return this.start();
  }

  /** The real docker CLI pointed at this engine. */
  docker(args: string[], opts: { input?: string | Buffer; timeoutMs?: number; env?: Record<string, string> } = {}): Promise<RunResult> {
    return runCommand('docker', args, {
      input: opts.input,
      timeoutMs: opts.timeoutMs ?? 60_000,
      env: { DOCKER_HOST: this.host, DOCKER_CONFIG: this.dockerConfig, DOCKER_CLI_HINTS: 'false', DOCKER_BUILDKIT: '0', ...opts.env },
    });
  }

  /** Like docker(), but throws with the output when the command fails. */
  async dockerOk(args: string[], opts: { input?: string | Buffer; timeoutMs?: number } = {}): Promise<string> {
    const r = await this.docker(args, opts);
    if (r.code !== 0) throw new Error(`docker ${args.join(' ')} exited ${r.code}:\n${r.stderr}${r.stdout}`);
    return r.stdout;
  }

  dockerode(version?: string): Docker {
    return new Docker({ socketPath: this.socket, ...(version ? { version: `v${version}` } : {}) });
  }

  /** One HTTP request over the unix socket; body is JSON-encoded unless it is a Buffer or string. */
  request(method: string, urlPath: string, opts: { body?: unknown; headers?: Record<string, string>; timeoutMs?: number } = {}): Promise<HttpResult> {
    return httpRequest(this.socket, method, urlPath, opts);
  }

  /** Loads the busybox test image (busybox:latest) built from Debian's busybox-static. */
  async loadBusybox(tag = 'busybox:latest'): Promise<void> {
    const tarball = path.join(this.root, `image-${tag.replace(/[^a-z0-9]/gi, '_')}.tar`);
    const fixtures = (await import('./fixtures/busybox.js')) as {
      buildBusyboxArchive(file: string, opts?: { tag?: string }): Promise<void>;
    };
    await fixtures.buildBusyboxArchive(tarball, { tag });
    await this.dockerOk(['load', '-i', tarball], { timeoutMs: 120_000 });
  }

  /**
   * Stops the daemon and removes all it left: containers still running under conmon (found through the
   * runtime's state root in the exec root), mounts below the temporary root, the bridge and its firewall
   * rules, and the files.
   */
  async cleanup(): Promise<void> {
    await this.stop().catch(() => undefined);
    killContainersUnder(this.execRoot);
    unmountUnder(this.root);
    for (const bridge of new Set([this.bridge, ...networkBridgesOf(this.dataRoot)])) removeBridge(bridge);
    rmSync(this.root, { recursive: true, force: true });
  }
}

/** Starts an engine; pair with `after(() => engine.cleanup())`. */
export async function startEngine(opts: EngineOptions = {}): Promise<Engine> {
  const engine = new Engine(opts);
  try {
    return await engine.start();
  } catch (err) {
    await engine.cleanup();
    throw err;
  }
}

/**
 * Starts an engine with the busybox image before the tests of the current describe (or file) and cleans it
 * up after them. The returned engine stands for the started one: use it inside tests and hooks only.
 */
export function useEngine(opts: EngineOptions = {}): Engine {
  let engine: Engine | undefined;
  before(async () => {
    engine = await startEngine(opts);
    await engine.loadBusybox();
  });
  after(async () => {
    await engine?.cleanup();
  });
  return new Proxy({} as Engine, {
    get(_, key) {
      if (!engine) throw new Error(`engine.${String(key)} used before the engine started (outside a test or hook)`);
      const value: unknown = Reflect.get(engine, key, engine);
      return typeof value === 'function' ? value.bind(engine) : value;
    },
  });
}

export function runCommand(
  cmd: string,
  args: string[],
  opts: {
    input?: string | Buffer;
    /**
     * Leaves the command's input open until it exits. For `script`: at the end of its input it types an
     * end-of-file, which a docker CLI that has not yet put the terminal in raw mode reads as the end of its
     * own input, and then it ends the session.
     */
    holdInput?: boolean;
    timeoutMs?: number;
    env?: Record<string, string>;
    cwd?: string;
    /** Runs the command as this user and group. */
    uid?: number;
    gid?: number;
  } = {},
): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { env: { ...process.env, ...opts.env }, cwd: opts.cwd, uid: opts.uid, gid: opts.gid, stdio: ['pipe', 'pipe', 'pipe'] });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout.on('data', (c: Buffer) => out.push(c));
    child.stderr.on('data', (c: Buffer) => err.push(c));
    const timer = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs ?? 60_000);
    child.on('error', reject);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout: Buffer.concat(out).toString('utf8'), stderr: Buffer.concat(err).toString('utf8') });
    });
    child.stdin.on('error', () => undefined);
    if (opts.input !== undefined) child.stdin.end(opts.input);
    else if (!opts.holdInput) child.stdin.end();
  });
}

/** The whole answer of an HTTP response. */
export function readResponse(res: http.IncomingMessage): Promise<HttpResult> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    res.on('data', (c: Buffer) => chunks.push(c));
    res.on('error', reject);
    res.on('end', () => {
      const body = Buffer.concat(chunks);
      const text = body.toString('utf8');
      resolve({ status: res.statusCode ?? 0, headers: res.headers, body, text, json: () => JSON.parse(text) });
    });
  });
}

/** Sockets whose late errors are already ignored (see httpRequest). */
const quieted = new WeakSet<object>();

export function httpRequest(
  socketPath: string,
  method: string,
  urlPath: string,
  opts: { body?: unknown; headers?: Record<string, string>; timeoutMs?: number; agent?: http.Agent } = {},
): Promise<HttpResult> {
  return new Promise((resolve, reject) => {
    let payload: Buffer | undefined;
    const headers: Record<string, string> = { ...opts.headers };
    if (opts.body !== undefined) {
      if (Buffer.isBuffer(opts.body)) payload = opts.body;
      else if (typeof opts.body === 'string') payload = Buffer.from(opts.body);
      else {
        payload = Buffer.from(JSON.stringify(opts.body));
        headers['Content-Type'] ??= 'application/json';
      }
      headers['Content-Length'] ??= String(payload.length);
    }
    const req = http.request({ socketPath, method, path: urlPath, headers, agent: opts.agent }, (res) => {
      readResponse(res).then(resolve, reject);
    });
    req.setTimeout(opts.timeoutMs ?? 30_000, () => req.destroy(new Error(`${method} ${urlPath} timed out`)));
    req.on('error', reject);
    // A server may answer before the body is sent (413 to an oversized body) and close: the rest of the
    // upload then fails with EPIPE, which is no failure of the request.
    // Once per socket: a kept-alive socket serves many requests.
    req.on('socket', (socket) => {
      if (!quieted.has(socket)) socket.on('error', () => undefined);
      quieted.add(socket);
    });
    req.end(payload);
  });
}

function killContainersUnder(execRoot: string): void {
  for (const runtime of ['crun', 'runc']) {
    // The containers, and the managed plugins (run with a state root of their own).
    for (const stateRoot of [path.join(execRoot, 'runtime'), path.join(execRoot, 'plugins', 'runtime')]) {
      if (!existsSync(stateRoot)) continue;
      const list = spawnSync(runtime, ['--root', stateRoot, 'list', '-q'], { encoding: 'utf8' });
      for (const id of (list.stdout ?? '').split('\n').map((s) => s.trim()).filter(Boolean)) {
        spawnSync(runtime, ['--root', stateRoot, 'kill', id, 'KILL'], { encoding: 'utf8' });
        spawnSync(runtime, ['--root', stateRoot, 'delete', '--force', id], { encoding: 'utf8' });
      }
    }
  }
}

/** Unmounts every mount point at or below `root`, deepest first. */
export function unmountUnder(root: string): void {
  const mounts = readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .map((line) => line.split(' ')[4])
    .filter((p): p is string => !!p && (p === root || p.startsWith(root + '/')))
    .map((p) => p.replace(/\\040/g, ' '))
    .sort((a, b) => b.length - a.length);
  for (const mount of mounts) spawnSync('umount', ['-l', mount]);
}

/** The Linux bridges of the engine's networks (user-defined ones included), from its network store. */
function networkBridgesOf(dataRoot: string): string[] {
  const dir = path.join(dataRoot, 'network');
  if (!existsSync(dir)) return [];
  const bridges: string[] = [];
  for (const file of readdirSync(dir)) {
    if (!file.endsWith('.json')) continue;
    try {
      const bridge = (JSON.parse(readFileSync(path.join(dir, file), 'utf8')) as { bridge?: unknown }).bridge;
      if (typeof bridge === 'string' && /^[\w.-]{1,15}$/.test(bridge)) bridges.push(bridge);
    } catch {
      // a file the engine was writing when it stopped: nothing to learn from it
    }
  }
  return bridges;
}

/** Removes a test bridge and every iptables and ip6tables rule whose text names it. */
export function removeBridge(bridge: string): void {
  spawnSync('ip', ['link', 'del', bridge]);
  for (const tool of ['iptables', 'ip6tables']) {
    for (const table of ['nat', 'filter']) {
      const rules = spawnSync(tool, ['-t', table, '-S'], { encoding: 'utf8' }).stdout ?? '';
      for (const rule of rules.split('\n')) {
        if (!rule.startsWith('-A ') || !rule.includes(bridge)) continue;
        const args = rule.slice(3).match(/"[^"]*"|\S+/g)!.map((a) => a.replace(/^"|"$/g, ''));
        spawnSync(tool, ['-t', table, '-D', ...args]);
      }
    }
  }
}

/** Polls `check` until it returns a truthy value or the time is up. */
export async function eventually<T>(check: () => Promise<T> | T, timeoutMs = 10_000, intervalMs = 50): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const value = await check();
      if (value) return value;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) throw new Error(`condition not met within ${timeoutMs} ms${last ? `: ${(last as Error).message}` : ''}`);
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

export const tmpdir = () => mkdtempSync(path.join(os.tmpdir(), 'berth-test-'));
