/**
 * Host devices and block IO limits against a real berthd and the docker CLI: --device (a node, read-only,
 * a folder of nodes, a missing or non-device path), --device-cgroup-rule, privileged containers' copy of
 * /dev, --device-read-bps and --blkio-weight-device read back from the container's cgroup files, and
 * --kernel-memory answered with Docker's warning.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import { runCommand, useEngine } from './harness.js';

const engine = useEngine();

/** The block device holding the host's root file system and its major:minor, or undefined. */
function rootDisk(): { path: string; major: number; minor: number } | undefined {
  for (const line of readFileSync('/proc/self/mountinfo', 'utf8').split('\n')) {
    const fields = line.split(' ');
    if (fields[4] !== '/') continue;
    const source = fields[fields.indexOf('-') + 2];
    if (!source?.startsWith('/dev/') || !existsSync(source)) continue;
    const st = statSync(source);
    if (!st.isBlockDevice()) continue;
    const [major, minor] = fields[2].split(':').map(Number);
    return { path: source, major, minor };
  }
  return undefined;
}

/** A file of the container's cgroup: v1 under the controller, v2 under the unified root. */
function cgroupFile(id: string, controller: string, v1File: string, v2File: string): string | undefined {
  const v1 = `/sys/fs/cgroup/${controller}/berth/${id}/${v1File}`;
  if (existsSync(v1)) return readFileSync(v1, 'utf8');
  const v2 = `/sys/fs/cgroup/berth/${id}/${v2File}`;
  return existsSync(v2) ? readFileSync(v2, 'utf8') : undefined;
}

const disk = rootDisk();
const noDisk = disk ? false : 'no block device holds the root file system here';
// /dev/loop-control: not among the default rules (as /dev/null or /dev/zero are), and opening it does nothing.
const loopControl = existsSync('/dev/loop-control') ? false : 'no /dev/loop-control here';

describe('devices', () => {
  test('--device /dev/null:/dev/mynull is a writable char device 1:3 inside', async () => {
    const out = await engine.dockerOk(['run', '--rm', '--device', '/dev/null:/dev/mynull', 'busybox', 'sh', '-c', 'ls -l /dev/mynull && echo hi > /dev/mynull && echo written']);
    assert.match(out, /^c[rw-]{9}\s.*\b1,\s+3\b.*\/dev\/mynull$/m);
    assert.match(out, /^written$/m);
    const inspect = await engine.request('POST', '/containers/create', {
      body: { Image: 'busybox', Cmd: ['true'], HostConfig: { Devices: [{ PathOnHost: '/dev/null', PathInContainer: '/dev/mynull', CgroupPermissions: 'rwm' }] } },
    });
    assert.equal(inspect.status, 201, inspect.text);
    const hc = (await engine.request('GET', `/containers/${inspect.json().Id}/json`)).json().HostConfig;
    assert.deepEqual(hc.Devices, [{ PathOnHost: '/dev/null', PathInContainer: '/dev/mynull', CgroupPermissions: 'rwm' }]);
    await engine.dockerOk(['rm', inspect.json().Id]);
  });

  test('--device /dev/fuse overrides the default rule that refuses it; a default device at its own place is fine', { skip: existsSync('/dev/fuse') ? false : 'no /dev/fuse here' }, async () => {
    const out = await engine.dockerOk(['run', '--rm', '--device', '/dev/fuse', '--device', '/dev/null', 'busybox', 'sh', '-c', 'ls -l /dev/fuse && (exec 3<>/dev/fuse) && echo fuse-opened && echo x > /dev/null && echo null-written']);
    assert.match(out, /\b10,\s+229\b.*\/dev\/fuse$/m);
    assert.match(out, /^fuse-opened$/m);
    assert.match(out, /^null-written$/m);
  });

  test('runc makes the same devices', async () => {
    const out = await engine.dockerOk(['run', '--rm', '--runtime', 'runc', '--device', '/dev/null:/dev/mynull:rw', 'busybox', 'sh', '-c', 'ls -l /dev/mynull && echo x > /dev/mynull && echo written']);
    assert.match(out, /\b1,\s+3\b.*\/dev\/mynull$/m);
    assert.match(out, /^written$/m);
  });

  test('a read-only device (:r) can be opened for reading but not for writing', { skip: loopControl }, async () => {
    const script = '(exec 3</dev/lc) && echo opened-r; (exec 3>/dev/lc) && echo opened-w; true';
    const ro = await engine.docker(['run', '--rm', '--device', '/dev/loop-control:/dev/lc:r', 'busybox', 'sh', '-c', script]);
    assert.equal(ro.code, 0, ro.stderr);
    assert.match(ro.stdout, /^opened-r$/m);
    assert.doesNotMatch(ro.stdout, /opened-w/);
    assert.match(ro.stderr, /can't create \/dev\/lc: Operation not permitted/);
    const rw = await engine.dockerOk(['run', '--rm', '--device', '/dev/loop-control:/dev/lc:rw', 'busybox', 'sh', '-c', script]);
    assert.match(rw, /^opened-r\nopened-w$/m);
  });

  test('a folder of device nodes brings every node below it', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'berth-devs-'));
    after(() => rmSync(dir, { recursive: true, force: true }));
    await runCommand('mknod', [path.join(dir, 'null'), 'c', '1', '3']);
    await runCommand('mkdir', [path.join(dir, 'sub')]);
    await runCommand('mknod', [path.join(dir, 'sub', 'zero'), 'c', '1', '5']);
    const out = await engine.dockerOk(['run', '--rm', '--device', `${dir}:/dev/mine`, 'busybox', 'sh', '-c', 'ls -l /dev/mine/null /dev/mine/sub/zero && echo x > /dev/mine/null && head -c 3 /dev/mine/sub/zero | wc -c']);
    assert.match(out, /\b1,\s+3\b.*\/dev\/mine\/null$/m);
    assert.match(out, /\b1,\s+5\b.*\/dev\/mine\/sub\/zero$/m);
    assert.match(out, /^3$/m);
  });

  test('a missing or non-device path fails the start with a clear error and the daemon keeps serving', async () => {
    const missing = await engine.docker(['run', '--rm', '--device', '/dev/berth-no-such-device', 'busybox', 'true']);
    assert.notEqual(missing.code, 0);
    assert.match(missing.stderr, /error gathering device information while adding custom device "\/dev\/berth-no-such-device": no such file or directory/);

    const created = await engine.request('POST', '/containers/create', {
      body: { Image: 'busybox', Cmd: ['true'], HostConfig: { Devices: [{ PathOnHost: '/etc/hostname', PathInContainer: '/dev/x', CgroupPermissions: 'rwm' }] } },
    });
    assert.equal(created.status, 201, created.text);
    const id = created.json().Id;
    const start = await engine.request('POST', `/containers/${id}/start`);
    assert.equal(start.status, 500);
    assert.equal(start.json().message, 'error gathering device information while adding custom device "/etc/hostname": not a device node');
    const state = (await engine.request('GET', `/containers/${id}/json`)).json().State;
    assert.equal(state.Running, false);
    assert.match(state.Error, /not a device node/);
    await engine.dockerOk(['rm', id]);
    assert.match(await engine.dockerOk(['run', '--rm', 'busybox', 'echo', 'still serving']), /still serving/);
  });

  test('bad Devices and DeviceCgroupRules values are 400 at create', async () => {
    const cases: Array<[Record<string, unknown>, RegExp]> = [
      [{ DeviceCgroupRules: ['c 1:3 xyz'] }, /invalid device cgroup rule format: 'c 1:3 xyz'/],
      [{ DeviceCgroupRules: ['q *:* rwm'] }, /'q \*:\* rwm'/],
      [{ Devices: [{ PathOnHost: '/dev/null', PathInContainer: 'dev/null', CgroupPermissions: 'rwm' }] }, /must be absolute/],
      [{ Devices: [{ PathOnHost: '/dev/null', PathInContainer: '/dev/null', CgroupPermissions: 'rwx' }] }, /invalid device mode "rwx"/],
      [{ Devices: [{ PathInContainer: '/dev/null' }] }, /PathOnHost is required/],
      [{ BlkioDeviceReadBps: [{ Path: 'vda', Rate: 1 }] }, /BlkioDeviceReadBps\[0\]\.Path/],
      [{ BlkioDeviceWriteIOps: [{ Path: '/dev/vda', Rate: -1 }] }, /BlkioDeviceWriteIOps\[0\]\.Rate/],
      [{ BlkioWeightDevice: [{ Path: '/dev/vda', Weight: 5 }] }, /from 10 to 1000/],
    ];
    for (const [hostConfig, message] of cases) {
      const r = await engine.request('POST', '/containers/create', { body: { Image: 'busybox', Cmd: ['true'], HostConfig: hostConfig } });
      assert.equal(r.status, 400, `${JSON.stringify(hostConfig)}: ${r.text}`);
      assert.match(r.json().message, message);
    }
  });

  test('--device-cgroup-rule allows using a node that is refused otherwise', { skip: loopControl }, async () => {
    // Making nodes is allowed by default (`c *:* m`, as Docker's rules); opening them is not.
    const script = 'mknod /dev/x c 10 237 && (exec 3</dev/x) && (exec 3>/dev/x) && echo opened';
    const refused = await engine.docker(['run', '--rm', 'busybox', 'sh', '-c', script]);
    assert.notEqual(refused.code, 0);
    assert.match(refused.stderr, /\/dev\/x: Operation not permitted/);
    const allowed = await engine.dockerOk(['run', '--rm', '--device-cgroup-rule', 'c 10:237 rw', 'busybox', 'sh', '-c', script]);
    assert.match(allowed, /^opened$/m);
    // A wildcard minor, and read only: the open for writing is refused.
    const ro = await engine.docker(['run', '--rm', '--device-cgroup-rule', 'c 10:* r', 'busybox', 'sh', '-c', script]);
    assert.notEqual(ro.code, 0);
    assert.match(ro.stderr, /can't create \/dev\/x: Operation not permitted/);
  });

  test('privileged containers see the host devices', async () => {
    const out = await engine.dockerOk(['run', '--rm', '--privileged', 'busybox', 'sh', '-c', 'ls /dev; head -c 2 /dev/kmsg >/dev/null && echo kmsg-read']);
    const names = new Set(out.split(/\s+/));
    for (const name of ['null', 'zero', 'kmsg', 'fuse', 'loop-control']) if (existsSync(`/dev/${name}`)) assert.ok(names.has(name), `/dev/${name} in ${out}`);
    if (disk) assert.ok(names.has(path.basename(disk.path)), out);
    assert.match(out, /kmsg-read/);
  });

  test('--device-read-bps and --device-write-iops reach the container cgroup', { skip: noDisk }, async () => {
    const id = (await engine.dockerOk(['run', '-d', '--device-read-bps', `${disk!.path}:1mb`, '--device-write-iops', `${disk!.path}:300`, 'busybox', 'sleep', '600'])).trim();
    const dev = `${disk!.major}:${disk!.minor}`;
    const v1 = cgroupFile(id, 'blkio', 'blkio.throttle.read_bps_device', 'io.max');
    assert.ok(v1, 'no blkio/io cgroup file for the container');
    if (v1.includes('rbps=')) {
      assert.match(v1, new RegExp(`^${dev} .*rbps=1048576`, 'm'));
      assert.match(v1, new RegExp(`^${dev} .*wiops=300`, 'm'));
    } else {
      assert.match(v1, new RegExp(`^${dev} 1048576$`, 'm'));
      assert.match(cgroupFile(id, 'blkio', 'blkio.throttle.write_iops_device', 'io.max')!, new RegExp(`^${dev} 300$`, 'm'));
    }
    const hc = (await engine.request('GET', `/containers/${id}/json`)).json().HostConfig;
    assert.deepEqual(hc.BlkioDeviceReadBps, [{ Path: disk!.path, Rate: 1048576 }]);
    await engine.dockerOk(['rm', '-f', id]);
  });

  test('--blkio-weight-device is applied where the kernel has per-device weights, else discarded with a warning', { skip: noDisk }, async () => {
    const v1 = ['blkio.weight_device', 'blkio.bfq.weight_device'].find((f) => existsSync(`/sys/fs/cgroup/blkio/${f}`));
    const r = await engine.docker(['run', '-d', '--blkio-weight-device', `${disk!.path}:300`, 'busybox', 'sleep', '600']);
    assert.equal(r.code, 0, r.stderr);
    const id = r.stdout.trim();
    const hc = (await engine.request('GET', `/containers/${id}/json`)).json().HostConfig;
    if (v1) {
      assert.match(cgroupFile(id, 'blkio', v1, 'io.weight') ?? '', new RegExp(`${disk!.major}:${disk!.minor} 300`));
      assert.deepEqual(hc.BlkioWeightDevice, [{ Path: disk!.path, Weight: 300 }]);
    } else if (existsSync('/sys/fs/cgroup/blkio')) {
      assert.match(r.stderr, /Your kernel does not support Block I\/O weight_device or the cgroup is not mounted\. Weight-device discarded\./);
      assert.deepEqual(hc.BlkioWeightDevice ?? [], []);
    }
    assert.equal((await engine.request('GET', `/containers/${id}/json`)).json().State.Running, true);
    await engine.dockerOk(['rm', '-f', id]);
  });

  test('a block IO device that is not there fails the start with its path', async () => {
    const created = await engine.request('POST', '/containers/create', {
      body: { Image: 'busybox', Cmd: ['true'], HostConfig: { BlkioDeviceReadBps: [{ Path: '/dev/berth-no-disk', Rate: 1024 }] } },
    });
    assert.equal(created.status, 201, created.text);
    const start = await engine.request('POST', `/containers/${created.json().Id}/start`);
    assert.equal(start.status, 500);
    assert.match(start.json().message, /stat \/dev\/berth-no-disk: no such file or directory/);
    await engine.dockerOk(['rm', created.json().Id]);
  });

  test('--kernel-memory is discarded: with a warning before API 1.42, ignored after, and the container runs', async () => {
    const old = await engine.docker(['run', '--rm', '--kernel-memory', '64m', 'busybox', 'echo', 'ran'], { env: { DOCKER_API_VERSION: '1.41' } });
    assert.equal(old.code, 0, old.stderr);
    assert.match(old.stdout, /^ran$/m);
    assert.match(old.stderr, /Your kernel does not support kernel memory limit capabilities or the cgroup is not mounted\. Limitation discarded\./);

    const created = await engine.request('POST', '/v1.41/containers/create', { body: { Image: 'busybox', Cmd: ['true'], HostConfig: { KernelMemory: 64 * 1024 * 1024 } } });
    assert.equal(created.status, 201, created.text);
    assert.deepEqual(created.json().Warnings, ['Your kernel does not support kernel memory limit capabilities or the cgroup is not mounted. Limitation discarded.']);
    assert.equal((await engine.request('GET', `/v1.41/containers/${created.json().Id}/json`)).json().HostConfig.KernelMemory, 0);
    await engine.dockerOk(['rm', created.json().Id]);

    const current = await engine.request('POST', '/containers/create', { body: { Image: 'busybox', Cmd: ['true'], HostConfig: { KernelMemory: 64 * 1024 * 1024 } } });
    assert.equal(current.status, 201, current.text);
    assert.deepEqual(current.json().Warnings, []);
    await engine.dockerOk(['rm', current.json().Id]);
  });

  test('docker update: block IO weights and kernel memory the host cannot apply are discarded with a warning', async () => {
    const id = (await engine.dockerOk(['run', '-d', 'busybox', 'sleep', '600'])).trim();
    const weightFile = ['blkio.weight', 'blkio.bfq.weight'].find((f) => existsSync(`/sys/fs/cgroup/blkio/${f}`));
    const r = await engine.docker(['update', '--blkio-weight', '300', id]);
    assert.equal(r.code, 0, r.stderr);
    const hc = (await engine.request('GET', `/containers/${id}/json`)).json().HostConfig;
    if (weightFile) assert.equal(hc.BlkioWeight, 300);
    else if (existsSync('/sys/fs/cgroup/blkio')) {
      assert.match(r.stdout + r.stderr, /Your kernel does not support Block I\/O weight or the cgroup is not mounted\. Weight discarded\./);
      assert.equal(hc.BlkioWeight, 0);
    }
    const old = await engine.request('POST', `/v1.41/containers/${id}/update`, { body: { KernelMemory: 64 * 1024 * 1024 } });
    assert.equal(old.status, 200, old.text);
    assert.deepEqual(old.json().Warnings, ['Your kernel does not support kernel memory limit capabilities or the cgroup is not mounted. Limitation discarded.']);
    const current = await engine.request('POST', `/containers/${id}/update`, { body: { KernelMemory: 64 * 1024 * 1024 } });
    assert.equal(current.status, 200, current.text);
    assert.deepEqual(current.json().Warnings, []);
    assert.equal((await engine.request('GET', `/containers/${id}/json`)).json().State.Running, true);
    await engine.dockerOk(['rm', '-f', id]);
  });
});
