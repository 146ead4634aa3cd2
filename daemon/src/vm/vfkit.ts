/**
 * The vfkit driver (macOS, Apple's Virtualization.framework): one vfkit process per VM, the VM dies with it.
 * Linux boot loader with the guest's kernel and initramfs (on arm64 the uncompressed Image: VZ hangs on a
 * gzip kernel), a raw sparse data disk, the agent's channel on a virtio-vsock port that vfkit exposes as a
 * unix socket on the host (`connect`: the host dials, the guest listens), host folders over virtiofs, NAT
 * networking, the console on a virtio-serial log file, and vfkit's REST endpoint on a unix socket for
 * state and stop. Rosetta is not offered (no rosetta device): the guest runs its own architecture only.
 *
 * vfkit splits `--device` and `--bootloader` values at commas (only the boot loader's `cmdline="..."` may
 * hold commas, inside its quotes), so a path with a comma, or a command line with a double quote, is refused
 * here rather than misread there.
 *
 * Not run on these Linux machines: unit-tested on its command line (checked against vfkit's usage document and
 * its option parser) and its REST requests.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, promises as fs } from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { AGENT_VSOCK_PORT, guestKernelArgs, shareTags, validateResources, type VmConfig, type VmDriver, type VmResources, type VmStatus } from './driver.js';
import { ensureDataDisk } from './qemu.js';

/** macOS's sun_path is 104 bytes, the terminating NUL included (vfkit refuses longer unix socket paths). */
export const MACOS_SUN_PATH_MAX = 103;

/** A value of a `--device` or `--bootloader` option: vfkit splits those at commas. */
function optionValue(what: string, value: string): string {
  if (value.includes(',')) throw new RangeError(`vfkit cannot take a ${what} with a comma: ${value}`);
  return value;
}

export interface VfkitCommand {
  binary: string;
  args: string[];
  agentSocket: string;
  restSocket: string;
  consoleLog: string;
  dataDisk: string;
}

export function vfkitCommand(config: VmConfig, opts: { binary?: string; now?: Date } = {}): VfkitCommand {
  validateResources(config.resources);
  const state = config.stateDir;
  const agentSocket = path.join(state, 'agent.sock');
  const restSocket = path.join(state, 'vfkit.sock');
  const consoleLog = path.join(state, 'console.log');
  const dataDisk = path.join(state, 'data.raw');
  for (const s of [agentSocket, restSocket]) {
    if (Buffer.byteLength(s) > MACOS_SUN_PATH_MAX) throw new RangeError(`socket path longer than macOS allows (${MACOS_SUN_PATH_MAX} bytes): ${s}`);
  }
  const shares = shareTags(config.shares);
  const kernel = config.image.arch === 'arm64' ? path.join(path.dirname(config.image.kernel), 'Image') : config.image.kernel;
  const cmdline = guestKernelArgs({
    console: 'hvc0',
    shares,
    shareFs: 'virtiofs',
    agent: `vsock:${AGENT_VSOCK_PORT}`,
    net: 'dhcp',
    now: opts.now,
    dataRoot: config.guestDataRoot,
    extra: config.kernelArgs,
  }).join(' ');
  // The command line goes inside double quotes, which vfkit takes off (commas inside are kept).
  if (cmdline.includes('"')) throw new RangeError(`the guest's kernel command line cannot hold a double quote for vfkit: ${cmdline}`);
  for (const [what, value] of [['state folder', state], ['kernel path', kernel], ['initrd path', config.image.initrd]] as const) optionValue(what, value);
  for (const s of shares) {
    optionValue('shared folder', s.hostPath);
    optionValue('share tag', s.tag);
  }
  const args = [
    '--cpus', String(config.resources.cpus),
    '--memory', String(config.resources.memoryMiB),
    '--bootloader', `linux,kernel=${kernel},initrd=${config.image.initrd},cmdline="${cmdline}"`,
    '--device', `virtio-blk,path=${dataDisk}`,
    '--device', `virtio-vsock,port=${AGENT_VSOCK_PORT},socketURL=${agentSocket},connect`,
    ...shares.flatMap((s) => ['--device', `virtio-fs,sharedDir=${s.hostPath},mountTag=${s.tag}`]),
    '--device', 'virtio-net,nat',
    '--device', `virtio-serial,logFilePath=${consoleLog}`,
    '--device', 'virtio-rng',
    '--device', 'virtio-balloon',
    '--restful-uri', `unix://${restSocket}`,
  ];
  return { binary: opts.binary ?? 'vfkit', args, agentSocket, restSocket, consoleLog, dataDisk };
}

/** vfkit's REST requests: GET /vm/state, POST /vm/state with Stop (ACPI-like request) or HardStop. */
export function vfkitStateRequest(action?: 'Stop' | 'HardStop'): { method: 'GET' | 'POST'; path: string; body?: string } {
  return action ? { method: 'POST', path: '/vm/state', body: JSON.stringify({ state: action }) } : { method: 'GET', path: '/vm/state' };
}

/** vfkit's state names (VZVirtualMachineState) as the driver's. */
export function vfkitState(answer: { state?: string }): VmStatus['state'] {
  switch (answer.state) {
    case 'VirtualMachineStateRunning':
    case 'VirtualMachineStatePaused':
    case 'VirtualMachineStateResuming':
    case 'VirtualMachineStatePausing':
    case 'VirtualMachineStateSaving':
      return 'running';
    case 'VirtualMachineStateStarting':
    case 'VirtualMachineStateRestoring':
      return 'starting';
    case 'VirtualMachineStateStopping':
      return 'stopping';
    default:
      return 'stopped';
  }
}

function rest(socketPath: string, req: { method: string; path: string; body?: string }): Promise<{ state?: string }> {
  return new Promise((resolve, reject) => {
    const r = http.request({ socketPath, method: req.method, path: req.path, headers: req.body ? { 'content-type': 'application/json' } : {} }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (text += c));
      res.on('end', () => {
        try {
          resolve(text ? (JSON.parse(text) as { state?: string }) : {});
        } catch {
          resolve({});
        }
      });
    });
    r.on('error', reject);
    r.setTimeout(5000, () => r.destroy(new Error('vfkit did not answer in 5 s')));
    r.end(req.body);
  });
}

export class VfkitDriver implements VmDriver {
  readonly kind = 'vfkit' as const;
  private child?: ChildProcess;
  private resources: VmResources;

  constructor(
    private readonly config: VmConfig,
    private readonly opts: { binary?: string } = {},
  ) {
    this.resources = { ...config.resources };
  }

  command(): VfkitCommand {
    return vfkitCommand({ ...this.config, resources: this.resources }, this.opts);
  }

  setResources(resources: Partial<VmResources>): void {
    const next = { ...this.resources, ...resources };
    validateResources(next);
    this.resources = next;
  }

  private running(): boolean {
    return !!this.child && this.child.exitCode === null && this.child.signalCode === null;
  }

  async status(): Promise<VmStatus> {
    const cmd = this.command();
    let state: VmStatus['state'] = 'stopped';
    if (this.running()) state = await rest(cmd.restSocket, vfkitStateRequest()).then(vfkitState, () => 'starting' as const);
    return { state, pid: this.running() ? this.child!.pid : undefined, resources: { ...this.resources }, agentEndpoint: state === 'running' ? `unix://${cmd.agentSocket}` : undefined, consoleLog: cmd.consoleLog };
  }

  async start(): Promise<VmStatus> {
    if (this.running()) return await this.status();
    const cmd = this.command();
    await fs.mkdir(this.config.stateDir, { recursive: true, mode: 0o700 });
    for (const f of [cmd.agentSocket, cmd.restSocket]) await fs.rm(f, { force: true });
    await ensureDataDisk(cmd.dataDisk, this.resources.diskGiB);
    const child = spawn(cmd.binary, cmd.args, { stdio: ['ignore', 'ignore', 'pipe'] });
    this.child = child;
    let stderr = '';
    child.stderr!.on('data', (c: Buffer) => (stderr = (stderr + c.toString('utf8')).slice(-4000)));
    const end = Date.now() + 30_000;
    while (!existsSync(cmd.restSocket)) {
      if (!this.running()) throw new Error(`vfkit exited (${child.exitCode ?? child.signalCode}): ${stderr.trim()}`);
      if (Date.now() > end) throw new Error('vfkit did not open its REST socket in 30 s');
      await new Promise((r) => setTimeout(r, 100));
    }
    return await this.status();
  }

  async stop(opts: { timeoutMs?: number } = {}): Promise<void> {
    if (!this.running()) return;
    const cmd = this.command();
    await rest(cmd.restSocket, vfkitStateRequest('Stop')).catch(() => undefined);
    const end = Date.now() + (opts.timeoutMs ?? 10_000);
    while (this.running() && Date.now() < end) await new Promise((r) => setTimeout(r, 100));
    if (this.running()) await rest(cmd.restSocket, vfkitStateRequest('HardStop')).catch(() => undefined);
    await new Promise((r) => setTimeout(r, 500));
    if (this.running()) this.child!.kill('SIGKILL');
  }
}
