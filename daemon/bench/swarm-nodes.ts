/**
 * The swarm benchmark across three daemons, each in a network namespace of its own (test/netns.ts), every
 * figure beside its reference from the same run:
 *
 *   (a) N containers created and started directly over the three daemons' APIs (the reference), beside a
 *       service of N replicas created on the manager until its N tasks run over the three nodes
 *       (target: within 2 s of the reference)
 *   (b) a worker's daemon killed (-9): time until its tasks run on the other nodes, beside the heartbeat
 *       period (1 s here; target: the period plus at most 1 s)
 *   (c) the leader's daemon killed (-9) in a swarm of three managers: time until a survivor names a new
 *       leader, beside the time until a write through a survivor succeeds again (the store's own failover,
 *       an etcd election when etcd's leader was on the dead host; target for the leader: under 3 s)
 *   (d) idle RSS a worker's daemon and a manager's (with its etcd member) add over the same daemon before it
 *       joined the swarm (targets: at most 10 MB and 80 MB)
 *
 *   node daemon/dist/bench/swarm-nodes.js [-n 10] [--json] [--check] [--verbose]
 *
 * It needs root (network namespaces), starts real daemons in temporary roots, and removes everything it made.
 */
import { randomBytes } from 'node:crypto';
import type { Engine } from '../test/harness.js';
import { NetnsCluster } from '../test/netns.js';
import { commonOptions, parseBenchArgs, positiveInt, runMain } from './cli.js';
import { cleanupOnce, findProcessesMentioning, MB, rssBytes, settledRss } from './procmem.js';
import { fmt, msSince } from './stats.js';

export const TARGET_SERVICE_EXTRA_MS = 2000;
export const TARGET_RESCHEDULE_EXTRA_MS = 1000;
export const TARGET_FAILOVER_MS = 3000;
export const TARGET_WORKER_MB = 10;
export const TARGET_MANAGER_MB = 80;
const HEARTBEAT_MS = 1000;

async function waitFor<T>(check: () => Promise<T | undefined | false>, timeoutMs: number, what: string): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check().catch(() => undefined);
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`${what}: not done within ${timeoutMs / 1000} s`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

async function ok(engine: Engine, method: string, path: string, body?: unknown): Promise<any> {
  const r = await engine.request(method, path, { body, timeoutMs: 60_000 });
  if (r.status >= 300) throw new Error(`${method} ${path} answered ${r.status}: ${r.text}`);
  return r.text ? r.json() : undefined;
}

interface Task {
  NodeID: string;
  Status: { State: string };
}

const running = async (engine: Engine, service: string): Promise<Task[]> => {
  const filters = encodeURIComponent(JSON.stringify({ service: [service], 'desired-state': ['running'] }));
  const r = await engine.request('GET', `/tasks?filters=${filters}`);
  return r.status === 200 ? r.json<Task[]>().filter((t) => t.Status.State === 'running') : [];
};

/** The daemon's RSS plus its etcd member's, when it runs one. */
async function managerRss(engine: Engine): Promise<number> {
  const etcd = findProcessesMentioning(`${engine.dataRoot}/swarm/etcd`).find((pid) => (rssBytes(pid) ?? 0) > 0);
  return (await settledRss(engine.pid!)) + (etcd ? await settledRss(etcd) : 0);
}

async function main(): Promise<number> {
  const values = parseBenchArgs(process.argv.slice(2), { replicas: { type: 'string', short: 'n', default: '10' } });
  const opts = commonOptions(values);
  const n = positiveInt(values, 'replicas', 10);
  const progress = (line: string) => {
    if (!opts.json) console.error(`# ${line}`);
  };
  const cluster = new NetnsCluster(3);
  const engines = [0, 1, 2].map((i) => cluster.engine(i, { verbose: opts.verbose }));
  const [m1, w2, w3] = engines as [Engine, Engine, Engine];
  const { cleanup, release } = cleanupOnce(async () => {
    for (const e of engines) await e.cleanup().catch(() => undefined);
    cluster.tearDown();
  }, progress);
  try {
    cluster.setUp();
    progress('starting three daemons');
    await Promise.all(engines.map(async (e) => {
      await e.start();
      await e.loadBusybox();
    }));
    const standalone = await Promise.all(engines.map((e) => settledRss(e.pid!)));

    // (a) the reference: N containers started directly, spread over the three daemons.
    let start = process.hrtime.bigint();
    const direct = await Promise.all(Array.from({ length: n }, async (_, i) => {
      const engine = engines[i % 3]!;
      const c = await ok(engine, 'POST', `/containers/create?name=direct${i}`, { Image: 'busybox', Cmd: ['sleep', '600'] });
      await ok(engine, 'POST', `/containers/${c.Id}/start`);
      return { engine, id: c.Id as string };
    }));
    const directMs = msSince(start);
    await Promise.all(direct.map(({ engine, id }) => engine.request('DELETE', `/containers/${id}?force=1`)));

    progress('making the swarm: one manager, two workers');
    const ip = (i: number) => cluster.nodes[i]!.ip;
    await ok(m1, 'POST', '/swarm/init', { AdvertiseAddr: ip(0), ListenAddr: `${ip(0)}:2377`, Spec: { Dispatcher: { HeartbeatPeriod: HEARTBEAT_MS * 1e6 } } });
    const swarm = await ok(m1, 'GET', '/swarm');
    for (const [i, e] of [[1, w2], [2, w3]] as const) {
      await ok(e, 'POST', '/swarm/join', { JoinToken: swarm.JoinTokens.Worker, RemoteAddrs: [`${ip(0)}:2377`], AdvertiseAddr: ip(i), ListenAddr: `${ip(i)}:2377` });
    }
    const nodeIds = await Promise.all(engines.map(async (e) => (await ok(e, 'GET', '/info')).Swarm.NodeID as string));
    await waitFor(async () => (await ok(m1, 'GET', '/nodes') as Array<{ Status: { State: string } }>).every((x) => x.Status.State === 'ready'), 30_000, 'nodes ready');
    const workerAdded = ((await settledRss(w3.pid!)) - standalone[2]!) / MB;
    const managerAdded = ((await managerRss(m1)) - standalone[0]!) / MB;

    // (a) a service of N replicas until its N tasks run.
    start = process.hrtime.bigint();
    await ok(m1, 'POST', '/services/create', {
      Name: 'bench',
      TaskTemplate: { ContainerSpec: { Image: 'busybox', Args: ['sleep', '600'], StopGracePeriod: 1e9 } },
      Mode: { Replicated: { Replicas: n } },
    });
    const placed = await waitFor(async () => {
      const list = await running(m1, 'bench');
      return list.length === n && list;
    }, 120_000, 'service running');
    const serviceMs = msSince(start);
    const spread = new Set(placed.map((t) => t.NodeID)).size;

    // (b) a worker dies: its tasks run elsewhere.
    const moving = placed.filter((t) => t.NodeID === nodeIds[2]).length;
    progress(`killing worker node-3's daemon (${moving} of its tasks to move)`);
    start = process.hrtime.bigint();
    await w3.crash();
    await waitFor(async () => {
      const list = await running(m1, 'bench');
      return list.length === n && list.every((t) => t.NodeID !== nodeIds[2]);
    }, 60_000, 'rescheduling');
    const rescheduleMs = msSince(start);

    // (c) three managers; the leader dies.
    progress('bringing node-3 back; promoting both workers');
    await w3.start();
    await waitFor(async () => (await ok(w3, 'GET', '/info')).Swarm.LocalNodeState === 'active', 30_000, 'node-3 back');
    for (const id of nodeIds.slice(1)) {
      const node = await ok(m1, 'GET', `/nodes/${id}`);
      await ok(m1, 'POST', `/nodes/${id}/update?version=${node.Version.Index}`, { ...node.Spec, Role: 'manager' });
    }
    await waitFor(async () => (await Promise.all([w2, w3].map(async (e) => (await ok(e, 'GET', '/info')).Swarm.ControlAvailable))).every(Boolean), 90_000, 'promotions');
    await waitFor(async () => (await ok(w2, 'GET', '/nodes') as Array<{ ManagerStatus?: { Reachability: string } }>).filter((x) => x.ManagerStatus?.Reachability === 'reachable').length === 3, 30_000, 'managers reachable');
    // Settle: the promoted members caught up and the leader's keepalives run at their pace.
    await new Promise((r) => setTimeout(r, 3000));
    progress('killing the leader\'s daemon');
    start = process.hrtime.bigint();
    await m1.crash();
    const writeMs = await (async () => {
      for (let i = 0; ; i++) {
        const r = await w2.request('POST', '/configs/create', { body: { Name: `probe-${randomBytes(4).toString('hex')}`, Data: '' }, timeoutMs: 10_000 }).catch(() => undefined);
        if (r?.status === 201) return msSince(start);
        if (msSince(start) > 60_000) throw new Error('no write succeeded through a survivor within 60 s');
        await new Promise((res) => setTimeout(res, 20));
      }
    })();
    await waitFor(async () => {
      const list = await ok(w2, 'GET', '/nodes') as Array<{ ID: string; ManagerStatus?: { Leader?: boolean } }>;
      return list.some((x) => x.ManagerStatus?.Leader && x.ID !== nodeIds[0]);
    }, 60_000, 'new leader');
    const failoverMs = msSince(start);

    const extraMs = serviceMs - directMs;
    const met = {
      service: extraMs <= TARGET_SERVICE_EXTRA_MS,
      reschedule: rescheduleMs <= HEARTBEAT_MS + TARGET_RESCHEDULE_EXTRA_MS,
      failover: failoverMs < TARGET_FAILOVER_MS,
      worker: workerAdded <= TARGET_WORKER_MB,
      manager: managerAdded <= TARGET_MANAGER_MB,
    };
    const word = (b: boolean) => (b ? 'met' : 'MISSED');
    if (opts.json) {
      console.log(JSON.stringify({ replicas: n, directMs, serviceMs, extraMs, nodesUsed: spread, heartbeatMs: HEARTBEAT_MS, rescheduleMs, writeMs, failoverMs, workerAddedMb: workerAdded, managerAddedMb: managerAdded, ok: met }));
    } else {
      console.log(`swarm of three daemons in network namespaces, ${n} replicas`);
      console.log(`  (a) ${n} containers started directly over 3 daemons (reference)   ${fmt(directMs)} ms`);
      console.log(`      service create to ${n} running tasks on ${spread} nodes          ${fmt(serviceMs)} ms   (+${fmt(extraMs)} ms; target <= +${TARGET_SERVICE_EXTRA_MS} ms: ${word(met.service)})`);
      console.log(`  (b) heartbeat period (reference)                                 ${fmt(HEARTBEAT_MS)} ms`);
      console.log(`      kill -9 of a worker to its ${moving} tasks running elsewhere      ${fmt(rescheduleMs)} ms   (target <= period + ${TARGET_RESCHEDULE_EXTRA_MS} ms: ${word(met.reschedule)})`);
      console.log(`  (c) kill -9 of the leader to a write through a survivor           ${fmt(writeMs)} ms`);
      console.log(`      kill -9 of the leader to a new leader                         ${fmt(failoverMs)} ms   (target < ${TARGET_FAILOVER_MS} ms: ${word(met.failover)})`);
      console.log(`  (d) idle RSS added over the standalone daemon: worker +${fmt(workerAdded)} MB (target <= ${TARGET_WORKER_MB}: ${word(met.worker)}), manager with its etcd member +${fmt(managerAdded)} MB (target <= ${TARGET_MANAGER_MB}: ${word(met.manager)})`);
    }
    return opts.check && !Object.values(met).every(Boolean) ? 1 : 0;
  } finally {
    await cleanup();
    release();
  }
}

runMain(main);
