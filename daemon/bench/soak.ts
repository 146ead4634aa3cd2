/**
 * The soak benchmark: does the daemon's memory stay flat under repeated work?
 *
 * It starts a real berthd in a temporary root, loads the busybox image, lets it settle and reads its idle RSS
 * (round 0, the fresh figure). Then, R times, it runs a round of mixed work over the API by C concurrent
 * clients, each on its own kept-alive connection: for each of N containers create, start, exec (`echo`, its
 * output read to the end), logs (read to the end), inspect, list, and remove by force. One container in four
 * is on the default bridge with an ephemeral published port, the others have no network. After each round it
 * leaves the daemon quiet for 6 s and reads its idle RSS again. The target: the last round's idle RSS within
 * 15 MB of round 0.
 *
 *   node daemon/dist/bench/soak.js [--rounds 10] [-n 200] [-c 8] [--json] [--check] [--verbose]
 *
 * It removes everything it started when it ends (also on Ctrl-C).
 */
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Engine, httpRequest, type HttpResult } from '../test/harness.js';
import { COMMON_USAGE, commonOptions, intAtLeast, parseBenchArgs, reportMain, type CommonOptions } from './cli.js';
import { cpuSeconds, cleanupOnce, stopLeftovers, MB, settledRss } from './procmem.js';
import { fmt, msSince } from './stats.js';

export const TARGETS = { growthMB: 15 };

/** How long the daemon is left quiet before its idle RSS is read. */
export const IDLE_MS = 6000;

export interface Options extends CommonOptions {
  rounds: number;
  containers: number;
  clients: number;
}

export const USAGE = `usage: node daemon/dist/bench/soak.js [options]

      --rounds R       rounds of mixed work (default 10)
  -n, --containers N   containers per round: create, start, exec, logs, inspect, list, remove (default 200)
  -c, --clients C      concurrent API clients (default 8)
${COMMON_USAGE}`;

export function parseOptions(argv: string[]): Options | undefined {
  const values = parseBenchArgs(argv, {
    rounds: { type: 'string' },
    containers: { type: 'string', short: 'n' },
    clients: { type: 'string', short: 'c' },
    help: { type: 'boolean', short: 'h' },
  });
  if (values.help) return undefined;
  const containers = intAtLeast(values, 'containers', 200, 1);
  return {
    rounds: intAtLeast(values, 'rounds', 10, 1),
    containers,
    clients: Math.min(containers, intAtLeast(values, 'clients', 8, 1)),
    ...commonOptions(values),
  };
}

/** One API client on its own kept-alive connection. */
class Client {
  readonly agent = new http.Agent({ keepAlive: true, maxSockets: 1 });

  constructor(
    private readonly socket: string,
    private readonly live: Set<string>,
  ) {}

  private async call(method: string, urlPath: string, expect: number, body?: unknown, agent: http.Agent | undefined = this.agent): Promise<HttpResult> {
    const res = await httpRequest(this.socket, method, urlPath, { body, agent, timeoutMs: 120_000 });
    if (res.status !== expect) throw new Error(`${method} ${urlPath} answered ${res.status}: ${res.text.trim().slice(0, 300)}`);
    return res;
  }

  /** The mixed work of one container; `n` picks its network. */
  async work(n: number): Promise<void> {
    const bridged = n % 4 === 0;
    const body = {
      Image: 'busybox',
      Cmd: ['sh', '-c', 'echo out $HOSTNAME; echo err >&2; exec sleep 600'],
      Labels: { soak: String(n) },
      ...(bridged ? { ExposedPorts: { '80/tcp': {} } } : {}),
      HostConfig: bridged ? { PortBindings: { '80/tcp': [{ HostPort: '' }] } } : { NetworkMode: 'none' },
    };
    const id = (await this.call('POST', '/containers/create', 201, body)).json<{ Id: string }>().Id;
    this.live.add(id);
    await this.call('POST', `/containers/${id}/start`, 204);
    const exec = (await this.call('POST', `/containers/${id}/exec`, 201, { AttachStdout: true, AttachStderr: true, Cmd: ['echo', 'exec'] })).json<{ Id: string }>().Id;
    // The exec's output is a hijacked stream, on a connection of its own.
    const out = await this.call('POST', `/exec/${exec}/start`, 200, { Detach: false, Tty: false }, undefined);
    if (!out.body.includes('exec')) throw new Error(`exec output lacks its line: ${JSON.stringify(out.text)}`);
    await this.call('GET', `/exec/${exec}/json`, 200);
    await this.call('GET', `/containers/${id}/logs?stdout=1&stderr=1&timestamps=1`, 200);
    await this.call('GET', `/containers/${id}/json`, 200);
    await this.call('GET', `/containers/json?filters=${encodeURIComponent(JSON.stringify({ label: [`soak=${n}`] }))}`, 200);
    await this.call('DELETE', `/containers/${id}?force=1`, 204);
    this.live.delete(id);
  }

  close(): void {
    this.agent.destroy();
  }
}

export interface RoundFigure {
  round: number;
  /** Wall time of the round's work, in seconds (0 for round 0). */
  seconds: number;
  /** CPU time the daemon spent in the round's work, in seconds (0 for round 0). */
  cpuSeconds: number;
  idleRssMB: number;
  /** Idle RSS minus round 0's. */
  growthMB: number;
}

export interface Report {
  host: { cpus: number; kernel: string; node: string };
  rounds: number;
  containers: number;
  clients: number;
  engineRoot: string;
  /** The daemon's idle RSS before the busybox image was loaded. */
  startRssMB?: number;
  figures: RoundFigure[];
  /** Containers the engine still listed after the last round (none expected). */
  containersLeft?: number;
  errors: Record<string, string>;
}

export async function runBenchmark(opts: Options, progress: (line: string) => void): Promise<Report> {
  const engine = new Engine({ verbose: opts.verbose });
  const report: Report = {
    host: { cpus: os.cpus().length, kernel: os.release(), node: process.version },
    rounds: opts.rounds,
    containers: opts.containers,
    clients: opts.clients,
    engineRoot: engine.root,
    figures: [],
    errors: {},
  };
  const live = new Set<string>();
  const clients = Array.from({ length: opts.clients }, () => new Client(engine.socket, live));
  const { cleanup, release } = cleanupOnce(async () => {
    for (const id of live) await engine.request('DELETE', `/containers/${id}?force=1`).catch(() => undefined);
    for (const c of clients) c.close();
    await engine.cleanup().catch(() => undefined);
    await stopLeftovers(engine.root, progress);
  }, progress);
  // The idle figure: the daemon quiet for 6 s (it gives memory back one second after its last request, at most
  // every 5 s), the median of a few readings.
  const idle = async () => (await settledRss(engine.pid!, IDLE_MS, 5)) / MB;
  try {
    progress(`starting berthd in ${engine.root}`);
    await engine.start();
    report.startRssMB = await idle();
    progress('loading the busybox image');
    await engine.loadBusybox();
    const fresh = await idle();
    report.figures.push({ round: 0, seconds: 0, cpuSeconds: 0, idleRssMB: fresh, growthMB: 0 });
    progress(`round 0: idle RSS ${fmt(fresh)} MB`);
    for (let round = 1; round <= opts.rounds; round++) {
      const started = process.hrtime.bigint();
      const cpuBefore = cpuSeconds(engine.pid!);
      let next = 0;
      try {
        await Promise.all(
          clients.map(async (client) => {
            while (next < opts.containers) await client.work(next++);
          }),
        );
      } catch (err) {
        report.errors[`round ${round}`] = (err as Error).message;
        break;
      }
      const seconds = msSince(started) / 1000;
      const cpu = cpuSeconds(engine.pid!) - cpuBefore;
      const rss = await idle();
      report.figures.push({ round, seconds, cpuSeconds: cpu, idleRssMB: rss, growthMB: rss - fresh });
      progress(`round ${round}: ${opts.containers} containers in ${fmt(seconds)} s (daemon CPU ${fmt(cpu)} s), idle RSS ${fmt(rss)} MB (${rss >= fresh ? '+' : ''}${fmt(rss - fresh)})`);
    }
    report.containersLeft = (await engine.request('GET', '/containers/json?all=1')).json<unknown[]>().length;
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
  const last = r.figures.at(-1);
  return last && r.figures.length === r.rounds + 1 && last.growthMB <= TARGETS.growthMB
    ? []
    : [`idle RSS after round ${r.rounds} within ${TARGETS.growthMB} MB of round 0`];
}

export function formatReport(r: Report): string {
  const lines: string[] = [];
  lines.push(`Berth soak benchmark: ${r.host.cpus} CPUs, Linux ${r.host.kernel}, Node ${r.host.node}`);
  lines.push(`${r.rounds} rounds of ${r.containers} containers (create, start, exec, logs, inspect, list, remove) by ${r.clients} clients`);
  lines.push(`daemon idle RSS just started, before the image was loaded: ${fmt(r.startRssMB ?? NaN)} MB`);
  lines.push('');
  lines.push(`${'round'.padEnd(8)}${'work s'.padStart(9)}${'daemon CPU s'.padStart(14)}${'idle RSS MB'.padStart(13)}${'vs round 0'.padStart(12)}`);
  for (const f of r.figures) {
    lines.push(`${String(f.round).padEnd(8)}${(f.round ? fmt(f.seconds) : '-').padStart(9)}${(f.round ? fmt(f.cpuSeconds) : '-').padStart(14)}${fmt(f.idleRssMB).padStart(13)}${((f.growthMB >= 0 ? '+' : '') + fmt(f.growthMB)).padStart(12)}`);
  }
  const last = r.figures.at(-1);
  if (last && r.figures.length > 1) {
    const ok = last.growthMB <= TARGETS.growthMB;
    lines.push(`round ${last.round} vs round 0: ${(last.growthMB >= 0 ? '+' : '') + fmt(last.growthMB)} MB (target at most +${TARGETS.growthMB}) ${ok ? 'ok' : 'MISSED'}`);
  }
  if (r.containersLeft) lines.push(`containers left in the engine: ${r.containersLeft}`);
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
