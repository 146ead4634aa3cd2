/**
 * Volume drivers of legacy plugins against a real berthd: a small VolumeDriver plugin served by this test
 * on unix sockets (one found as a socket in the plugin socket folder, one through a `.spec` file), keeping
 * its volumes in a temporary folder. The docker CLI creates, lists, inspects, mounts (in containers, with
 * `-v`, `--mount` and `--volume-driver`), removes and prunes its volumes; the driver's errors reach the
 * client; a missing driver is named with Docker's words.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { startEngine, type Engine } from './harness.js';

interface Call {
  method: string;
  accept: string | undefined;
  body: any;
}

/** A VolumeDriver plugin keeping each volume as a folder under `dir`. */
class FakeVolumePlugin {
  readonly calls: Call[] = [];
  readonly volumes = new Map<string, { opts: Record<string, string>; mounts: Set<string> }>();
  implementsList = ['VolumeDriver'];
  private readonly servers: http.Server[] = [];

  constructor(readonly dir: string) {
    mkdirSync(dir, { recursive: true });
  }

  folder(name: string): string {
    return path.join(this.dir, name);
  }

  private answer(method: string, body: any): { status?: number; json: object } {
    const v = body?.Name !== undefined ? this.volumes.get(body.Name) : undefined;
    switch (method) {
      case 'Plugin.Activate':
        return { json: { Implements: this.implementsList } };
      case 'VolumeDriver.Capabilities':
        return { json: { Capabilities: { Scope: 'global' } } };
      case 'VolumeDriver.Create':
        if (String(body.Name).startsWith('refused')) return { json: { Err: 'refused by the test driver' } };
        if (String(body.Name).startsWith('broken')) return { status: 500, json: { Err: 'the test driver broke' } };
        mkdirSync(this.folder(body.Name), { recursive: true });
        this.volumes.set(body.Name, { opts: body.Opts ?? {}, mounts: new Set() });
        return { json: {} };
      case 'VolumeDriver.Remove':
        if (!v) return { json: { Err: `no volume ${body.Name}` } };
        if (v.mounts.size > 0) return { json: { Err: `volume ${body.Name} is mounted` } };
        rmSync(this.folder(body.Name), { recursive: true, force: true });
        this.volumes.delete(body.Name);
        return { json: {} };
      case 'VolumeDriver.Mount':
        if (!v) return { json: { Err: `no volume ${body.Name}` } };
        v.mounts.add(body.ID);
        return { json: { Mountpoint: this.folder(body.Name) } };
      case 'VolumeDriver.Unmount':
        if (!v) return { json: { Err: `no volume ${body.Name}` } };
        v.mounts.delete(body.ID);
        return { json: {} };
      case 'VolumeDriver.Path':
        return { json: v ? { Mountpoint: this.folder(body.Name) } : { Err: `no volume ${body.Name}` } };
      case 'VolumeDriver.Get':
        if (!v) return { json: { Err: `no volume ${body.Name}` } };
        return { json: { Volume: { Name: body.Name, Mountpoint: this.folder(body.Name), Status: { mounts: v.mounts.size, opts: v.opts } } } };
      case 'VolumeDriver.List':
        return { json: { Volumes: [...this.volumes.keys()].map((Name) => ({ Name, Mountpoint: this.folder(Name) })) } };
      default:
        return { status: 404, json: { Err: `unknown method ${method}` } };
    }
  }

  listen(socketPath: string): Promise<void> {
    const server = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const method = (req.url ?? '/').slice(1);
        const text = Buffer.concat(chunks).toString();
        const body = text ? JSON.parse(text) : {};
        this.calls.push({ method, accept: req.headers.accept, body });
        const { status = 200, json } = this.answer(method, body);
        res.writeHead(status, { 'Content-Type': 'application/vnd.docker.plugins.v1.2+json' });
        res.end(JSON.stringify(json));
      });
    });
    this.servers.push(server);
    return new Promise((resolve, reject) => {
      server.once('error', reject);
      server.listen(socketPath, () => resolve());
    });
  }

  callsOf(method: string): Call[] {
    return this.calls.filter((c) => c.method === method);
  }

  close(): Promise<void> {
    return Promise.all(this.servers.map((s) => new Promise<void>((resolve) => s.close(() => resolve())))).then(() => undefined);
  }
}

let engine: Engine;
let tmp: string;
let plugin: FakeVolumePlugin;
let specPlugin: FakeVolumePlugin;
let networkOnly: FakeVolumePlugin;

before(async () => {
  tmp = mkdtempSync('/tmp/bvp-');
  const socketDir = path.join(tmp, 'run-plugins');
  const specDir = path.join(tmp, 'etc-plugins');
  mkdirSync(socketDir);
  mkdirSync(specDir);
  plugin = new FakeVolumePlugin(path.join(tmp, 'store-a'));
  await plugin.listen(path.join(socketDir, 'testvol.sock'));
  // Found through a .spec file naming a socket elsewhere.
  specPlugin = new FakeVolumePlugin(path.join(tmp, 'store-b'));
  await specPlugin.listen(path.join(tmp, 'elsewhere.sock'));
  writeFileSync(path.join(specDir, 'specvol.spec'), `unix://${path.join(tmp, 'elsewhere.sock')}\n`);
  // A plugin of another kind.
  networkOnly = new FakeVolumePlugin(path.join(tmp, 'store-c'));
  networkOnly.implementsList = ['NetworkDriver'];
  await networkOnly.listen(path.join(socketDir, 'netonly.sock'));
  engine = await startEngine({ env: { BERTH_PLUGIN_SOCKET_DIRS: socketDir, BERTH_PLUGIN_SPEC_DIRS: specDir } });
  await engine.loadBusybox();
});

after(async () => {
  await engine?.cleanup();
  await plugin?.close();
  await specPlugin?.close();
  await networkOnly?.close();
  if (tmp) rmSync(tmp, { recursive: true, force: true });
});

describe('volumes of a legacy plugin', () => {
  test('create, list, inspect through the docker CLI; the plugin is activated and spoken to in its media type', async () => {
    await engine.dockerOk(['volume', 'create', '-d', 'testvol', '--opt', 'size=1m', '--label', 'team=blue', 'pv-one']);
    assert.equal(plugin.callsOf('Plugin.Activate').length, 1);
    assert.deepEqual(plugin.callsOf('VolumeDriver.Create').map((c) => c.body), [{ Name: 'pv-one', Opts: { size: '1m' } }]);
    assert.ok(plugin.calls.every((c) => c.accept === 'application/vnd.docker.plugins.v1.2+json'), 'every call in the plugins media type');
    assert.ok(existsSync(plugin.folder('pv-one')));

    const inspected = JSON.parse(await engine.dockerOk(['volume', 'inspect', 'pv-one']))[0];
    assert.equal(inspected.Name, 'pv-one');
    assert.equal(inspected.Driver, 'testvol');
    assert.equal(inspected.Mountpoint, plugin.folder('pv-one'));
    assert.equal(inspected.Scope, 'global');
    assert.deepEqual(inspected.Labels, { team: 'blue' });
    assert.deepEqual(inspected.Options, { size: '1m' });
    assert.deepEqual(inspected.Status, { mounts: 0, opts: { size: '1m' } });

    // A volume the driver has that was not made through this engine is listed too.
    mkdirSync(plugin.folder('made-elsewhere'));
    plugin.volumes.set('made-elsewhere', { opts: {}, mounts: new Set() });
    const listed = (await engine.dockerOk(['volume', 'ls', '--format', '{{.Driver}} {{.Name}}'])).trim().split('\n');
    assert.ok(listed.includes('testvol pv-one'), listed.join('\n'));
    assert.ok(listed.includes('testvol made-elsewhere'), listed.join('\n'));
    const filtered = (await engine.dockerOk(['volume', 'ls', '-q', '--filter', 'driver=testvol'])).trim().split('\n').sort();
    assert.deepEqual(filtered, ['made-elsewhere', 'pv-one']);
    await engine.dockerOk(['volume', 'rm', 'made-elsewhere']);
    assert.equal(plugin.volumes.has('made-elsewhere'), false);

    // The same name with another driver is refused.
    const clash = await engine.docker(['volume', 'create', '-d', 'local', 'pv-one']);
    assert.notEqual(clash.code, 0);
    assert.match(clash.stderr, /volume name must be unique/);
  });

  test('containers mount it (with their id), write and read it; it is unmounted when they stop', async () => {
    await engine.dockerOk(['run', '--rm', '-v', 'pv-one:/data', 'busybox', 'sh', '-c', 'echo written > /data/file']);
    assert.equal(readFileSync(path.join(plugin.folder('pv-one'), 'file'), 'utf8'), 'written\n');
    const mounts = plugin.callsOf('VolumeDriver.Mount');
    const unmounts = plugin.callsOf('VolumeDriver.Unmount');
    assert.equal(mounts.length, 1);
    assert.match(mounts[0].body.ID, /^[0-9a-f]{64}$/);
    assert.deepEqual(unmounts.map((c) => c.body), [{ Name: 'pv-one', ID: mounts[0].body.ID }]);

    const read = await engine.dockerOk(['run', '--rm', '--mount', 'type=volume,src=pv-one,dst=/in', 'busybox', 'cat', '/in/file']);
    assert.equal(read, 'written\n');

    // A long-running one holds it: remove and prune leave it, and inspect shows the container's mount.
    const id = (await engine.dockerOk(['run', '-d', '-v', 'pv-one:/data', 'busybox', 'sleep', '300'])).trim();
    const container = JSON.parse(await engine.dockerOk(['inspect', id]))[0];
    const m = container.Mounts.find((x: any) => x.Destination === '/data');
    assert.equal(m.Driver, 'testvol');
    assert.equal(m.Name, 'pv-one');
    assert.equal(plugin.volumes.get('pv-one')!.mounts.has(id), true);
    const busy = await engine.docker(['volume', 'rm', 'pv-one']);
    assert.notEqual(busy.code, 0);
    assert.match(busy.stderr, /volume is in use/);
    await engine.dockerOk(['rm', '-f', id]);
    assert.equal(plugin.volumes.get('pv-one')!.mounts.size, 0);
  });

  test('--volume-driver and --mount volume-driver create the container\'s volumes with the plugin', async () => {
    await engine.dockerOk(['run', '--rm', '--volume-driver', 'testvol', '-v', 'pv-two:/x', 'busybox', 'true']);
    await engine.dockerOk(['run', '--rm', '--mount', 'type=volume,src=pv-three,dst=/y,volume-driver=specvol', 'busybox', 'sh', '-c', 'echo s > /y/s']);
    assert.ok(plugin.volumes.has('pv-two'));
    assert.ok(specPlugin.volumes.has('pv-three'), 'the driver found through its .spec file made it');
    assert.equal(readFileSync(path.join(specPlugin.folder('pv-three'), 's'), 'utf8'), 's\n');
    const drivers = (await engine.dockerOk(['volume', 'ls', '--format', '{{.Name}}={{.Driver}}'])).trim().split('\n');
    assert.ok(drivers.includes('pv-two=testvol') && drivers.includes('pv-three=specvol'), drivers.join('\n'));
  });

  test('remove and prune go through the driver', async () => {
    await engine.dockerOk(['volume', 'rm', 'pv-two']);
    assert.equal(plugin.volumes.has('pv-two'), false);
    assert.deepEqual(plugin.callsOf('VolumeDriver.Remove').at(-1)!.body, { Name: 'pv-two' });
    const pruned = await engine.dockerOk(['volume', 'prune', '-a', '-f']);
    assert.match(pruned, /pv-one/);
    assert.match(pruned, /pv-three/);
    assert.equal(plugin.volumes.has('pv-one'), false);
    assert.equal(specPlugin.volumes.has('pv-three'), false);
    assert.equal((await engine.dockerOk(['volume', 'ls', '-q'])).trim(), '');
  });

  test('the driver\'s Err reaches the client; a missing driver and one of another kind are named', async () => {
    const refused = await engine.docker(['volume', 'create', '-d', 'testvol', 'refused-one']);
    assert.notEqual(refused.code, 0);
    assert.match(refused.stderr, /Error response from daemon: create refused-one: refused by the test driver/);
    const broken = await engine.request('POST', '/volumes/create', { body: { Name: 'broken-one', Driver: 'testvol' } });
    assert.equal(broken.status, 500);
    assert.equal(broken.json().message, 'create broken-one: VolumeDriver.Create: the test driver broke');
    assert.equal((await engine.request('GET', '/volumes/refused-one')).status, 404, 'nothing recorded');

    const missing = await engine.docker(['volume', 'create', '-d', 'nosuch', 'm-one']);
    assert.notEqual(missing.code, 0);
    assert.match(missing.stderr, /create m-one: error looking up volume plugin nosuch: plugin "nosuch" not found/);
    const inRun = await engine.docker(['run', '--rm', '--volume-driver', 'nosuch', '-v', 'm-two:/x', 'busybox', 'true']);
    assert.notEqual(inRun.code, 0);
    assert.match(inRun.stderr, /create m-two: error looking up volume plugin nosuch: plugin "nosuch" not found/);

    const other = await engine.request('POST', '/volumes/create', { body: { Name: 'n-one', Driver: 'netonly' } });
    assert.equal(other.status, 500);
    assert.match(other.json().message, /^create n-one: error looking up volume plugin netonly: plugin "netonly" does not implement VolumeDriver$/);
  });

  test('volumes of a plugin survive a daemon restart', async () => {
    await engine.dockerOk(['volume', 'create', '-d', 'testvol', 'pv-kept']);
    await engine.stop();
    await engine.start();
    const inspected = JSON.parse(await engine.dockerOk(['volume', 'inspect', 'pv-kept']))[0];
    assert.equal(inspected.Driver, 'testvol');
    assert.equal(inspected.Mountpoint, plugin.folder('pv-kept'));
    assert.equal(await engine.dockerOk(['run', '--rm', '-v', 'pv-kept:/k', 'busybox', 'sh', '-c', 'echo k > /k/k && cat /k/k']), 'k\n');
    await engine.dockerOk(['volume', 'rm', 'pv-kept']);
  });
});
