import assert from 'node:assert/strict';
import { test } from 'node:test';
import { InvalidParameter } from '../../errors.js';
import { useMachineFacts } from '../machine.js';
import { discardUnsupported, parseCgroupRule, resolveBlockIO, resolveDevices, validateDeviceFields, type DeviceProbe } from './devices.js';

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

/** A probe of a machine whose only device is /dev/null (1:3), and whose only block device is /dev/sda (8:0). */
const probe: DeviceProbe = {
  devices: async (onHost, inContainer) => {
    if (onHost === '/dev/null') return [{ path: inContainer, type: 'c', major: 1, minor: 3, fileMode: 0o666, uid: 0, gid: 0 }];
    throw new Error(`error gathering device information while adding custom device "${onHost}": no such file or directory`);
  },
  allDevices: async () => [{ path: '/dev/null', type: 'c', major: 1, minor: 3, fileMode: 0o666, uid: 0, gid: 0 }],
  blockDevice: async (field, p) => {
    if (p === '/dev/sda') return { major: 8, minor: 0 };
    throw new Error(`${field}: ${p} is not a block device`);
  },
};

test('a device node gives its node and rule; the container path and permissions are the mapping\'s', async () => {
  const resolved = await resolveDevices({ Devices: [{ PathOnHost: '/dev/null', PathInContainer: '/dev/mynull', CgroupPermissions: 'rw' }], DeviceCgroupRules: ['c 10:* m'] }, probe);
  assert.equal(resolved.devices.length, 1);
  assert.deepEqual({ ...resolved.devices[0], fileMode: undefined, uid: undefined, gid: undefined }, { path: '/dev/mynull', type: 'c', major: 1, minor: 3, fileMode: undefined, uid: undefined, gid: undefined });
  assert.deepEqual(resolved.rules, [
    { allow: true, type: 'c', major: 1, minor: 3, access: 'rw' },
    { allow: true, type: 'c', major: 10, access: 'm' },
  ]);
  assert.deepEqual(resolved.blockIO, {});
});

test('a privileged container gets the machine\'s devices and no rules; block IO lists go by major:minor', async () => {
  const resolved = await resolveDevices({ Privileged: true, DeviceCgroupRules: ['c 10:* m'], BlkioDeviceReadBps: [{ Path: '/dev/sda', Rate: 1024 }] }, probe);
  assert.deepEqual(resolved.devices.map((d) => d.path), ['/dev/null']);
  assert.deepEqual(resolved.rules, []);
  assert.deepEqual(resolved.blockIO, { throttleReadBpsDevice: [{ major: 8, minor: 0, rate: 1024 }] });
  await assert.rejects(resolveBlockIO({ BlkioDeviceReadBps: [{ Path: '/dev/null', Rate: 1 }] }, probe), { message: 'BlkioDeviceReadBps: /dev/null is not a block device' });
});

test('block IO controls the machine lacks are discarded with Docker\'s warnings', () => {
  useMachineFacts({ rlimits: {}, machineId: '', blkio: { weight: false, weightDevice: false, throttle: true } });
  try {
    const hc: Record<string, unknown> = { BlkioWeight: 300, BlkioDeviceReadBps: [{ Path: '/dev/sda', Rate: 1 }] };
    assert.deepEqual(discardUnsupported(hc), ['Your kernel does not support Block I/O weight or the cgroup is not mounted. Weight discarded.']);
    assert.deepEqual(hc, { BlkioWeight: 0, BlkioDeviceReadBps: [{ Path: '/dev/sda', Rate: 1 }] });
  } finally {
    useMachineFacts({ rlimits: {}, machineId: '', blkio: { weight: true, weightDevice: true, throttle: true } });
  }
});

test('kernel memory is discarded with Docker\'s warning; nothing else is touched', () => {
  const hc: Record<string, unknown> = { KernelMemory: 64 << 20, Memory: 64 << 20 };
  assert.deepEqual(discardUnsupported(hc), ['Your kernel does not support kernel memory limit capabilities or the cgroup is not mounted. Limitation discarded.']);
  assert.deepEqual(hc, { KernelMemory: 0, Memory: 64 << 20 });
  assert.deepEqual(discardUnsupported({}), []);
});
