/**
 * The QEMU driver: direct kernel boot of the guest image (no firmware, no boot loader), the whole root file
 * system in the initramfs, a sparse raw data disk for /var/lib/berth, host folders shared over 9p, the guest
 * agent's channel on a virtio-serial port whose host end is a unix socket (QEMU listens, the daemon connects:
 * `berthd --agent unix://<stateDir>/agent.sock`), QMP on another unix socket, and user-mode networking for
 * the guest's own traffic (pulls).
 *
 * Accelerators: KVM on Linux when /dev/kvm opens, HVF on macOS, WHPX on Windows, each only for a guest of the
 * host's architecture; TCG (software) otherwise, or when BERTH_VM_ACCEL says so (the CI machines have a
 * /dev/kvm that does not work).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { constants as fsc, accessSync, existsSync, promises as fs, readFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import {
  AGENT_PORT_NAME,
  guestKernelArgs,
  shareTags,
  validateResources,
  type GuestArch,
  type PortForward,
  type VmConfig,
  type VmDriver,
  type VmResources,
  type VmStatus,
} from './driver.js';

export type QemuAccel = 'kvm' | 'hvf' | 'whpx' | 'tcg';

export interface QemuHostInfo {
  platform: NodeJS.Platform;
  /** Node's name of the host's architecture (x64, arm64). */
  arch: string;
  /** Whether /dev/kvm can be opened read-write (Linux). */
  kvmUsable?: boolean;
}

export interface QemuOptions {
  /** Forced accelerator (default: BERTH_VM_ACCEL, else chosen from the host). */
  accel?: QemuAccel;
  /** The qemu-system-* binary (default: by the guest's architecture, on PATH). */
  binary?: string;
  host?: QemuHostInfo;
  /** User-mode networking for the guest's own traffic (default on). */
  network?: boolean;
  /**
   * Host loopback ports forwarded to guest ports by QEMU's user-mode network. With `engine`, the guest runs
   * its own engine on that guest port (init's berth.engine), reached from the host without the agent: the
   * tests and bench/vm.ts compare it with the remote Host.
   */
  hostForwards?: Array<{ hostPort: number; guestPort: number; engine?: boolean }>;
  /** Date written on the kernel command line (the guest's clock at boot); tests fix it. */
  now?: Date;
}

export interface QemuCommand {
  binary: string;
  args: string[];
  accel: QemuAccel;
  agentSocket: string;
  qmpSocket: string;
  consoleLog: string;
  pidFile: string;
  dataDisk: string;
}

function sameArch(guest: GuestArch, hostArch: string): boolean {
  return (guest === 'amd64' && hostArch === 'x64') || (guest === 'arm64' && hostArch === 'arm64');
}

export function currentHost(): QemuHostInfo {
  let kvmUsable = false;
  if (process.platform === 'linux') {
    try {
      accessSync('/dev/kvm', fsc.R_OK | fsc.W_OK);
      kvmUsable = true;
    } catch {
      kvmUsable = false;
    }
  }
  return { platform: process.platform, arch: os.arch(), kvmUsable };
}

export function chooseAccel(guest: GuestArch, host: QemuHostInfo, forced?: string): QemuAccel {
  if (forced) {
    if (forced !== 'kvm' && forced !== 'hvf' && forced !== 'whpx' && forced !== 'tcg') throw new RangeError(`unknown QEMU accelerator ${forced}`);
    return forced;
  }
  if (!sameArch(guest, host.arch)) return 'tcg';
  if (host.platform === 'linux') return host.kvmUsable ? 'kvm' : 'tcg';
  if (host.platform === 'darwin') return 'hvf';
  if (host.platform === 'win32') return 'whpx';
  return 'tcg';
}

/** The command line of the VM (pure: unit-tested for every platform). */
export function qemuCommand(config: VmConfig, opts: QemuOptions = {}): QemuCommand {
  validateResources(config.resources);
  const host = opts.host ?? currentHost();
  const arch = config.image.arch;
  const accel = chooseAccel(arch, host, opts.accel ?? process.env.BERTH_VM_ACCEL);
  const exe = host.platform === 'win32' ? '.exe' : '';
  const binary = opts.binary ?? (arch === 'amd64' ? `qemu-system-x86_64${exe}` : `qemu-system-aarch64${exe}`);
  const state = config.stateDir;
  const agentSocket = path.join(state, 'agent.sock');
  const qmpSocket = path.join(state, 'qmp.sock');
  const consoleLog = path.join(state, 'console.log');
  const pidFile = path.join(state, 'qemu.pid');
  const dataDisk = path.join(state, 'data.raw');
  const shares = shareTags(config.shares);
  const r = config.resources;

  const args: string[] = ['-name', `berth-${config.name}`];
  if (arch === 'amd64') {
    args.push('-machine', 'q35');
  } else {
    args.push('-machine', 'virt');
  }
  if (accel === 'tcg') args.push('-accel', 'tcg,thread=multi');
  else if (accel === 'whpx') args.push('-accel', 'whpx,kernel-irqchip=off');
  else args.push('-accel', accel);
  args.push('-cpu', accel === 'kvm' || accel === 'hvf' ? 'host' : 'max');
  args.push('-smp', String(r.cpus), '-m', String(r.memoryMiB));
  args.push('-nodefaults', '-no-user-config', '-display', 'none', '-no-reboot');
  args.push('-chardev', `file,id=console,path=${consoleLog}`, '-serial', 'chardev:console');
  args.push('-kernel', config.image.kernel, '-initrd', config.image.initrd);
  const append = guestKernelArgs({
    console: arch === 'amd64' ? 'ttyS0' : 'ttyAMA0',
    shares,
    shareFs: '9p',
    agent: `port:${AGENT_PORT_NAME}`,
    net: opts.network === false ? undefined : 'qemu-user',
    enginePort: opts.network === false ? undefined : opts.hostForwards?.find((f) => f.engine)?.guestPort,
    now: opts.now,
    dataRoot: config.guestDataRoot,
    extra: config.kernelArgs,
  });
  args.push('-append', append.join(' '));
  args.push('-drive', `file=${dataDisk},if=none,id=data,format=raw,discard=unmap,cache=writeback`);
  args.push('-device', 'virtio-blk-pci,drive=data');
  // Few ports: number 0 is kept for a console, the agent's is 1 (a device with many ports made guests miss
  // the host's connection in other projects' use).
  args.push('-device', 'virtio-serial-pci,max_ports=2');
  args.push('-chardev', `socket,id=agent,path=${agentSocket},server=on,wait=off`);
  args.push('-device', `virtserialport,chardev=agent,name=${AGENT_PORT_NAME}`);
  shares.forEach((s, i) => {
    args.push('-fsdev', `local,id=fs${i},path=${s.hostPath},security_model=none${s.readOnly ? ',readonly=on' : ''}`);
    args.push('-device', `virtio-9p-pci,fsdev=fs${i},mount_tag=${s.tag}`);
  });
  if (opts.network !== false) {
    const fwd = (opts.hostForwards ?? []).map((f) => `,hostfwd=${hostfwdRule({ protocol: 'tcp', hostPort: f.hostPort, guestPort: f.guestPort })}`).join('');
    args.push('-netdev', `user,id=net0${fwd}`, '-device', 'virtio-net-pci,netdev=net0');
  }
  args.push('-device', 'virtio-rng-pci');
  args.push('-qmp', `unix:${qmpSocket},server=on,wait=off`);
  args.push('-pidfile', pidFile);
  return { binary, args, accel, agentSocket, qmpSocket, consoleLog, pidFile, dataDisk };
}

/** A forward in QEMU's hostfwd syntax (host loopback only). */
export function hostfwdRule(fwd: PortForward): string {
  for (const p of [fwd.hostPort, fwd.guestPort]) if (!Number.isInteger(p) || p < 1 || p > 65535) throw new RangeError(`not a port: ${p}`);
  return `${fwd.protocol}:127.0.0.1:${fwd.hostPort}-:${fwd.guestPort}`;
}

/** One QMP command over a fresh connection: the greeting, capabilities, the command, its answer. */
export async function qmp(socketPath: string, execute: string, args?: object, timeoutMs = 5000): Promise<unknown> {
  return await new Promise((resolve, reject) => {
    const sock = net.connect(socketPath);
    let buf = '';
    let phase = 0;
    const timer = setTimeout(() => {
      sock.destroy();
      reject(new Error(`QMP ${execute}: no answer in ${timeoutMs} ms`));
    }, timeoutMs);
    const done = (err: Error | null, value?: unknown) => {
      clearTimeout(timer);
      sock.destroy();
      if (err) reject(err);
      else resolve(value);
    };
    sock.on('error', (err) => done(err));
    sock.on('close', () => {
      // `quit` closes the connection instead of answering at times.
      if (execute === 'quit') done(null, {});
      else done(new Error(`QMP ${execute}: connection closed`));
    });
    sock.on('data', (chunk) => {
      buf += chunk.toString('utf8');
      let nl: number;
      while ((nl = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, nl).trim();
        buf = buf.slice(nl + 1);
        if (!line) continue;
        const msg = JSON.parse(line) as { QMP?: unknown; return?: unknown; error?: { desc?: string }; event?: string };
        if (msg.event) continue;
        if (phase === 0 && msg.QMP) {
          phase = 1;
          sock.write(JSON.stringify({ execute: 'qmp_capabilities' }) + '\n');
        } else if (phase === 1) {
          phase = 2;
          sock.write(JSON.stringify(args ? { execute, arguments: args } : { execute }) + '\n');
        } else if (phase === 2) {
          if (msg.error) done(new Error(`QMP ${execute}: ${msg.error.desc ?? 'error'}`));
          else done(null, msg.return);
        }
      }
    });
  });
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function waitFor(cond: () => boolean, timeoutMs: number, stepMs = 50): Promise<boolean> {
  const end = Date.now() + timeoutMs;
  while (Date.now() < end) {
    if (cond()) return true;
    await new Promise((r) => setTimeout(r, stepMs));
  }
  return cond();
}

/** Creates the sparse data disk, or grows it to the size asked for (the guest's file system grows at boot). */
export async function ensureDataDisk(file: string, sizeGiB: number): Promise<void> {
  const want = sizeGiB * 1024 ** 3;
  const st = await fs.stat(file).catch(() => undefined);
  if (st && st.size >= want) return;
  const fh = await fs.open(file, st ? 'r+' : 'w');
  try {
    await fh.truncate(want);
  } finally {
    await fh.close();
  }
}

export interface QemuDriverOptions extends QemuOptions {
  /** Asks the guest to power off (the agent's shutdown call); stop() waits for QEMU to exit after it. */
  guestShutdown?: () => Promise<void>;
}

export class QemuDriver implements VmDriver {
  readonly kind = 'qemu' as const;
  private child?: ChildProcess;
  private stderrTail = '';
  private stateName: 'stopped' | 'starting' | 'running' | 'stopping' = 'stopped';
  private resources: VmResources;

  constructor(
    private readonly config: VmConfig,
    private readonly opts: QemuDriverOptions = {},
  ) {
    this.resources = { ...config.resources };
  }

  command(): QemuCommand {
    return qemuCommand({ ...this.config, resources: this.resources }, this.opts);
  }

  setResources(resources: Partial<VmResources>): void {
    const next = { ...this.resources, ...resources };
    validateResources(next);
    this.resources = next;
  }

  /** PID of a QEMU of this VM that runs (started by this driver, or by an earlier daemon: its pid file). */
  private runningPid(): number | undefined {
    if (this.child?.pid && this.child.exitCode === null && this.child.signalCode === null) return this.child.pid;
    const cmd = this.command();
    try {
      const pid = Number(readFileSync(cmd.pidFile, 'utf8').trim());
      if (pid > 0 && alive(pid)) return pid;
    } catch {
      // No pid file: not running.
    }
    return undefined;
  }

  async status(): Promise<VmStatus> {
    const cmd = this.command();
    const pid = this.runningPid();
    const state = pid ? (this.stateName === 'stopped' ? 'running' : this.stateName) : 'stopped';
    return {
      state,
      pid,
      resources: { ...this.resources },
      agentEndpoint: pid ? `unix://${cmd.agentSocket}` : undefined,
      consoleLog: cmd.consoleLog,
    };
  }

  async start(): Promise<VmStatus> {
    if (this.runningPid()) return await this.status();
    const cmd = this.command();
    await fs.mkdir(this.config.stateDir, { recursive: true, mode: 0o700 });
    for (const f of [cmd.agentSocket, cmd.qmpSocket, cmd.pidFile]) await fs.rm(f, { force: true });
    await ensureDataDisk(cmd.dataDisk, this.resources.diskGiB);
    for (const f of [this.config.image.kernel, this.config.image.initrd]) {
      if (!existsSync(f)) throw new Error(`guest image file missing: ${f} (build it with scripts/build-guest-image.sh)`);
    }
    this.stateName = 'starting';
    this.stderrTail = '';
    const child = spawn(cmd.binary, cmd.args, { stdio: ['ignore', 'ignore', 'pipe'] });
    this.child = child;
    child.stderr!.on('data', (c: Buffer) => {
      this.stderrTail = (this.stderrTail + c.toString('utf8')).slice(-4000);
    });
    child.on('exit', () => {
      this.stateName = 'stopped';
    });
    const spawnError = new Promise<Error>((resolve) => child.once('error', resolve));
    const up = await Promise.race([
      waitFor(() => existsSync(cmd.agentSocket) && existsSync(cmd.qmpSocket), 30_000).then((ok) => (ok ? null : new Error('QEMU created no sockets in 30 s'))),
      spawnError,
      new Promise<Error>((resolve) => child.once('exit', (code, sig) => resolve(new Error(`QEMU exited (${code ?? sig})`)))),
    ]);
    if (up) {
      this.stateName = 'stopped';
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      throw new Error(`${up.message}: ${this.stderrTail.trim() || 'no message'} [${cmd.binary} ${cmd.args.join(' ')}]`);
    }
    this.stateName = 'running';
    return await this.status();
  }

  async stop(opts: { timeoutMs?: number } = {}): Promise<void> {
    const pid = this.runningPid();
    if (!pid) return;
    const timeoutMs = opts.timeoutMs ?? 10_000;
    const cmd = this.command();
    this.stateName = 'stopping';
    const gone = () => !alive(pid) || (this.child?.pid === pid && this.child.exitCode !== null) || (this.child?.pid === pid && this.child.signalCode !== null);
    if (this.opts.guestShutdown) {
      await this.opts.guestShutdown().catch(() => undefined);
      if (await waitFor(gone, timeoutMs, 100)) return this.stopped(cmd);
    }
    await qmp(cmd.qmpSocket, 'quit', undefined, 2000).catch(() => undefined);
    if (await waitFor(gone, 3000, 50)) return this.stopped(cmd);
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // Already gone.
    }
    await waitFor(gone, 3000, 50);
    await this.stopped(cmd);
  }

  /** hostfwd_add on the running VM's user-mode network (QEMU's monitor command, through QMP). */
  async forwardPort(fwd: PortForward): Promise<void> {
    await this.monitor(`hostfwd_add net0 ${hostfwdRule(fwd)}`);
  }

  async unforwardPort(fwd: PortForward): Promise<void> {
    await this.monitor(`hostfwd_remove net0 ${fwd.protocol}:127.0.0.1:${fwd.hostPort}`);
  }

  private async monitor(line: string): Promise<void> {
    if (this.opts.network === false) throw new Error('this VM has no user-mode network to forward ports on');
    if (!this.runningPid()) throw new Error('the VM is not running');
    const out = await qmp(this.command().qmpSocket, 'human-monitor-command', { 'command-line': line });
    // The monitor answers in text, errors included ("Could not set up host forwarding rule", "... not found";
    // a removal that worked says "host forwarding rule for ... removed").
    if (typeof out === 'string' && /could not|invalid|not found|error|fail/i.test(out)) throw new Error(`QEMU: ${out.trim()}`);
  }

  private async stopped(cmd: QemuCommand): Promise<void> {
    this.stateName = 'stopped';
    for (const f of [cmd.agentSocket, cmd.qmpSocket, cmd.pidFile]) await fs.rm(f, { force: true });
  }
}
