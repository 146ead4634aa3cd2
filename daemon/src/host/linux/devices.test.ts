import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { allDevices, blockDevice, devicesFromPath } from './devices.js';

test('devices: a node of the machine, at the path in the container', async () => {
  const [node] = await devicesFromPath('/dev/null', '/dev/mynull');
  assert.deepEqual({ path: node.path, type: node.type, major: node.major, minor: node.minor }, { path: '/dev/mynull', type: 'c', major: 1, minor: 3 });
  assert.ok((await allDevices()).some((d) => d.path === '/dev/null' && d.major === 1 && d.minor === 3));
});

test('devices: missing paths and non-devices carry Docker\'s message', async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'berth-devices-'));
  try {
    await assert.rejects(devicesFromPath(path.join(dir, 'none'), '/dev/x'), {
      message: `error gathering device information while adding custom device "${path.join(dir, 'none')}": no such file or directory`,
    });
    // An empty folder holds no device.
    await assert.rejects(devicesFromPath(dir, '/dev/x'), { message: `error gathering device information while adding custom device "${dir}": not a device node` });
    await assert.rejects(blockDevice('BlkioDeviceReadBps', '/dev/null'), { message: 'BlkioDeviceReadBps: /dev/null is not a block device' });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
