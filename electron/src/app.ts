/**
 * The main process, composed from the Electron objects it is given (so that tests pass fakes): the
 * single-instance lock, settings, the engine (embedded or connected), the window, the tray, and the IPC
 * endpoints of the preload's bridge.
 */
import path from 'node:path';
import { BridgeError, engineRequest, forwardRequest, openStream, openTerminal, openUpload, type BridgeRequest, type ConfirmHostAccess, type EngineEndpoint, type PortLike } from './bridge.js';
import { writeDockerContext } from './docker-context.js';
import { usesVm } from './engine-args.js';
import { CredentialStore, registryAuthHeader, registryOfImage, type SafeStorageLike } from './credentials.js';
import { EngineHost, pingEngine, type DaemonStarter } from './engine-host.js';
import { defaultSettings, SettingsStore, type SettingsPatch } from './settings.js';
import { trayTemplate, trayTooltip } from './tray.js';
import type { VmView } from './vm-engine.js';
import { guardNavigation, windowOptions } from './window.js';

export interface WindowLike {
  webContents: { id: number; on(event: string, listener: (...args: any[]) => void): unknown; setWindowOpenHandler(h: (details: { url: string }) => { action: 'deny' }): void };
  loadFile(file: string): Promise<void>;
  once(event: 'ready-to-show', listener: () => void): unknown;
  on(event: 'closed', listener: () => void): unknown;
  show(): void;
  focus(): void;
  restore(): void;
  isMinimized(): boolean;
  isDestroyed(): boolean;
}
export interface TrayLike {
  setContextMenu(menu: unknown): void;
  setToolTip(text: string): void;
  on(event: 'click', listener: () => void): unknown;
}
export interface IpcEvent {
  sender: { id: number };
  ports?: PortLike[];
}
export interface ElectronModules {
  app: {
    requestSingleInstanceLock(): boolean;
    quit(): void;
    on(event: string, listener: (...args: any[]) => void): unknown;
    whenReady(): Promise<void>;
    getPath(name: 'userData'): string;
  };
  BrowserWindow: new (options: ReturnType<typeof windowOptions>) => WindowLike;
  Tray: new (icon: string) => TrayLike;
  Menu: { buildFromTemplate(template: ReturnType<typeof trayTemplate>): unknown };
  ipcMain: {
    handle(channel: string, listener: (event: IpcEvent, ...args: any[]) => unknown): void;
    on(channel: string, listener: (event: IpcEvent, ...args: any[]) => void): void;
  };
  nativeTheme: { themeSource: 'system' | 'light' | 'dark'; shouldUseDarkColors: boolean };
  /** Opens a container's published port in the system's browser; absent, such links do nothing. */
  shell?: { openExternal(url: string): Promise<void> };
  /** The OS keychain's encryption; absent, registry logins cannot be kept. */
  safeStorage?: SafeStorageLike;
  /** The native dialogs; absent, requests that reach beyond a container's isolation are refused. */
  dialog?: {
    showMessageBox(
      window: WindowLike,
      options: { type: 'warning'; title: string; message: string; detail: string; buttons: string[]; defaultId: number; cancelId: number; noLink: boolean },
    ): Promise<{ response: number }>;
  };
}

/**
 * The question the main process asks (in its own window-modal dialog, out of the page's reach) before the
 * bridge passes a request that gives a container privileges or the host's files. Cancel is the default.
 */
export function hostAccessDialog(ask: Parameters<ConfirmHostAccess>[0]): { type: 'warning'; title: string; message: string; detail: string; buttons: string[]; defaultId: number; cancelId: number; noLink: boolean } {
  const route = ask.path.split('?')[0]!;
  const bullets = ask.reasons.map((r) => `• ${r}`).join('\n');
  if (/\/swarm\/init$/.test(route)) {
    return {
      type: 'warning',
      title: 'Berth',
      message: 'Make this engine a swarm manager?',
      detail: `The app asks the engine to start swarm mode:\n${bullets}\n\nMachines that reach that address with a join token can then run services here. Allow it only if you asked for it.`,
      buttons: ['Cancel', 'Allow'],
      defaultId: 0,
      cancelId: 0,
      noLink: true,
    };
  }
  const what = /\/exec$/.test(route)
    ? 'a command'
    : /\/volumes\/create$/.test(route)
      ? 'a volume'
      : /\/plugins\/pull$/.test(route)
        ? 'a plugin'
        : /\/services\/(create|[^/]+\/update)$/.test(route)
          ? 'a service'
          : 'a container';
  return {
    type: 'warning',
    title: 'Berth',
    message: `Allow ${what} with access to the host?`,
    detail: `The app asks the engine for ${what} that:\n${bullets}\n\nIt could read or change anything on this computer. Allow it only if you asked for it.`,
    buttons: ['Cancel', 'Allow'],
    defaultId: 0,
    cancelId: 0,
    noLink: true,
  };
}

export interface AppOptions {
  rendererIndex: string;
  preload: string;
  trayIcon: string;
  startDaemon: DaemonStarter;
  ping?: (endpoint: EngineEndpoint) => Promise<string | undefined>;
  /** The platform whose engine this is (tests); process.platform by default. */
  platform?: NodeJS.Platform;
  /** The docker CLI's configuration folder ($DOCKER_CONFIG or ~/.docker), where the `berth` context goes; absent, none is written. */
  dockerConfig?: string;
  /** The VM the engine runs in, once one was started (macOS, Windows, Linux under the test switch). */
  vmStatus?: () => VmView | undefined | Promise<VmView | undefined>;
}

export interface RunningApp {
  engine: EngineHost;
  settings: SettingsStore;
  credentials: CredentialStore;
  window(): WindowLike | undefined;
  quit(): Promise<void>;
}

/** Starts the app; undefined when another instance already runs (this one quits, the other comes forward). */
export async function startApp(e: ElectronModules, opts: AppOptions): Promise<RunningApp | undefined> {
  if (!e.app.requestSingleInstanceLock()) {
    e.app.quit();
    return undefined;
  }
  let win: WindowLike | undefined;
  let quitting = false;

  const showWindow = () => {
    if (!win || win.isDestroyed()) {
      win = createWindow();
      return;
    }
    if (win.isMinimized()) win.restore();
    win.show();
    win.focus();
  };
  e.app.on('second-instance', showWindow);

  await e.app.whenReady();
  const userData = e.app.getPath('userData');
  const settings = new SettingsStore(path.join(userData, 'settings.json'), defaultSettings(userData));
  await settings.load();
  e.nativeTheme.themeSource = settings.value.theme;

  const engine = new EngineHost(() => settings.value, opts.startDaemon, opts.ping ?? ((endpoint) => pingEngine(endpoint)));
  const noKeychain: SafeStorageLike = { isEncryptionAvailable: () => false, encryptString: () => Buffer.alloc(0), decryptString: () => '' };
  const credentials = new CredentialStore(path.join(userData, 'registries.json'), e.safeStorage ?? noKeychain);
  await credentials.load();

  // Only the app's own window may use the bridge.
  const fromWindow = (event: IpcEvent) => {
    if (!win || win.isDestroyed() || event.sender.id !== win.webContents.id) throw new BridgeError(403, 'not the app window');
  };
  // The user's answer, asked in a dialog of the app's window: page script can neither draw it nor press it.
  const confirmHostAccess: ConfirmHostAccess = async (ask) => {
    if (!e.dialog || !win || win.isDestroyed()) return false;
    const { response } = await e.dialog.showMessageBox(win, hostAccessDialog(ask));
    return response === 1;
  };
  const endpoint = (): EngineEndpoint => {
    const current = engine.endpoint;
    if (!current) throw new BridgeError(503, `the engine is ${engine.state}${engine.error ? `: ${engine.error}` : ''}`);
    return current;
  };
  e.ipcMain.handle('berth:request', async (event, req: BridgeRequest) => {
    fromWindow(event);
    try {
      return await forwardRequest(endpoint(), withRegistryAuth(req), confirmHostAccess);
    } catch (err) {
      if (err instanceof BridgeError) return { status: err.status, body: JSON.stringify({ message: err.message }) };
      throw err;
    }
  });
  e.ipcMain.on('berth:open', (event, open: { type?: string; method?: string; path?: string; body?: string; headers?: unknown; target?: any; version?: string }) => {
    const port = event.ports?.[0];
    if (!port) return;
    try {
      fromWindow(event);
      // Headers as plain strings only; the bridge passes on the few the engine needs (registry credentials).
      const headers = open?.headers && typeof open.headers === 'object' ? Object.fromEntries(Object.entries(open.headers).filter((h): h is [string, string] => typeof h[1] === 'string')) : undefined;
      if (open?.type === 'stream') void openStream(endpoint(), withRegistryAuth({ method: String(open.method), path: String(open.path), body: open.body, headers }), port, confirmHostAccess);
      else if (open?.type === 'terminal') openTerminal(endpoint(), open.target, String(open.version ?? '1.53'), port);
      else if (open?.type === 'upload') openUpload(endpoint(), { method: String(open.method), path: String(open.path) }, port);
      else throw new BridgeError(400, 'unknown stream kind');
    } catch (err) {
      port.postMessage({ type: 'error', status: (err as BridgeError).status ?? 500, message: (err as Error).message });
      port.close();
    }
  });
  e.ipcMain.handle('berth:settings:get', (event) => {
    fromWindow(event);
    return settings.value;
  });
  e.ipcMain.handle('berth:settings:update', async (event, patch: SettingsPatch) => {
    fromWindow(event);
    const before = JSON.stringify(settings.value.engine);
    const next = await settings.update({ engine: patch?.engine, vm: patch?.vm, theme: patch?.theme });
    e.nativeTheme.themeSource = next.theme;
    // Another engine: let go of this one (the embedded daemon stops, containers keep running) and reach the new one.
    if (JSON.stringify(next.engine) !== before) {
      await engine.stop();
      await engine.start();
    }
    return next;
  });
  e.ipcMain.handle('berth:engine:status', async (event) => {
    fromWindow(event);
    // `vm`: whether the bundled engine runs in a VM here (macOS, Windows), whose resources the settings hold;
    // `vmStatus`: that VM's state and the resources it was started with, once it was started.
    const vmStatus = await opts.vmStatus?.();
    return { state: engine.state, error: engine.error, mode: engine.mode, address: engine.address, vm: usesVm(opts.platform ?? process.platform) || !!vmStatus, ...(vmStatus ? { vmStatus } : {}) };
  });
  e.ipcMain.handle('berth:registry:list', (event) => {
    fromWindow(event);
    return { keychain: credentials.available, logins: credentials.list() };
  });
  // A login is checked by the engine (POST /auth, as docker login does) and kept only when it succeeded.
  e.ipcMain.handle('berth:registry:login', async (event, login: { serveraddress?: unknown; username?: unknown; password?: unknown }) => {
    fromWindow(event);
    const [serveraddress, username, password] = [login?.serveraddress, login?.username, login?.password];
    if (typeof serveraddress !== 'string' || typeof username !== 'string' || typeof password !== 'string' || !serveraddress.trim() || !username || !password)
      return { ok: false, message: 'a login needs a registry, a user name and a password' };
    if (!credentials.available) return { ok: false, message: 'no OS keychain is available to keep the password: the login was not saved' };
    try {
      const answer = await authenticate(endpoint(), { serveraddress: serveraddress.trim(), username, password });
      if (answer.status !== 200) return { ok: false, message: answer.message };
      await credentials.save({ serveraddress: serveraddress.trim(), username, password });
      return { ok: true, message: answer.message };
    } catch (err) {
      return { ok: false, message: (err as Error).message };
    }
  });
  e.ipcMain.handle('berth:registry:logout', async (event, serveraddress: unknown) => {
    fromWindow(event);
    return { ok: typeof serveraddress === 'string' && (await credentials.remove(serveraddress)) };
  });

  /** A pull or push without credentials of its own gets the saved login of its registry, added here. */
  function withRegistryAuth(req: BridgeRequest): BridgeRequest {
    if (!req || typeof req.path !== 'string' || String(req.method).toUpperCase() !== 'POST') return req;
    // The page sends an empty auth config (anonymous) where it has none; a login of the user's own replaces it.
    const given = Object.entries(req.headers ?? {}).find(([k]) => k.toLowerCase() === 'x-registry-auth');
    if (given && !isEmptyAuth(given[1])) return req;
    let image: string | undefined;
    try {
      const url = new URL(req.path, 'http://engine');
      if (/^\/v1\.\d+\/images\/create$/.test(url.pathname)) image = url.searchParams.get('fromImage') ?? undefined;
      else image = /^\/v1\.\d+\/images\/(.+)\/push$/.exec(url.pathname)?.[1];
      if (image) image = decodeURIComponent(image);
    } catch {
      return req;
    }
    const found = image ? credentials.credentialsFor(registryOfImage(image)) : undefined;
    if (!found) return req;
    const headers = Object.fromEntries(Object.entries(req.headers ?? {}).filter(([k]) => k.toLowerCase() !== 'x-registry-auth'));
    return { ...req, headers: { ...headers, 'X-Registry-Auth': registryAuthHeader(found) } };
  }

  function createWindow(): WindowLike {
    const w = new e.BrowserWindow(windowOptions(opts.preload, e.nativeTheme.shouldUseDarkColors));
    guardNavigation(w.webContents as never, `file://${opts.rendererIndex}`, e.shell ? (url) => e.shell!.openExternal(url) : undefined);
    w.once('ready-to-show', () => w.show());
    w.on('closed', () => {
      if (win === w) win = undefined;
    });
    void w.loadFile(opts.rendererIndex);
    return w;
  }

  const tray = new e.Tray(opts.trayIcon);
  const actions = {
    show: showWindow,
    start: () => void engine.start(),
    stop: () => void engine.stop(),
    quit: () => void quit(),
  };
  const refreshTray = () => {
    tray.setToolTip(trayTooltip(engine.state));
    tray.setContextMenu(e.Menu.buildFromTemplate(trayTemplate(engine.state, { mode: engine.mode, socketPath: engine.socketPath, address: engine.address, error: engine.error }, actions)));
  };
  engine.onChange(refreshTray);
  refreshTray();
  // The engine the app started is reachable by external CLIs as the `berth` docker context.
  engine.onChange((state) => {
    const endpoint = engine.endpoint;
    if (!opts.dockerConfig || state !== 'running' || engine.mode !== 'embedded' || !endpoint || !('socketPath' in endpoint)) return;
    writeDockerContext(endpoint.socketPath, opts.dockerConfig).catch((err: Error) => console.error(`the berth docker context could not be written: ${err.message}`));
  });
  tray.on('click', showWindow);

  // Closing the window leaves the app in the tray; quitting stops the embedded engine first.
  e.app.on('window-all-closed', () => undefined);
  async function quit(): Promise<void> {
    if (quitting) return;
    quitting = true;
    await engine.stop();
    e.app.quit();
  }
  e.app.on('before-quit', (event: { preventDefault(): void }) => {
    if (!quitting && engine.state === 'running') {
      event.preventDefault();
      void quit();
    }
  });

  win = createWindow();
  await engine.start();
  return { engine, settings, credentials, window: () => win, quit };
}

/** An X-Registry-Auth value that carries no credentials: `{}` in base64 or base64url, or nothing. */
function isEmptyAuth(value: unknown): boolean {
  if (typeof value !== 'string' || !value.trim()) return true;
  try {
    const parsed = JSON.parse(Buffer.from(value, 'base64').toString('utf8')) as Record<string, unknown>;
    return !!parsed && typeof parsed === 'object' && Object.values(parsed).every((v) => v === '' || v === undefined || v === null);
  } catch {
    return false;
  }
}

/** POST /auth: the engine checks the login against the registry; its status and message come back. */
function authenticate(engine: EngineEndpoint, login: { serveraddress: string; username: string; password: string }): Promise<{ status: number; message: string }> {
  const body = JSON.stringify(login);
  return new Promise((resolve, reject) => {
    const r = engineRequest(engine, { method: 'POST', path: '/v1.53/auth', headers: { Host: 'engine', 'Content-Type': 'application/json', 'Content-Length': String(Buffer.byteLength(body)) } });
    r.on('response', (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        let message = '';
        try {
          const parsed = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { Status?: string; message?: string };
          message = parsed.Status ?? parsed.message ?? '';
        } catch {
          message = Buffer.concat(chunks).toString('utf8').trim();
        }
        resolve({ status: res.statusCode ?? 500, message: message || `the engine answered ${res.statusCode}` });
      });
      res.on('error', reject);
    });
    r.on('error', (err) => reject(new Error(`the engine did not answer: ${err.message}`)));
    r.end(body);
  });
}
