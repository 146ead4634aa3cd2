import { afterEach, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { startApp, type ElectronModules, type IpcEvent } from '../src/app.js';
import { fakeEngine, FakePort } from './fakes.js';

/** Electron's main-process objects, faked: they record what the app does with them. */
function fakeElectron(opts: { lock?: boolean; userData: string; dialogAnswers?: number[] }) {
  const dialogs: Array<{ window: unknown; options: any }> = [];
  const appHandlers: Record<string, Array<(...a: any[]) => void>> = {};
  const ipcHandle: Record<string, (event: IpcEvent, ...a: any[]) => unknown> = {};
  const ipcOn: Record<string, (event: IpcEvent, ...a: any[]) => void> = {};
  const windows: FakeWindow[] = [];
  const trays: FakeTray[] = [];
  let quits = 0;
  let nextId = 1;
  class FakeWindow {
    shown = 0;
    focused = 0;
    loaded: string[] = [];
    destroyed = false;
    handlers: Record<string, () => void> = {};
    webContents = { id: nextId++, on: () => undefined, setWindowOpenHandler: () => undefined };
    constructor(readonly options: any) {
      windows.push(this);
    }
    async loadFile(f: string) {
      this.loaded.push(f);
      this.handlers['ready-to-show']?.();
    }
    once(ev: string, cb: () => void) {
      this.handlers[ev] = cb;
    }
    on(ev: string, cb: () => void) {
      this.handlers[ev] = cb;
    }
    show() {
      this.shown++;
    }
    focus() {
      this.focused++;
    }
    restore() {}
    isMinimized() {
      return false;
    }
    isDestroyed() {
      return this.destroyed;
    }
  }
  class FakeTray {
    menu: any[] = [];
    tooltip = '';
    constructor(readonly icon: string) {
      trays.push(this);
    }
    setContextMenu(m: any) {
      this.menu = m;
    }
    setToolTip(t: string) {
      this.tooltip = t;
    }
    on() {}
  }
  const electron: ElectronModules = {
    app: {
      requestSingleInstanceLock: () => opts.lock ?? true,
      quit: () => void quits++,
      on: (ev: string, cb: (...a: any[]) => void) => void (appHandlers[ev] ??= []).push(cb),
      whenReady: async () => undefined,
      getPath: () => opts.userData,
    },
    BrowserWindow: FakeWindow as never,
    Tray: FakeTray as never,
    Menu: { buildFromTemplate: (t: any) => t },
    ipcMain: {
      handle: (ch, fn) => void (ipcHandle[ch] = fn),
      on: (ch, fn) => void (ipcOn[ch] = fn),
    },
    nativeTheme: { themeSource: 'system', shouldUseDarkColors: false },
    dialog: {
      showMessageBox: async (window, options) => {
        dialogs.push({ window, options });
        return { response: opts.dialogAnswers?.shift() ?? 0 };
      },
    },
  };
  return { electron, appHandlers, ipcHandle, ipcOn, windows, trays, dialogs, quits: () => quits };
}

describe('main process', () => {
  const cleanups: Array<() => Promise<void> | void> = [];
  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c();
  });

  function tmp(): string {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'berth-app-'));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    return dir;
  }

  /** The embedded daemon, faked: a fake engine serving the socket from the settings. */
  function daemonStarter() {
    const calls = { started: 0, stopped: 0 };
    const engines: Array<Awaited<ReturnType<typeof fakeEngine>>> = [];
    return {
      calls,
      engines,
      start: async (socketPath: string) => {
        calls.started++;
        const engine = await fakeEngine(socketPath);
        engines.push(engine);
        cleanups.push(() => engine.close());
        return {
          shutdown: async () => {
            calls.stopped++;
            await engine.close();
          },
        };
      },
    };
  }

  it('quits when another instance holds the lock, without a window', async () => {
    const f = fakeElectron({ lock: false, userData: tmp() });
    const daemon = daemonStarter();
    const app = await startApp(f.electron, { rendererIndex: '/r/index.html', preload: '/p.cjs', trayIcon: '/t.png', startDaemon: daemon.start });
    assert.equal(app, undefined);
    assert.equal(f.quits(), 1);
    assert.equal(f.windows.length, 0);
    assert.equal(daemon.calls.started, 0);
  });

  it('starts the embedded engine, opens one isolated window, and shows the state in the tray', async () => {
    const f = fakeElectron({ userData: tmp() });
    const daemon = daemonStarter();
    const app = (await startApp(f.electron, { rendererIndex: '/r/index.html', preload: '/p.cjs', trayIcon: '/t.png', startDaemon: daemon.start }))!;
    assert.equal(app.engine.state, 'running');
    assert.equal(f.windows.length, 1);
    const w = f.windows[0]!;
    assert.deepEqual(w.loaded, ['/r/index.html']);
    assert.equal(w.options.webPreferences.contextIsolation, true);
    assert.equal(w.options.webPreferences.sandbox, true);
    assert.equal(w.options.webPreferences.nodeIntegration, false);
    assert.equal(w.shown, 1);
    assert.equal(f.trays[0]!.menu[0].label, 'Engine running');
    // A second launch brings the window forward instead of opening another.
    for (const cb of f.appHandlers['second-instance']!) cb();
    assert.equal(f.windows.length, 1);
    assert.equal(w.focused, 1);
    await app.quit();
  });

  it('answers the bridge only for its window, through the allow-list, and streams over ports', async () => {
    const f = fakeElectron({ userData: tmp() });
    const daemon = daemonStarter();
    const app = (await startApp(f.electron, { rendererIndex: '/r/index.html', preload: '/p.cjs', trayIcon: '/t.png', startDaemon: daemon.start }))!;
    const own = { sender: { id: f.windows[0]!.webContents.id } };
    const res = (await f.ipcHandle['berth:request']!(own, { method: 'GET', path: '/v1.53/containers/json?all=1' })) as { status: number; body: string };
    assert.equal(res.status, 200);
    assert.equal(JSON.parse(res.body)[0].Id, 'c1');
    const refused = (await f.ipcHandle['berth:request']!(own, { method: 'POST', path: '/v1.53/swarm/leave' })) as { status: number; body: string };
    assert.equal(refused.status, 403);
    await assert.rejects(async () => f.ipcHandle['berth:request']!({ sender: { id: 999 } }, { method: 'GET', path: '/_ping' }), /not the app window/);

    const port = new FakePort();
    f.ipcOn['berth:open']!({ ...own, ports: [port] }, { type: 'stream', method: 'GET', path: '/v1.53/events' });
    await port.until((s) => s.some((m) => m.type === 'end'));
    assert.match(port.text(), /"Action":"start"/);
    const strange = new FakePort();
    f.ipcOn['berth:open']!({ sender: { id: 999 }, ports: [strange] }, { type: 'stream', method: 'GET', path: '/v1.53/events' });
    assert.equal(strange.sent[0].status, 403);
    // A pull's registry credentials reach the engine; other headers do not.
    const pull = new FakePort();
    f.ipcOn['berth:open']!({ ...own, ports: [pull] }, { type: 'stream', method: 'POST', path: '/v1.53/images/create?fromImage=x', headers: { 'X-Registry-Auth': 'e30=', Cookie: 'a=b' } });
    await pull.until((s) => s.some((m) => m.type === 'error'));
    assert.ok(daemon.engines[0]!.seen.includes('POST /v1.53/images/create?fromImage=x auth=e30='), daemon.engines[0]!.seen.join('\n'));
    await app.quit();
  });

  it("asks in its own dialog before the bridge creates a container with the host's root mounted", async () => {
    const f = fakeElectron({ userData: tmp(), dialogAnswers: [0, 1] });
    const daemon = daemonStarter();
    const app = (await startApp(f.electron, { rendererIndex: '/r/index.html', preload: '/p.cjs', trayIcon: '/t.png', startDaemon: daemon.start }))!;
    const own = { sender: { id: f.windows[0]!.webContents.id } };
    const req = { method: 'POST', path: '/v1.53/containers/create?name=rooted', body: JSON.stringify({ Image: 'busybox', HostConfig: { Privileged: true, Binds: ['/:/host'] } }) };
    const seen = () => daemon.engines[0]!.seen.filter((s) => s.startsWith('POST /v1.53/containers/create?name=rooted')).length;
    // Cancelled: refused with the reasons, nothing reaches the engine.
    const refused = (await f.ipcHandle['berth:request']!(own, req)) as { status: number; body: string };
    assert.equal(refused.status, 403);
    assert.match(JSON.parse(refused.body).message, /privileged/);
    assert.equal(seen(), 0);
    assert.equal(f.dialogs.length, 1);
    assert.equal(f.dialogs[0]!.window, f.windows[0], 'modal to the app window');
    const { options } = f.dialogs[0]!;
    assert.deepEqual(options.buttons, ['Cancel', 'Allow']);
    assert.equal(options.defaultId, 0, 'Cancel is the default');
    assert.match(options.message, /container with access to the host/);
    assert.match(options.detail, /runs privileged/);
    assert.match(options.detail, /mounts the host's \/ at \/host \(read-write\)/);
    // Allowed: it goes on to the engine.
    const allowed = (await f.ipcHandle['berth:request']!(own, req)) as { status: number; body: string };
    assert.equal(allowed.status, 404, 'the fake engine answered');
    assert.equal(seen(), 1);
    // The same body as a stream asks too (and is refused: no answer left means Cancel).
    const port = new FakePort();
    f.ipcOn['berth:open']!({ ...own, ports: [port] }, { type: 'stream', ...req });
    await port.until((s) => s.some((m) => m.type === 'error'));
    assert.equal(port.sent[0].status, 403);
    assert.equal(f.dialogs.length, 3);
    assert.equal(seen(), 1);
    // Without a dialog to ask in, such requests are refused outright.
    const g = fakeElectron({ userData: tmp() });
    delete (g.electron as { dialog?: unknown }).dialog;
    const app2 = (await startApp(g.electron, { rendererIndex: '/r/index.html', preload: '/p.cjs', trayIcon: '/t.png', startDaemon: daemonStarter().start }))!;
    const none = (await g.ipcHandle['berth:request']!({ sender: { id: g.windows[0]!.webContents.id } }, req)) as { status: number };
    assert.equal(none.status, 403);
    await app2.quit();
    await app.quit();
  });

  it('stops and starts the engine from the tray, and persists settings', async () => {
    const userData = tmp();
    const f = fakeElectron({ userData });
    const daemon = daemonStarter();
    const app = (await startApp(f.electron, { rendererIndex: '/r/index.html', preload: '/p.cjs', trayIcon: '/t.png', startDaemon: daemon.start }))!;
    const tray = f.trays[0]!;
    const item = (label: string) => tray.menu.find((i: any) => i.label === label);
    item('Stop engine').click();
    await new Promise((r) => setTimeout(r, 100));
    assert.equal(daemon.calls.stopped, 1);
    assert.equal(tray.menu[0].label, 'Engine stopped');
    assert.match(tray.tooltip, /stopped/);
    const own = { sender: { id: f.windows[0]!.webContents.id } };
    const down = (await f.ipcHandle['berth:request']!(own, { method: 'GET', path: '/_ping' })) as { status: number; body: string };
    assert.equal(down.status, 503);
    item('Start engine').click();
    await new Promise((r) => setTimeout(r, 100));
    assert.equal(daemon.calls.started, 2);
    assert.equal(tray.menu[0].label, 'Engine running');

    // Connect to an engine that already serves a socket instead.
    const other = path.join(userData, 'other.sock');
    const external = await fakeEngine(other);
    cleanups.push(() => external.close());
    const updated = (await f.ipcHandle['berth:settings:update']!(own, { engine: { mode: 'socket', socketPath: other }, theme: 'dark' })) as any;
    assert.equal(updated.engine.mode, 'socket');
    assert.equal(f.electron.nativeTheme.themeSource, 'dark');
    assert.equal(app.engine.state, 'running');
    assert.equal(tray.menu[1].label, `Connected to ${other}`);
    const ping = (await f.ipcHandle['berth:request']!(own, { method: 'GET', path: '/_ping' })) as { status: number; body: string };
    assert.equal(ping.status, 200);
    assert.ok(external.seen.includes('GET /_ping'));
    const f2 = fakeElectron({ userData });
    const app2 = (await startApp(f2.electron, { rendererIndex: '/r/index.html', preload: '/p.cjs', trayIcon: '/t.png', startDaemon: daemon.start }))!;
    assert.equal(app2.settings.value.engine.socketPath, other, 'settings survive a restart');
    await app2.quit();
    await app.quit();
    void http;
  });
});
