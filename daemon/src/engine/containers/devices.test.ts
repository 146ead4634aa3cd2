import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { InvalidParameter } from '../../errors.js';
import { discardUnsupported, parseCgroupRule, resolveBlockIO, resolveDevices, validateDeviceFields } from './devices.js';

test('device cgroup rules: type, major and minor or *, access', () => {
  assert.deepEqual(parseCgroupRule('c 1:3 rwm'), { allow: true, type: 'c', major: 1, minor: 3, access: 'rwm' });
  assert.deepEqual(parseCgroupRule('b 8:* r'), { allow: true, type: 'b', major: 8, access: 'r' });
  assert.deepEqual(parseCgroupRule('a *:* m'), { allow: true, type: 'a', access: 'm' });
  for (const bad of ['c 1:3', 'x 1:3 r', 'c 1 r', 'c 1:3 rwx', 'c a:3 r', ' c 1:3 r', 'c 1:3 rwmr']) {
    assert.throws(() => parseCgroupRule(bad), (err: Error) => err instanceof InvalidParameter && err.message.includes(`'${bad}'`));
  }
});

test('Devices, rules and block IO lists are checked at create', () => {
  validateDeviceFields({ Devices: [{ PathOnHost: '/dev/null' }], DeviceCgroupRules: ['c 1:3 r'], BlkioDeviceReadBps: [{ Path: '/dev/vda', Rate: 0 }] });
  validateDeviceFields({ Devices: null, DeviceCgroupRules: null, BlkioWeightDevice: null });
  const bad: Array<Record<string, unknown>> = [
    { Devices: ['/dev/null'] },
    { Devices: [{ PathOnHost: '' }] },
    { Devices: [{ PathOnHost: '/dev/null', CgroupPermissions: 'rr' }] },
    { Devices: [{ PathOnHost: '/dev/null', PathInContainer: 3 }] },
    { DeviceCgroupRules: ['c 1:3'] },
    { BlkioWeightDevice: [{ Path: '/dev/vda', Weight: 1001 }] },
    { BlkioDeviceReadIOps: [{ Path: '/dev/vda', Rate: 1.5 }] },
    { BlkioDeviceWriteBps: [null] },
  ];
  for (const hc of bad) assert.throws(() => validateDeviceFields(hc), InvalidParameter, JSON.stringify(hc));
});

test('a device node gives its node and rule; the container path and permissions are the mapping\'s', async () => {
  const resolved = await resolveDevices({ Devices: [{ PathOnHost: '/dev/null', PathInContainer: '/dev/mynull', CgroupPermissions: 'rw' }], DeviceCgroupRules: ['c 10:* m'] });
  assert.equal(resolved.devices.length, 1);
  assert.deepEqual({ ...resolved.devices[0], fileMode: undefined, uid: undefined, gid: undefined }, { path: '/dev/mynull', type: 'c', major: 1, minor: 3, fileMode: undefined, uid: undefined, gid: undefined });
  assert.deepEqual(resolved.rules, [
    { allow: true, type: 'c', major: 1, minor: 3, access: 'rw' },
    { allow: true, type: 'c', major: 10, access: 'm' },
  ]);
  assert.deepEqual(resolved.blockIO, {});
});

test('missing paths and non-devices carry Docker\'s message', async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'berth-devices-'));
  try {
    await assert.rejects(resolveDevices({ Devices: [{ PathOnHost: path.join(dir, 'none') }] }), {
      message: `error gathering device information while adding custom device "${path.join(dir, 'none')}": no such file or directory`,
    });
    // An empty folder holds no device.
    await assert.rejects(resolveDevices({ Devices: [{ PathOnHost: dir }] }), { message: `error gathering device information while adding custom device "${dir}": not a device node` });
    await assert.rejects(resolveBlockIO({ BlkioDeviceReadBps: [{ Path: '/dev/null', Rate: 1 }] }), { message: 'BlkioDeviceReadBps: /dev/null is not a block device' });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('kernel memory is discarded with Docker\'s warning; nothing else is touched', () => {
  const hc: Record<string, unknown> = { KernelMemory: 64 << 20, Memory: 64 << 20 };
  assert.deepEqual(discardUnsupported(hc), ['Your kernel does not support kernel memory limit capabilities or the cgroup is not mounted. Limitation discarded.']);
  assert.deepEqual(hc, { KernelMemory: 0, Memory: 64 << 20 });
  assert.deepEqual(discardUnsupported({}), []);
});
