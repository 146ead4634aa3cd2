import { afterEach, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, execFileSync } from 'node:child_process';
import { promisify } from 'node:util';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { hostAccessDialog, startApp, type ElectronModules, type IpcEvent } from '../src/app.js';
import { contextMetaFile } from '../src/docker-context.js';
import { fakeElectron, fakeEngine, FakePort, fakeSafeStorage } from './fakes.js';

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
          localToken: 'berth_local_test',
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
    // A sandbox's policy: read and installed with the embedded daemon's local token, which the page never holds.
    await f.ipcHandle['berth:request']!(own, { method: 'PUT', path: '/v1/sandboxes/c1/network-policies', body: '{"defaultAction":"deny","rules":[]}', headers: { Authorization: 'Bearer forged' } });
    assert.ok(daemon.engines[0]!.authorized.includes('PUT /v1/sandboxes/c1/network-policies Bearer berth_local_test'), daemon.engines[0]!.authorized.join('\n'));
    assert.ok(!daemon.engines[0]!.authorized.some((a) => a.includes('forged')));
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

  /** A self-signed certificate for 127.0.0.1 (it is its own CA), made with openssl. */
  function certificate(dir: string, name: string): { cert: string; key: string } {
    const cert = path.join(dir, `${name}-cert.pem`);
    const key = path.join(dir, `${name}-key.pem`);
    execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '1', '-subj', '/CN=127.0.0.1', '-addext', 'subjectAltName=IP:127.0.0.1', '-keyout', key, '-out', cert], { stdio: 'ignore' });
    return { cert, key };
  }

  it('switches from the embedded engine to one over TCP with TLS, trusting only the CA given, and back', async () => {
    const userData = tmp();
    const f = fakeElectron({ userData });
    const daemon = daemonStarter();
    const app = (await startApp(f.electron, { rendererIndex: '/r/index.html', preload: '/p.cjs', trayIcon: '/t.png', startDaemon: daemon.start }))!;
    const own = { sender: { id: f.windows[0]!.webContents.id } };
    const server = certificate(userData, 'server');
    const other = certificate(userData, 'other');
    const remote = await fakeEngine({ port: 0, tls: { cert: readFileSync(server.cert), key: readFileSync(server.key) } });
    cleanups.push(() => remote.close());

    // A CA that did not sign the engine's certificate: no connection, and the reason is told.
    await f.ipcHandle['berth:settings:update']!(own, { engine: { mode: 'tcp', tcp: { host: '127.0.0.1', port: remote.port, tls: true, ca: other.cert } } });
    assert.equal(daemon.calls.stopped, 1, 'the embedded engine stopped');
    assert.equal(app.engine.state, 'error');
    assert.match(app.engine.error, /no engine answers on https:\/\/127\.0\.0\.1:\d+: .*(self.signed|verify|certificate)/i);
    const refused = (await f.ipcHandle['berth:request']!(own, { method: 'GET', path: '/_ping' })) as { status: number };
    assert.equal(refused.status, 503);
    assert.equal(remote.seen.length, 0, 'nothing reached the engine over an untrusted connection');

    // Its own CA: connected, and requests go there.
    await f.ipcHandle['berth:settings:update']!(own, { engine: { tcp: { ca: server.cert } } });
    assert.equal(app.engine.state, 'running', app.engine.error);
    const list = (await f.ipcHandle['berth:request']!(own, { method: 'GET', path: '/v1.53/containers/json?all=1' })) as { status: number; body: string };
    assert.equal(list.status, 200);
    assert.deepEqual(JSON.parse(list.body), [{ Id: 'c1', Names: ['/web'] }]);
    assert.ok(remote.seen.includes('GET /v1.53/containers/json?all=1'));
    const status = (await f.ipcHandle['berth:engine:status']!(own)) as { state: string; address: string };
    assert.deepEqual(status, { state: 'running', error: '', mode: 'tcp', address: `https://127.0.0.1:${remote.port}`, vm: false });
    assert.equal(f.trays[0]!.menu[1].label, `Connected to https://127.0.0.1:${remote.port}`);
    // Streams go over TLS too.
    const port = new FakePort();
    f.ipcOn['berth:open']!({ ...own, ports: [port] }, { type: 'stream', method: 'GET', path: '/v1.53/events' });
    await port.until((sent) => sent.some((m) => m.type === 'end'));
    assert.match(port.text(), /"Action":"die"/);

    // Back to the embedded engine.
    await f.ipcHandle['berth:settings:update']!(own, { engine: { mode: 'embedded' } });
    assert.equal(daemon.calls.started, 2);
    assert.equal(app.engine.state, 'running');
    assert.equal(f.trays[0]!.menu[1].label, `Embedded engine on ${path.join(userData, 'engine.sock')}`);
    await app.quit();
  });

  it('logs in to a registry through the engine, keeps the password only encrypted, and adds it to pushes', async () => {
    const userData = tmp();
    const f = fakeElectron({ userData, safeStorage: fakeSafeStorage() });
    const daemon = daemonStarter();
    const app = (await startApp(f.electron, { rendererIndex: '/r/index.html', preload: '/p.cjs', trayIcon: '/t.png', startDaemon: daemon.start }))!;
    const own = { sender: { id: f.windows[0]!.webContents.id } };
    const engine = daemon.engines[0]!;

    const wrong = (await f.ipcHandle['berth:registry:login']!(own, { serveraddress: 'localhost:5000', username: 'ann', password: 'wrong' })) as { ok: boolean; message: string };
    assert.deepEqual(wrong, { ok: false, message: 'login attempt failed: unauthorized' });
    assert.deepEqual(((await f.ipcHandle['berth:registry:list']!(own)) as any).logins, []);
    const good = (await f.ipcHandle['berth:registry:login']!(own, { serveraddress: 'localhost:5000', username: 'ann', password: 'right' })) as { ok: boolean; message: string };
    assert.deepEqual(good, { ok: true, message: 'Login Succeeded' });
    assert.deepEqual(await f.ipcHandle['berth:registry:list']!(own), { keychain: true, logins: [{ serveraddress: 'localhost:5000', username: 'ann' }] });
    assert.doesNotMatch(readFileSync(path.join(userData, 'registries.json'), 'utf8'), /right/);
    assert.ok(engine.seen.filter((s) => s.startsWith('POST /v1.53/auth')).length === 2);

    // A push to that registry carries the login; one elsewhere does not; one with its own header keeps it.
    const port = new FakePort();
    // The page sends an empty auth config (anonymous) of its own, as the images view does.
    f.ipcOn['berth:open']!({ ...own, ports: [port] }, { type: 'stream', method: 'POST', path: '/v1.53/images/localhost:5000/team/app/push?tag=1', headers: { 'X-Registry-Auth': Buffer.from('{}').toString('base64') } });
    await port.until((sent) => sent.some((m) => m.type === 'end' || m.type === 'error'));
    const pushed = engine.seen.find((s) => s.startsWith('POST /v1.53/images/localhost:5000/team/app/push'))!;
    const auth = JSON.parse(Buffer.from(/auth=(\S+)/.exec(pushed)![1]!, 'base64url').toString());
    assert.deepEqual(auth, { username: 'ann', password: 'right', serveraddress: 'localhost:5000' });
    await f.ipcHandle['berth:request']!(own, { method: 'POST', path: '/v1.53/images/other.example/app/push' });
    assert.ok(engine.seen.includes('POST /v1.53/images/other.example/app/push'));
    const own64 = Buffer.from(JSON.stringify({ username: 'carl', password: 'x' })).toString('base64');
    await f.ipcHandle['berth:request']!(own, { method: 'POST', path: '/v1.53/images/localhost:5000/team/other/push', headers: { 'X-Registry-Auth': own64 } });
    assert.ok(engine.seen.includes(`POST /v1.53/images/localhost:5000/team/other/push auth=${own64}`));

    assert.deepEqual(await f.ipcHandle['berth:registry:logout']!(own, 'localhost:5000'), { ok: true });
    assert.deepEqual(((await f.ipcHandle['berth:registry:list']!(own)) as any).logins, []);
    await app.quit();
  });

  it('refuses a registry login when no keychain can keep it', async () => {
    const userData = tmp();
    const f = fakeElectron({ userData, safeStorage: fakeSafeStorage({ backend: 'basic_text' }) });
    const daemon = daemonStarter();
    const app = (await startApp(f.electron, { rendererIndex: '/r/index.html', preload: '/p.cjs', trayIcon: '/t.png', startDaemon: daemon.start }))!;
    const own = { sender: { id: f.windows[0]!.webContents.id } };
    const answer = (await f.ipcHandle['berth:registry:login']!(own, { serveraddress: 'localhost:5000', username: 'ann', password: 'right' })) as { ok: boolean; message: string };
    assert.equal(answer.ok, false);
    assert.match(answer.message, /no OS keychain/);
    assert.equal(((await f.ipcHandle['berth:registry:list']!(own)) as any).keychain, false);
    await app.quit();
  });

  it('makes its engine the `berth` docker context, which the docker CLI reaches, and leaves the current context alone', async () => {
    const home = tmp();
    const dockerConfig = path.join(home, '.docker');
    mkdirSync(dockerConfig);
    const config = JSON.stringify({ auths: {}, currentContext: 'default' });
    writeFileSync(path.join(dockerConfig, 'config.json'), config);
    const f = fakeElectron({ userData: tmp() });
    const daemon = daemonStarter();
    const app = (await startApp(f.electron, { rendererIndex: '/r/index.html', preload: '/p.cjs', trayIcon: '/t.png', startDaemon: daemon.start, dockerConfig }))!;
    const file = contextMetaFile(dockerConfig);
    for (let i = 0; i < 100 && !existsSync(file); i++) await new Promise((r) => setTimeout(r, 20));
    const meta = JSON.parse(readFileSync(file, 'utf8'));
    assert.equal(meta.Name, 'berth');
    assert.equal(meta.Endpoints.docker.Host, `unix://${app.engine.socketPath}`);
    // The real docker CLI, with HOME in the temporary folder, reaches the app's engine through the context.
    // (Asynchronously: the engine answers in this process.)
    const env = { ...Object.fromEntries(Object.entries(process.env).filter(([k]) => !/^DOCKER_(CONFIG|HOST|CONTEXT)$/.test(k))), HOME: home };
    const docker = async (args: string[]) => (await promisify(execFile)('docker', args, { env, encoding: 'utf8', timeout: 20_000 })).stdout;
    assert.equal((await docker(['--context', 'berth', 'version', '--format', '{{.Server.Version}}'])).trim(), 'fake-engine');
    const contexts = await docker(['context', 'ls', '--format', '{{.Name}} {{.Current}}']);
    assert.match(contexts, /^berth false$/m);
    assert.match(contexts, /^default true$/m);
    assert.equal(readFileSync(path.join(dockerConfig, 'config.json'), 'utf8'), config, 'config.json (the current context) untouched');
    await app.quit();
  });

  it("keeps the VM's resources for the engine's start, and says where there is a VM", async () => {
    const f = fakeElectron({ userData: tmp() });
    const started: Array<{ vm: unknown }> = [];
    const daemon = daemonStarter();
    const startDaemon = async (socketPath: string, settings: { vm: unknown }) => {
      started.push({ vm: settings.vm });
      return daemon.start(socketPath);
    };
    const app = (await startApp(f.electron, { rendererIndex: '/r/index.html', preload: '/p.cjs', trayIcon: '/t.png', startDaemon, platform: 'darwin' }))!;
    const own = { sender: { id: f.windows[0]!.webContents.id } };
    assert.equal(((await f.ipcHandle['berth:engine:status']!(own)) as { vm: boolean }).vm, true);
    const next = (await f.ipcHandle['berth:settings:update']!(own, { vm: { cpus: 6, memoryMiB: 8192 } })) as { vm: unknown };
    assert.deepEqual(next.vm, { cpus: 6, memoryMiB: 8192, diskGiB: 64 });
    // Given at the engine's next start.
    await app.engine.stop();
    await app.engine.start();
    assert.deepEqual(started.map((s) => s.vm), [{ cpus: 2, memoryMiB: 2048, diskGiB: 64 }, { cpus: 6, memoryMiB: 8192, diskGiB: 64 }]);
    await app.quit();
    const g = fakeElectron({ userData: tmp() });
    const linux = (await startApp(g.electron, { rendererIndex: '/r/index.html', preload: '/p.cjs', trayIcon: '/t.png', startDaemon: daemonStarter().start, platform: 'linux' }))!;
    assert.equal(((await g.ipcHandle['berth:engine:status']!({ sender: { id: g.windows[0]!.webContents.id } })) as { vm: boolean }).vm, false);
    await linux.quit();
  });

  it('asks in its own dialog before a plugin install that grants privileges goes to the engine', async () => {
    const f = fakeElectron({ userData: tmp(), dialogAnswers: [0] });
    const daemon = daemonStarter();
    const app = (await startApp(f.electron, { rendererIndex: '/r/index.html', preload: '/p.cjs', trayIcon: '/t.png', startDaemon: daemon.start }))!;
    const own = { sender: { id: f.windows[0]!.webContents.id } };
    const pulls = () => daemon.engines[0]!.seen.filter((s) => s.startsWith('POST /v1.53/plugins/pull')).length;
    const open = async (privileges: unknown) => {
      const port = new FakePort();
      f.ipcOn['berth:open']!({ ...own, ports: [port] }, { type: 'stream', method: 'POST', path: '/v1.53/plugins/pull?remote=r:5000/p:1', body: JSON.stringify(privileges) });
      await port.until((s) => s.some((m) => m.type === 'error' || m.type === 'end'));
      return port;
    };
    const refused = await open([{ Name: 'mount', Description: '', Value: ['/var/lib/docker'] }]);
    assert.equal(refused.sent[0].status, 403);
    assert.equal(pulls(), 0);
    assert.match(f.dialogs[0]!.options.message, /Allow a plugin with access to the host/);
    assert.match(f.dialogs[0]!.options.detail, /installs a plugin granted mount: \/var\/lib\/docker/);
    // An isolated network alone asks nothing.
    await open([{ Name: 'network', Description: '', Value: ['none'] }]);
    assert.equal(pulls(), 1);
    assert.equal(f.dialogs.length, 1);
    await app.quit();
  });
});

describe('the host access dialog', () => {
  it('names what is asked for: a service update, a swarm init', () => {
    const service = hostAccessDialog({ method: 'POST', path: '/v1.53/services/web/update?version=3', reasons: ["mounts the host's / at /host (read-write)"] });
    assert.equal(service.message, 'Allow a service with access to the host?');
    assert.match(service.detail, /• mounts the host's \/ at \/host \(read-write\)/);
    const init = hostAccessDialog({ method: 'POST', path: '/v1.53/swarm/init', reasons: ['makes this engine a swarm manager, its swarm port listening on 0.0.0.0:2377 for other machines to join'] });
    assert.equal(init.message, 'Make this engine a swarm manager?');
    assert.match(init.detail, /listening on 0\.0\.0\.0:2377/);
    assert.deepEqual([init.buttons, init.defaultId, init.cancelId], [['Cancel', 'Allow'], 0, 0]);
  });
});
