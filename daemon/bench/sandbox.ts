/**
 * The sandbox benchmark: what a network policy of 1,000 rules costs a container, measured in one run in
 * interleaved rounds (the order alternates each round) beside a container without a policy:
 *
 *   (1) connection setup: K TCP connections one after the other to a server container, each timed from
 *       connect() to the established socket by a small Node client run in the container's network namespace
 *       (nsenter: no process start counted); per round the p50 of each container, and what the policy adds;
 *   (2) TCP throughput to a server container: busybox `nc` feeding `dd` with 1 MiB blocks, as in network.ts,
 *       run in the container's network namespace; per round the ratio of the two.
 *
 * The figures are the medians over the rounds of those per-round pairs (targets: under 0.2 ms added per
 * connection, under 5% of the throughput lost), so that a burst of load from elsewhere on the machine moves
 * one pair, not the result. The sandbox is measured with the server allowed last by CIDR, and by its name
 * through a domain rule (whose flows go through the flow set on every packet): the bench puts each variant's
 * table in the kernel in turn, with the direct peers the engine gave it. Its frames to a container of its
 * bridge are handed to that container's veth after the policy, as a plain container's are by the bridge's
 * tc block; a diagnostic state takes its table out, so that its frames go through the bridge and the
 * netfilter path the kernel runs for bridged frames (what a sandbox's frames cost before the direct peers).
 *
 * The policy denies by default and holds 300 CIDR denials, 300 domain rules, 399 CIDR allowances with ports
 * and, last, the allowance of the server's network: every packet of the sandbox goes through all of it.
 *
 *   node daemon/dist/bench/sandbox.js [--mb 512] [--connections 300] [--repeat 21] [--json] [--check] [--verbose]
 *
 * It starts a real berthd in a temporary root and removes everything it started when it ends.
 */
import { spawn } from 'node:child_process';
import { Engine } from '../test/harness.js';
import { compilePolicy, validatePolicy } from '../src/engine/sandbox/policy.js';
import { LinuxSandboxHost } from '../src/host/linux/network/sandbox.js';
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
      --mb N           megabytes per transfer (512)
      --connections N  connections per round of the setup loop (300)
      --repeat N       interleaved rounds; the median of their pairs counts (21)
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
    mb: positiveInt(values, 'mb', 512),
    connections: positiveInt(values, 'connections', 300),
    repeat: positiveInt(values, 'repeat', 21),
    ...commonOptions(values),
  };
}

/**
 * The benchmark's policy: 1,000 rules, the one that lets the server through last: its network by CIDR, or
 * (`serverName`) its name by a domain rule, whose flows then go through the flow set on every packet.
 */
export function benchPolicy(serverSubnet: string, serverName?: string): unknown {
  const rules: unknown[] = [];
  for (let i = 0; i < 300; i++) rules.push({ action: 'deny', cidr: `198.18.${i >> 4}.${(i & 15) * 16}/28` });
  for (let i = 0; i < 300; i++) rules.push({ action: 'allow', domain: `svc${i}.bench.test`, protocol: 'tcp', ports: [443] });
  for (let i = 0; i < 399; i++) rules.push({ action: 'allow', cidr: `198.19.${i >> 2}.${(i & 3) * 64}/26`, protocol: 'tcp', ports: ['8000-8100'] });
  rules.push(serverName ? { action: 'allow', domain: serverName, protocol: 'tcp' } : { action: 'allow', cidr: serverSubnet });
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
    await docker(['network', 'create', 'sbxbench']);
    const subnet = (await docker(['network', 'inspect', '-f', '{{(index .IPAM.Config 0).Subnet}}', 'sbxbench'])).trim();
    // The sandbox's label holds the domain variant (the engine fills its sets from the embedded DNS server's
    // answers); the CIDR variant is put in the kernel in its place for its rounds.
    const policy = benchPolicy(subnet, 'sbx-server');
    const programs = { domain: compilePolicy(validatePolicy(policy)), cidr: compilePolicy(validatePolicy(benchPolicy(subnet))) };
    await docker(['run', '-d', '--name', 'sbx-server', '--network', 'sbxbench', 'busybox', 'sh', '-c',
      'while true; do busybox nc -l -p 5001 -e busybox dd of=/dev/null bs=1M 2>/dev/null; done']);
    const server = (await docker(['inspect', '-f', '{{.NetworkSettings.Networks.sbxbench.IPAddress}}', 'sbx-server'])).trim();
    const serverPid = (await docker(['inspect', '-f', '{{.State.Pid}}', 'sbx-server'])).trim();
    const connectServer = spawn('nsenter', ['-t', serverPid, '-n', process.execPath, '-e', CONNECT_SERVER], { stdio: 'ignore' });
    connectServerPid = connectServer.pid;
    await docker(['run', '-d', '--name', 'plain', '--network', 'sbxbench', 'busybox', 'sleep', '100000']);
    const sandboxId = (await docker(['run', '-d', '--name', 'sandboxed', '--network', 'sbxbench', '--label', `berth.network-policy=${JSON.stringify(policy)}`, 'busybox', 'sleep', '100000'])).trim();
    const pids = {
      plain: (await docker(['inspect', '-f', '{{.State.Pid}}', 'plain'])).trim(),
      sandboxed: (await docker(['inspect', '-f', '{{.State.Pid}}', 'sandboxed'])).trim(),
    };
    // The host end of the sandbox's eth0: the table goes on and off its ingress between states.
    // (`ip` in the container's namespace: /sys would still show the host's, as nsenter -n does not mount one.)
    const link = (await exec('nsenter', ['-t', pids.sandboxed, '-n', 'ip', '-o', 'link', 'show', 'eth0'], {})).stdout;
    const index = /@if(\d+)/.exec(link)?.[1];
    const veth = index && new RegExp(`^${index}: ([^@:]+)`, 'm').exec((await exec('ip', ['-o', 'link', 'show'], {})).stdout)?.[1];
    if (!veth) throw new Error(`the sandbox's veth was not found (${link.trim()})`);
    const kernel = new LinuxSandboxHost();
    const table = `berth_sbx_${sandboxId.slice(0, 12)}`;
    const tableIn = async () => (await exec('nft', ['list', 'table', 'netdev', table], {})).code === 0;
    if (!(await tableIn())) throw new Error(`the sandbox's table ${table} is not in the kernel`);
    // The containers of its bridge the engine hands the sandbox's frames to directly: put back with each table.
    const listed = JSON.parse((await exec('nft', ['-j', 'list', 'map', 'netdev', table, 'peers'], {})).stdout || '{}') as { nftables?: Array<{ map?: { elem?: unknown[] } }> };
    const peers = (listed.nftables ?? []).flatMap((x) => x.map?.elem ?? []).map((e) => {
      const [mac, hostInterface] = e as [string, string];
      return { mac, hostInterface };
    });
    if (!peers.some((p) => typeof p.hostInterface === 'string')) throw new Error(`the engine gave the sandbox no direct peers: ${JSON.stringify(listed)}`);

    type State = 'cidr' | 'domain' | 'none' | 'plain';
    const setState = async (state: State) => {
      if (state === 'plain') return;
      if (state === 'none') await kernel.removePolicy(sandboxId);
      else {
        await kernel.applyPolicy(sandboxId, [veth], programs[state]);
        await kernel.setDirectPeers(sandboxId, peers);
      }
      if ((await tableIn()) !== (state !== 'none')) throw new Error(`the sandbox's table is ${state !== 'none' ? 'missing' : 'still there'}`);
      if (state !== 'domain') return;
      // The server's name asked of the embedded DNS server: the engine adds its address to the rule's set.
      const r = await exec('nsenter', ['-t', pids.sandboxed, '-n', 'busybox', 'nslookup', 'sbx-server', '127.0.0.11'], {});
      if (r.code !== 0) throw new Error(`the sandbox cannot resolve the server: ${r.stdout} ${r.stderr}`);
      if (!(await exec('nft', ['list', 'table', 'netdev', table], {})).stdout.includes(server)) throw new Error('the server\'s address is not in the domain rule\'s set');
    };
    const pidOf = (state: State) => (state === 'plain' ? pids.plain : pids.sandboxed);
    const connections = async (state: State, n: number): Promise<number[]> => {
      const r = await exec('nsenter', ['-t', pidOf(state), '-n', process.execPath, '-e', CONNECT_CLIENT, server, '5002', String(n)], {});
      if (r.code !== 0) throw new Error(`${state}: connections failed (${r.code}): ${r.stderr}`);
      return JSON.parse(r.stdout) as number[];
    };
    const transfer = async (state: State): Promise<number> => {
      const args = ['-t', pidOf(state), '-n', 'busybox', 'time', '-p', 'busybox', 'nc', server, '5001', '-e', 'busybox', 'dd', 'if=/dev/zero', 'bs=1M', `count=${opts.mb}`];
      for (let attempt = 0; ; attempt++) {
        const r = await exec('nsenter', args, {});
        if (r.code === 0) return opts.mb / realSeconds(r.stderr);
        // The receiver listens again a moment after each connection ends.
        if (attempt >= 20 || !/refused|can't connect/.test(r.stderr)) throw new Error(`${state}: transfer failed (${r.code}): ${r.stderr}`);
        await new Promise((res) => setTimeout(res, 100));
      }
    };
    // Warm-up, and a check that the policy is in force: an address its rules deny is refused at once.
    await setState('domain');
    const probe = await exec('nsenter', ['-t', pids.sandboxed, '-n', 'busybox', 'timeout', '3', 'busybox', 'nc', '198.18.0.1', '80'], {});
    if (!/refused/i.test(probe.stderr)) throw new Error(`the policy does not refuse a denied address: ${probe.stderr}`);
    const kinds: State[] = ['domain', 'cidr', 'none', 'plain'];
    for (const state of kinds) {
      await setState(state);
      await connections(state, 20);
    }
    const p50 = (xs: number[]) => summarize(xs).p50;
    type Figures = Record<State, { connectionMs: number; mibPerSecond: number }>;
    const rounds: Figures[] = [];
    for (let round = 0; round < opts.repeat; round++) {
      const states = round % 2 === 0 ? kinds : [...kinds].reverse();
      const figures = {} as Figures;
      // The connection loops, then the transfers back to back: a pair's two transfers are a moment apart.
      for (const state of states) {
        await setState(state);
        figures[state] = { connectionMs: p50(await connections(state, opts.connections)), mibPerSecond: NaN };
      }
      for (const state of states) {
        await setState(state);
        figures[state].mibPerSecond = await transfer(state);
      }
      rounds.push(figures);
      if (opts.verbose) process.stderr.write(`round ${round + 1}: ${JSON.stringify(figures)}\n`);
    }
    // The daemon's own table is left as the engine put it.
    await setState('domain');
    const median = (f: (r: Figures) => number) => p50(rounds.map(f));
    const against = (state: 'cidr' | 'domain', base: 'none' | 'plain') => ({
      addedMs: median((r) => r[state].connectionMs - r[base].connectionMs),
      ratio: median((r) => r[state].mibPerSecond / r[base].mibPerSecond),
    });
    const report = {
      rules: (policy as { rules: unknown[] }).rules.length,
      kernelRules: programs.domain.chain.length,
      rounds: rounds.length,
      connectionMs: Object.fromEntries(kinds.map((k) => [k, median((r) => r[k].connectionMs)])) as Record<State, number>,
      throughputMiBs: Object.fromEntries(kinds.map((k) => [k, median((r) => r[k].mibPerSecond)])) as Record<State, number>,
      /** Beside a container without a policy (its frames handed veth to veth by the bridge's tc block). */
      cidr: against('cidr', 'plain'),
      domain: against('domain', 'plain'),
      /** Beside the same container with its table taken out (its frames through the bridge). */
      bridged: { cidr: against('cidr', 'none'), domain: against('domain', 'none') },
      targets: TARGETS,
    };
    const worst = { addedMs: Math.max(report.cidr.addedMs, report.domain.addedMs), ratio: Math.min(report.cidr.ratio, report.domain.ratio) };
    const missed: string[] = [];
    if (!(worst.addedMs < TARGETS.addedPerConnectionMs)) missed.push('connection setup');
    if (!(1 - worst.ratio < TARGETS.throughputLoss)) missed.push('throughput');
    if (opts.json) process.stdout.write(JSON.stringify(report, null, 2) + '\n');
    else {
      const ms = (v: number) => `${fmt(v, 3)} ms`;
      const line = (what: string, r: { addedMs: number; ratio: number }) => `${what}: connection setup ${r.addedMs >= 0 ? "+" : ""}${ms(r.addedMs)}, throughput ratio ${fmt(r.ratio, 3)}`;
      process.stdout.write(
        [
          `policy: ${report.rules} rules, ${report.kernelRules} rules in the kernel's chain; medians of ${report.rounds} interleaved rounds (${opts.connections} connections and ${opts.mb} MiB per state and round)`,
          `connection setup p50: ${kinds.map((k) => `${k} ${ms(report.connectionMs[k])}`).join(', ')}`,
          `TCP throughput: ${kinds.map((k) => `${k} ${fmt(report.throughputMiBs[k])} MiB/s`).join(', ')}`,
          line('server allowed by CIDR, beside a container without a policy', report.cidr),
          line('server allowed by its name (domain rule, flow set), beside the same', report.domain),
          `targets: under ${TARGETS.addedPerConnectionMs} ms added, ratio over ${fmt(1 - TARGETS.throughputLoss, 2)}`,
          line('diagnostic, CIDR beside the sandbox with its table taken out (through the bridge)', report.bridged.cidr),
          line('diagnostic, domain beside the same', report.bridged.domain),
          missed.length > 0 ? `missed: ${missed.join(', ')}` : 'targets met',
          '',
        ].join('\n'),
      );
    }
    return opts.check && missed.length > 0 ? 1 : 0;
  }, cleanup);
}

runMain(main, 1);
