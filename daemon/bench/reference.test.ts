import assert from 'node:assert/strict';
import { existsSync, promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { measureReference, prepareBundle, runOnce, type Bundle } from './reference.js';

const root = process.getuid?.() === 0;
let work: string;
let bundle: Bundle;

before(async () => {
  if (!root) return;
  work = await fs.mkdtemp(path.join(os.tmpdir(), 'bench-ref-'));
  bundle = await prepareBundle(path.join(work, 'bundle'));
});

after(async () => {
  if (work) await fs.rm(work, { recursive: true, force: true });
});

test('the bundle holds the busybox root filesystem and a spec that runs /bin/true without a terminal', { skip: !root && 'needs root' }, async () => {
  assert.equal((await fs.lstat(path.join(bundle.dir, 'rootfs/bin/true'))).isSymbolicLink(), true);
  assert.equal((await fs.stat(path.join(bundle.dir, 'rootfs/bin/busybox'))).mode & 0o111, 0o111);
  const config = JSON.parse(await fs.readFile(path.join(bundle.dir, 'config.json'), 'utf8'));
  assert.deepEqual(config.process.args, ['/bin/true']);
  assert.equal(config.process.terminal, false);
});

test('crun runs the bundle: one timed sample per iteration, and no container state is left', { skip: !root && 'needs root' }, async () => {
  const result = await measureReference('crun', bundle, 3, 1);
  assert.equal(result.samples.length, 3);
  for (const ms of result.samples) assert.ok(ms > 0 && ms < 10_000, `sample ${ms} ms`);
  assert.deepEqual(await fs.readdir(bundle.stateRoot), []);
});

test('on hybrid cgroup hosts the reference runs where /sys/fs/cgroup/unified is hidden, and still cleans up', { skip: (!root && 'needs root') || (!existsSync('/sys/fs/cgroup/unified/cgroup.controllers') && 'no hybrid cgroup layout here') }, async () => {
  const result = await measureReference('crun', bundle, 2, 0, { hideUnifiedCgroup: true });
  assert.equal(result.samples.length, 2);
  assert.match(result.note ?? '', /private mount namespace/);
  assert.deepEqual(await fs.readdir(bundle.stateRoot), []);
  assert.ok(existsSync('/sys/fs/cgroup/unified/cgroup.controllers'), 'the host keeps its cgroup2 mount');
});

test('runc runs the same bundle', { skip: !root && 'needs root' }, async () => {
  const result = await measureReference('runc', bundle, 2, 0);
  assert.equal(result.samples.length, 2);
  assert.deepEqual(await fs.readdir(bundle.stateRoot), []);
});

test('a failing run is reported with the runtime\'s message', { skip: !root && 'needs root' }, async () => {
  const broken = await prepareBundle(path.join(work, 'broken'), ['/bin/no-such-program']);
  await assert.rejects(runOnce('runc', broken, `broken-${process.pid}`), /runc run exited/);
  await fs.rm(broken.dir, { recursive: true, force: true });
});
