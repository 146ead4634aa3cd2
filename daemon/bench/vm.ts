/**
 * The VM path benchmark, measured side by side in one run on this machine (QEMU; TCG unless BERTH_VM_ACCEL
 * says otherwise):
 *
 *   (a) boot to a ready agent channel: from QEMU's start to the guest's first line on the agent's port, the
 *       guest kernel's uptime at that moment, when init started, and the count of init's steps after the
 *       kernel (each stage of daemon/vm/guest/init: mounts, modules, network, data disk, shares, channel)
 *   (b) cold file reads in the guest (its page cache dropped before each): a file of a host folder shared
 *       over 9p (a bind mount's source) against a file of the guest's own data disk (virtio-blk, ext4)
 *   (c) `docker run --rm busybox true` against the guest's own engine (its port forwarded to the host's
 *       loopback by QEMU), beside the same through the remote Host: a daemon on the host with --agent to a
 *       second VM's agent port (both VMs up, the runs interleaved)
 *
 *   node daemon/dist/bench/vm.js [--boots 2] [--mib 256] [--rounds 3] [-n 5] [--json] [--verbose]
 *
 * The image is built first when the cache lacks it (vm/guest/image.ts). Everything it starts (QEMU, by
 * PID through the driver) is stopped, and its temporary folder removed, when it ends.
 */
import { existsSync, promises as fs, readFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { buildGuestImage, defaultCacheDir } from '../src/vm/guest/image.js';
import { GuestLineChannel } from '../src/vm/hello.js';
import { QemuDriver, type QemuAccel } from '../src/vm/qemu.js';
import { buildBusyboxArchive } from '../test/fixtures/busybox.js';
import { Engine, runCommand } from '../test/harness.js';
import { commonOptions, parseBenchArgs, positiveInt, runMain, type CommonOptions } from './cli.js';
import { fmt } from './stats.js';

interface Options extends CommonOptions {
  iterations: number;
  boots: number;
  mib: number;
  rounds: number;
}

export interface BootFigures {
  /** From QEMU's spawn to the guest's hello on the agent port. */
  readyMs: number;
  /** The guest kernel's uptime at its hello. */
  kernelUptimeS: number;
  /** The guest kernel's uptime when init printed its first step. */
  initStartS: number;
  /** Init's steps between the kernel and the ready channel. */
  steps: number;
}

export interface VmReport {
  accel: string;
  image: { dir: string; initrdBytes: number; kernel: string; cached: boolean };
  boots: BootFigures[];
  readMiBps: { share9p: number[]; guestDisk: number[] };
  /** Milliseconds of each `docker run --rm busybox true`. */
  runRmTrue: { guestEngine: number[]; remoteHost: number[]; missing?: string };
  /** From the agent VM's start to the host daemon serving with it and the busybox image loaded through it. */
  agentReadyMs?: number;
  errors: Record<string, string>;
}

async function freePort(): Promise<number> {
  const srv = net.createServer();
  await new Promise<void>((resolve) => srv.listen(0, '127.0.0.1', resolve));
  const port = (srv.address() as net.AddressInfo).port;
  await new Promise((resolve) => srv.close(resolve));
  return port;
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.floor((s.length - 1) / 2)]! : NaN;
}

/** Kernel uptime of init's first step, from the console log (`berth-init: step 1 <what> <uptime>s`). */
export function initStart(consoleText: string): number {
  const m = /berth-init: step 1 \S+ ([\d.]+)s/.exec(consoleText);
  return m ? Number(m[1]) : NaN;
}

export async function runVmBench(opts: Options): Promise<VmReport> {
  const accel = (process.env.BERTH_VM_ACCEL as QemuAccel | undefined) ?? 'tcg';
  const log = (line: string) => opts.verbose && process.stderr.write(`${line}\n`);
  const image = await buildGuestImage({ arch: os.arch() === 'arm64' ? 'arm64' : 'amd64', cacheDir: defaultCacheDir(), log });
  const root = await fs.mkdtemp(path.join(os.tmpdir(), 'berth-vmbench-'));
  const report: VmReport = {
    accel,
    image: { dir: image.dir, initrdBytes: (await fs.stat(image.initrd)).size, kernel: String(image.manifest.kernelVersion), cached: image.cached },
    boots: [],
    readMiBps: { share9p: [], guestDisk: [] },
    runRmTrue: { guestEngine: [], remoteHost: [] },
    errors: {},
  };
  const share = path.join(root, 'share');
  await fs.mkdir(share);
  const enginePort = await freePort();
  let driver: QemuDriver | undefined;
  const drivers: QemuDriver[] = [];
  const engines: Engine[] = [];
  let channel: GuestLineChannel | undefined;
  try {
    for (let i = 0; i < opts.boots; i++) {
      const stateDir = path.join(root, `vm${i}`);
      const last = i === opts.boots - 1;
      driver = new QemuDriver(
        { name: `bench${i}`, stateDir, image, resources: { cpus: 2, memoryMiB: 2048, diskGiB: 4 }, shares: [{ hostPath: share, guestPath: '/mnt/share' }], kernelArgs: ['berth.handshake=line'] },
        { accel, hostForwards: last ? [{ hostPort: enginePort, guestPort: 2375, engine: true }] : [] },
      );
      const t0 = Date.now();
      const status = await driver.start();
      channel = await GuestLineChannel.connect(status.agentEndpoint!.slice('unix://'.length));
      const hello = await channel.hello(300_000);
      const readyMs = Date.now() - t0;
      report.boots.push({ readyMs, kernelUptimeS: hello.uptime, initStartS: initStart(readFileSync(status.consoleLog!, 'utf8')), steps: hello.steps });
      log(`boot ${i + 1}: ready in ${readyMs} ms`);
      if (i < opts.boots - 1) {
        await channel.call('poweroff').catch(() => undefined);
        channel.close();
        await driver.stop({ timeoutMs: 30_000 });
      }
    }
    // (b) on the last boot: the same size of file on each side, read cold, in interleaved rounds.
    const shared = path.join(share, 'bench.bin');
    const handle = await fs.open(shared, 'w');
    const chunk = Buffer.alloc(1024 * 1024, 7);
    for (let i = 0; i < opts.mib; i++) await handle.write(chunk);
    await handle.close();
    const made = await channel!.call(`mkfile /var/lib/berth/bench.bin ${opts.mib}`, 300_000);
    if (made !== 'made') throw new Error(`the guest could not write its file: ${made}`);
    const speed = async (file: string): Promise<number> => {
      const answer = (await channel!.call(`readspeed ${file}`, 300_000)).split(' ');
      if (answer[1] === 'failed' || answer.length < 3) throw new Error(`read of ${file} failed in the guest`);
      return Number(answer[1]) / 1024 / 1024 / Math.max(Number(answer[2]), 0.01);
    };
    for (let r = 0; r < opts.rounds; r++) {
      report.readMiBps.share9p.push(await speed('/mnt/share/bench.bin'));
      report.readMiBps.guestDisk.push(await speed('/var/lib/berth/bench.bin'));
    }
    // (c) the guest's own engine, through the forwarded port.
    const env = { DOCKER_HOST: `tcp://127.0.0.1:${enginePort}`, DOCKER_CONFIG: path.join(root, 'docker-config') };
    const docker = (args: string[]) => runCommand('docker', args, { env, timeoutMs: 300_000 });
    const deadline = Date.now() + 300_000;
    while ((await docker(['version', '--format', '{{.Server.Os}}'])).stdout.trim() !== 'linux') {
      if (Date.now() > deadline) throw new Error("the guest's engine did not answer in 5 minutes");
      await new Promise((r) => setTimeout(r, 1000));
    }
    const archive = path.join(root, 'busybox.tar');
    await buildBusyboxArchive(archive);
    const loaded = await docker(['load', '-i', archive]);
    if (loaded.code !== 0) throw new Error(`docker load in the guest: ${loaded.stderr}`);
    // The remote Host: a second VM with the agent on its port, a daemon on the host with --agent to it (the
    // guest's data root at the daemon's path, its containers and volumes folders shared); both VMs up, the
    // runs interleaved.
    let remote: ((args: string[]) => Promise<{ code: number | null; stderr: string }>) | undefined;
    if (existsSync(path.join(path.dirname(new URL(import.meta.url).pathname), '..', 'src', 'agent'))) {
      const engineArgs: string[] = [];
      const engine = new Engine({ args: engineArgs });
      engines.push(engine);
      const daemonShares = ['containers', 'volumes'].map((n) => path.join(engine.dataRoot, n));
      for (const dir of daemonShares) await fs.mkdir(dir, { recursive: true });
      const agentVm = new QemuDriver(
        {
          name: 'bench-agent',
          stateDir: path.join(root, 'vm-agent'),
          image,
          resources: { cpus: 2, memoryMiB: 2048, diskGiB: 4 },
          shares: daemonShares.map((dir) => ({ hostPath: dir, guestPath: dir })),
          guestDataRoot: engine.dataRoot,
        },
        { accel },
      );
      drivers.push(agentVm);
      const t0 = Date.now();
      const st = await agentVm.start();
      engineArgs.push('--agent', st.agentEndpoint!);
      await engine.start();
      await engine.dockerOk(['load', '-i', archive], { timeoutMs: 600_000 });
      report.agentReadyMs = Date.now() - t0;
      remote = (args) => engine.docker(args, { timeoutMs: 300_000 });
    } else {
      report.runRmTrue.missing = 'no guest agent in this build';
    }
    const trueRun = ['run', '--rm', '--network', 'none', 'busybox', 'true'];
    for (let i = 0; i < opts.iterations + 1; i++) {
      for (const [side, run] of [['guestEngine', docker], ['remoteHost', remote]] as const) {
        if (!run) continue;
        const t = process.hrtime.bigint();
        const r = await run(trueRun);
        if (r.code !== 0) throw new Error(`docker run (${side}): ${r.stderr}`);
        if (i > 0) report.runRmTrue[side].push(Number(process.hrtime.bigint() - t) / 1e6); // the first one warms up
      }
    }
    await channel!.call('poweroff').catch(() => undefined);
  } finally {
    channel?.close();
    for (const e of engines) await e.cleanup().catch(() => undefined);
    for (const d of drivers) await d.stop({ timeoutMs: 10_000 });
    await driver?.stop({ timeoutMs: 10_000 });
    await fs.rm(root, { recursive: true, force: true });
  }
  return report;
}

function print(r: VmReport): void {
  const line = (label: string, value: string) => console.log(`  ${label.padEnd(44)} ${value}`);
  console.log(`VM path, QEMU with ${r.accel.toUpperCase()}; image ${r.image.dir} (kernel ${r.image.kernel}, initramfs ${fmt(r.image.initrdBytes / 1e6, 0)} MB${r.image.cached ? ', cached' : ''})`);
  console.log('(a) boot to a ready agent channel');
  r.boots.forEach((b, i) => line(`boot ${i + 1}`, `${fmt(b.readyMs / 1000, 1)} s from QEMU's start; kernel at ${fmt(b.kernelUptimeS, 2)} s, init started at ${fmt(b.initStartS, 2)} s; ${b.steps} init steps`));
  console.log('(b) cold reads in the guest, MiB/s (median of rounds)');
  line('9p share of a host folder (bind mount source)', fmt(median(r.readMiBps.share9p), 1));
  line("the guest's own disk (virtio-blk, ext4)", fmt(median(r.readMiBps.guestDisk), 1));
  line('ratio share / own disk', fmt(median(r.readMiBps.share9p) / median(r.readMiBps.guestDisk), 2));
  console.log('(c) docker run --rm --network none busybox true, ms (median)');
  line("the guest's own engine (forwarded TCP port)", `${fmt(median(r.runRmTrue.guestEngine), 0)} (of ${r.runRmTrue.guestEngine.length})`);
  if (r.runRmTrue.missing) line('through the remote Host', `not measured: ${r.runRmTrue.missing}`);
  else {
    line('through the remote Host (agent in a second VM)', `${fmt(median(r.runRmTrue.remoteHost), 0)} (of ${r.runRmTrue.remoteHost.length})`);
    line('ratio remote Host / guest engine', `${fmt(median(r.runRmTrue.remoteHost) / median(r.runRmTrue.guestEngine), 2)} (target at most 1.3)`);
    line('agent VM start to daemon ready, image loaded', `${fmt((r.agentReadyMs ?? NaN) / 1000, 1)} s`);
  }
}

async function main(): Promise<number> {
  const values = parseBenchArgs(process.argv.slice(2), { iterations: { type: 'string', short: 'n' }, boots: { type: 'string' }, mib: { type: 'string' }, rounds: { type: 'string' } });
  const opts: Options = { iterations: positiveInt(values, 'iterations', 5), boots: positiveInt(values, 'boots', 2), mib: positiveInt(values, 'mib', 256), rounds: positiveInt(values, 'rounds', 3), ...commonOptions(values) };
  const report = await runVmBench(opts);
  if (opts.json) console.log(JSON.stringify(report, null, 2));
  else print(report);
  return 0;
}

if (process.argv[1] && path.resolve(process.argv[1]) === new URL(import.meta.url).pathname) runMain(main);
