/**
 * The overlay benchmark across two daemons, each in a network namespace of its own (test/netns.ts): TCP
 * throughput between two tasks on different nodes through an overlay network (VXLAN between the nodes'
 * namespaces), measured in one run beside
 *
 *   (1) the same pair of node namespaces talking over the underlay directly (the reference; target: the
 *       overlay at least 0.7x, its MTU 1450 beside the underlay's 1500), and
 *   (2) two containers on one node's plain bridge network;
 *
 * and, on a line of its own, the same two tasks' pair through an encrypted overlay (`--opt encrypted`: ESP in
 * UDP between the nodes, carried by the daemons), beside the underlay too (--encrypted-mb per transfer);
 *
 * and the latency of HTTP requests (one connection each, from the benchmark's process) through the routing
 * mesh at the node that runs no task of the service, beside the same requests to the task through a port its
 * node publishes in host mode (the reference; target: at most 1 ms added at the p50).
 *
 * Every transfer is the same pair of busybox programs, started the same way for every kind by the benchmark
 * with nsenter into the network namespaces of its two ends (the nodes' for the underlay, the tasks' for the
 * overlays, the containers' for the bridge), each under `time -p`: the receiver `nc -l -p PORT -e dd
 * of=/dev/null bs=1M`, the sender `nc HOST PORT -e dd if=/dev/zero bs=1M count=MB`. Only the path between
 * them differs (no `docker exec` on one side only). The kinds run in --repeat interleaved rounds, back to
 * back within a round and in an order that alternates from round to round; the overlay's ratios are the
 * medians of each round's own ratios, so that the load of other processes on the machine, which drifts from
 * second to second, weighs on both sides of a ratio alike. Beside the throughput,
 * the CPU time of the two ends' processes per GB (user and system, the kernel's work on the packets done in
 * their context included): what the path costs. With `--priority rt` both ends run at a real-time priority
 * (`chrt -f`; the kernel keeps 5% of each second for other tasks): on a machine whose cores other work keeps
 * busy, the rounds then agree with each other, but each packet wakes its reader at once, as on an idle
 * machine, which weighs the overlay's work per packet more than a loaded machine's batches do.
 *
 *   node daemon/dist/bench/overlay.js [--mb 1024] [--encrypted-mb 128] [--repeat 7] [--priority normal|rt] [--json] [--check] [--verbose]
 *
 * It needs root, starts real daemons in temporary roots, and removes everything it made.
 */
import { spawn } from 'node:child_process';
import type { Engine } from '../test/harness.js';
import { NetnsCluster } from '../test/netns.js';
import { removeOverlayNamespaces } from '../test/overlay-netns.js';
import { cpuSeconds, exec, realSeconds } from './commands.js';
import { commonOptions, parseBenchArgs, positiveInt, runMain } from './cli.js';
import { cleanupOnce } from './procmem.js';
import http from 'node:http';
import { fmt, percentile } from './stats.js';

export const TARGET_OVERLAY_RATIO = 0.7;
export const TARGET_MESH_ADDED_MS = 1;

/** Milliseconds of one GET / on a new connection. */
function timedGet(ip: string, port: number): Promise<number> {
  const start = process.hrtime.bigint();
  return new Promise((resolve, reject) => {
    const req = http.get({ host: ip, port, path: '/', agent: false, timeout: 5000 }, (res) => {
      res.resume();
      res.on('end', () => resolve(Number(process.hrtime.bigint() - start) / 1e6));
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', reject);
  });
}
const PORT = 5001;

const receiver = ['busybox', 'time', '-p', 'busybox', 'nc', '-l', '-p', String(PORT), '-e', 'busybox', 'dd', 'of=/dev/null', 'bs=1M'];
const sender = (mb: number, host: string) => ['busybox', 'time', '-p', 'busybox', 'nc', host, String(PORT), '-e', 'busybox', 'dd', 'if=/dev/zero', 'bs=1M', `count=${mb}`];

/**
 * One transfer of `mb` MB from the namespace `from` to `host` in the namespace `to` (nsenter's arguments that
 * name a network namespace): its seconds, and the CPU seconds of both ends.
 */
async function transfer(from: string[], to: string[], host: string, mb: number, prio: string[]): Promise<{ seconds: number; cpu: number }> {
  // In a process group of its own, which a failed transfer ends whole (time, nc and dd).
  const child = spawn('nsenter', [...to, ...prio, ...receiver], { stdio: ['ignore', 'ignore', 'pipe'], detached: true });
  let rxErr = '';
  child.stderr.on('data', (c) => (rxErr += c));
  const rx = new Promise<number | null>((resolve, reject) => {
    child.on('error', reject);
    child.on('close', resolve);
  });
  try {
    // The sender tries again until the receiver listens (a refused connection ends nc at once).
    const deadline = Date.now() + 10_000;
    for (;;) {
      const tx = await exec('nsenter', [...from, ...prio, ...sender(mb, host)]);
      if (tx.code === 0 && /^real/m.test(tx.stderr)) {
        const code = await rx;
        if (code !== 0) throw new Error(`the receiver failed (${code}): ${rxErr}`);
        return { seconds: realSeconds(tx.stderr), cpu: cpuSeconds(tx.stderr) + cpuSeconds(rxErr) };
      }
      if (Date.now() > deadline) throw new Error(`transfer to ${host} failed (${tx.code}): ${tx.stderr}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  } finally {
    if (child.exitCode === null && child.signalCode === null && child.pid) {
      try {
        process.kill(-child.pid, 'SIGKILL');
      } catch {
        /* gone already */
      }
    }
  }
}

async function ok(engine: Engine, args: string[]): Promise<string> {
  return engine.dockerOk(args, { timeoutMs: 120_000 });
}

async function waitFor<T>(check: () => Promise<T | undefined>, timeoutMs: number, what: string): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    let last = '';
    const v = await check().catch((err: unknown) => {
      last = err instanceof Error ? err.message : String(err);
      return undefined;
    });
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`${what}: not done within ${timeoutMs / 1000} s${last ? ` (${last.trim()})` : ''}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

async function main(): Promise<number> {
  const values = parseBenchArgs(process.argv.slice(2), { mb: { type: 'string', default: '1024' }, 'encrypted-mb': { type: 'string', default: '128' }, repeat: { type: 'string', default: '7' }, priority: { type: 'string', default: 'normal' } });
  const opts = commonOptions(values);
  const mb = positiveInt(values, 'mb', 1024);
  const repeat = positiveInt(values, 'repeat', 7);
  const encryptedMb = positiveInt(values, 'encrypted-mb', 128);
  if (values.priority !== 'rt' && values.priority !== 'normal') throw new Error(`--priority wants rt or normal, got ${JSON.stringify(values.priority)}`);
  const prio = values.priority === 'rt' ? ['chrt', '-f', '10'] : [];
  const progress = (line: string) => {
    if (!opts.json) console.error(`# ${line}`);
  };
  const cluster = new NetnsCluster(2);
  const engines = [0, 1].map((i) => cluster.engine(i, { verbose: opts.verbose }));
  const [m, w] = engines as [Engine, Engine];
  const { cleanup, release } = cleanupOnce(async () => {
    for (const e of engines) await e.cleanup().catch(() => undefined);
    for (const e of engines) removeOverlayNamespaces(e.execRoot);
    cluster.tearDown();
  }, progress);
  try {
    cluster.setUp();
    progress('starting two daemons');
    await Promise.all(engines.map(async (e) => {
      await e.start();
      await e.loadBusybox();
    }));
    const [n1, n2] = cluster.nodes as [typeof cluster.nodes[0], typeof cluster.nodes[0]];
    await ok(m, ['swarm', 'init', '--advertise-addr', n1.ip, '--dispatcher-heartbeat', '1s']);
    const token = (await ok(m, ['swarm', 'join-token', '-q', 'worker'])).trim();
    await ok(w, ['swarm', 'join', '--token', token, '--advertise-addr', n2.ip, `${n1.ip}:2377`]);
    await ok(m, ['network', 'create', '-d', 'overlay', 'benchov']);
    await ok(m, ['service', 'create', '--detach', '--name', 'rx', '--network', 'benchov', '--constraint', `node.hostname==${n2.name}`, 'busybox', 'sleep', '100000']);
    await ok(m, ['service', 'create', '--detach', '--name', 'tx', '--network', 'benchov', '--constraint', `node.hostname==${n1.name}`, 'busybox', 'sleep', '100000']);
    const running = async (service: string) => {
      const r = await m.request('GET', `/tasks?filters=${encodeURIComponent(JSON.stringify({ service: [service], 'desired-state': ['running'] }))}`);
      return r.json<any[]>().find((t) => t.Status.State === 'running');
    };
    // The same pair on an encrypted overlay.
    await ok(m, ['network', 'create', '-d', 'overlay', '--opt', 'encrypted', 'benchenc']);
    await ok(m, ['service', 'create', '--detach', '--name', 'erx', '--network', 'benchenc', '--constraint', `node.hostname==${n2.name}`, 'busybox', 'sleep', '100000']);
    await ok(m, ['service', 'create', '--detach', '--name', 'etx', '--network', 'benchenc', '--constraint', `node.hostname==${n1.name}`, 'busybox', 'sleep', '100000']);
    const rx = await waitFor(() => running('rx'), 60_000, 'the receiving task');
    const tx = await waitFor(() => running('tx'), 60_000, 'the sending task');
    const rxIp = String(rx.NetworksAttachments[0].Addresses[0]).split('/')[0]!;
    const pidOf = async (e: Engine, container: string) => Number((await ok(e, ['inspect', '-f', '{{.State.Pid}}', container])).trim());
    const inTask = async (e: Engine, container: string) => ['-t', String(await pidOf(e, container)), '-n'];
    const rxNet = await inTask(w, rx.Status.ContainerStatus.ContainerID as string);
    const txNet = await inTask(m, tx.Status.ContainerStatus.ContainerID as string);
    const erx = await waitFor(() => running('erx'), 60_000, 'the receiving task of the encrypted overlay');
    const etx = await waitFor(() => running('etx'), 60_000, 'the sending task of the encrypted overlay');
    const erxIp = String(erx.NetworksAttachments[0].Addresses[0]).split('/')[0]!;

    // The plain bridge pair, on node-1.
    await ok(m, ['network', 'create', 'benchbr']);
    await ok(m, ['run', '-d', '--name', 'brx', '--network', 'benchbr', 'busybox', 'sleep', '100000']);
    await ok(m, ['run', '-d', '--name', 'btx', '--network', 'benchbr', 'busybox', 'sleep', '100000']);
    const brxIp = (await ok(m, ['inspect', '-f', '{{.NetworkSettings.Networks.benchbr.IPAddress}}', 'brx'])).trim();

    // The underlay pair: the two nodes' namespaces themselves.
    type Kind = 'underlay' | 'overlay' | 'bridge' | 'encrypted';
    const kinds: Kind[] = ['underlay', 'overlay', 'bridge', 'encrypted'];
    const size = (kind: Kind) => (kind === 'encrypted' ? encryptedMb : mb);
    const ends: Record<Kind, { from: string[]; to: string[]; host: string }> = {
      underlay: { from: [`--net=/run/netns/${n1.ns}`], to: [`--net=/run/netns/${n2.ns}`], host: n2.ip },
      overlay: { from: txNet, to: rxNet, host: rxIp },
      bridge: { from: await inTask(m, 'btx'), to: await inTask(m, 'brx'), host: brxIp },
      encrypted: { from: await inTask(m, etx.Status.ContainerStatus.ContainerID as string), to: await inTask(w, erx.Status.ContainerStatus.ContainerID as string), host: erxIp },
    };
    const once = (kind: Kind) => transfer(ends[kind].from, ends[kind].to, ends[kind].host, size(kind), prio);
    // A first transfer of each kind warms up (neighbours, conntrack, the page cache of the programs).
    for (const kind of kinds) await waitFor(async () => ((await once(kind)), true), 20_000, `the first ${kind} transfer`);
    const rounds: Array<Record<Kind, { seconds: number; cpu: number }>> = [];
    for (let i = 0; i < repeat; i++) {
      const round = {} as Record<Kind, { seconds: number; cpu: number }>;
      for (const kind of i % 2 === 0 ? kinds : [...kinds].reverse()) round[kind] = await once(kind);
      rounds.push(round);
      if (opts.verbose) console.error(`# round ${i + 1}: ${kinds.map((k) => `${k} ${fmt(size(k) / round[k].seconds)} MB/s, ${fmt(1024 * round[k].cpu / size(k), 2)} CPU s/GB`).join('; ')}`);
    }
    const rate = (kind: Kind) => median(rounds.map((r) => size(kind) / r[kind].seconds));
    const cpuPerGB = (kind: Kind) => median(rounds.map((r) => (1024 * r[kind].cpu) / size(kind)));
    const ratio = (kind: Kind, base: Kind) => median(rounds.map((r) => (size(kind) / r[kind].seconds) / (size(base) / r[base].seconds)));

    // Latency: the mesh at node-1 (no task there) beside the task's own node publishing in host mode.
    await ok(m, ['service', 'create', '--detach', '--name', 'web', '--constraint', `node.hostname==${n2.name}`, '-p', '8080:80', '-p', 'mode=host,target=80,published=8081',
      'busybox', 'sh', '-c', 'mkdir -p /www && echo hi > /www/index.html && exec httpd -f -p 80 -h /www']);
    await waitFor(async () => ((await timedGet(n1.ip, 8080)) >= 0 && (await timedGet(n2.ip, 8081)) >= 0) || undefined, 60_000, 'the web service');
    const requests = 200;
    const latency = { mesh: [] as number[], direct: [] as number[] };
    for (let i = 0; i < requests; i++) {
      latency.direct.push(await timedGet(n2.ip, 8081));
      latency.mesh.push(await timedGet(n1.ip, 8080));
    }
    const result = {
      mb,
      repeat,
      priority: values.priority,
      underlayMBps: rate('underlay'),
      overlayMBps: rate('overlay'),
      bridgeMBps: rate('bridge'),
      overlayToUnderlay: ratio('overlay', 'underlay'),
      overlayToBridge: ratio('overlay', 'bridge'),
      underlayCpuPerGB: cpuPerGB('underlay'),
      overlayCpuPerGB: cpuPerGB('overlay'),
      bridgeCpuPerGB: cpuPerGB('bridge'),
      overlayCpuToUnderlay: median(rounds.map((r) => r.overlay.cpu / r.underlay.cpu)),
      encryptedMb,
      encryptedMBps: rate('encrypted'),
      encryptedToUnderlay: ratio('encrypted', 'underlay'),
      encryptedCpuPerGB: cpuPerGB('encrypted'),
      target: TARGET_OVERLAY_RATIO,
      meshP50Ms: percentile(latency.mesh, 50),
      directP50Ms: percentile(latency.direct, 50),
      meshAddedP50Ms: percentile(latency.mesh, 50) - percentile(latency.direct, 50),
      meshTargetMs: TARGET_MESH_ADDED_MS,
    };
    if (opts.json) console.log(JSON.stringify(result));
    else {
      console.log(`TCP throughput, ${mb} MB per transfer, medians of ${repeat} interleaved rounds (ratios: of each round's pair), ${prio.length ? 'at a real-time priority' : 'at a normal priority'}:`);
      console.log(`  underlay (node namespace to node namespace, MTU 1500)   ${fmt(result.underlayMBps)} MB/s   ${fmt(result.underlayCpuPerGB, 2)} CPU s/GB   (reference)`);
      console.log(`  overlay (task on node-1 to task on node-2, MTU 1450)   ${fmt(result.overlayMBps)} MB/s   ${fmt(result.overlayCpuPerGB, 2)} CPU s/GB   ${fmt(result.overlayToUnderlay, 2)}x the underlay (target >= ${TARGET_OVERLAY_RATIO}x), ${fmt(result.overlayCpuToUnderlay, 2)}x its CPU`);
      console.log(`  bridge (two containers of one node's bridge network)   ${fmt(result.bridgeMBps)} MB/s   ${fmt(result.bridgeCpuPerGB, 2)} CPU s/GB   the overlay is ${fmt(result.overlayToBridge, 2)}x this`);
      console.log(`  encrypted overlay (the same pair, ESP in UDP, MTU 1400, ${encryptedMb} MB)   ${fmt(result.encryptedMBps)} MB/s   ${fmt(result.encryptedCpuPerGB, 2)} CPU s/GB   ${fmt(result.encryptedToUnderlay, 2)}x the underlay`);
      console.log(`HTTP GET on a new connection, p50 of ${requests}:`);
      console.log(`  to the task's node, port published in host mode          ${fmt(result.directP50Ms, 2)} ms   (reference)`);
      console.log(`  through the routing mesh at a node without the task     ${fmt(result.meshP50Ms, 2)} ms   +${fmt(result.meshAddedP50Ms, 2)} ms (target <= ${TARGET_MESH_ADDED_MS} ms)`);
    }
    return opts.check && (result.overlayToUnderlay < TARGET_OVERLAY_RATIO || result.meshAddedP50Ms > TARGET_MESH_ADDED_MS) ? 1 : 0;
  } finally {
    await cleanup();
    release();
  }
}

runMain(main);
