/**
 * How the app starts its own engine, with the real daemon (its build, loaded at run time): on Linux berthd in
 * this process with the flags engine-args.ts chooses; where the engine runs in a VM (macOS, Windows, and Linux
 * under the test switch BERTH_APP_VM=qemu), the VM first and berthd with `--agent` to it (vm-engine.ts). main.ts
 * and the tests use this same code.
 */
import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { embeddedEnginePlan, type HostFacts } from './engine-args.js';
import type { DaemonStarter, EmbeddedDaemon } from './engine-host.js';
import { guestImageIn, loadVmModules, VmEngine } from './vm-engine.js';
import { vmDriverFor, vmEnginePlan } from './vm-plan.js';

export interface StarterOptions {
  /** The repository (or package) root: the daemon's build is in daemon/dist. */
  root: string;
  facts(): HostFacts;
  /** The test switch (BERTH_APP_VM): `qemu` runs the Linux engine in a QEMU VM as on macOS and Windows. */
  vmSwitch?: string;
  /** QEMU's accelerator (BERTH_VM_ACCEL). */
  accel?: string;
  /** The guest image's folder (BERTH_GUEST_IMAGE); the newest of the build's cache by default. */
  imageDir?: string;
  /** Told of each VM started, for its state in the settings page. */
  onVm?(vm: VmEngine): void;
}

/** berthd in this process with these flags, parsed by the daemon's own parser. */
async function startInProcess(daemonDist: string, args: string[]): Promise<EmbeddedDaemon> {
  // daemon/src/cli.ts and daemon.ts; kept structural so that this package compiles on its own.
  const { parseFlags } = (await import(pathToFileURL(path.join(daemonDist, 'cli.js')).href)) as { parseFlags(argv: string[]): Record<string, unknown> | 'help' | 'version' };
  const { startDaemon } = (await import(pathToFileURL(path.join(daemonDist, 'daemon.js')).href)) as {
    startDaemon(opts: Record<string, unknown>): Promise<{ shutdown(): Promise<void>; localToken?: string }>;
  };
  const opts = parseFlags(args);
  if (typeof opts !== 'object') throw new Error(`the engine's flags were not understood: ${args.join(' ')}`);
  return startDaemon(opts);
}

export function createDaemonStarter(o: StarterOptions): DaemonStarter {
  const daemonDist = path.join(o.root, 'daemon', 'dist', 'src');
  return async (socketPath, settings) => {
    const facts = o.facts();
    const driver = vmDriverFor(facts.platform, o.vmSwitch);
    if (driver) {
      const mods = await loadVmModules(daemonDist);
      const plan = vmEnginePlan(driver, facts, socketPath, settings.vm);
      const vm = new VmEngine({ plan, mods, image: guestImageIn(mods, o.imageDir), startDaemon: (args) => startInProcess(daemonDist, args), accel: o.accel });
      o.onVm?.(vm);
      return vm.start();
    }
    const plan = embeddedEnginePlan(socketPath, facts);
    if ('error' in plan) throw new Error(plan.error);
    await mkdir(plan.execRoot, { recursive: true, mode: 0o700 });
    return startInProcess(daemonDist, plan.args);
  };
}
