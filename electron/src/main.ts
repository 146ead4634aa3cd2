/** Electron's entry point: the real Electron objects, the renderer build, and berthd in process. */
import { app, BrowserWindow, dialog, ipcMain, Menu, nativeTheme, safeStorage, shell, Tray } from 'electron';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { startApp, type ElectronModules } from './app.js';
import { dockerConfigDir } from './docker-context.js';
import type { DaemonStarter } from './engine-host.js';

const here = path.dirname(fileURLToPath(import.meta.url));
/** electron/ (this file runs from electron/dist/src). */
const electronDir = path.resolve(here, '..', '..');
const root = path.resolve(electronDir, '..');

/** berthd in this process: the daemon package's composition, serving the chosen socket. */
const startDaemon: DaemonStarter = async (socketPath) => {
  const { startDaemon } = (await import(pathToFileURL(path.join(root, 'daemon', 'dist', 'src', 'daemon.js')).href)) as {
    // daemon/src/daemon.ts: startDaemon(DaemonOptions); kept structural so this package compiles on its own.
    startDaemon(opts: Record<string, unknown>): Promise<{ shutdown(): Promise<void>; localToken?: string }>;
  };
  const state = path.join(app.getPath('userData'), 'engine');
  return startDaemon({
    hosts: [`unix://${socketPath}`],
    dataRoot: path.join(state, 'data'),
    execRoot: path.join(state, 'run'),
    pidfile: path.join(state, 'berthd.pid'),
    runtime: 'crun',
    bridgeName: 'berth0',
    iptables: true,
    tls: false,
    tlsVerify: false,
    logLevel: 'info',
  });
};

void startApp({ app, BrowserWindow, Tray, Menu, ipcMain, nativeTheme, shell, dialog, safeStorage } as unknown as ElectronModules, {
  rendererIndex: path.join(root, 'renderer', 'dist', 'index.html'),
  preload: path.join(here, 'preload.cjs'),
  trayIcon: path.join(electronDir, 'assets', 'tray.png'),
  startDaemon,
  dockerConfig: dockerConfigDir(),
});
