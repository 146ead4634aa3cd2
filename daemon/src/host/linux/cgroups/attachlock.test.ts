import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { AttachLockWarmer, ownCgroupMoveFile } from './attachlock.js';

const HYBRID = [
  '32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu',
  '40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd',
  '41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw',
].join('\n');

test('the move file: a v1 hierarchy on a hybrid host, cgroup.procs on a v2 host, none without cgroups', () => {
  assert.equal(ownCgroupMoveFile(HYBRID, '9:name=systemd:/user.slice\n1:cpu:/daemons\n0::/x\n'), '/sys/fs/cgroup/systemd/user.slice/tasks');
  assert.equal(ownCgroupMoveFile(HYBRID, '1:cpu:/daemons\n0::/x\n'), '/sys/fs/cgroup/cpu/daemons/tasks');
  const v2 = '30 23 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate';
  assert.equal(ownCgroupMoveFile(v2, '0::/system.slice/berthd.service\n'), '/sys/fs/cgroup/system.slice/berthd.service/cgroup.procs');
  // A namespaced mount: the path is taken relative to the mount's root.
  const nested = '30 23 0:26 /system.slice /sys/fs/cgroup rw - cgroup2 cgroup2 rw';
  assert.equal(ownCgroupMoveFile(nested, '0::/system.slice/berthd.service\n'), '/sys/fs/cgroup/berthd.service/cgroup.procs');
  assert.equal(ownCgroupMoveFile('', '0::/\n'), undefined);
});

test('the warm-up moves the main thread into its own cgroup: nothing changes', async () => {
  const own = () => readFileSync(`/proc/${process.pid}/task/${process.pid}/cgroup`, 'utf8');
  const before = own();
  const file = ownCgroupMoveFile(readFileSync('/proc/self/mountinfo', 'utf8'), before);
  assert.ok(file, 'this machine has cgroups');
  const warmer = new AttachLockWarmer(file);
  warmer.warm();
  warmer.warm(); // a second call while the first is under way is the same warm-up
  await warmer.settled();
  assert.equal(own(), before);
  assert.ok(readFileSync(file!, 'utf8').split('\n').includes(String(process.pid)), `${file} lists the main thread`);
});
