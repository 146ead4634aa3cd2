/**
 * The concurrent-clients benchmark, measured side by side in one run on this machine:
 *
 *   (a) N container lifecycles over the API by C concurrent clients, each on its own kept-alive connection:
 *       create, start, stop (`docker stop -t 0`: SIGTERM, then SIGKILL at once), delete of a container running
 *       `sleep 3600` (NetworkMode none). As PID 1 of its namespace, sleep ignores SIGTERM; a shell that traps it
 *       would race its own start-up (a stop before the trap is set waits out the timeout).
 *   (b) the reference: the same N lifecycles as `crun run` of `/bin/true` on an OCI bundle of the same busybox
 *       root filesystem, by C concurrent workers
 *
 * and prints containers per second for each, their ratio, and the target (at least 25 containers/s over the
 * API). The reference's wall time is the busiest worker's total run time (worker start-up left out).
 *
 *   node daemon/dist/bench/concurrent.js [-n 100] [-c 8] [--runtime crun|runc] [--json] [--check] [--verbose]
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
import { cleanupOnce, stopLeftovers } from './procmem.js';
import { measureReference, prepareBundle, type Runtime } from './reference.js';
import { chunks } from './run.js';
import { fmt, msSince, summarize, type Summary } from './stats.js';

export const TARGETS = { apiContainersPerSecond: 25 };

export const LIFECYCLE_CMD = ['sleep', '3600'];

export interface Options extends CommonOptions {
  containers: number;
  clients: number;
  warmup: number;
  runtime: Runtime;
}

export const USAGE = `usage: node daemon/dist/bench/concurrent.js [options]

  -n, --containers N   container lifecycles of each kind (default 100)
  -c, --clients C      concurrent API clients, and concurrent reference workers (default 8)
      --warmup W       untimed lifecycles over the API before the timed ones (default 4)
      --runtime NAME   the daemon's OCI runtime, crun or runc (default crun); the reference is always crun
${COMMON_USAGE}`;

export function parseOptions(argv: string[]): Options | undefined {
  const values = parseBenchArgs(argv, {
    containers: { type: 'string', short: 'n' },
    clients: { type: 'string', short: 'c' },
    warmup: { type: 'string' },
    runtime: { type: 'string' },
    help: { type: 'boolean', short: 'h' },
  });
  if (values.help) return undefined;
  const runtime = runtimeOption(values.runtime);
  const containers = intAtLeast(values, 'containers', 100, 1);
  return {
    containers,
    clients: Math.min(containers, intAtLeast(values, 'clients', 8, 1)),
    warmup: intAtLeast(values, 'warmup', 4, 0),
    runtime,
    ...commonOptions(values),
  };
}

export interface Steps {
  create: number[];
  start: number[];
  stop: number[];
  delete: number[];
}

/** One API client: its own kept-alive connection. */
class Client {
  readonly agent = new http.Agent({ keepAlive: true, maxSockets: 1 });

  constructor(
    private readonly socket: string,
    private readonly live: Set<string>,
  ) {}

  private async call(method: string, urlPath: string, expect: number[], body?: unknown): Promise<HttpResult> {
    const res = await httpRequest(this.socket, method, urlPath, { body, agent: this.agent, timeoutMs: 120_000 });
    if (!expect.includes(res.status)) throw new Error(`${method} ${urlPath} answered ${res.status}: ${res.text.trim()}`);
    return res;
  }

  /** create, start, stop, delete; adds each step's time (ms) to `steps`. */
  async lifecycle(steps?: Steps): Promise<void> {
    let t = process.hrtime.bigint();
    const lap = (step: keyof Steps) => {
      steps?.[step].push(msSince(t));
      t = process.hrtime.bigint();
    };
    const res = await this.call('POST', '/containers/create', [201], { Image: 'busybox', Cmd: LIFECYCLE_CMD, HostConfig: { NetworkMode: 'none' } });
    const id = res.json<{ Id: string }>().Id;
    this.live.add(id);
    lap('create');
    await this.call('POST', `/containers/${id}/start`, [204]);
    lap('start');
    await this.call('POST', `/containers/${id}/stop?t=0`, [204]);
    lap('stop');
    await this.call('DELETE', `/containers/${id}`, [204]);
    this.live.delete(id);
    lap('delete');
  }

  close(): void {
    this.agent.destroy();
  }
}

/** Runs `total` lifecycles over `clients` clients; resolves with the wall time in ms. */
async function runClients(clients: Client[], total: number, steps?: Steps): Promise<number> {
  let next = 0;
  const started = process.hrtime.bigint();
  await Promise.all(
    clients.map(async (client) => {
      while (next < total) {
        next++;
        await client.lifecycle(steps);
      }
    }),
  );
  return msSince(started);
}

export interface Report {
  host: { cpus: number; kernel: string; node: string; runtime: Runtime };
  containers: number;
  clients: number;
  engineRoot: string;
  api?: { wallMs: number; perSecond: number; steps: Record<keyof Steps, Summary> };
  crun?: { wallMs: number; perSecond: number; run: Summary };
  crunNote?: string;
  /** API containers/s divided by crun's. */
  ratio?: number;
  errors: Record<string, string>;
}

export async function runBenchmark(opts: Options, progress: (line: string) => void): Promise<Report> {
  const work = await fs.mkdtemp('/tmp/bc-');
  const engine = new Engine({ runtime: opts.runtime, verbose: opts.verbose });
  const report: Report = {
    host: { cpus: os.cpus().length, kernel: os.release(), node: process.version, runtime: opts.runtime },
    containers: opts.containers,
    clients: opts.clients,
    engineRoot: engine.root,
    errors: {},
  };
  const live = new Set<string>();
  const clients = Array.from({ length: opts.clients }, () => new Client(engine.socket, live));
  const { cleanup, release } = cleanupOnce(async () => {
    for (const id of live) await engine.request('DELETE', `/containers/${id}?force=1`).catch(() => undefined);
    for (const c of clients) c.close();
    await engine.cleanup().catch(() => undefined);
    await stopLeftovers(engine.root, progress);
    await fs.rm(work, { recursive: true, force: true });
  }, progress);
  try {
    progress('building the busybox OCI bundle');
    const bundle = await prepareBundle(path.join(work, 'bundle'));
    progress(`starting berthd (runtime ${opts.runtime}) in ${engine.root}`);
    await engine.start();
    progress('loading the busybox image');
    await engine.loadBusybox();

    try {
      if (opts.warmup > 0) await runClients(clients.slice(0, Math.min(opts.clients, opts.warmup)), opts.warmup);
      progress(`${opts.containers} lifecycles over the API by ${opts.clients} clients`);
      const steps: Steps = { create: [], start: [], stop: [], delete: [] };
      const wallMs = await runClients(clients, opts.containers, steps);
      report.api = {
        wallMs,
        perSecond: opts.containers / (wallMs / 1000),
        steps: { create: summarize(steps.create), start: summarize(steps.start), stop: summarize(steps.stop), delete: summarize(steps.delete) },
      };
    } catch (err) {
      report.errors.api = (err as Error).message;
    }

    try {
      progress(`${opts.containers} \`crun run\` by ${opts.clients} workers`);
      const parts = await Promise.all(chunks(opts.containers, opts.clients).map((n) => measureReference('crun', bundle, n, 1)));
      const wallMs = Math.max(...parts.map((p) => p.samples.reduce((a, b) => a + b, 0)));
      report.crun = { wallMs, perSecond: opts.containers / (wallMs / 1000), run: summarize(parts.flatMap((p) => p.samples)) };
      report.crunNote = parts[0]?.note;
    } catch (err) {
      report.errors.crun = (err as Error).message;
    }
    if (report.api && report.crun) report.ratio = report.api.perSecond / report.crun.perSecond;
  } catch (err) {
    report.errors.setup = (err as Error).message;
  } finally {
    progress('cleaning up');
    await cleanup();
    release();
  }
  return report;
}

export function missedTargets(r: Report): string[] {
  return r.api && r.api.perSecond >= TARGETS.apiContainersPerSecond ? [] : [`at least ${TARGETS.apiContainersPerSecond} containers/s over the API`];
}

export function formatReport(r: Report): string {
  const lines: string[] = [];
  lines.push(`Berth concurrent benchmark: ${r.host.cpus} CPUs, Linux ${r.host.kernel}, Node ${r.host.node}, berthd --runtime ${r.host.runtime}`);
  lines.push(`${r.containers} container lifecycles of each kind, ${r.clients} concurrent clients`);
  lines.push('');
  lines.push(`${''.padEnd(52)}${'containers/s'.padStart(13)}${'wall s'.padStart(9)}  target`);
  const ok = r.api ? (r.api.perSecond >= TARGETS.apiContainersPerSecond ? 'ok' : 'MISSED') : '';
  lines.push(`${'(a) API create+start+stop+delete'.padEnd(52)}${fmt(r.api?.perSecond ?? NaN).padStart(13)}${fmt((r.api?.wallMs ?? NaN) / 1000, 2).padStart(9)}  >= ${TARGETS.apiContainersPerSecond} ${ok}`);
  lines.push(`${'(b) crun run of /bin/true (reference)'.padEnd(52)}${fmt(r.crun?.perSecond ?? NaN).padStart(13)}${fmt((r.crun?.wallMs ?? NaN) / 1000, 2).padStart(9)}`);
  lines.push(`    (a)/(b): ${r.ratio === undefined ? '-' : `${fmt(r.ratio, 2)}x`} the reference's rate`);
  if (r.api) {
    const parts = Object.entries(r.api.steps).map(([step, s]) => `${step} ${fmt(s.p50)}/${fmt(s.p90)}`);
    lines.push(`    (a) by step (ms), p50/p90: ${parts.join(', ')}`);
  }
  if (r.crun) lines.push(`    (b) one crun run (ms), p50/p90: ${fmt(r.crun.run.p50)}/${fmt(r.crun.run.p90)}`);
  if (r.crunNote) lines.push(`    (b) ${r.crunNote}`);
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
