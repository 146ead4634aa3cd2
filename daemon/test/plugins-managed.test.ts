/**
 * Managed plugins against a real berthd: a volume driver plugin built from C source in this repository
 * (static, serving HTTP on /run/docker/plugins/fixvol.sock inside its root and keeping volumes in /data of
 * its root), made with `docker plugin create`, then ls, inspect (1.25+ and the 1.24 shape), set, enable (it
 * runs as a runtime container of its own), its volumes in containers, disable refused while a volume uses
 * it, a restart when it dies, its return with the daemon, rm, and the plugin events; then push to a local
 * docker-registry and `docker plugin install --grant-all-permissions` from it.
 */
import assert from 'node:assert/strict';
import { existsSync, readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { expectConforms } from './contract/openapi.js';
import { eventually, startEngine, type Engine } from './harness.js';
import { pluginContext, pluginRuntimeState, volumeDriverConfig } from './plugin-support.js';
import { getFromRegistry, haveRegistry, startRegistry, type TestRegistry } from './registry-support.js';

let engine: Engine;
let context: string;
before(async () => {
  context = pluginContext('volplugin.c', 'volplugin', volumeDriverConfig());
  engine = await startEngine();
  await engine.loadBusybox();
});

after(async () => {
  await engine?.cleanup();
  if (context) rmSync(context, { recursive: true, force: true });
});

async function inspectPlugin(): Promise<any> {
  return JSON.parse(await engine.dockerOk(['plugin', 'inspect', 'fixvol']))[0];
}

function runtimeState(id: string): { pid: number; status: string } | undefined {
  return pluginRuntimeState(engine.execRoot, id);
}

async function pluginEvents(): Promise<string[]> {
  const out = await engine.dockerOk(['events', '--since', '0', '--until', String(Math.ceil(Date.now() / 1000) + 1), '--filter', 'type=plugin', '--format', '{{.Action}} {{.Actor.Attributes.name}}']);
  return out.trim().split('\n').map((line) => {
    assert.match(line, / fixvol:latest$/);
    return line.split(' ')[0];
  });
}

describe('managed plugins', () => {
  test('create from a folder of config.json and rootfs, ls, inspect in both shapes, set', async () => {
    await engine.dockerOk(['plugin', 'create', 'fixvol', context], { timeoutMs: 60_000 });
    assert.match(await engine.dockerOk(['plugin', 'ls', '--format', '{{.Name}} {{.Enabled}}']), /^fixvol:latest false$/m);
    const p = await inspectPlugin();
    assert.match(p.Id, /^[0-9a-f]{64}$/);
    assert.equal(p.Name, 'fixvol:latest');
    assert.equal(p.Enabled, false);
    assert.deepEqual(p.Settings.Env, ['VOLPLUGIN_GREETING=hello']);
    assert.deepEqual(p.Config.Interface.Types, ['docker.volumedriver/1.0']);
    assert.ok(existsSync(path.join(engine.dataRoot, 'plugins', p.Id, 'rootfs', 'volplugin')));
    for (const version of ['1.25', '1.41', '1.53']) {
      await expectConforms(version, 'get', '/plugins/{name}/json', 200, (await engine.request('GET', `/v${version}/plugins/fixvol/json`)).json());
      await expectConforms(version, 'get', '/plugins', 200, (await engine.request('GET', `/v${version}/plugins`)).json());
    }
    const filtered = await engine.request('GET', `/plugins?filters=${encodeURIComponent(JSON.stringify({ capability: ['volumedriver'], enabled: ['false'] }))}`);
    assert.deepEqual(filtered.json().map((x: any) => x.Name), ['fixvol:latest']);
    const none = await engine.request('GET', `/plugins?filters=${encodeURIComponent(JSON.stringify({ capability: ['networkdriver'] }))}`);
    assert.deepEqual(none.json(), []);

    const old = (await engine.request('GET', '/v1.24/plugins/fixvol')).json();
    assert.equal(old.Name, 'fixvol');
    assert.equal(old.Tag, 'latest');
    assert.equal(old.Active, false);
    assert.equal(old.Manifest.ManifestVersion, 'v0');
    assert.deepEqual(old.Config.Env, ['VOLPLUGIN_GREETING=hello']);
    assert.equal(old.Enabled, undefined);

    await engine.dockerOk(['plugin', 'set', 'fixvol', 'VOLPLUGIN_GREETING=bonjour']);
    assert.deepEqual((await inspectPlugin()).Settings.Env, ['VOLPLUGIN_GREETING=bonjour']);
    const unknown = await engine.docker(['plugin', 'set', 'fixvol', 'NOPE=1']);
    assert.notEqual(unknown.code, 0);
    assert.match(unknown.stderr, /setting "NOPE" not found in the plugin configuration/);

    const again = await engine.docker(['plugin', 'create', 'fixvol', context]);
    assert.notEqual(again.code, 0);
    assert.match(again.stderr, /already exists/);
    const missing = await engine.request('GET', '/plugins/nosuch/json');
    assert.equal(missing.status, 404);
  });

  test('enable runs it outside the containers list; its volumes work in containers; disable and rm are refused while needed', async () => {
    await engine.dockerOk(['plugin', 'enable', 'fixvol'], { timeoutMs: 60_000 });
    const p = await inspectPlugin();
    assert.equal(p.Enabled, true);
    assert.ok(existsSync(path.join(engine.execRoot, 'plugins', p.Id, 'fixvol.sock')), 'the socket in the host folder');
    assert.equal(runtimeState(p.Id)?.status, 'running');
    assert.equal((await engine.dockerOk(['ps', '-aq'])).trim(), '', 'not a container');
    assert.deepEqual((await engine.request('GET', '/info')).json().Plugins.Volume, ['local', 'fixvol:latest']);
    assert.equal((await engine.docker(['plugin', 'enable', 'fixvol'])).code !== 0, true);

    await engine.dockerOk(['volume', 'create', '-d', 'fixvol', 'mv-one']);
    const v = JSON.parse(await engine.dockerOk(['volume', 'inspect', 'mv-one']))[0];
    assert.equal(v.Driver, 'fixvol:latest');
    assert.equal(v.Mountpoint, path.join(engine.dataRoot, 'plugins', p.Id, 'rootfs', 'data', 'mv-one'));
    assert.equal(await engine.dockerOk(['run', '--rm', '-v', 'mv-one:/v', 'busybox', 'cat', '/v/greeting']), 'bonjour\n');
    await engine.dockerOk(['run', '--rm', '--mount', 'type=volume,src=mv-one,dst=/w', 'busybox', 'sh', '-c', 'echo more > /w/more']);
    assert.equal(readFileSync(path.join(v.Mountpoint, 'more'), 'utf8'), 'more\n');
    assert.match(await engine.dockerOk(['volume', 'ls', '--format', '{{.Driver}} {{.Name}}']), /^fixvol:latest mv-one$/m);

    const disable = await engine.docker(['plugin', 'disable', 'fixvol']);
    assert.notEqual(disable.code, 0);
    assert.match(disable.stderr, /plugin fixvol:latest is in use/);
    const rm = await engine.docker(['plugin', 'rm', 'fixvol']);
    assert.notEqual(rm.code, 0);
    assert.match(rm.stderr, /is enabled/);
    assert.equal((await inspectPlugin()).Enabled, true);
    assert.deepEqual(await pluginEvents(), ['create', 'enable']);
  });

  test('a plugin that dies while enabled is started again', async () => {
    const p = await inspectPlugin();
    const before = runtimeState(p.Id);
    assert.ok(before?.pid);
    process.kill(before.pid, 'SIGKILL');
    const deadline = Date.now() + 30_000;
    let after: { pid: number; status: string } | undefined;
    while (Date.now() < deadline) {
      after = runtimeState(p.Id);
      if (after?.status === 'running' && after.pid !== before.pid) break;
      await new Promise((r) => setTimeout(r, 200));
    }
    assert.equal(after?.status, 'running');
    assert.notEqual(after?.pid, before.pid);
    assert.equal((await engine.dockerOk(['volume', 'inspect', '--format', '{{.Name}}', 'mv-one'])).trim(), 'mv-one');
  });

  test('enabled plugins come back with the daemon', async () => {
    await engine.stop();
    await engine.start();
    assert.equal((await inspectPlugin()).Enabled, true);
    assert.equal(await engine.dockerOk(['run', '--rm', '-v', 'mv-one:/v', 'busybox', 'cat', '/v/more']), 'more\n');
  });

  test('a container that needs it and died while the daemon was down is started again once the plugin is back', async () => {
    const p = await inspectPlugin();
    const starts = path.join(engine.dataRoot, 'plugins', p.Id, 'rootfs', 'data', 'mv-one', 'starts');
    await engine.dockerOk(['run', '-d', '--name', 'needs-plugin', '--restart', 'always', '-v', 'mv-one:/v', 'busybox', 'sh', '-c', 'echo started >> /v/starts; exec sleep 1000']);
    await eventually(() => existsSync(starts) && readFileSync(starts, 'utf8') === 'started\n');
    const pid = JSON.parse(await engine.dockerOk(['inspect', 'needs-plugin']))[0].State.Pid as number;
    await engine.stop();
    process.kill(pid, 'SIGKILL');
    await eventually(() => !existsSync(`/proc/${pid}`));
    await engine.start();
    // The daemon starts its enabled plugins before it restarts containers: the volume mounts at once.
    await eventually(() => readFileSync(starts, 'utf8') === 'started\nstarted\n', 20_000);
    const state = JSON.parse(await engine.dockerOk(['inspect', 'needs-plugin']))[0].State;
    assert.equal(state.Running, true);
    assert.notEqual(state.Pid, pid);
    await engine.dockerOk(['rm', '-f', 'needs-plugin']);
  });

  test('disable after its volumes are gone, rm; the plugin events', async () => {
    await engine.dockerOk(['volume', 'rm', 'mv-one']);
    const p = await inspectPlugin();
    await engine.dockerOk(['plugin', 'disable', 'fixvol']);
    assert.equal(runtimeState(p.Id), undefined, 'stopped');
    const unusable = await engine.docker(['volume', 'create', '-d', 'fixvol', 'mv-two']);
    assert.notEqual(unusable.code, 0);
    assert.match(unusable.stderr, /is disabled/);
    await engine.dockerOk(['plugin', 'rm', 'fixvol']);
    assert.equal((await engine.dockerOk(['plugin', 'ls', '-q'])).trim(), '');
    assert.equal(existsSync(path.join(engine.dataRoot, 'plugins', p.Id)), false);
    // Events are the daemon's memory: those since its restart.
    assert.deepEqual(await pluginEvents(), ['disable', 'remove']);
  });
});

describe('managed plugins through a registry', () => {
  let registry: TestRegistry | undefined;
  before(async () => {
    if (haveRegistry()) registry = await startRegistry();
  });
  after(async () => {
    await registry?.stop();
  });

  test('push, privileges, install with --grant-all-permissions and a setting, use, remove', async (t) => {
    if (!registry) return t.skip('docker-registry is not installed');
    const name = `${registry.host}/fixvol:1`;
    await engine.dockerOk(['plugin', 'create', name, context], { timeoutMs: 60_000 });
    const pushed = await engine.dockerOk(['plugin', 'push', name], { timeoutMs: 120_000 });
    assert.match(pushed, /1: digest: sha256:[0-9a-f]{64} size: \d+/);
    const manifest = await getFromRegistry(registry, '/v2/fixvol/manifests/1', 'application/vnd.docker.distribution.manifest.v2+json');
    assert.equal(manifest.status, 200);
    assert.equal(JSON.parse(manifest.body.toString()).config.mediaType, 'application/vnd.docker.plugin.v1+json');
    await engine.dockerOk(['plugin', 'rm', name]);

    const privileges = await engine.request('GET', `/plugins/privileges?remote=${encodeURIComponent(name)}`);
    assert.equal(privileges.status, 200, privileges.text);
    assert.deepEqual(privileges.json(), [{ Name: 'network', Description: 'permissions to access a network', Value: ['none'] }]);
    const refused = await engine.request('POST', `/plugins/pull?remote=${encodeURIComponent(name)}`, { body: [] });
    assert.match(refused.text, /privileges granted do not match/);

    await engine.dockerOk(['plugin', 'install', '--grant-all-permissions', name, 'VOLPLUGIN_GREETING=ciao'], { timeoutMs: 120_000 });
    const p = JSON.parse(await engine.dockerOk(['plugin', 'inspect', name]))[0];
    assert.equal(p.Enabled, true);
    assert.equal(p.PluginReference, name);
    assert.deepEqual(p.Settings.Env, ['VOLPLUGIN_GREETING=ciao']);
    await engine.dockerOk(['volume', 'create', '-d', name, 'iv-one']);
    assert.equal(await engine.dockerOk(['run', '--rm', '-v', 'iv-one:/v', 'busybox', 'cat', '/v/greeting']), 'ciao\n');
    await engine.dockerOk(['volume', 'rm', 'iv-one']);
    await engine.dockerOk(['plugin', 'rm', '--force', name]);
    assert.equal((await engine.dockerOk(['plugin', 'ls', '-q'])).trim(), '');

    // API 1.24 pulls and installs in one call, answering the privileges.
    const legacy = await engine.request('POST', `/v1.24/plugins/pull?name=${encodeURIComponent(name)}`, { timeoutMs: 120_000 });
    assert.equal(legacy.status, 200, legacy.text);
    assert.deepEqual(legacy.json().map((x: any) => x.Name), ['network']);
    const old = (await engine.request('GET', `/v1.24/plugins/${name}`)).json();
    assert.deepEqual([old.Name, old.Tag, old.Active], [`${registry.host}/fixvol`, '1', false]);
    await engine.dockerOk(['plugin', 'rm', name]);

    // An image is not a plugin.
    await engine.dockerOk(['tag', 'busybox', `${registry.host}/plain:1`]);
    await engine.dockerOk(['push', `${registry.host}/plain:1`], { timeoutMs: 120_000 });
    const notPlugin = await engine.docker(['plugin', 'install', '--grant-all-permissions', `${registry.host}/plain:1`]);
    assert.notEqual(notPlugin.code, 0);
    assert.match(notPlugin.stderr, /is not a plugin/);
  });
});
