/** Electron's entry point: the real Electron objects, the renderer build, and berthd in process. */
import { app, BrowserWindow, dialog, ipcMain, Menu, nativeTheme, safeStorage, shell, Tray } from 'electron';
import { existsSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { startApp, type ElectronModules } from './app.js';
import { dockerConfigDir } from './docker-context.js';
import { embeddedEnginePlan, usesVm, type HostFacts } from './engine-args.js';
import type { DaemonStarter } from './engine-host.js';

const here = path.dirname(fileURLToPath(import.meta.url));
/** electron/ (this file runs from electron/dist/src). */
const electronDir = path.resolve(here, '..', '..');
const root = path.resolve(electronDir, '..');

/**
 * berthd in this process, with the flags engine-args.ts chooses for this machine and user (as the user,
 * driving the root agent service on Linux; a VM on macOS and Windows), parsed by the daemon's own parser.
 */
const startDaemon: DaemonStarter = async (socketPath, settings) => {
  const facts: HostFacts = {
    platform: process.platform,
    uid: typeof process.getuid === 'function' ? process.getuid() : -1,
    home: os.homedir(),
    env: { XDG_DATA_HOME: process.env.XDG_DATA_HOME, XDG_RUNTIME_DIR: process.env.XDG_RUNTIME_DIR },
    userData: app.getPath('userData'),
    exists: (file) => existsSync(file),
  };
  const plan = embeddedEnginePlan(socketPath, facts, usesVm(process.platform) ? settings.vm : undefined);
  if ('error' in plan) throw new Error(plan.error);
  const daemonDist = path.join(root, 'daemon', 'dist', 'src');
  // daemon/src/cli.ts and daemon.ts; kept structural so that this package compiles on its own.
  const { parseFlags } = (await import(pathToFileURL(path.join(daemonDist, 'cli.js')).href)) as { parseFlags(argv: string[]): Record<string, unknown> | 'help' | 'version' };
  const { startDaemon } = (await import(pathToFileURL(path.join(daemonDist, 'daemon.js')).href)) as {
    startDaemon(opts: Record<string, unknown>): Promise<{ shutdown(): Promise<void>; localToken?: string }>;
  };
  const opts = parseFlags(plan.args);
  if (typeof opts !== 'object') throw new Error(`the engine's flags were not understood: ${plan.args.join(' ')}`);
  await mkdir(plan.execRoot, { recursive: true, mode: 0o700 });
  // The VM's resources (daemon/src/vm/driver.ts VmResources), where the engine runs in one.
  return startDaemon(plan.vm ? { ...opts, vm: plan.vm } : opts);
};

void startApp({ app, BrowserWindow, Tray, Menu, ipcMain, nativeTheme, shell, dialog, safeStorage } as unknown as ElectronModules, {
  rendererIndex: path.join(root, 'renderer', 'dist', 'index.html'),
  preload: path.join(here, 'preload.cjs'),
  trayIcon: path.join(electronDir, 'assets', 'tray.png'),
  startDaemon,
  dockerConfig: dockerConfigDir(),
});
