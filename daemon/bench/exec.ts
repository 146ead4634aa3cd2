/**
 * The exec latency benchmark, measured side by side in one run on this machine:
 *
 *   (a) `POST /containers/{id}/exec` + `POST /exec/{id}/start` of `/bin/true` over the API, until the output
 *       stream ends (the exit code is recorded by then), on one kept-alive connection for the create
 *   (b) the reference: `crun exec <id> /bin/true` on the same running container, in the foreground
 *   (c) for the breakdown: the Linux host's exec session alone (`crun exec` with pipes, as for an attached exec),
 *       called in this process without the API
 *
 * in interleaved rounds, then the p50 of each and the ratio (a)/(b) (target: at most 2).
 *
 *   node daemon/dist/bench/exec.js [-n 50] [--rounds 5] [--warmup 3] [--json] [--check] [--verbose]
 *
 * It starts a real berthd in a temporary root and removes everything it started when it ends.
 */
import { spawn } from 'node:child_process';
import http from 'node:http';
import path from 'node:path';
import { LinuxContainerRuntime } from '../src/host/linux/runtime/runtime.js';
import { Engine, httpRequest } from '../test/harness.js';
import { commonOptions, parseBenchArgs, positiveInt, runMain, withEngine, type CommonOptions } from './cli.js';
import { fmt, msSince, summarize, type Summary } from './stats.js';

export const TARGET_RATIO = 2;

interface Options extends CommonOptions {
  iterations: number;
  rounds: number;
  warmup: number;
}

function parseOptions(argv: string[]): Options {
  const values = parseBenchArgs(argv, {
    iterations: { type: 'string', short: 'n' },
    rounds: { type: 'string' },
    warmup: { type: 'string' },
  });
  return {
    iterations: positiveInt(values, 'iterations', 50),
    rounds: positiveInt(values, 'rounds', 5),
    warmup: positiveInt(values, 'warmup', 3),
    ...commonOptions(values),
  };
}

/** One exec over the API: create (on the kept-alive connection, as the docker CLI does), then start until the stream ends (on its own connection, which the hijack takes over). */
async function apiExec(engine: Engine, containerId: string, agent: http.Agent): Promise<number> {
  const started = process.hrtime.bigint();
  const created = await httpRequest(engine.socket, 'POST', `/containers/${containerId}/exec`, { body: { AttachStdout: true, AttachStderr: true, Cmd: ['/bin/true'] }, agent });
  if (created.status !== 201) throw new Error(`exec create answered ${created.status}: ${created.text}`);
  const id = created.json().Id as string;
  const run = await httpRequest(engine.socket, 'POST', `/exec/${id}/start`, { body: { Detach: false, Tty: false } });
  if (run.status !== 200) throw new Error(`exec start answered ${run.status}: ${run.text}`);
  return msSince(started);
}

/** One `crun exec` of the same command in the same container. */
function crunExec(stateRoot: string, containerId: string): Promise<number> {
  const started = process.hrtime.bigint();
  return new Promise((resolve, reject) => {
    const child = spawn('crun', [`--root=${stateRoot}`, 'exec', containerId, '/bin/true'], { stdio: ['ignore', 'ignore', 'pipe'] });
    let err = '';
    child.stderr.on('data', (c: Buffer) => (err += c.toString()));
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve(msSince(started)) : reject(new Error(`crun exec exited ${code}: ${err}`))));
  });
}

/** One exec session through the Linux host directly (conmon + crun exec, attached), to its exit. */
async function hostExec(runtime: LinuxContainerRuntime, containerId: string, n: number): Promise<number> {
  const started = process.hrtime.bigint();
  const execId = `bench${String(n).padStart(8, '0')}${process.pid}`;
  const session = await runtime.exec(containerId, execId, { args: ['/bin/true'], env: ['PATH=/bin'], cwd: '/', user: { uid: 0, gid: 0 } }, { tty: false, openStdin: false });
  session.streams.output.resume();
  const code = await session.exit;
  const ms = msSince(started);
  await runtime.releaseExec(execId);
  if (code !== 0) throw new Error(`host exec exited ${code}`);
  return ms;
}

async function main(): Promise<number> {
  const opts = parseOptions(process.argv.slice(2));
  const engine = new Engine({ verbose: opts.verbose });
  return withEngine(engine, async () => {
    await engine.loadBusybox();
    const containerId = (await engine.dockerOk(['run', '-d', '--network', 'none', 'busybox', 'sleep', '3600'])).trim();
    const stateRoot = path.join(engine.execRoot, 'runtime');
    const runtime = new LinuxContainerRuntime({ dataRoot: engine.dataRoot, execRoot: engine.execRoot, runtime: 'crun' });
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    let n = 0;
    const api: number[] = [];
    const crun: number[] = [];
    const host: number[] = [];
    try {
      for (let i = 0; i < opts.warmup; i++) {
        await apiExec(engine, containerId, agent);
        await crunExec(stateRoot, containerId);
        await hostExec(runtime, containerId, n++);
      }
      const perRound = Math.ceil(opts.iterations / opts.rounds);
      for (let round = 0; round < opts.rounds; round++) {
        for (let i = 0; i < perRound && api.length < opts.iterations; i++) api.push(await apiExec(engine, containerId, agent));
        for (let i = 0; i < perRound && crun.length < opts.iterations; i++) crun.push(await crunExec(stateRoot, containerId));
        for (let i = 0; i < perRound && host.length < opts.iterations; i++) host.push(await hostExec(runtime, containerId, n++));
      }
    } finally {
      runtime.close();
      agent.destroy();
    }
    const a = summarize(api);
    const c = summarize(crun);
    const h = summarize(host);
    const ratio = a.p50 / c.p50;
    if (opts.json) {
      console.log(JSON.stringify({ api: a, crunExec: c, hostExec: h, ratioP50: ratio, target: TARGET_RATIO }, null, 2));
    } else {
      const row = (name: string, s: Summary) => `${name.padEnd(34)} ${fmt(s.p50).padStart(8)} ${fmt(s.p90).padStart(8)} ${fmt(s.min).padStart(8)} ${fmt(s.max).padStart(8)}`;
      console.log(`exec of /bin/true in a running busybox container, ${opts.iterations} each, ${opts.rounds} interleaved rounds (ms)`);
      console.log(`${''.padEnd(34)} ${'p50'.padStart(8)} ${'p90'.padStart(8)} ${'min'.padStart(8)} ${'max'.padStart(8)}`);
      console.log(row('(a) API exec create + start', a));
      console.log(row('(b) crun exec (reference)', c));
      console.log(row('(c) host exec session', h));
      console.log(`ratio of p50s (a)/(b): ${fmt(ratio, 2)} (target at most ${TARGET_RATIO})`);
    }
    return opts.check && !(ratio <= TARGET_RATIO) ? 1 : 0;
  });
}

runMain(main);
