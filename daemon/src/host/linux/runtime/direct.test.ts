import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { closeSync, constants, existsSync, mkdirSync, mkdtempSync, openSync, readSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { cgroupMounts, DirectUnavailable, parseCrunStatus, removeStopped, startCreated } from './direct.js';

test('parseCrunStatus reads the fields that matter of crun status', () => {
  const s = parseCrunStatus('{"pid": 844, "cgroup-path": "/berth/abc", "scope": "", "systemd-cgroup": false, "owner": "root"}');
  assert.deepEqual(s, { pid: 844, cgroupPath: '/berth/abc', systemdCgroup: false });
  assert.equal(parseCrunStatus('{"systemd-cgroup": true}').systemdCgroup, true);
  assert.throws(() => parseCrunStatus('{not json'));
});

test('cgroupMounts lists cgroup v1 and v2 mount points only', () => {
  const info = [
    '31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755',
    '32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu',
    '40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd',
    '41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw',
    '50 31 0:40 / /mnt/with\\040space rw shared:1 - cgroup2 cgroup2 rw',
    '',
  ].join('\n');
  assert.deepEqual(cgroupMounts(info), ['/sys/fs/cgroup/cpu', '/sys/fs/cgroup/systemd', '/sys/fs/cgroup/unified', '/mnt/with space']);
});

function tempState(): { root: string; id: string; dir: string } {
  const root = mkdtempSync('/tmp/berth-direct-');
  const id = `c${randomBytes(6).toString('hex')}`;
  const dir = path.join(root, id);
  mkdirSync(dir);
  return { root, id, dir };
}

test('startCreated writes one NUL byte to the waiting reader of exec.fifo and unlinks it', (t) => {
  const { root, id, dir } = tempState();
  t.after(() => rmSync(root, { recursive: true, force: true }));
  const fifo = path.join(dir, 'exec.fifo');
  assert.equal(spawnSync('mkfifo', ['-m', '0600', fifo]).status, 0);
  // The container's init holds the reading end, opened without blocking, as crun does.
  const reader = openSync(fifo, constants.O_RDONLY | constants.O_NONBLOCK);
  try {
    startCreated(root, id);
    assert.equal(existsSync(fifo), false);
    const buf = Buffer.alloc(4);
    assert.equal(readSync(reader, buf, 0, 4, null), 1);
    assert.equal(buf[0], 0);
  } finally {
    closeSync(reader);
  }
});

test('startCreated refuses when nobody waits on the FIFO (the init died) or there is none', (t) => {
  const { root, id, dir } = tempState();
  t.after(() => rmSync(root, { recursive: true, force: true }));
  assert.throws(() => startCreated(root, id), DirectUnavailable);
  const fifo = path.join(dir, 'exec.fifo');
  assert.equal(spawnSync('mkfifo', ['-m', '0600', fifo]).status, 0);
  assert.throws(() => startCreated(root, id), DirectUnavailable);
  assert.equal(existsSync(fifo), true, 'a FIFO nobody reads is left for the runtime to report on');
});

test('removeStopped: an unknown container is nothing to do; a systemd cgroup is left to the runtime', async (t) => {
  const { root, id, dir } = tempState();
  t.after(() => rmSync(root, { recursive: true, force: true }));
  assert.equal(await removeStopped(root, 'unknown'), false);
  writeFileSync(path.join(dir, 'status'), JSON.stringify({ pid: 1, 'cgroup-path': 'machine.slice:berth:x', 'systemd-cgroup': true }));
  await assert.rejects(removeStopped(root, id), DirectUnavailable);
  writeFileSync(path.join(dir, 'status'), JSON.stringify({ pid: 1, 'cgroup-path': '/berth/../../x', 'systemd-cgroup': false }));
  await assert.rejects(removeStopped(root, id), DirectUnavailable);
  assert.equal(existsSync(dir), true);
});

test('removeStopped removes the container cgroup in every hierarchy and the state folder', { skip: process.getuid?.() !== 0 && 'needs root' }, async (t) => {
  const { root, id, dir } = tempState();
  const rel = `berth-direct-test/${id}`;
  t.after(() => {
    for (const m of cgroupMountsHere()) spawnSync('rmdir', [path.join(m, rel), path.join(m, 'berth-direct-test')]);
    rmSync(root, { recursive: true, force: true });
  });
  const mounts = cgroupMountsHere();
  if (mounts.length === 0) return t.skip('no cgroup hierarchy mounted');
  for (const m of mounts) {
    const cg = path.join(m, rel);
    mkdirSync(cg, { recursive: true });
    assert.equal(existsSync(cg), true);
  }
  writeFileSync(path.join(dir, 'status'), JSON.stringify({ pid: 999999, 'cgroup-path': `/${rel}`, 'systemd-cgroup': false }));
  writeFileSync(path.join(dir, 'config.json'), '{}');
  assert.equal(await removeStopped(root, id), true);
  for (const m of mounts) assert.equal(existsSync(path.join(m, rel)), false, `${m}/${rel} removed`);
  assert.equal(existsSync(dir), false);
});

test('removeStopped refuses a cgroup that still holds a process (crun delete --force must kill it)', { skip: process.getuid?.() !== 0 && 'needs root' }, async (t) => {
  const { root, id, dir } = tempState();
  const mount = cgroupMountsHere().find((m) => m.endsWith('/pids') || m.endsWith('/unified') || m === '/sys/fs/cgroup');
  if (!mount) return t.skip('no pids or v2 hierarchy');
  const rel = `berth-direct-test/${id}`;
  const cg = path.join(mount, rel);
  mkdirSync(cg, { recursive: true });
  const child = spawn('sleep', ['30'], { stdio: 'ignore' });
  const pid = child.pid!;
  writeFileSync(path.join(cg, 'cgroup.procs'), String(pid));
  t.after(() => {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // gone
    }
    rmSync(root, { recursive: true, force: true });
  });
  writeFileSync(path.join(dir, 'status'), JSON.stringify({ pid, 'cgroup-path': `/${rel}`, 'systemd-cgroup': false }));
  await assert.rejects(removeStopped(root, id), DirectUnavailable);
  assert.equal(existsSync(dir), true, 'the state stays for the runtime');
  process.kill(pid, 'SIGKILL');
  for (let i = 0; i < 100 && spawnSync('rmdir', [cg]).status !== 0; i++) await new Promise((r) => setTimeout(r, 20));
  spawnSync('rmdir', [path.join(mount, 'berth-direct-test')]);
});

function cgroupMountsHere(): string[] {
  return cgroupMounts(spawnSync('cat', ['/proc/self/mountinfo'], { encoding: 'utf8' }).stdout);
}
