/**
 * The container list benchmark, measured side by side in one run on this machine:
 *
 *   (a) the reference: `GET /containers/json?all=1` against the engine with no container
 *   (b) the same request with 500 containers (created, not started)
 *
 * on one kept-alive connection, then the p50 of each (target: (b) at most 10 ms).
 *
 *   node daemon/dist/bench/list.js [-c 500] [-n 200] [--json] [--check] [--verbose]
 *
 * It starts a real berthd in a temporary root and removes everything it started when it ends.
 */
import http from 'node:http';
import { Engine, httpRequest } from '../test/harness.js';
import { commonOptions, parseBenchArgs, runMain, withEngine } from './cli.js';
import { fmt, msSince, summarize, type Summary } from './stats.js';

export const TARGET_P50_MS = 10;

async function timeList(engine: Engine, agent: http.Agent, n: number): Promise<{ summary: Summary; count: number }> {
  const samples: number[] = [];
  let count = 0;
  for (let i = 0; i < n + 5; i++) {
    const start = process.hrtime.bigint();
    const res = await httpRequest(engine.socket, 'GET', '/containers/json?all=1', { agent, timeoutMs: 60_000 });
    const ms = msSince(start);
    if (res.status !== 200) throw new Error(`list answered ${res.status}: ${res.text}`);
    count = (res.json() as unknown[]).length;
    if (i >= 5) samples.push(ms);
  }
  return { summary: summarize(samples), count };
}

async function main(): Promise<number> {
  const values = parseBenchArgs(process.argv.slice(2), {
    containers: { type: 'string', short: 'c', default: '500' },
    iterations: { type: 'string', short: 'n', default: '200' },
  });
  const opts = commonOptions(values);
  const containers = Number(values.containers);
  const iterations = Number(values.iterations);
  if (!(containers > 0) || !(iterations > 0)) throw new Error('--containers and --iterations must be positive numbers');
  const engine = new Engine({ verbose: opts.verbose });
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  return withEngine(engine, async () => {
    await engine.loadBusybox();
    const empty = await timeList(engine, agent, iterations);
    for (let i = 0; i < containers; i++) {
      const res = await httpRequest(engine.socket, 'POST', '/containers/create', {
        agent,
        body: { Image: 'busybox', Cmd: ['true'], Labels: { bench: String(i) }, HostConfig: { NetworkMode: 'none' } },
      });
      if (res.status !== 201) throw new Error(`create answered ${res.status}: ${res.text}`);
    }
    const full = await timeList(engine, agent, iterations);
    if (full.count !== containers) throw new Error(`the list holds ${full.count} containers, ${containers} were created`);
    const ok = full.summary.p50 <= TARGET_P50_MS;
    if (opts.json) {
      console.log(JSON.stringify({ containers, iterations, empty: empty.summary, full: full.summary, targetP50Ms: TARGET_P50_MS, ok }));
    } else {
      console.log(`GET /containers/json?all=1, ${iterations} requests each, one kept-alive connection`);
      console.log(`  (a) no container (reference)   p50 ${fmt(empty.summary.p50)} ms   p90 ${fmt(empty.summary.p90)} ms`);
      console.log(`  (b) ${containers} created containers   p50 ${fmt(full.summary.p50)} ms   p90 ${fmt(full.summary.p90)} ms   (target p50 <= ${TARGET_P50_MS} ms: ${ok ? 'met' : 'MISSED'})`);
    }
    return opts.check && !ok ? 1 : 0;
  }, async () => {
    agent.destroy();
    await engine.cleanup();
  });
}

runMain(main);
