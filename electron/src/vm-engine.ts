/**
 * The app's engine on macOS and Windows: the VM first (the driver of vm-plan.ts, with the settings'
 * resources, from the newest guest image in the cache), then berthd in the main process with `--agent` to the
 * guest's agent, serving where CLIs look for it; published ports forwarded into the VM where the driver can.
 * It is ready once the engine answers /info, which waits for the agent. Stopping stops the port forwards, the
 * daemon, then the VM. The VM's state (starting, running, stopping, stopped, error) and resources are kept
 * for the settings page.
 *
 * The daemon's VM modules (daemon/src/vm) are loaded from its build at run time, kept structural here, so
 * that this package compiles on its own (as main.ts loads the daemon).
 */
import { promises as fs } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import type { VmResources } from './engine-args.js';
import type { EmbeddedDaemon } from './engine-host.js';
import { VM_NAME, type VmDriverKind, type VmEnginePlan } from './vm-plan.js';

export type VmState = 'stopped' | 'starting' | 'running' | 'stopping' | 'error';

export interface VmView {
  state: VmState;
  driver: VmDriverKind;
  resources: VmResources;
  error?: string;
  /** The guest's console output, for the user to read when the VM does not come up. */
  consoleLog?: string;
}

/** The parts of daemon/src/vm/driver.ts's VmDriver used here. */
interface Driver {
  start(): Promise<{ agentEndpoint?: string; consoleLog?: string; pid?: number }>;
  status(): Promise<{ state: string }>;
  stop(opts?: { timeoutMs?: number }): Promise<void>;
  forwardPort?(fwd: unknown): Promise<void>;
  unforwardPort?(fwd: unknown): Promise<void>;
}
interface GuestImage {
  arch: 'amd64' | 'arm64';
  kernel: string;
  initrd: string;
  rootfsTar?: string;
}
type DriverClass = new (config: Record<string, unknown>, opts?: Record<string, unknown>) => Driver;

/** What is loaded from the daemon's build (daemon/dist/src/vm). */
export interface VmModules {
  drivers: Record<VmDriverKind, DriverClass>;
  PublishedPorts: new (socket: string, driver: Required<Pick<Driver, 'forwardPort' | 'unforwardPort'>>, onError?: (err: unknown) => void) => { watch(): () => void };
  newestImage(cacheDir: string, arch: 'amd64' | 'arm64'): string | undefined;
  defaultCacheDir(): string;
}

export async function loadVmModules(daemonDist: string): Promise<VmModules> {
  const load = (file: string) => import(pathToFileURL(path.join(daemonDist, 'vm', file)).href) as Promise<Record<string, any>>;
  const [qemu, vfkit, wsl, ports, cli, image] = await Promise.all([load('qemu.js'), load('vfkit.js'), load('wsl.js'), load('ports.js'), load('cli.js'), load('guest/image.js')]);
  return {
    drivers: { qemu: qemu.QemuDriver, vfkit: vfkit.VfkitDriver, wsl2: wsl.Wsl2Driver },
    PublishedPorts: ports.PublishedPorts,
    newestImage: cli.newestImage,
    defaultCacheDir: image.defaultCacheDir,
  };
}

/** The guest image of this machine's architecture: the folder given, or the newest in the build's cache. */
export function guestImageIn(mods: VmModules, dir?: string): GuestImage {
  const arch = os.arch() === 'arm64' ? 'arm64' : 'amd64';
  const found = dir ?? mods.newestImage(mods.defaultCacheDir(), arch);
  if (!found) throw new Error(`no guest image for ${arch} in ${mods.defaultCacheDir()}: build one with scripts/build-guest-image.sh`);
  return { arch, kernel: path.join(found, 'vmlinuz'), initrd: path.join(found, 'initrd.img'), rootfsTar: path.join(found, 'rootfs.tar') };
}

/** Asks GET /info until it answers 200 (the daemon restores its state through the agent first). */
async function engineReady(socketPath: string, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last = '';
  while (Date.now() < deadline) {
    last = await new Promise<string>((resolve) => {
      const req = http.request({ socketPath, path: '/info', headers: { Host: 'engine' }, timeout: Math.max(1000, deadline - Date.now()) }, (res) => {
        res.resume();
        resolve(res.statusCode === 200 ? '' : `/info answered ${res.statusCode}`);
      });
      req.on('timeout', () => req.destroy(new Error('no answer')));
      req.on('error', (err) => resolve(err.message));
      req.end();
    });
    if (!last) return;
    await new Promise((r) => setTimeout(r, 500));
  }
  throw new Error(`the engine did not become ready in the VM within ${Math.round(timeoutMs / 1000)} s: ${last}`);
}

export interface VmEngineOptions {
  plan: VmEnginePlan;
  mods: VmModules;
  image: GuestImage;
  /** Starts berthd in this process with these flags (main.ts: the daemon's own parser and startDaemon). */
  startDaemon(args: string[]): Promise<EmbeddedDaemon>;
  /** QEMU's accelerator (BERTH_VM_ACCEL; the tests use tcg). */
  accel?: string;
  readyTimeoutMs?: number;
}

export class VmEngine {
  private view: VmView;
  private listeners = new Set<(view: VmView) => void>();
  private driver?: Driver;

  constructor(private readonly opts: VmEngineOptions) {
    this.view = { state: 'stopped', driver: opts.plan.driver, resources: opts.plan.resources };
  }

  get status(): VmView {
    return { ...this.view };
  }

  /**
   * The VM's state now: one that stopped by itself (a crash, a power-off in the guest) shows as an error. Asked
   * when the settings page asks for the engine's status; nothing here polls.
   */
  async refresh(): Promise<VmView> {
    if (this.view.state === 'running' && this.driver) {
      const now = await this.driver.status().catch(() => undefined);
      if (now?.state === 'stopped') this.set({ state: 'error', error: `the VM stopped by itself${this.view.consoleLog ? `; its console log is ${this.view.consoleLog}` : ''}` });
    }
    return this.status;
  }

  onChange(cb: (view: VmView) => void): () => void {
    this.listeners.add(cb);
    return () => void this.listeners.delete(cb);
  }

  private set(patch: Partial<VmView>): void {
    this.view = { ...this.view, error: undefined, ...patch };
    for (const cb of this.listeners) cb(this.status);
  }

  /** Starts the VM and the daemon on it; resolves with the daemon, whose shutdown stops both. */
  async start(): Promise<EmbeddedDaemon & { socketPath: string }> {
    const { plan, mods } = this.opts;
    this.set({ state: 'starting' });
    let driver: Driver | undefined;
    let daemon: EmbeddedDaemon | undefined;
    let stopPorts = () => {};
    try {
      // The folders both sides write in are shared: they must exist before the VM starts.
      for (const dir of [plan.dataRoot, ...plan.shares.map((s) => s.hostPath)]) await fs.mkdir(dir, { recursive: true, mode: 0o700 });
      await fs.mkdir(plan.execRoot, { recursive: true, mode: 0o700 });
      const config = { name: VM_NAME, stateDir: plan.stateDir, image: this.opts.image, resources: plan.resources, shares: plan.shares, guestDataRoot: plan.guestDataRoot };
      driver = new mods.drivers[plan.driver](config, plan.driver === 'qemu' && this.opts.accel ? { accel: this.opts.accel } : {});
      this.driver = driver;
      const vm = await driver.start();
      this.view.consoleLog = vm.consoleLog;
      if (!vm.agentEndpoint) throw new Error(`the ${plan.driver} VM started without an agent endpoint`);
      daemon = await this.opts.startDaemon([...plan.args, '--agent', vm.agentEndpoint]);
      await engineReady(plan.socketPath, this.opts.readyTimeoutMs ?? 5 * 60_000);
      if (driver.forwardPort && driver.unforwardPort) {
        const ports = new mods.PublishedPorts(plan.socketPath, driver as Required<Driver>, (err) => console.error(`published ports: ${err instanceof Error ? err.message : String(err)}`));
        stopPorts = ports.watch();
      }
      this.set({ state: 'running' });
    } catch (err) {
      await daemon?.shutdown().catch(() => undefined);
      await driver?.stop({ timeoutMs: 2000 }).catch(() => undefined);
      this.driver = undefined;
      this.set({ state: 'error', error: (err as Error).message });
      throw err;
    }
    const started = daemon;
    const vmDriver = driver;
    return {
      localToken: started.localToken,
      socketPath: plan.socketPath,
      shutdown: async () => {
        this.set({ state: 'stopping' });
        try {
          stopPorts();
          await started.shutdown();
          await vmDriver.stop();
          this.driver = undefined;
          this.set({ state: 'stopped' });
        } catch (err) {
          this.set({ state: 'error', error: (err as Error).message });
          throw err;
        }
      },
    };
  }
}
