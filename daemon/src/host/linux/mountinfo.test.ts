import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { mountOf, parseMountinfo } from './mountinfo.js';

test('mountinfo lines: fields, escaped paths, optional fields, and this process', () => {
  const text = [
    '27 1 254:0 / / rw,relatime - ext4 /dev/vda rw,discard',
    '31 23 0:28 / /sys/fs/cgroup rw,relatime shared:9 master:2 - tmpfs tmpfs rw,mode=755',
    '90 27 0:50 /a\\040b /mnt/with\\040space rw - overlay overlay rw,lowerdir=/l',
    'not a mountinfo line',
  ].join('\n');
  const [root, cgroup, spaced, ...rest] = parseMountinfo(text);
  assert.deepEqual(root, { device: '254:0', root: '/', mountPoint: '/', fsType: 'ext4', source: '/dev/vda', superOptions: ['rw', 'discard'], optional: [] });
  assert.deepEqual(cgroup!.optional, ['shared:9', 'master:2']);
  assert.equal(cgroup!.fsType, 'tmpfs');
  assert.deepEqual(cgroup!.superOptions, ['rw', 'mode=755']);
  assert.equal(spaced!.mountPoint, '/mnt/with space');
  assert.equal(spaced!.root, '/a b');
  assert.deepEqual(rest, []);
  assert.ok(parseMountinfo(readFileSync('/proc/self/mountinfo', 'utf8')).some((m) => m.mountPoint === '/'));
});

test('the mount a path lies on: the longest mount point above it, the top one of those stacked at one place', () => {
  const entries = parseMountinfo([
    '1 0 8:1 / / rw shared:1 - ext4 /dev/sda1 rw',
    '2 1 0:30 / /tmp rw - tmpfs tmpfs rw',
    '3 1 0:31 / /tmp rw shared:7 - tmpfs tmpfs rw',
    '4 3 0:32 / /tmp/ab rw master:7 - tmpfs tmpfs rw',
  ].join('\n'));
  assert.equal(mountOf(entries, '/tmp/a')!.optional[0], 'shared:7');
  assert.equal(mountOf(entries, '/tmp/ab/c')!.mountPoint, '/tmp/ab');
  assert.equal(mountOf(entries, '/tmp/abc')!.mountPoint, '/tmp');
  assert.equal(mountOf(entries, '/var/x')!.mountPoint, '/');
});
