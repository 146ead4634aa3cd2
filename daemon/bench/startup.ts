/**
 * The daemon's start-up benchmark: how long from spawning berthd to its first answer of `GET /_ping`?
 *
 * It prepares a data root holding C containers, made once through the API (R of them running `sleep`, half of
 * those on the default bridge; a third of the rest run to their end; the others only created), then measures
 * side by side, alternating one spawn of each:
 *
 *   (a) berthd, from spawn to the first 200 of `GET /_ping` on its unix socket; then the time to its first
 *       answer of `GET /containers/json?all=1` listing every container (its state restored); then SIGTERM, and
 *       the benchmark waits for it to exit;
 *   (b) the floor: `node -e` with a script that serves `GET /_ping` over HTTP on a unix socket (node:http, the
 *       least a Node daemon can do before it answers), timed the same way and stopped the same way.
 *
 * Each is measured as a restart (the prepared data root, its running containers left running under conmon)
 * and as a first start (an empty data root and exec root each time: the default bridge and its rules made
 * anew). The target: berthd's first `/_ping` at most 100 ms after spawn on the data root with C containers.
 * With `--baseline BIN`, another build's berthd (e.g. of the commit before, in a worktree of its own) is spawned
 * in turn with the two on the same roots, and reported beside.
 *
 *   node daemon/dist/bench/startup.js [-n 20] [-c 100] [-r 20] [--baseline BIN] [--json] [--check] [--verbose]
 *
 * It removes everything it started when it ends (also on Ctrl-C).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { rmSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { BERTHD, Engine, httpRequest } from '../test/harness.js';
import { COMMON_USAGE, commonOptions, intAtLeast, parseBenchArgs, reportMain, type CommonOptions } from './cli.js';
import { cleanupOnce, stopLeftovers } from './procmem.js';
import { fmt, msSince, summarize, type Summary } from './stats.js';

export const TARGETS = { firstPingMs: 100 };

export interface Options extends CommonOptions {
  iterations: number;
  containers: number;
  running: number;
  /** Another berthd (its bin/berthd) measured in turn with this one. */
  baseline?: string;
}

export const USAGE = `usage: node daemon/dist/bench/startup.js [options]

  -n, --iterations N   timed spawns of each kind, for the restart and for the first start (default 20)
  -c, --containers C   containers in the prepared data root (default 100)
  -r, --running R      of which running (default 20, half of them on the default bridge)
      --baseline BIN   also spawn this berthd (another build's bin/berthd) in turn, on the same roots
${COMMON_USAGE}`;

export function parseOptions(argv: string[]): Options | undefined {
  const values = parseBenchArgs(argv, {
    iterations: { type: 'string', short: 'n' },
    containers: { type: 'string', short: 'c' },
    running: { type: 'string', short: 'r' },
    baseline: { type: 'string' },
    help: { type: 'boolean', short: 'h' },
  });
  if (values.help) return undefined;
  const containers = intAtLeast(values, 'containers', 100, 0);
  return {
    iterations: intAtLeast(values, 'iterations', 20, 1),
    containers,
    running: Math.min(containers, intAtLeast(values, 'running', 20, 0)),
    ...(values.baseline !== undefined ? { baseline: path.resolve(values.baseline) } : {}),
    ...commonOptions(values),
  };
}

/** The floor's script: an HTTP server on a unix socket (its path in argv) that answers every request `OK`. */
export const FLOOR_SCRIPT =
  "require('node:http').createServer((q,s)=>s.end('OK')).listen(process.argv[1]);process.on('SIGTERM',()=>process.exit(0))";

/** What the floor is, as the report says it. */
export const FLOOR_DESCRIPTION = '`node -e` of an HTTP server on a unix socket answering GET /_ping';

/** How often the socket is tried while the process starts. */
const POLL_MS = 1;

/** A connection per try, closed after its answer: nothing holds the process being timed. */
const oneShot = new http.Agent({ keepAlive: false });

interface Spawned {
  child: ChildProcess;
  started: bigint;
  exited: Promise<void>;
  stderr: Buffer[];
}

function spawnTimed(args: string[], verbose: boolean): Spawned {
  const started = process.hrtime.bigint();
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'ignore', 'pipe'] });
  const stderr: Buffer[] = [];
  child.stderr!.on('data', (chunk: Buffer) => {
    stderr.push(chunk);
    if (verbose) process.stderr.write(chunk);
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  return { child, started, exited, stderr };
}

/** Milliseconds from the spawn to the first 200 of GET `urlPath` on the socket (tried every POLL_MS). */
async function firstAnswer(p: Spawned, socket: string, urlPath: string, accept: (body: string) => boolean = () => true): Promise<number> {
  const deadline = Date.now() + 30_000;
  let exited = false;
  void p.exited.then(() => (exited = true));
  for (;;) {
    if (exited) throw new Error(`the process exited before it answered ${urlPath}: ${Buffer.concat(p.stderr).toString().slice(-2000)}`);
    if (Date.now() > deadline) throw new Error(`no answer to ${urlPath} within 30 s`);
    const res = await httpRequest(socket, 'GET', urlPath, { agent: oneShot, timeoutMs: 30_000 }).catch(() => undefined);
    if (res?.status === 200 && accept(res.text)) return msSince(p.started);
    await new Promise((r) => setTimeout(r, POLL_MS));
  }
}

/** SIGTERM, then waits for the exit (SIGKILL after 15 s). */
async function stopSpawned(p: Spawned): Promise<void> {
  if (p.child.exitCode !== null || p.child.signalCode !== null) return;
  p.child.kill('SIGTERM');
  const timer = setTimeout(() => p.child.kill('SIGKILL'), 15_000);
  await p.exited;
  clearTimeout(timer);
}

function daemonArgs(engine: Engine, berthd: string): string[] {
  return [
    berthd,
    '-H', engine.host,
    '--data-root', engine.dataRoot,
    '--exec-root', engine.execRoot,
    '--pidfile', engine.pidfile,
    '--bridge', engine.bridge,
    '--runtime', 'crun',
  ];
}

export interface Figures {
  /** berthd: spawn to the first /_ping answered, ms. */
  ping: Summary;
  /** berthd: spawn to the first container list holding every container, ms. */
  listed: Summary;
  /** The floor: spawn to its first /_ping answered, ms. */
  floor: Summary;
  /** ping p50 / floor p50. */
  ratio: number;
  /** The baseline berthd's figures, when one was given. */
  baseline?: { ping: Summary; listed: Summary; ratio: number };
}

export interface Report {
  host: { cpus: number; kernel: string; node: string; loadavg: number[] };
  iterations: number;
  containers: number;
  running: number;
  engineRoot: string;
  floor: string;
  baseline?: string;
  restart?: Figures;
  firstStart?: Figures;
  /** After the runs: the containers the engine listed, and those running. */
  after?: { listed: number; running: number };
  errors: Record<string, string>;
}

interface Samples {
  ping: number[];
  listed: number[];
}

function figures(own: Samples, floor: number[], baseline?: Samples): Figures {
  const f = { ping: summarize(own.ping), listed: summarize(own.listed), floor: summarize(floor) };
  const b = baseline && { ping: summarize(baseline.ping), listed: summarize(baseline.listed) };
  return { ...f, ratio: f.ping.p50 / f.floor.p50, ...(b ? { baseline: { ...b, ratio: b.ping.p50 / f.floor.p50 } } : {}) };
}

const countOf = (text: string): number => {
  try {
    return (JSON.parse(text) as unknown[]).length;
  } catch {
    return -1;
  }
};

/** Makes `count` containers through the API: `running` of them left running, a third of the rest run to their end. */
async function prepare(engine: Engine, count: number, running: number): Promise<void> {
  const call = async (method: string, urlPath: string, expect: number, body?: unknown) => {
    const res = await engine.request(method, urlPath, { body, timeoutMs: 120_000 });
    if (res.status !== expect) throw new Error(`${method} ${urlPath} answered ${res.status}: ${res.text.trim().slice(0, 300)}`);
    return res;
  };
  for (let i = 0; i < count; i++) {
    const live = i < running;
    const ran = !live && (i - running) % 3 === 0;
    const body = {
      Image: 'busybox',
      Cmd: live ? ['sleep', '3600'] : ['true'],
      Labels: { startup: String(i) },
      HostConfig: live && i % 2 === 0 ? {} : { NetworkMode: 'none' },
    };
    const id = (await call('POST', '/containers/create', 201, body)).json<{ Id: string }>().Id;
    if (live || ran) await call('POST', `/containers/${id}/start`, 204);
    if (ran) await call('POST', `/containers/${id}/wait`, 200);
  }
}

export async function runBenchmark(opts: Options, progress: (line: string) => void): Promise<Report> {
  const engine = new Engine({ verbose: opts.verbose });
  const report: Report = {
    host: { cpus: os.cpus().length, kernel: os.release(), node: process.version, loadavg: os.loadavg() },
    iterations: opts.iterations,
    containers: opts.containers,
    running: opts.running,
    engineRoot: engine.root,
    floor: FLOOR_DESCRIPTION,
    ...(opts.baseline ? { baseline: opts.baseline } : {}),
    errors: {},
  };
  const fresh: Engine[] = [];
  const spawned = new Set<Spawned>();
  const { cleanup, release } = cleanupOnce(async () => {
    for (const p of spawned) await stopSpawned(p);
    for (const e of [engine, ...fresh]) {
      await e.cleanup().catch(() => undefined);
      await stopLeftovers(e.root, progress);
    }
  }, progress);

  const floorSocket = path.join(engine.root, 'floor.sock');
  const timeFloor = async (): Promise<number> => {
    // The floor exits without removing its socket.
    rmSync(floorSocket, { force: true });
    const p = spawnTimed(['-e', FLOOR_SCRIPT, floorSocket], false);
    spawned.add(p);
    try {
      return await firstAnswer(p, floorSocket, '/_ping');
    } finally {
      await stopSpawned(p);
      spawned.delete(p);
    }
  };
  const timeDaemon = async (e: Engine, berthd: string): Promise<{ ping: number; listed: number }> => {
    const p = spawnTimed(daemonArgs(e, berthd), opts.verbose);
    spawned.add(p);
    try {
      const ping = await firstAnswer(p, e.socket, '/_ping');
      const listed = await firstAnswer(p, e.socket, '/containers/json?all=1', (text) => countOf(text) === (e === engine ? opts.containers : 0));
      return { ping, listed };
    } finally {
      await stopSpawned(p);
      spawned.delete(p);
    }
  };
  const measure = async (next: () => Engine, done: (e: Engine) => Promise<void>): Promise<Figures> => {
    const own: Samples = { ping: [], listed: [] };
    const baseline: Samples = { ping: [], listed: [] };
    const floor: number[] = [];
    const spawnOn = async (berthd: string, into: Samples, timed: boolean) => {
      const e = next();
      const d = await timeDaemon(e, berthd);
      await done(e);
      if (!timed) return;
      into.ping.push(d.ping);
      into.listed.push(d.listed);
    };
    // One untimed spawn of each first: the file system cache holds the modules from then on.
    for (let i = -1; i < opts.iterations; i++) {
      await spawnOn(BERTHD, own, i >= 0);
      if (opts.baseline) await spawnOn(opts.baseline, baseline, i >= 0);
      const f = await timeFloor();
      if (i >= 0) floor.push(f);
    }
    return figures(own, floor, opts.baseline ? baseline : undefined);
  };

  try {
    progress(`starting berthd in ${engine.root} to make ${opts.containers} containers (${opts.running} running)`);
    await engine.start();
    await engine.loadBusybox();
    await prepare(engine, opts.containers, opts.running);
    await engine.stop();
    progress(`restart: ${opts.iterations} spawns of berthd and of the floor, alternating`);
    report.restart = await measure(() => engine, async () => undefined);
    progress(`first start: ${opts.iterations} spawns of berthd on an empty root and of the floor, alternating`);
    report.firstStart = await measure(
      () => {
        const e = new Engine({ verbose: opts.verbose });
        fresh.push(e);
        return e;
      },
      async (e) => {
        await e.cleanup();
        fresh.splice(fresh.indexOf(e), 1);
      },
    );
    await engine.start();
    const list = (await engine.request('GET', '/containers/json?all=1')).json<Array<{ State: string }>>();
    report.after = { listed: list.length, running: list.filter((c) => c.State === 'running').length };
  } catch (err) {
    report.errors.run = (err as Error).message;
  } finally {
    progress('cleaning up');
    await cleanup();
    release();
  }
  return report;
}

export function missedTargets(r: Report): string[] {
  const missed: string[] = [];
  if (!(r.restart && r.restart.ping.p50 <= TARGETS.firstPingMs)) missed.push(`restart: first /_ping p50 at most ${TARGETS.firstPingMs} ms`);
  if (!(r.firstStart && r.firstStart.ping.p50 <= TARGETS.firstPingMs)) missed.push(`first start: first /_ping p50 at most ${TARGETS.firstPingMs} ms`);
  return missed;
}

export function formatReport(r: Report): string {
  const lines: string[] = [];
  lines.push(`Berth start-up benchmark: ${r.host.cpus} CPUs, Linux ${r.host.kernel}, Node ${r.host.node}, load ${r.host.loadavg.map((l) => fmt(l, 2)).join(' ')}`);
  lines.push(`${r.iterations} spawns of each kind, alternating; the data root holds ${r.containers} containers (${r.running} running)`);
  lines.push(`floor: ${r.floor}`);
  if (r.baseline) lines.push(`baseline: ${r.baseline}`);
  const row = (label: string, s: Summary) => `  ${label.padEnd(44)}${fmt(s.p50).padStart(9)}${fmt(s.p90).padStart(9)}${fmt(s.min).padStart(9)}`;
  for (const [name, f] of [
    ['restart (the data root with the containers)', r.restart],
    ['first start (an empty data root)', r.firstStart],
  ] as const) {
    if (!f) continue;
    lines.push('');
    lines.push(`${name}, ms from spawn:`);
    lines.push(`  ${''.padEnd(44)}${'p50'.padStart(9)}${'p90'.padStart(9)}${'min'.padStart(9)}`);
    lines.push(row('berthd: first /_ping', f.ping));
    lines.push(row('berthd: first full container list', f.listed));
    if (f.baseline) {
      lines.push(row('baseline berthd: first /_ping', f.baseline.ping));
      lines.push(row('baseline berthd: first full container list', f.baseline.listed));
    }
    lines.push(row('floor: first /_ping', f.floor));
    const ok = f.ping.p50 <= TARGETS.firstPingMs;
    lines.push(`  berthd / floor at p50: ${fmt(f.ratio, 2)}x${f.baseline ? ` (baseline ${fmt(f.baseline.ratio, 2)}x)` : ''}; first /_ping p50 ${fmt(f.ping.p50)} ms (target at most ${TARGETS.firstPingMs}) ${ok ? 'ok' : 'MISSED'}`);
  }
  if (r.after) lines.push('', `after the runs: ${r.after.listed} containers listed, ${r.after.running} running`);
  const errors = Object.entries(r.errors);
  if (errors.length) {
    lines.push('');
    lines.push('not measured:');
    for (const [part, message] of errors) lines.push(`    ${part}: ${message.replace(/\s*\n\s*/g, ' | ').slice(0, 400)}`);
  }
  return lines.join('\n') + '\n';
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  reportMain(process.argv.slice(2), { usage: USAGE, parseOptions, runBenchmark, formatReport, missedTargets }).then((code) => process.exit(code));
}
