import assert from 'node:assert/strict';
import { test } from 'node:test';
import { InvalidParameter } from '../../errors.js';
import type { PluginRecord } from './config.js';
import { pluginSpec, type PluginDevices } from './spec.js';

/** A machine whose only device node is /dev/null (1:3). */
const probe: PluginDevices = {
  devices: async (onHost, inContainer) => {
    if (onHost === '/dev/null') return [{ path: inContainer, type: 'c', major: 1, minor: 3, fileMode: 0o20666, uid: 0, gid: 0 }];
    throw new Error('not a device node');
  },
};

function plugin(devices: string[]): PluginRecord {
  return {
    Id: 'a'.repeat(64),
    Name: 'vol:latest',
    Enabled: false,
    Settings: { Mounts: [], Env: [], Args: [], Devices: devices.map((Path) => ({ Path })) },
    PluginReference: 'vol:latest',
    Config: { Entrypoint: ['/plugin'] } as PluginRecord['Config'],
  };
}

test('plugin spec: a device of the settings is the machine\'s node with its rule; anything else is refused', async () => {
  const spec = (await pluginSpec(plugin(['/dev/null']), { plugin: '/p', sockets: '/s' }, probe)) as { linux: { devices: object[]; resources: { devices: object[] } } };
  assert.deepEqual(spec.linux.devices, [{ path: '/dev/null', type: 'c', major: 1, minor: 3, fileMode: 0o666, uid: 0, gid: 0 }]);
  assert.deepEqual(spec.linux.resources.devices.at(-1), { allow: true, type: 'c', major: 1, minor: 3, access: 'rwm' });
  await assert.rejects(pluginSpec(plugin(['/etc/passwd']), { plugin: '/p', sockets: '/s' }, probe), (err: unknown) => {
    assert.ok(err instanceof InvalidParameter);
    assert.equal(err.message, 'plugin device /etc/passwd: not a device node on this host');
    return true;
  });
});
