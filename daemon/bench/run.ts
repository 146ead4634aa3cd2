/**
 * The start-up and memory benchmark. Everything is measured side by side in one run, on this machine:
 *
 *   (a) create + start + wait + delete of `true` over the API (NetworkMode none, one kept-alive connection)
 *   (b) `docker run --rm --network none busybox true` through the docker CLI
 *   (c) the reference: `crun run` of an OCI bundle of the same busybox root filesystem, in the foreground
 *       (and `runc run` of it beside, for comparison)
 *
 * then the daemon's idle RSS, and the memory each running container adds beyond its own processes: the daemon's
 * RSS growth plus the RSS of the per-container helpers (conmon), divided by the number of containers.
 *
 *   npm run bench -- [-n 50] [-k 20] [--rounds 5] [--runtime crun|runc] [--json] [--check] [--verbose]
 *
 * It starts a real berthd in a temporary root and removes everything it started when it ends (also on Ctrl-C).
 */
import { promises as fs } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Engine, httpRequest, type HttpResult } from '../test/harness.js';
import { COMMON_USAGE, commonOptions, intAtLeast, parseBenchArgs, reportMain, runtimeOption, type CommonOptions } from './cli.js';
import { findProcessesMentioning, cleanupOnce, stopLeftovers, MB, rssBytes, settledRss } from './procmem.js';
import { measureReference, prepareBundle, type Bundle, type Runtime } from './reference.js';
import { fmt, msSince, summarize, type Summary } from './stats.js';

export const TARGETS = { apiToCrunP50: 3, idleRssMB: 60, perContainerMB: 2.5 };

export interface Options extends CommonOptions {
  iterations: number;
  containers: number;
  rounds: number;
  warmup: number;
  runtime: Runtime;
}

export const USAGE = `usage: npm run bench -- [options]   (or: node daemon/dist/bench/run.js [options])

  -n, --iterations N   timed start-ups of each kind (default 50)
  -k, --containers K   running containers for the memory figure (default 20)
      --rounds R       run the iterations in R interleaved rounds of (a), (b), (c) (default 5)
      --warmup W       untimed start-ups of each kind before the first round (default 3)
      --runtime NAME   the daemon's OCI runtime, crun or runc (default crun); the reference is always crun
${COMMON_USAGE}`;

/** Parses the flags; undefined for --help. Throws on bad input. */
export function parseOptions(argv: string[]): Options | undefined {
  const values = parseBenchArgs(argv, {
    iterations: { type: 'string', short: 'n' },
    containers: { type: 'string', short: 'k' },
    rounds: { type: 'string' },
    warmup: { type: 'string' },
    runtime: { type: 'string' },
    help: { type: 'boolean', short: 'h' },
  });
  if (values.help) return undefined;
  const runtime = runtimeOption(values.runtime);
  const iterations = intAtLeast(values, 'iterations', 50, 1);
  return {
    iterations,
    containers: intAtLeast(values, 'containers', 20, 1),
    rounds: Math.min(iterations, intAtLeast(values, 'rounds', 5, 1)),
    warmup: intAtLeast(values, 'warmup', 3, 0),
    runtime,
    ...commonOptions(values),
  };
}

/** Splits `total` into `parts` chunk sizes that differ by at most one. */
export function chunks(total: number, parts: number): number[] {
  return Array.from({ length: parts }, (_, i) => Math.floor(total / parts) + (i < total % parts ? 1 : 0));
}

/** Times of the steps of (a), to show where the time goes. */
export interface StepTimes {
  create: number[];
  start: number[];
  wait: number[];
  delete: number[];
}

/** An agent that keeps one connection alive and counts the connections it opened. */
class OneConnectionAgent extends http.Agent {
  opened = 0;
  constructor() {
    super({ keepAlive: true, maxSockets: 1 });
  }
  override createConnection(...args: Parameters<http.Agent['createConnection']>): ReturnType<http.Agent['createConnection']> {
    this.opened++;
    return super.createConnection(...args);
  }
}

/** The few API calls the benchmark makes, over one kept-alive connection. */
class Api {
  readonly agent = new OneConnectionAgent();
  /** Containers created and not yet deleted, for the clean-up. */
  readonly live = new Set<string>();

  constructor(private readonly socket: string) {}

  async call(method: string, urlPath: string, expect: number, body?: unknown): Promise<HttpResult> {
    const res = await httpRequest(this.socket, method, urlPath, { body, agent: this.agent, timeoutMs: 60_000 });
    if (res.status !== expect) throw new Error(`${method} ${urlPath} answered ${res.status}: ${res.text.trim()}`);
    return res;
  }

  async create(cmd: string[]): Promise<string> {
    const res = await this.call('POST', '/containers/create', 201, { Image: 'busybox', Cmd: cmd, HostConfig: { NetworkMode: 'none' } });
    const id = res.json<{ Id: string }>().Id;
    this.live.add(id);
    return id;
  }

  async start(id: string): Promise<void> {
    await this.call('POST', `/containers/${id}/start`, 204);
  }

  async remove(id: string, force = false): Promise<void> {
    await this.call('DELETE', `/containers/${id}${force ? '?force=1' : ''}`, 204);
    this.live.delete(id);
  }

  /** (a): create, start, wait, delete; checks the exit code. Adds each step's time (ms) to `steps`. */
  async runTrue(steps?: StepTimes): Promise<void> {
    let t = process.hrtime.bigint();
    const lap = (step: keyof StepTimes) => {
      steps?.[step].push(msSince(t));
      t = process.hrtime.bigint();
    };
    const id = await this.create(['true']);
    lap('create');
    await this.start(id);
    lap('start');
    const status = (await this.call('POST', `/containers/${id}/wait`, 200)).json<{ StatusCode: number }>().StatusCode;
    if (status !== 0) throw new Error(`container ${id} exited ${status}`);
    lap('wait');
    await this.remove(id);
    lap('delete');
  }

  close(): void {
    this.agent.destroy();
  }
}

export interface MemoryFigures {
  containers: number;
  daemonBeforeMB: number;
  daemonAfterMB: number;
  helpers: number;
  helpersRssMB: number;
  perContainerMB: number;
}

export interface Report {
  host: { cpus: number; kernel: string; node: string; runtime: Runtime };
  iterations: number;
  rounds: number;
  /** The temporary root the daemon ran in (removed at the end). */
  engineRoot: string;
  api?: Summary;
  apiConnections?: number;
  /** p50 and p90 of each step of (a). */
  apiSteps?: Record<keyof StepTimes, Summary>;
  cli?: Summary;
  crun?: Summary;
  crunNote?: string;
  runc?: Summary;
  /** The runtime the daemon runs containers with, as /info reports it, and why when it is not the one asked for. */
  daemonRuntime?: string;
  daemonRuntimeNote?: string;
  ratios: {
    apiToCrunP50?: number;
    apiToCrunP90?: number;
    cliToCrunP50?: number;
    cliToCrunP90?: number;
    runcToCrunP50?: number;
    runcToCrunP90?: number;
  };
  idleRssMB?: number;
  memory?: MemoryFigures;
  errors: Record<string, string>;
}

/** The daemon's own helpers: processes other than the daemon whose arguments name the engine's root. */
function helpers(engine: Engine): number[] {
  return findProcessesMentioning(engine.root).filter((pid) => pid !== engine.pid && pid !== process.pid);
}

function rssSum(pids: number[]): number {
  return pids.reduce((sum, pid) => sum + (rssBytes(pid) ?? 0), 0);
}

async function timeApi(api: Api, count: number, into: number[], steps?: StepTimes): Promise<void> {
  for (let i = 0; i < count; i++) {
    const start = process.hrtime.bigint();
    await api.runTrue(steps);
    into.push(msSince(start));
  }
}

async function timeCli(engine: Engine, count: number, into: number[]): Promise<void> {
  for (let i = 0; i < count; i++) {
    const start = process.hrtime.bigint();
    const r = await engine.docker(['run', '--rm', '--network', 'none', 'busybox', 'true']);
    const ms = msSince(start);
    if (r.code !== 0) throw new Error(`docker run exited ${r.code}: ${(r.stderr + r.stdout).trim()}`);
    into.push(ms);
  }
}

async function measureMemory(engine: Engine, api: Api, k: number): Promise<MemoryFigures> {
  const pid = engine.pid!;
  const helpersBefore = helpers(engine);
  const daemonBefore = await settledRss(pid);
  const rssHelpersBefore = rssSum(helpersBefore);
  for (let i = 0; i < k; i++) await api.start(await api.create(['sleep', '3600']));
  const daemonAfter = await settledRss(pid);
  const helpersAfter = helpers(engine);
  const added = helpersAfter.filter((p) => !helpersBefore.includes(p));
  const addedRss = rssSum(helpersAfter) - rssHelpersBefore;
  return {
    containers: k,
    daemonBeforeMB: daemonBefore / MB,
    daemonAfterMB: daemonAfter / MB,
    helpers: added.length,
    helpersRssMB: addedRss / MB,
    perContainerMB: (daemonAfter - daemonBefore + addedRss) / k / MB,
  };
}

/** One measured part: it stops at its first failure and records why. */
class Part {
  readonly samples: number[] = [];
  error?: string;
  constructor(readonly name: string) {}
  get ok(): boolean {
    return this.error === undefined;
  }
  async attempt(fn: (into: number[]) => Promise<void>): Promise<void> {
    if (!this.ok) return;
    try {
      await fn(this.samples);
    } catch (err) {
      this.error = (err as Error).message;
    }
  }
}

export async function runBenchmark(opts: Options, progress: (line: string) => void): Promise<Report> {
  const work = await fs.mkdtemp('/tmp/bb-');
  const engine = new Engine({ runtime: opts.runtime, verbose: opts.verbose });
  const report: Report = {
    host: { cpus: os.cpus().length, kernel: os.release(), node: process.version, runtime: opts.runtime },
    iterations: opts.iterations,
    rounds: opts.rounds,
    engineRoot: engine.root,
    ratios: {},
    errors: {},
  };
  const api = new Api(engine.socket);
  const { cleanup, release } = cleanupOnce(async () => {
    for (const id of api.live) await api.remove(id, true).catch(() => undefined);
    api.close();
    await engine.cleanup().catch(() => undefined);
    await stopLeftovers(engine.root, progress);
    await fs.rm(work, { recursive: true, force: true });
  }, progress);

  const apiPart = new Part('api');
  const cliPart = new Part('cli');
  const crunPart = new Part('crun');
  const runcPart = new Part('runc');
  const steps: StepTimes = { create: [], start: [], wait: [], delete: [] };
  try {
    progress('building the busybox OCI bundle');
    const bundle: Bundle = await prepareBundle(path.join(work, 'bundle'));

    progress(`starting berthd (runtime ${opts.runtime}) in ${engine.root}`);
    await engine.start();
    report.idleRssMB = (await settledRss(engine.pid!)) / MB;
    try {
      report.daemonRuntime = (await engine.request('GET', '/info')).json<{ DefaultRuntime?: string }>().DefaultRuntime;
    } catch {
      // reported as unknown
    }
    const fallback = /level=warn[^\n]*using (crun|runc)[^\n]*/.exec(engine.daemonLog);
    if (fallback) report.daemonRuntimeNote = fallback[0];

    progress('loading the busybox image');
    try {
      await engine.loadBusybox();
    } catch (err) {
      report.errors.image = (err as Error).message;
      apiPart.error = cliPart.error = 'no busybox image';
    }

    // Warm-up: the first start-ups fill caches (page cache, the daemon's JIT) that later ones find filled.
    await apiPart.attempt(() => timeApi(api, opts.warmup, []));
    await cliPart.attempt(() => timeCli(engine, opts.warmup, []));

    const sizes = chunks(opts.iterations, opts.rounds);
    for (const [round, size] of sizes.entries()) {
      progress(`round ${round + 1}/${sizes.length}: ${size} start-ups of each kind`);
      await apiPart.attempt((into) => timeApi(api, size, into, steps));
      await cliPart.attempt((into) => timeCli(engine, size, into));
      await crunPart.attempt(async (into) => {
        const ref = await measureReference('crun', bundle, size, round === 0 ? opts.warmup : 1);
        into.push(...ref.samples);
        report.crunNote = ref.note;
      });
      await runcPart.attempt(async (into) => {
        into.push(...(await measureReference('runc', bundle, size, round === 0 ? opts.warmup : 1)).samples);
      });
    }
    if (apiPart.ok) report.apiConnections = api.agent.opened;

    if (report.errors.image === undefined) {
      progress(`starting ${opts.containers} \`sleep 3600\` containers`);
      try {
        report.memory = await measureMemory(engine, api, opts.containers);
      } catch (err) {
        report.errors.memory = (err as Error).message;
      }
    } else {
      report.errors.memory = 'no busybox image';
    }
  } catch (err) {
    report.errors.setup = (err as Error).message;
  } finally {
    progress('cleaning up');
    await cleanup();
    release();
  }

  for (const part of [apiPart, cliPart, crunPart, runcPart]) if (part.error) report.errors[part.name] = part.error;
  if (apiPart.ok && apiPart.samples.length) {
    report.api = summarize(apiPart.samples);
    report.apiSteps = {
      create: summarize(steps.create),
      start: summarize(steps.start),
      wait: summarize(steps.wait),
      delete: summarize(steps.delete),
    };
  }
  if (cliPart.ok && cliPart.samples.length) report.cli = summarize(cliPart.samples);
  if (crunPart.ok && crunPart.samples.length) report.crun = summarize(crunPart.samples);
  if (runcPart.ok && runcPart.samples.length) report.runc = summarize(runcPart.samples);
  if (report.crun) {
    if (report.api) {
      report.ratios.apiToCrunP50 = report.api.p50 / report.crun.p50;
      report.ratios.apiToCrunP90 = report.api.p90 / report.crun.p90;
    }
    if (report.cli) {
      report.ratios.cliToCrunP50 = report.cli.p50 / report.crun.p50;
      report.ratios.cliToCrunP90 = report.cli.p90 / report.crun.p90;
    }
    if (report.runc) {
      report.ratios.runcToCrunP50 = report.runc.p50 / report.crun.p50;
      report.ratios.runcToCrunP90 = report.runc.p90 / report.crun.p90;
    }
  }
  return report;
}

/** Which targets a report misses (figures that could not be measured count as missed). */
export function missedTargets(r: Report): string[] {
  const missed: string[] = [];
  if (!(r.ratios.apiToCrunP50! <= TARGETS.apiToCrunP50)) missed.push(`API p50 at most ${TARGETS.apiToCrunP50}x crun`);
  if (!(r.idleRssMB! <= TARGETS.idleRssMB)) missed.push(`idle RSS at most ${TARGETS.idleRssMB} MB`);
  if (!(r.memory?.perContainerMB! <= TARGETS.perContainerMB)) missed.push(`at most ${TARGETS.perContainerMB} MB per running container`);
  return missed;
}

/** An error message on one line, cut to a readable length. */
function oneLine(message: string, max = 400): string {
  const flat = message.replace(/\s*\n\s*/g, ' | ').trim();
  return flat.length > max ? `${flat.slice(0, max)}...` : flat;
}

export function formatReport(r: Report): string {
  const verdict = (ok: boolean | undefined) => (ok === undefined ? '' : ok ? 'ok' : 'MISSED');
  const row = (label: string, s: Summary | undefined, ratio50?: number, ratio90?: number, target = '') =>
    `${label.padEnd(44)}${fmt(s?.p50 ?? NaN).padStart(8)}${fmt(s?.p90 ?? NaN).padStart(8)}${(ratio50 === undefined ? '' : fmt(ratio50, 2) + 'x').padStart(10)}${(ratio90 === undefined ? '' : fmt(ratio90, 2) + 'x').padStart(10)}  ${target}`;
  const lines: string[] = [];
  lines.push(`Berth benchmark: ${r.host.cpus} CPUs, Linux ${r.host.kernel}, Node ${r.host.node}`);
  lines.push(`berthd --runtime ${r.host.runtime}; the daemon runs containers with ${r.daemonRuntime ?? 'an unknown runtime'}`);
  if (r.daemonRuntimeNote) lines.push(`    ${r.daemonRuntimeNote}`);
  lines.push(`${r.iterations} timed start-ups of each kind, in ${r.rounds} interleaved rounds`);
  lines.push('');
  lines.push(`${'start-up of `true` (ms)'.padEnd(44)}${'p50'.padStart(8)}${'p90'.padStart(8)}${'p50/crun'.padStart(10)}${'p90/crun'.padStart(10)}  target`);
  const apiOk = r.ratios.apiToCrunP50 === undefined ? undefined : r.ratios.apiToCrunP50 <= TARGETS.apiToCrunP50;
  lines.push(row('(a) API create+start+wait+delete', r.api, r.ratios.apiToCrunP50, r.ratios.apiToCrunP90, `p50 <= ${TARGETS.apiToCrunP50}x crun ${verdict(apiOk)}`));
  lines.push(row('(b) docker run --rm --network none', r.cli, r.ratios.cliToCrunP50, r.ratios.cliToCrunP90));
  lines.push(row('(c) crun run (reference)', r.crun, r.crun ? 1 : undefined, r.crun ? 1 : undefined));
  lines.push(row('    runc run (for comparison)', r.runc, r.ratios.runcToCrunP50, r.ratios.runcToCrunP90));
  if (r.apiSteps) {
    const parts = Object.entries(r.apiSteps).map(([step, s]) => `${step} ${fmt(s.p50)}/${fmt(s.p90)}`);
    lines.push(`    (a) by step, p50/p90: ${parts.join(', ')}`);
  }
  if (r.apiConnections !== undefined) lines.push(`    (a) used ${r.apiConnections} HTTP connection(s)`);
  if (r.crunNote) lines.push(`    (c) ${r.crunNote}`);
  lines.push('');
  lines.push(`${'memory (MB)'.padEnd(44)}${'value'.padStart(8)}  target`);
  const idleOk = r.idleRssMB === undefined ? undefined : r.idleRssMB <= TARGETS.idleRssMB;
  lines.push(`${'daemon idle RSS'.padEnd(44)}${fmt(r.idleRssMB ?? NaN).padStart(8)}  <= ${TARGETS.idleRssMB} ${verdict(idleOk)}`);
  const m = r.memory;
  const perOk = m === undefined ? undefined : m.perContainerMB <= TARGETS.perContainerMB;
  lines.push(`${`per running container (${m?.containers ?? '-'} containers)`.padEnd(44)}${fmt(m?.perContainerMB ?? NaN, 2).padStart(8)}  <= ${TARGETS.perContainerMB} ${verdict(perOk)}`);
  if (m) {
    const growth = m.daemonAfterMB - m.daemonBeforeMB;
    lines.push(`    daemon RSS ${fmt(m.daemonBeforeMB)} -> ${fmt(m.daemonAfterMB)} (${growth >= 0 ? '+' : ''}${fmt(growth)})`);
    lines.push(`    ${m.helpers} helper processes (conmon) added ${fmt(m.helpersRssMB)} RSS, ${fmt(m.helpers ? m.helpersRssMB / m.helpers : NaN, 2)} each`);
  }
  const errors = Object.entries(r.errors);
  if (errors.length) {
    lines.push('');
    lines.push('not measured:');
    for (const [part, message] of errors) lines.push(`    ${part}: ${oneLine(message)}`);
  }
  return lines.join('\n') + '\n';
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  reportMain(process.argv.slice(2), { usage: USAGE, parseOptions, runBenchmark, formatReport, missedTargets }).then((code) => process.exit(code));
}
