/**
 * The sandbox benchmark: what a network policy of 1,000 rules costs a container, measured side by side in
 * one run against the same container without a policy, in interleaved rounds:
 *
 *   (1) connection setup: K TCP connections one after the other to a server container, each timed from
 *       connect() to the established socket by a small Node client run in the container's network namespace
 *       (nsenter: no process start counted); the p50, and what the policy adds to it (target: under 0.2 ms);
 *   (2) TCP throughput to a server container: `nc -e dd` writing 1 MiB at a time, as in network.ts (target:
 *       under 5% lost).
 *
 * A diagnostic third container without a policy whose veth also left the bridge's direct delivery, as a
 * sandbox's does (frames through the bridge and the netfilter path the kernel runs for bridged frames): the
 * sandboxed figures beside it are the policy's own cost, apart from that path.
 *
 * The policy denies by default and holds 300 CIDR denials, 300 domain rules, 399 CIDR allowances with ports
 * and, last, the allowance of the server's network: every packet of the sandbox goes through all of it.
 *
 *   node daemon/dist/bench/sandbox.js [--mb 2048] [--connections 1000] [--repeat 5] [--json] [--check] [--verbose]
 *
 * It starts a real berthd in a temporary root and removes everything it started when it ends.
 */
import { spawn } from 'node:child_process';
import { Engine } from '../test/harness.js';
import { compilePolicy, validatePolicy } from '../src/engine/sandbox/policy.js';
import { exec, realSeconds } from './commands.js';
import { COMMON_USAGE, commonOptions, parseBenchArgs, positiveInt, runMain, withEngine, type CommonOptions } from './cli.js';
import { fmt, summarize } from './stats.js';

export const TARGETS = { throughputLoss: 0.05, addedPerConnectionMs: 0.2 };

interface Options extends CommonOptions {
  mb: number;
  connections: number;
  repeat: number;
}

/** The connection server: accepts and closes at once, without a process per connection (a large backlog). */
const CONNECT_SERVER = `require('node:net').createServer((socket) => socket.destroy()).listen({ port: 5002, backlog: 4096 });`;

/** The connection client: connects `n` times in turn and prints each setup time in ms (JSON). */
const CONNECT_CLIENT = `
const net = require('node:net');
const [host, port, n] = process.argv.slice(1);
(async () => {
  const times = [];
  for (let i = 0; i < Number(n); i++) {
    const start = process.hrtime.bigint();
    await new Promise((resolve, reject) => {
      const socket = net.connect(Number(port), host, () => {
        times.push(Number(process.hrtime.bigint() - start) / 1e6);
        socket.destroy();
        resolve();
      });
      socket.on('error', reject);
    });
  }
  process.stdout.write(JSON.stringify(times));
})().catch((err) => { console.error(err.message); process.exit(1); });
`;

const USAGE = `usage: node daemon/dist/bench/sandbox.js [options]   (as root)
      --mb N           megabytes per transfer (2048)
      --connections N  connections per round of the setup loop (1000)
      --repeat N       rounds of each kind; the median counts (5)
${COMMON_USAGE}`;

function parseOptions(argv: string[]): Options | undefined {
  const values = parseBenchArgs(argv, {
    mb: { type: 'string' },
    connections: { type: 'string' },
    repeat: { type: 'string' },
    help: { type: 'boolean', short: 'h' },
  });
  if (values.help) return undefined;
  return {
    mb: positiveInt(values, 'mb', 2048),
    connections: positiveInt(values, 'connections', 1000),
    repeat: positiveInt(values, 'repeat', 5),
    ...commonOptions(values),
  };
}

/** The benchmark's policy: 1,000 rules, the one that lets the server's network through last. */
export function benchPolicy(serverSubnet: string): unknown {
  const rules: unknown[] = [];
  for (let i = 0; i < 300; i++) rules.push({ action: 'deny', cidr: `198.18.${i >> 4}.${(i & 15) * 16}/28` });
  for (let i = 0; i < 300; i++) rules.push({ action: 'allow', domain: `svc${i}.bench.test`, protocol: 'tcp', ports: [443] });
  for (let i = 0; i < 399; i++) rules.push({ action: 'allow', cidr: `198.19.${i >> 2}.${(i & 3) * 64}/26`, protocol: 'tcp', ports: ['8000-8100'] });
  rules.push({ action: 'allow', cidr: serverSubnet });
  return { defaultAction: 'deny', rules };
}

async function main(): Promise<number> {
  const opts = parseOptions(process.argv.slice(2));
  if (!opts) {
    process.stdout.write(USAGE);
    return 0;
  }
  const engine = new Engine({ verbose: opts.verbose });
  // The sandbox's table goes with the container: removed through the engine before the engine's own clean-up.
  let connectServerPid: number | undefined;
  const cleanup = async () => {
    if (connectServerPid) {
      try {
        process.kill(connectServerPid, 'SIGKILL');
      } catch {
        // gone already
      }
    }
    await engine.docker(['rm', '-f', 'sandboxed']).catch(() => undefined);
    await engine.cleanup();
  };
  return withEngine(engine, async () => {
    await engine.loadBusybox();
    const docker = (args: string[]) => engine.dockerOk(args, { timeoutMs: 600_000 });
    const env = { DOCKER_HOST: engine.host, DOCKER_CONFIG: engine.dockerConfig };
    await docker(['network', 'create', 'sbxbench']);
    const subnet = (await docker(['network', 'inspect', '-f', '{{(index .IPAM.Config 0).Subnet}}', 'sbxbench'])).trim();
    const policy = benchPolicy(subnet);
    const program = compilePolicy(validatePolicy(policy));
    await docker(['run', '-d', '--name', 'sbx-server', '--network', 'sbxbench', 'busybox', 'sh', '-c',
      'while true; do busybox nc -l -p 5001 -e busybox dd of=/dev/null bs=1M 2>/dev/null; done']);
    const server = (await docker(['inspect', '-f', '{{.NetworkSettings.Networks.sbxbench.IPAddress}}', 'sbx-server'])).trim();
    const serverPid = (await docker(['inspect', '-f', '{{.State.Pid}}', 'sbx-server'])).trim();
    const connectServer = spawn('nsenter', ['-t', serverPid, '-n', process.execPath, '-e', CONNECT_SERVER], { stdio: 'ignore' });
    connectServerPid = connectServer.pid;
    await docker(['run', '-d', '--name', 'plain', '--network', 'sbxbench', 'busybox', 'sleep', '100000']);
    await docker(['run', '-d', '--name', 'bridged', '--network', 'sbxbench', 'busybox', 'sleep', '100000']);
    await docker(['run', '-d', '--name', 'sandboxed', '--network', 'sbxbench', '--label', `berth.network-policy=${JSON.stringify(policy)}`, 'busybox', 'sleep', '100000']);
    await new Promise((r) => setTimeout(r, 500));

    const inContainer = async (name: string, script: string): Promise<number> => {
      for (let attempt = 0; ; attempt++) {
        const r = await exec('docker', ['exec', name, 'sh', '-c', script], env);
        if (r.code === 0) return realSeconds(r.stderr);
        // The receiver listens again a moment after each connection ends.
        if (attempt >= 20 || !/refused|can't connect/.test(r.stderr)) throw new Error(`${name}: ${script} failed (${r.code}): ${r.stderr}`);
        await new Promise((res) => setTimeout(res, 100));
      }
    };
    const pids = {
      plain: (await docker(['inspect', '-f', '{{.State.Pid}}', 'plain'])).trim(),
      sandboxed: (await docker(['inspect', '-f', '{{.State.Pid}}', 'sandboxed'])).trim(),
      bridged: (await docker(['inspect', '-f', '{{.State.Pid}}', 'bridged'])).trim(),
    };
    // The bridged container's veth leaves the direct delivery block, as a sandbox's does.
    const index = (await exec('nsenter', ['-t', pids.bridged, '-n', 'cat', '/sys/class/net/eth0/iflink'], {})).stdout.trim();
    const veth = (await exec('sh', ['-c', `grep -lx ${Number(index)} /sys/class/net/*/ifindex`], {})).stdout.trim().split('/')[4];
    if (!veth) throw new Error('the bridged container\'s veth was not found');
    await exec('tc', ['qdisc', 'del', 'dev', veth, 'clsact'], {});
    type Kind = keyof typeof pids;
    const connections = async (name: Kind, n: number): Promise<number[]> => {
      const r = await exec('nsenter', ['-t', pids[name], '-n', process.execPath, '-e', CONNECT_CLIENT, server, '5002', String(n)], {});
      if (r.code !== 0) throw new Error(`${name}: connections failed (${r.code}): ${r.stderr}`);
      return JSON.parse(r.stdout) as number[];
    };
    const transfer = `busybox time -p busybox nc ${server} 5001 -e busybox dd if=/dev/zero bs=1M count=${opts.mb}`;
    // Warm-up: both clients once, and a check that the policy lets the server through.
    for (const name of ['plain', 'sandboxed', 'bridged'] as const) await connections(name, 20);
    const perConnectionMs = { plain: [] as number[], sandboxed: [] as number[], bridged: [] as number[] };
    const mibPerSecond = { plain: [] as number[], sandboxed: [] as number[], bridged: [] as number[] };
    for (let round = 0; round < opts.repeat; round++) {
      const kinds: Kind[] = ['plain', 'sandboxed', 'bridged'];
      const order = round % 2 === 0 ? kinds : [...kinds].reverse();
      for (const name of order) perConnectionMs[name].push(...(await connections(name, opts.connections)));
      for (const name of order) mibPerSecond[name].push(opts.mb / (await inContainer(name, transfer)));
    }
    const p50 = (xs: number[]) => summarize(xs).p50;
    const report = {
      rules: (policy as { rules: unknown[] }).rules.length,
      kernelRules: program.chain.length,
      connection: { plainMs: p50(perConnectionMs.plain), sandboxedMs: p50(perConnectionMs.sandboxed), addedMs: p50(perConnectionMs.sandboxed) - p50(perConnectionMs.plain) },
      throughput: { plainMiBs: p50(mibPerSecond.plain), sandboxedMiBs: p50(mibPerSecond.sandboxed), ratio: p50(mibPerSecond.sandboxed) / p50(mibPerSecond.plain) },
      bridged: { connectionMs: p50(perConnectionMs.bridged), throughputMiBs: p50(mibPerSecond.bridged) },
      targets: TARGETS,
    };
    const missed: string[] = [];
    if (report.connection.addedMs >= TARGETS.addedPerConnectionMs) missed.push('connection setup');
    if (1 - report.throughput.ratio >= TARGETS.throughputLoss) missed.push('throughput');
    if (opts.json) process.stdout.write(JSON.stringify(report, null, 2) + '\n');
    else {
      process.stdout.write(
        [
          `policy: ${report.rules} rules, ${report.kernelRules} rules in the kernel's chain`,
          `connection setup (p50 of ${opts.repeat} rounds of ${opts.connections}): plain ${fmt(report.connection.plainMs, 3)} ms, sandboxed ${fmt(report.connection.sandboxedMs, 3)} ms, added ${fmt(report.connection.addedMs, 3)} ms (target < ${TARGETS.addedPerConnectionMs} ms), ratio ${fmt(report.connection.sandboxedMs / report.connection.plainMs, 3)}`,
          `TCP throughput (p50 of ${opts.repeat} transfers of ${opts.mb} MiB): plain ${fmt(report.throughput.plainMiBs)} MiB/s, sandboxed ${fmt(report.throughput.sandboxedMiBs)} MiB/s, ratio ${fmt(report.throughput.ratio, 3)} (target > ${fmt(1 - TARGETS.throughputLoss, 2)})`,
          `diagnostic, no policy but through the bridge as a sandbox: connection ${fmt(report.bridged.connectionMs, 3)} ms (sandboxed adds ${fmt(report.connection.sandboxedMs - report.bridged.connectionMs, 3)} ms to it), throughput ${fmt(report.bridged.throughputMiBs)} MiB/s (sandboxed ratio to it ${fmt(report.throughput.sandboxedMiBs / report.bridged.throughputMiBs, 3)})`,
          missed.length > 0 ? `missed: ${missed.join(', ')}` : 'targets met',
          '',
        ].join('\n'),
      );
    }
    return opts.check && missed.length > 0 ? 1 : 0;
  }, cleanup);
}

runMain(main, 1);
