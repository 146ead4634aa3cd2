import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { pluginShape } from '../../api/compat.js';
import { privilegesOf } from './distribution.js';
import { normalizePluginName, typeImplements, type PluginConfig } from './manager.js';

describe('plugin names, types and shapes', () => {
  test('names get the latest tag unless they carry one', () => {
    assert.equal(normalizePluginName('fixvol'), 'fixvol:latest');
    assert.equal(normalizePluginName('vieux/sshfs:1.2'), 'vieux/sshfs:1.2');
    assert.equal(normalizePluginName('127.0.0.1:5000/p'), '127.0.0.1:5000/p:latest');
    assert.equal(normalizePluginName('docker.io/library/p:2'), 'p:2');
  });

  test('interface types name their capability', () => {
    assert.ok(typeImplements('docker.volumedriver/1.0', 'volumedriver'));
    assert.ok(typeImplements('docker.volumedriver/1.0', 'VolumeDriver'));
    assert.ok(!typeImplements('docker.networkdriver/1.0', 'volumedriver'));
    assert.ok(!typeImplements('nonsense', 'nonsense'));
  });

  test('API 1.24 shows Active, Tag, the settings as Config and the config as a v0 Manifest', () => {
    const p = { Id: 'a'.repeat(64), Name: '127.0.0.1:5000/x/y:2', Enabled: true, Settings: { Env: ['A=1'] }, PluginReference: '', Config: { Description: 'd' } };
    assert.deepEqual(pluginShape(24, p), {
      Id: p.Id, Name: '127.0.0.1:5000/x/y', Tag: '2', Active: true, Config: { Env: ['A=1'] }, Manifest: { ManifestVersion: 'v0', Description: 'd' },
    });
    assert.equal(pluginShape(25, p), p);
  });

  test('privileges come from the network, namespaces, mounts, devices and capabilities', () => {
    const config = {
      Interface: { Types: [], Socket: 's' },
      Network: { Type: 'host' },
      PidHost: true,
      Mounts: [{ Source: '/var/lib/x', Destination: '/x' }, { Destination: '/tmp', Type: 'tmpfs' }],
      Linux: { Capabilities: ['CAP_SYS_ADMIN'], Devices: [{ Path: '/dev/fuse' }] },
    } as PluginConfig;
    assert.deepEqual(
      privilegesOf(config).map((p) => [p.Name, p.Value]),
      [['network', ['host']], ['host pid namespace', ['true']], ['mount', ['/var/lib/x']], ['device', ['/dev/fuse']], ['capabilities', ['CAP_SYS_ADMIN']]],
    );
  });
});
