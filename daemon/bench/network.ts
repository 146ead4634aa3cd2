/**
 * The network benchmark, measured side by side in one run on this machine:
 *
 *   (1) `docker run --rm busybox true` on the default bridge against the same with `--network none`, in
 *       interleaved rounds: the p50 the network adds (target: at most 15 ms).
 *   (2) TCP throughput between two containers on a user-defined network, against the same transfer over
 *       the host's loopback (target: at least 0.8x).
 *   (3) the same through a published port (host 127.0.0.1 -> DNAT -> container), against the host's
 *       loopback (target: at least 0.5x).
 *
 * Every transfer, the reference included, is the same busybox program with the same sizes: the sender is
 * `nc HOST PORT -e dd if=/dev/zero bs=1M count=MB` (dd writes 1 MiB at a time into the socket), the
 * receiver `nc -l -p PORT -e dd of=/dev/null bs=1M`. The plain `dd | nc` pipe is not a throughput test:
 * busybox nc moves 1 KiB per read and write, and TCP sends each such write as a packet of its own once the
 * MSS is 1448 (MTU 1500) instead of 65483 (loopback), so it counted packets, not bytes; --small-writes
 * adds that figure for loopback and container to container. Beside the reference, the same transfer over a
 * loopback whose MTU is the containers' 1500 (a private network namespace): what the MTU alone costs.
 *
 * Transfers are timed by the sender (busybox `time -p`; the main process of a container for (2)), so that
 * container start-up is not counted; each kind runs --repeat times, interleaved, and the median counts.
 *
 * The CPU placement differs: the reference's two ends are host processes in two scheduling entities (the
 * receiver runs in a session of its own, hence in its own autogroup), while every container sits in the
 * engine's cgroup (`/berth/<id>`, as Docker's `/docker/<id>`), whose weight is that of one host task or
 * session. On a loaded machine the containers' two ends therefore share the CPU time one host session gets
 * (so do the two ends of the MTU 1500 loopback, both in the benchmark's session). A diagnostic line shows
 * the loopback transfer with both ends in one cgroup beside the containers' (cgroup v1 cpu or v2), and the
 * load averages before and after are printed: a figure is only comparable with one of like load.
 *
 *   node daemon/dist/bench/network.js [-n 20] [--mb 2048] [--repeat 5] [--small-writes] [--json] [--check] [--verbose]
 *
 * It starts a real berthd in a temporary root and removes everything it started when it ends.
 */
import { spawn } from 'node:child_process';
import { randomInt } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Engine } from '../test/harness.js';
import { exec, realSeconds } from './commands.js';
import { COMMON_USAGE, commonOptions, parseBenchArgs, positiveInt, runMain, withEngine, type CommonOptions } from './cli.js';
import { fmt, msSince, summarize, type Summary } from './stats.js';

export const TARGETS = { bridgeOverheadP50Ms: 15, containerToContainer: 0.8, publishedPort: 0.5 };

interface Options extends CommonOptions {
  iterations: number;
  mb: number;
  repeat: number;
  smallWrites: boolean;
}

const USAGE = `usage: node daemon/dist/bench/network.js [options]   (as root)
  -n, --iterations N   start-ups of each kind (20)
      --mb N           megabytes per transfer (2048)
      --repeat N       transfers of each kind; the median counts (5)
      --small-writes   also busybox nc's own 1 KiB writes (dd | nc), loopback and container to container
${COMMON_USAGE}`;

/** The options, or undefined for --help. */
function parseOptions(argv: string[]): Options | undefined {
  const values = parseBenchArgs(argv, {
    iterations: { type: 'string', short: 'n' },
    mb: { type: 'string' },
    repeat: { type: 'string' },
    'small-writes': { type: 'boolean' },
    help: { type: 'boolean', short: 'h' },
  });
  if (values.help) return undefined;
  return {
    iterations: positiveInt(values, 'iterations', 20),
    mb: positiveInt(values, 'mb', 2048),
    repeat: positiveInt(values, 'repeat', 5),
    smallWrites: values['small-writes'] === true,
    ...commonOptions(values),
  };
}

/** A sender of `mb` MB of zeros to host:port, timed by busybox: dd writing 1 MiB at a time into the socket (nc -e). */
function sender(mb: number, host: string, port: number): string[] {
  return ['busybox', 'time', '-p', 'busybox', 'nc', host, String(port), '-e', 'busybox', 'dd', 'if=/dev/zero', 'bs=1M', `count=${mb}`];
}

/** The same bytes through busybox nc's own 1 KiB reads and writes. */
function smallWriteSender(mb: number, host: string, port: number): string[] {
  return ['busybox', 'time', '-p', 'sh', '-c', `dd if=/dev/zero bs=1M count=${mb} 2>/dev/null | busybox nc ${host} ${port}`];
}

/** A receiver of one connection. */
function receiverOnce(port: number): string {
  return `busybox nc -l -p ${port} -e busybox dd of=/dev/null bs=1M 2>/dev/null`;
}

/** A receiver that takes one connection after another and drops the bytes, read up to 1 MiB at a time by dd. */
function receiverScript(port: number): string {
  return `while true; do ${receiverOnce(port)}; done`;
}

/** A receiver for the small-write senders: busybox nc itself reads (stdin held open through a fifo, or nc would stop at its EOF). */
function smallWriteReceiverScript(port: number, fifo: string): string {
  return `rm -f ${fifo}; mkfifo ${fifo}; exec 3<>${fifo}; while true; do busybox nc -l -p ${port} <&3 >/dev/null; done`;
}

/**
 * The cgroup folder of the cpu controller that holds `pid`, or undefined when it cannot be found (cgroup v1
 * `cpu` or `cpu,cpuacct` mounted under /sys/fs/cgroup, or the v2 hierarchy at /sys/fs/cgroup).
 */
function cpuCgroupOf(pid: number | string): string | undefined {
  let lines: string[];
  try {
    lines = readFileSync(`/proc/${pid}/cgroup`, 'utf8').trim().split('\n');
  } catch {
    return undefined;
  }
  for (const line of lines) {
    const [, controllers, rel] = /^\d+:([^:]*):(.*)$/.exec(line) ?? [];
    if (controllers === undefined || !controllers.split(',').includes('cpu')) continue;
    for (const mount of [controllers, 'cpu', 'cpu,cpuacct']) {
      const dir = path.join('/sys/fs/cgroup', mount, rel);
      if (existsSync(path.join(dir, 'cgroup.procs'))) return dir;
    }
  }
  const unified = lines.find((l) => l.startsWith('0::'));
  if (unified && existsSync('/sys/fs/cgroup/cgroup.controllers')) {
    const dir = path.join('/sys/fs/cgroup', unified.slice(3));
    if (existsSync(path.join(dir, 'cpu.weight'))) return dir;
  }
  return undefined;
}

/** The 1-, 5- and 15-minute load averages. */
function loadAverage(): string {
  return os.loadavg().map((l) => l.toFixed(2)).join(' ');
}

async function main(): Promise<number> {
  const opts = parseOptions(process.argv.slice(2));
  if (!opts) {
    process.stdout.write(USAGE);
    return 0;
  }
  const engine = new Engine({ verbose: opts.verbose });
  const tmp = mkdtempSync(path.join(os.tmpdir(), 'berth-netbench-'));
  const hostReceivers: number[] = [];
  let sharedCgroup: string | undefined;
  const cleanup = async () => {
    for (const pid of hostReceivers) {
      try {
        process.kill(-pid, 'SIGKILL');
      } catch {
        // gone already
      }
    }
    if (sharedCgroup) {
      // Only this benchmark's transfers ever ran there: a receiver left by a failed one is stopped.
      try {
        for (const pid of readFileSync(path.join(sharedCgroup, 'cgroup.procs'), 'utf8').split('\n').filter(Boolean)) process.kill(Number(pid), 'SIGKILL');
      } catch {
        // gone already
      }
      for (let i = 0; i < 50; i++) {
        try {
          rmdirSync(sharedCgroup);
          break;
        } catch (err) {
          if ((err as NodeJS.ErrnoException).code === 'ENOENT') break;
          await new Promise((r) => setTimeout(r, 100));
        }
      }
    }
    await engine.cleanup();
    rmSync(tmp, { recursive: true, force: true });
  };
  return withEngine(engine, async () => {
    const loadBefore = loadAverage();
    await engine.loadBusybox();
    const docker = (args: string[]) => engine.dockerOk(args, { timeoutMs: 600_000 });

    // (1) start-up with and without the network
    const bridge: number[] = [];
    const none: number[] = [];
    const once = async (args: string[]) => {
      const t = process.hrtime.bigint();
      await docker(['run', '--rm', ...args, 'busybox', 'true']);
      return msSince(t);
    };
    for (let i = 0; i < 3; i++) {
      await once([]);
      await once(['--network', 'none']);
    }
    for (let i = 0; i < opts.iterations; i++) {
      // Alternating order, so that neither kind always runs after the other.
      if (i % 2 === 0) {
        bridge.push(await once([]));
        none.push(await once(['--network', 'none']));
      } else {
        none.push(await once(['--network', 'none']));
        bridge.push(await once([]));
      }
    }
    const bridgeSummary = summarize(bridge);
    const noneSummary = summarize(none);
    const overhead = bridgeSummary.p50 - noneSummary.p50;

    // (2) and (3): throughput
    const port = 5001;
    const smallPort = 5002;
    const hostPort = randomInt(20000, 30000);
    const refPort = hostPort + 1;
    const smallRefPort = hostPort + 2;
    await docker(['network', 'create', 'benchnet']);
    // The same with a jumbo MTU: the per-packet cost of a 1500-byte MTU (the default, Docker's too) set apart.
    await docker(['network', 'create', '-o', 'com.docker.network.driver.mtu=65520', 'jumbonet']);
    await docker(['run', '-d', '--name', 'jumbo-server', '--network', 'jumbonet', 'busybox', 'sh', '-c', receiverScript(port)]);
    const serverScript = opts.smallWrites ? `(${smallWriteReceiverScript(smallPort, '/tmp/hold')}) & ${receiverScript(port)}` : receiverScript(port);
    await docker(['run', '-d', '--name', 'bench-server', '--network', 'benchnet', '-p', `127.0.0.1:${hostPort}:${port}`, 'busybox', 'sh', '-c', serverScript]);
    // The same transfer from the client container's network namespace by a process of the host's cgroup:
    // the network path alone, without the containers' share of the CPU (all containers sit in one cgroup).
    await docker(['run', '-d', '--name', 'bench-client', '--network', 'benchnet', 'busybox', 'sleep', '100000']);
    const clientPid = (await docker(['inspect', '-f', '{{.State.Pid}}', 'bench-client'])).trim();
    const serverIp = (await docker(['inspect', '-f', '{{.NetworkSettings.Networks.benchnet.IPAddress}}', 'bench-server'])).trim();
    // A cgroup beside the containers' (a sibling of bench-server's) for the loopback transfer with both ends in it.
    const serverCgroup = cpuCgroupOf((await docker(['inspect', '-f', '{{.State.Pid}}', 'bench-server'])).trim());
    if (serverCgroup) {
      const dir = path.join(path.dirname(serverCgroup), `netbench-${process.pid}`);
      try {
        mkdirSync(dir);
        sharedCgroup = dir;
      } catch {
        // no such diagnostic then
      }
    }
    const sharedPort = hostPort + 3;
    const hostReceiver = spawn('busybox', ['sh', '-c', receiverScript(refPort)], { stdio: 'ignore', detached: true });
    hostReceivers.push(hostReceiver.pid!);
    if (opts.smallWrites) {
      const small = spawn('busybox', ['sh', '-c', smallWriteReceiverScript(smallRefPort, path.join(tmp, 'hold'))], { stdio: 'ignore', detached: true });
      hostReceivers.push(small.pid!);
    }
    await new Promise((r) => setTimeout(r, 500));

    const seconds = {
      loopback: [] as number[],
      containers: [] as number[],
      networkPath: [] as number[],
      loopback1500: [] as number[],
      loopbackShared: [] as number[],
      jumbo: [] as number[],
      published: [] as number[],
      smallLoopback: [] as number[],
      smallContainers: [] as number[],
    };
    type Kind = keyof typeof seconds;
    // busybox nc's 1 KiB writes move some 50 MB/s here: a smaller transfer keeps the run short.
    const smallMb = Math.max(1, Math.min(opts.mb, 256));
    const dockerEnv = { DOCKER_HOST: engine.host, DOCKER_CONFIG: engine.dockerConfig };
    const command = (kind: Kind): [string, string[], Record<string, string>?] => {
      switch (kind) {
        case 'loopback':
          return ['busybox', sender(opts.mb, '127.0.0.1', refPort).slice(1)];
        case 'published':
          return ['busybox', sender(opts.mb, '127.0.0.1', hostPort).slice(1)];
        case 'loopbackShared':
          // The reference's transfer, its two ends in one cgroup beside the containers': their CPU placement.
          return ['busybox', ['sh', '-c', `echo $$ > ${sharedCgroup}/cgroup.procs && { ${receiverOnce(sharedPort)} & } && sleep 0.3 && exec ${sender(opts.mb, '127.0.0.1', sharedPort).join(' ')}`]];
        case 'loopback1500':
          // A private network namespace whose loopback has the containers' MTU: no veth, no bridge, no rules.
          return ['unshare', ['-n', 'busybox', 'sh', '-c', `ip link set lo mtu 1500 up && { ${receiverOnce(refPort)} & } && sleep 0.3 && exec ${sender(opts.mb, '127.0.0.1', refPort).join(' ')}`]];
        case 'networkPath':
          return ['nsenter', ['-t', clientPid, '-n', ...sender(opts.mb, serverIp, port)]];
        case 'containers':
          return ['docker', ['run', '--rm', '--network', 'benchnet', ...sender(opts.mb, 'bench-server', port)], dockerEnv];
        case 'jumbo':
          return ['docker', ['run', '--rm', '--network', 'jumbonet', ...sender(opts.mb, 'jumbo-server', port)], dockerEnv];
        case 'smallLoopback':
          return ['busybox', smallWriteSender(smallMb, '127.0.0.1', smallRefPort).slice(1)];
        case 'smallContainers':
          return ['docker', ['run', '--rm', '--network', 'benchnet', ...smallWriteSender(smallMb, 'bench-server', smallPort)], dockerEnv];
      }
    };
    const transferOnce = async (kind: Kind) => {
      const [cmd, args, env] = command(kind);
      const r = await exec(cmd, args, env);
      if (r.code !== 0) throw new Error(`${kind} transfer failed (${r.code}): ${r.stderr}`);
      seconds[kind].push(realSeconds(r.stderr));
    };
    const transfer = async (kind: Kind): Promise<void> => {
      for (let attempt = 0; ; attempt++) {
        try {
          return await transferOnce(kind);
        } catch (err) {
          // The receiver listens again a moment after each connection ends.
          if (attempt >= 20 || !/Connection refused|can't connect/.test(String(err))) throw err;
          await new Promise((r) => setTimeout(r, 100));
        }
      }
    };
    const kinds: Kind[] = [
      'loopback',
      ...(sharedCgroup ? (['loopbackShared'] as const) : []),
      'loopback1500',
      'containers',
      'networkPath',
      'jumbo',
      'published',
      ...(opts.smallWrites ? (['smallLoopback', 'smallContainers'] as const) : []),
    ];
    for (let i = 0; i < opts.repeat; i++) {
      // Alternating order, so that neither kind always runs after the other.
      for (const kind of i % 2 === 0 ? kinds : [...kinds].reverse()) await transfer(kind);
    }
    const median = (xs: number[]) => summarize(xs).p50;
    const rate = (s: number, mb = opts.mb) => mb / s;
    const loopback = rate(median(seconds.loopback));
    const containers = rate(median(seconds.containers));
    const published = rate(median(seconds.published));
    const networkPath = rate(median(seconds.networkPath));
    const loopback1500 = rate(median(seconds.loopback1500));
    const loopbackShared = sharedCgroup ? rate(median(seconds.loopbackShared)) : undefined;
    const loadAfter = loadAverage();
    const jumbo = rate(median(seconds.jumbo));
    const small = opts.smallWrites ? { loopback: rate(median(seconds.smallLoopback), smallMb), containers: rate(median(seconds.smallContainers), smallMb) } : undefined;
    const results = {
      startup: { bridge: bridgeSummary, none: noneSummary, overheadP50Ms: overhead, target: TARGETS.bridgeOverheadP50Ms },
      method: 'busybox nc -e dd, 1 MiB writes and reads',
      loadAverage: { before: loadBefore, after: loadAfter },
      throughputMBps: { loopback, loopbackShared, loopback1500, containers, networkPath, jumbo, published },
      ratios: {
        loopbackShared: loopbackShared === undefined ? undefined : loopbackShared / loopback,
        loopback1500: loopback1500 / loopback,
        containers: containers / loopback,
        networkPath: networkPath / loopback,
        jumbo: jumbo / loopback,
        published: published / loopback,
        containersToShared: loopbackShared === undefined ? undefined : containers / loopbackShared,
      },
      ...(small ? { smallWrites: { mb: smallMb, throughputMBps: small, ratio: small.containers / small.loopback } } : {}),
      targets: TARGETS,
      seconds,
    };
    const misses: string[] = [];
    if (overhead > TARGETS.bridgeOverheadP50Ms) misses.push('bridge start-up overhead');
    if (results.ratios.containers < TARGETS.containerToContainer) misses.push('container to container throughput');
    if (results.ratios.published < TARGETS.publishedPort) misses.push('published port throughput');
    if (opts.json) console.log(JSON.stringify(results, null, 2));
    else {
      const line = (name: string, s: Summary) => `  ${name.padEnd(34)} p50 ${fmt(s.p50)} ms  p90 ${fmt(s.p90)} ms  (n=${s.n})`;
      console.log('docker run --rm busybox true');
      console.log(line('default bridge', bridgeSummary));
      console.log(line('--network none', noneSummary));
      console.log(`  network adds at p50                 ${fmt(overhead)} ms   (target <= ${TARGETS.bridgeOverheadP50Ms} ms)`);
      console.log(`TCP throughput, ${opts.mb} MB by busybox nc -e dd (1 MiB writes and reads), median of ${opts.repeat}`);
      console.log(`  host loopback (reference)          ${fmt(loopback)} MB/s`);
      if (loopbackShared !== undefined) {
        console.log(`  host loopback, ends in one cgroup  ${fmt(loopbackShared)} MB/s   ratio ${fmt(loopbackShared / loopback, 2)}   (beside the containers': their CPU share)`);
      }
      console.log(`  host loopback at MTU 1500          ${fmt(loopback1500)} MB/s   ratio ${fmt(results.ratios.loopback1500, 2)}   (the cost of the MTU alone)`);
      console.log(`  container -> container (user net)  ${fmt(containers)} MB/s   ratio ${fmt(results.ratios.containers, 2)}   (target >= ${TARGETS.containerToContainer})`);
      console.log(`  same path, sender in host cgroup   ${fmt(networkPath)} MB/s   ratio ${fmt(results.ratios.networkPath, 2)}   (the network alone)`);
      console.log(`  container -> container, MTU 65520  ${fmt(jumbo)} MB/s   ratio ${fmt(results.ratios.jumbo, 2)}   (com.docker.network.driver.mtu)`);
      console.log(`  host -> published port             ${fmt(published)} MB/s   ratio ${fmt(results.ratios.published, 2)}   (target >= ${TARGETS.publishedPort})`);
      if (loopbackShared !== undefined) {
        console.log(`  container -> container / loopback with ends in one cgroup   ratio ${fmt(containers / loopbackShared, 2)}   (no target)`);
      }
      console.log(`load average ${loadBefore} before, ${loadAfter} after`);
      if (small) {
        console.log(`TCP throughput, ${smallMb} MB by dd | busybox nc (1 KiB writes: a packet each at MTU 1500), median of ${opts.repeat}`);
        console.log(`  host loopback                      ${fmt(small.loopback)} MB/s`);
        console.log(`  container -> container (user net)  ${fmt(small.containers)} MB/s   ratio ${fmt(small.containers / small.loopback, 2)}   (no target)`);
      }
      console.log(misses.length === 0 ? 'all targets met' : `missed: ${misses.join(', ')}`);
    }
    return opts.check && misses.length > 0 ? 1 : 0;
  }, cleanup);
}

runMain(main, 1);
