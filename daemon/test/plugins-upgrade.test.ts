/**
 * Managed plugins changed after their install: `docker plugin set` of a mount's source and a device's path
 * (as the config declares them settable) taking effect in the running plugin, and `docker plugin upgrade`
 * from a local docker-registry (refused while enabled; the id, name and settings kept, the root and config
 * replaced, privileges checked as for an install).
 */
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { expectConforms } from './contract/openapi.js';
import { startEngine, type Engine } from './harness.js';
import { pluginContext, pluginRuntimeState, volumeDriverConfig } from './plugin-support.js';
import { haveRegistry, startRegistry, type TestRegistry } from './registry-support.js';

let engine: Engine;
const contexts: string[] = [];
let shares: string;

before(async () => {
  shares = mkdtempSync('/tmp/bpu-');
  for (const name of ['a', 'b']) {
    mkdirSync(path.join(shares, name));
    writeFileSync(path.join(shares, name, 'marker'), `share ${name}\n`);
  }
  engine = await startEngine();
  await engine.loadBusybox();
});

after(async () => {
  await engine?.cleanup();
  for (const c of contexts) rmSync(c, { recursive: true, force: true });
  if (shares) rmSync(shares, { recursive: true, force: true });
});

function context(config: object, files: Record<string, string> = {}): string {
  const dir = pluginContext('volplugin.c', 'volplugin', config, files);
  contexts.push(dir);
  return dir;
}

async function inspect(name: string): Promise<any> {
  return JSON.parse(await engine.dockerOk(['plugin', 'inspect', name]))[0];
}

describe('plugin set of mounts and devices', () => {
  test('a settable mount source and device path are set, shown, and used by the running plugin', async () => {
    const config = volumeDriverConfig({
      Mounts: [{ Name: 'share', Description: 'a host folder', Settable: ['source'], Source: path.join(shares, 'a'), Destination: '/share', Type: 'bind', Options: ['rbind', 'ro'] }],
      Linux: { Capabilities: null, AllowAllDevices: false, Devices: [{ Name: 'dev', Description: 'a device', Settable: ['path'], Path: '/dev/null' }] },
      Env: [
        { Name: 'VOLPLUGIN_GREETING', Description: 'written into new volumes', Settable: ['value'], Value: 'hello' },
        { Name: 'FIXED', Description: 'not settable', Settable: null, Value: 'x' },
      ],
    });
    await engine.dockerOk(['plugin', 'create', 'fixset', context(config, { 'share/.keep': '' })], { timeoutMs: 60_000 });

    await engine.dockerOk(['plugin', 'set', 'fixset', `share.source=${path.join(shares, 'b')}`, 'dev=/dev/zero']);
    const p = await inspect('fixset');
    assert.equal(p.Settings.Mounts[0].Source, path.join(shares, 'b'));
    assert.equal(p.Settings.Mounts[0].Destination, '/share');
    assert.equal(p.Settings.Devices[0].Path, '/dev/zero');
    assert.equal(p.Config.Mounts[0].Source, path.join(shares, 'a'), 'the config stays');
    for (const version of ['1.26', '1.53']) await expectConforms(version, 'get', '/plugins/{name}/json', 200, (await engine.request('GET', `/v${version}/plugins/fixset/json`)).json());

    for (const [setting, message] of [
      ['FIXED=y', /"FIXED" is not settable/],
      ['share.destination=/x', /"share.destination" is not settable/],
      ['dev.path=/etc/passwd', /a device path must be under \/dev/],
      ['share.source=relative', /the source must be an absolute path/],
      ['nosuch.source=/x', /setting "nosuch" not found in the plugin configuration/],
    ] as const) {
      const r = await engine.docker(['plugin', 'set', 'fixset', setting]);
      assert.notEqual(r.code, 0, setting);
      assert.match(r.stderr, message);
    }
    const bad = await engine.request('POST', '/plugins/fixset/set', { body: ['=x'] });
    assert.equal(bad.status, 400, bad.text);

    await engine.dockerOk(['plugin', 'enable', 'fixset'], { timeoutMs: 60_000 });
    const state = pluginRuntimeState(engine.execRoot, p.Id);
    assert.ok(state?.pid, 'runs');
    assert.equal(readFileSync(`/proc/${state.pid}/root/share/marker`, 'utf8'), 'share b\n');
    const dev = statSync(`/proc/${state.pid}/root/dev/zero`);
    assert.ok(dev.isCharacterDevice());
    assert.equal(dev.rdev, statSync('/dev/zero').rdev);
    const refused = await engine.docker(['plugin', 'set', 'fixset', 'VOLPLUGIN_GREETING=x']);
    assert.notEqual(refused.code, 0);
    assert.match(refused.stderr, /disable plugin before setting/);
    await engine.dockerOk(['plugin', 'rm', '--force', 'fixset']);
  });
});

describe('plugin upgrade', () => {
  let registry: TestRegistry | undefined;
  before(async () => {
    if (haveRegistry()) registry = await startRegistry();
  });
  after(async () => {
    await registry?.stop();
  });

  test('refused while enabled; keeps the id, name and settings; the new root and config', async (t) => {
    if (!registry) return t.skip('docker-registry is not installed');
    const one = `${registry.host}/fixup:1`;
    const two = `${registry.host}/fixup:2`;
    const three = `${registry.host}/fixup:3`;
    await engine.dockerOk(['plugin', 'create', one, context(volumeDriverConfig({ Description: 'version one' }), { version: '1\n' })], { timeoutMs: 60_000 });
    await engine.dockerOk(['plugin', 'create', two, context(volumeDriverConfig({ Description: 'version two' }), { version: '2\n' })], { timeoutMs: 60_000 });
    await engine.dockerOk(['plugin', 'create', three, context(volumeDriverConfig({ Description: 'version three', Network: { Type: 'host' } }), { version: '3\n' })], { timeoutMs: 60_000 });
    for (const name of [one, two, three]) {
      await engine.dockerOk(['plugin', 'push', name], { timeoutMs: 120_000 });
      await engine.dockerOk(['plugin', 'rm', name]);
    }

    for (const version of ['1.26', '1.53']) {
      const asked = await engine.request('GET', `/v${version}/plugins/privileges?remote=${encodeURIComponent(three)}`);
      await expectConforms(version, 'get', '/plugins/privileges', 200, asked.json());
    }
    await engine.dockerOk(['plugin', 'install', '--grant-all-permissions', one, 'VOLPLUGIN_GREETING=ciao'], { timeoutMs: 120_000 });
    const before = await inspect(one);
    assert.equal(before.Enabled, true);

    const cli = await engine.docker(['plugin', 'upgrade', '--grant-all-permissions', one, two]);
    assert.notEqual(cli.code, 0);
    assert.match(cli.stderr, /must be disabled/);
    const api = await engine.request('POST', `/plugins/${one}/upgrade?remote=${encodeURIComponent(two)}`, { body: [] });
    assert.equal(api.status, 409, api.text);
    assert.match(api.json().message, /plugin must be disabled before upgrading/);

    await engine.dockerOk(['plugin', 'disable', one]);
    // The privileges granted are checked as for an install.
    const ungranted = await engine.request('POST', `/plugins/${one}/upgrade?remote=${encodeURIComponent(three)}`, { body: [] });
    assert.match(ungranted.text, /privileges granted do not match/);
    assert.equal((await inspect(one)).Config.Description, 'version one');

    const out = await engine.dockerOk(['plugin', 'upgrade', '--grant-all-permissions', '--skip-remote-check', one, two], { timeoutMs: 120_000 });
    assert.match(out, /Upgraded plugin/);
    const after = await inspect(one);
    assert.equal(after.Id, before.Id);
    assert.equal(after.Name, one);
    assert.equal(after.Enabled, false);
    assert.equal(after.Config.Description, 'version two');
    assert.equal(after.PluginReference, two);
    assert.deepEqual(after.Settings.Env, ['VOLPLUGIN_GREETING=ciao']);
    assert.equal(readFileSync(path.join(engine.dataRoot, 'plugins', after.Id, 'rootfs', 'version'), 'utf8'), '2\n');
    for (const version of ['1.26', '1.53']) await expectConforms(version, 'get', '/plugins/{name}/json', 200, (await engine.request('GET', `/v${version}/plugins/${one}/json`)).json());

    await engine.dockerOk(['plugin', 'enable', one], { timeoutMs: 60_000 });
    await engine.dockerOk(['volume', 'create', '-d', one, 'up-one']);
    assert.equal(await engine.dockerOk(['run', '--rm', '-v', 'up-one:/v', 'busybox', 'cat', '/v/greeting']), 'ciao\n');
    await engine.dockerOk(['volume', 'rm', 'up-one']);
    await engine.dockerOk(['plugin', 'rm', '--force', one]);
    const missing = await engine.request('POST', `/plugins/nosuch/upgrade?remote=${encodeURIComponent(two)}`, { body: [] });
    assert.equal(missing.status, 404);
  });
});
