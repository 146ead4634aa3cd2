/** Electron's entry point: the real Electron objects, the renderer build, and berthd in process (embedded.ts). */
import { app, BrowserWindow, dialog, ipcMain, Menu, nativeTheme, safeStorage, shell, Tray } from 'electron';
import { existsSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startApp, type ElectronModules } from './app.js';
import { dockerConfigDir } from './docker-context.js';
import { createDaemonStarter } from './embedded.js';
import type { VmEngine } from './vm-engine.js';

const here = path.dirname(fileURLToPath(import.meta.url));
/** electron/ (this file runs from electron/dist/src). */
const electronDir = path.resolve(here, '..', '..');
const root = path.resolve(electronDir, '..');

let vm: VmEngine | undefined;
const startDaemon = createDaemonStarter({
  root,
  facts: () => ({
    platform: process.platform,
    uid: typeof process.getuid === 'function' ? process.getuid() : -1,
    home: os.homedir(),
    env: { XDG_DATA_HOME: process.env.XDG_DATA_HOME, XDG_RUNTIME_DIR: process.env.XDG_RUNTIME_DIR },
    userData: app.getPath('userData'),
    exists: (file) => existsSync(file),
  }),
  vmSwitch: process.env.BERTH_APP_VM,
  accel: process.env.BERTH_VM_ACCEL,
  imageDir: process.env.BERTH_GUEST_IMAGE,
  onVm: (started) => (vm = started),
});

void startApp({ app, BrowserWindow, Tray, Menu, ipcMain, nativeTheme, shell, dialog, safeStorage } as unknown as ElectronModules, {
  rendererIndex: path.join(root, 'renderer', 'dist', 'index.html'),
  preload: path.join(here, 'preload.cjs'),
  trayIcon: path.join(electronDir, 'assets', 'tray.png'),
  startDaemon,
  dockerConfig: dockerConfigDir(),
  vmStatus: () => vm?.refresh(),
});
