import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { parseMountinfo } from './mountinfo.js';

test('mountinfo lines: fields, escaped paths, optional fields, and this process', () => {
  const text = [
    '27 1 254:0 / / rw,relatime - ext4 /dev/vda rw,discard',
    '31 23 0:28 / /sys/fs/cgroup rw,relatime shared:9 master:2 - tmpfs tmpfs rw,mode=755',
    '90 27 0:50 /a\\040b /mnt/with\\040space rw - overlay overlay rw,lowerdir=/l',
    'not a mountinfo line',
  ].join('\n');
  const [root, cgroup, spaced, ...rest] = parseMountinfo(text);
  assert.deepEqual(root, { device: '254:0', root: '/', mountPoint: '/', fsType: 'ext4', source: '/dev/vda', superOptions: ['rw', 'discard'] });
  assert.equal(cgroup!.fsType, 'tmpfs');
  assert.deepEqual(cgroup!.superOptions, ['rw', 'mode=755']);
  assert.equal(spaced!.mountPoint, '/mnt/with space');
  assert.equal(spaced!.root, '/a b');
  assert.deepEqual(rest, []);
  assert.ok(parseMountinfo(readFileSync('/proc/self/mountinfo', 'utf8')).some((m) => m.mountPoint === '/'));
});
