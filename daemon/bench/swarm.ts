/**
 * The swarm benchmark on one daemon, measured side by side in one run:
 *
 *   (a) the reference: N containers (`sleep 600`) created and started directly over the API, in parallel
 *   (b) a service of N replicas created over the API, until all N tasks run (target: within 2 s of (a))
 *   (c) the memory a manager adds: the daemon's idle RSS before `swarm init`, beside its RSS plus its etcd
 *       member's after it (target: at most 80 MB added)
 *
 *   node daemon/dist/bench/swarm.js [-n 10] [--json] [--check] [--verbose]
 *
 * The swarm listens on a loopback address of its own. It starts a real berthd in a temporary root and removes
 * everything it started when it ends. (Three nodes, rescheduling after a worker dies, leader failover and a
 * worker's memory are measured by bench/swarm-nodes.ts, across daemons in network namespaces.)
 */
import { randomInt } from 'node:crypto';
import { Engine } from '../test/harness.js';
import { commonOptions, parseBenchArgs, positiveInt, runMain, withEngine } from './cli.js';
import { findProcessesMentioning, MB, rssBytes, settledRss } from './procmem.js';
import { fmt, msSince } from './stats.js';

export const TARGET_EXTRA_MS = 2000;
export const TARGET_MANAGER_MB = 80;

async function waitFor(check: () => Promise<boolean>, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`not done within ${timeoutMs / 1000} s`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

async function main(): Promise<number> {
  const values = parseBenchArgs(process.argv.slice(2), { replicas: { type: 'string', short: 'n', default: '10' } });
  const opts = commonOptions(values);
  const n = positiveInt(values, 'replicas', 10);
  const ip = `127.${randomInt(100, 250)}.${randomInt(1, 250)}.${randomInt(2, 250)}`;
  const engine = new Engine({ verbose: opts.verbose });
  return withEngine(engine, async () => {
    await engine.loadBusybox();
    const standalone = await settledRss(engine.pid!);

    // (a) N containers started directly.
    let start = process.hrtime.bigint();
    const ids = await Promise.all(
      Array.from({ length: n }, async (_, i) => {
        const c = await engine.request('POST', `/containers/create?name=direct${i}`, { body: { Image: 'busybox', Cmd: ['sleep', '600'] } });
        if (c.status !== 201) throw new Error(`create answered ${c.status}: ${c.text}`);
        const id = c.json().Id as string;
        const s = await engine.request('POST', `/containers/${id}/start`);
        if (s.status !== 204) throw new Error(`start answered ${s.status}: ${s.text}`);
        return id;
      }),
    );
    const directMs = msSince(start);
    await Promise.all(ids.map((id) => engine.request('DELETE', `/containers/${id}?force=1`)));

    // (c) first half: the manager's memory once the swarm runs.
    const init = await engine.request('POST', '/swarm/init', { body: { AdvertiseAddr: ip, ListenAddr: `${ip}:2377` }, timeoutMs: 60_000 });
    if (init.status !== 200) throw new Error(`swarm init answered ${init.status}: ${init.text}`);
    const etcdPid = findProcessesMentioning(`${engine.dataRoot}/swarm/etcd`).find((pid) => (rssBytes(pid) ?? 0) > 0);
    const managerRss = (await settledRss(engine.pid!)) + (etcdPid ? await settledRss(etcdPid) : 0);

    // (b) a service of N replicas, until its N tasks run.
    start = process.hrtime.bigint();
    const created = await engine.request('POST', '/services/create', {
      body: { Name: 'bench', TaskTemplate: { ContainerSpec: { Image: 'busybox', Args: ['sleep', '600'], StopGracePeriod: 1e9 } }, Mode: { Replicated: { Replicas: n } } },
    });
    if (created.status !== 201) throw new Error(`service create answered ${created.status}: ${created.text}`);
    const filters = encodeURIComponent(JSON.stringify({ service: ['bench'], 'desired-state': ['running'] }));
    await waitFor(async () => {
      const tasks = (await engine.request('GET', `/tasks?filters=${filters}`)).json<Array<{ Status: { State: string } }>>();
      return tasks.filter((t) => t.Status.State === 'running').length === n;
    }, 120_000);
    const serviceMs = msSince(start);
    await engine.request('POST', '/swarm/leave?force=1', { timeoutMs: 60_000 });

    const extraMs = serviceMs - directMs;
    const managerMb = (managerRss - standalone) / MB;
    const ok = { service: extraMs <= TARGET_EXTRA_MS, manager: managerMb <= TARGET_MANAGER_MB };
    if (opts.json) {
      console.log(JSON.stringify({ replicas: n, directMs, serviceMs, extraMs, standaloneRssMb: standalone / MB, managerRssMb: managerRss / MB, managerAddedMb: managerMb, ok }));
    } else {
      console.log(`swarm on one daemon, ${n} replicas`);
      console.log(`  (a) ${n} containers started directly (reference)   ${fmt(directMs)} ms`);
      console.log(`  (b) service create to ${n} running tasks          ${fmt(serviceMs)} ms   (+${fmt(extraMs)} ms; target <= +${TARGET_EXTRA_MS} ms: ${ok.service ? 'met' : 'MISSED'})`);
      console.log(`  (c) idle RSS: standalone ${fmt(standalone / MB)} MB, manager with its etcd member ${fmt(managerRss / MB)} MB   (+${fmt(managerMb)} MB; target <= +${TARGET_MANAGER_MB} MB: ${ok.manager ? 'met' : 'MISSED'})`);
    }
    return opts.check && !(ok.service && ok.manager) ? 1 : 0;
  });
}

runMain(main);
