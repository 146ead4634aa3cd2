/** Fakes of the Electron objects and of an engine socket, for the main-process tests. */
import http from 'node:http';
import https from 'node:https';
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import type { PortLike } from '../src/bridge.js';
import type { ElectronModules, IpcEvent } from '../src/app.js';
import type { SafeStorageLike } from '../src/credentials.js';

export class FakePort implements PortLike {
  sent: any[] = [];
  closed = false;
  private handlers: Record<string, Array<(ev?: any) => void>> = { message: [], close: [] };
  private waiters: Array<() => void> = [];
  postMessage(message: unknown): void {
    this.sent.push(message);
    for (const w of this.waiters.splice(0)) w();
  }
  on(event: 'message' | 'close', listener: (ev: any) => void): this {
    this.handlers[event]!.push(listener);
    return this;
  }
  start(): void {}
  close(): void {
    this.closed = true;
    for (const w of this.waiters.splice(0)) w();
  }
  /** The renderer side sends a message. */
  send(data: unknown): void {
    for (const h of this.handlers.message!) h({ data });
  }
  /** Resolves once `check` holds over what was sent. */
  async until(check: (sent: any[]) => boolean, timeoutMs = 3000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!check(this.sent)) {
      if (Date.now() > deadline) throw new Error(`port condition not met; sent: ${JSON.stringify(this.sent).slice(0, 500)}`);
      await new Promise<void>((r) => {
        this.waiters.push(r);
        setTimeout(r, 50);
      });
    }
  }
  text(): string {
    return Buffer.concat(this.sent.filter((m) => m.type === 'data').map((m) => Buffer.from(m.data))).toString();
  }
}

/** A stand-in engine: JSON routes, a chunked stream, and hijacked exec/attach that echo upper-cased. */
export async function fakeEngine(
  socketPath: string | { port: 0; tls?: { cert: Buffer; key: Buffer } },
): Promise<{ server: http.Server; seen: string[]; authorized: string[]; port: number; close(): Promise<void> }> {
  const seen: string[] = [];
  /** The requests that came with an Authorization header, and its value. */
  const authorized: string[] = [];
  const handler = (req: http.IncomingMessage, res: http.ServerResponse) => {
    seen.push(`${req.method} ${req.url}${req.headers['x-registry-auth'] ? ` auth=${req.headers['x-registry-auth']}` : ''}${req.headers.cookie ? ' cookie' : ''}`);
    if (req.headers.authorization) authorized.push(`${req.method} ${req.url} ${req.headers.authorization}`);
    if (req.url === '/_ping') return void res.end('OK');
    if (/^\/v1\.\d+\/version$/.test(req.url!)) {
      res.setHeader('Content-Type', 'application/json');
      return void res.end(JSON.stringify({ Version: 'fake-engine', ApiVersion: '1.53', MinAPIVersion: '1.24', Os: 'linux', Arch: 'amd64', Components: [{ Name: 'Engine', Version: 'fake-engine' }] }));
    }
    // POST /auth: one good login (user "ann", password "right"), as a registry would check it.
    if (req.url === '/v1.53/auth' && req.method === 'POST') {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const login = JSON.parse(Buffer.concat(chunks).toString()) as { username: string; password: string };
        res.setHeader('Content-Type', 'application/json');
        if (login.username === 'ann' && login.password === 'right') return void res.end(JSON.stringify({ Status: 'Login Succeeded' }));
        res.statusCode = 401;
        res.end(JSON.stringify({ message: 'login attempt failed: unauthorized' }));
      });
      return;
    }
    if (/^\/v1\.53\/images\/.+\/push/.test(req.url!)) return void res.end('{"status":"pushed"}\n');
    // A build: counts the context's bytes, then answers as the engine does.
    if (req.url!.startsWith('/v1.53/build') && req.method === 'POST') {
      let size = 0;
      req.on('data', (c: Buffer) => (size += c.length));
      req.on('end', () => {
        res.writeHead(200, { 'Content-Type': 'application/json' });
        res.end(`{"stream":"context of ${size} bytes (${req.headers['content-type']})\\n"}\n{"aux":{"ID":"sha256:feed"}}\n`);
      });
      return;
    }
    if (req.url === '/v1.53/containers/json?all=1') {
      res.setHeader('Content-Type', 'application/json');
      return void res.end(JSON.stringify([{ Id: 'c1', Names: ['/web'] }]));
    }
    if (req.url === '/v1.53/events') {
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.write('{"Type":"container","Action":"start"}\n');
      setTimeout(() => res.end('{"Type":"container","Action":"die"}\n'), 20);
      return;
    }
    res.writeHead(404, { 'Content-Type': 'application/json' });
    res.end(JSON.stringify({ message: `No such thing: ${req.url}` }));
  };
  const server = typeof socketPath === 'object' && socketPath.tls ? https.createServer({ cert: socketPath.tls.cert, key: socketPath.tls.key }, handler) : http.createServer(handler);
  server.on('upgrade', (req, socket, head: Buffer) => {
    seen.push(`${req.method} ${req.url} upgrade=${req.headers.upgrade} body=${head.toString()}`);
    if (/^\/v1\.53\/(exec\/e1\/start|containers\/c1\/attach)/.test(req.url!)) {
      socket.write('HTTP/1.1 101 UPGRADED\r\nConnection: Upgrade\r\nUpgrade: tcp\r\n\r\n');
      socket.on('data', (d: Buffer) => (d.toString() === 'exit\n' ? socket.end() : socket.write(d.toString().toUpperCase())));
      return;
    }
    const body = JSON.stringify({ message: 'No such exec: nope' });
    socket.end(`HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`);
  });
  const sockets = new Set<import('node:net').Socket>();
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((r) => (typeof socketPath === 'string' ? server.listen(socketPath, r) : server.listen(0, '127.0.0.1', r)));
  const address = server.address();
  return {
    server,
    seen,
    authorized,
    port: address && typeof address === 'object' ? address.port : 0,
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

/** safeStorage, faked: AES with a key only this process holds (as the OS keychain would hold it). */
export function fakeSafeStorage(opts: { available?: boolean; backend?: string } = {}): SafeStorageLike & { calls: number } {
  const key = randomBytes(32);
  const fake = {
    calls: 0,
    isEncryptionAvailable: () => opts.available ?? true,
    getSelectedStorageBackend: () => opts.backend ?? 'gnome_libsecret',
    encryptString(plain: string): Buffer {
      fake.calls++;
      const iv = randomBytes(16);
      const c = createCipheriv('aes-256-cbc', key, iv);
      return Buffer.concat([iv, c.update(plain, 'utf8'), c.final()]);
    },
    decryptString(encrypted: Buffer): string {
      const d = createDecipheriv('aes-256-cbc', key, encrypted.subarray(0, 16));
      return Buffer.concat([d.update(encrypted.subarray(16)), d.final()]).toString('utf8');
    },
  };
  return fake;
}

/** Electron's main-process objects, faked: they record what the app does with them. */
export function fakeElectron(opts: { lock?: boolean; userData: string; dialogAnswers?: number[]; safeStorage?: ElectronModules['safeStorage'] }) {
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
    safeStorage: opts.safeStorage,
    dialog: {
      showMessageBox: async (window, options) => {
        dialogs.push({ window, options });
        return { response: opts.dialogAnswers?.shift() ?? 0 };
      },
    },
  };
  return { electron, appHandlers, ipcHandle, ipcOn, windows, trays, dialogs, quits: () => quits };
}
