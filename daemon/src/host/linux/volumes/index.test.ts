import assert from 'node:assert/strict';
import { existsSync, promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { LinuxVolumeHost } from './index.js';

let root: string;
let volumesRoot: string;
let host: LinuxVolumeHost;

before(async () => {
  root = await fs.mkdtemp(path.join(os.tmpdir(), 'berth-volhost-'));
  volumesRoot = path.join(root, 'volumes');
  await fs.mkdir(volumesRoot);
  host = new LinuxVolumeHost(volumesRoot);
});

after(async () => {
  for (const dir of [path.join(volumesRoot, 'ram', '_data')]) if (await host.isMounted(dir)) await host.unmount(dir);
  await fs.rm(root, { recursive: true, force: true });
});

describe('LinuxVolumeHost', () => {
  test('creates and removes volume folders below its root only', async () => {
    const dir = path.join(volumesRoot, 'one');
    await host.createVolumeDir(dir);
    assert.equal((await fs.stat(path.join(dir, '_data'))).mode & 0o777, 0o755);
    assert.equal(await host.isEmpty(path.join(dir, '_data')), true);
    await fs.writeFile(path.join(dir, '_data', 'f'), 'abc');
    assert.equal(await host.isEmpty(path.join(dir, '_data')), false);
    assert.equal(await host.diskUsage(path.join(dir, '_data')), 3);
    await assert.rejects(host.createVolumeDir(dir), /EEXIST/);
    await assert.rejects(host.removeVolumeDir(path.join(volumesRoot, '..', 'outside')), /not under the volumes folder/);
    await assert.rejects(host.createVolumeDir(root), /not under the volumes folder/);
    await host.removeVolumeDir(dir);
    assert.ok(!existsSync(dir));
  });

  test('lists its volume folders (not its own dot-folders), and none before its root exists', async () => {
    assert.deepEqual(await new LinuxVolumeHost(path.join(root, 'not-yet')).listVolumeDirs(), []);
    await host.createVolumeDir(path.join(volumesRoot, 'listed'));
    await fs.mkdir(path.join(volumesRoot, '.subpaths'), { recursive: true });
    await fs.writeFile(path.join(volumesRoot, 'a-file'), '');
    assert.deepEqual(await host.listVolumeDirs(), ['listed']);
    await host.removeVolumeDir(path.join(volumesRoot, 'listed'));
    await fs.rm(path.join(volumesRoot, 'a-file'));
    assert.deepEqual(await host.listVolumeDirs(), []);
  });

  test('mounts a tmpfs and refuses to remove a mounted volume', async () => {
    const dir = path.join(volumesRoot, 'ram');
    await host.createVolumeDir(dir);
    const data = path.join(dir, '_data');
    await host.mount(data, { type: 'tmpfs', device: 'tmpfs', o: 'size=1m' });
    assert.equal(await host.isMounted(data), true);
    await assert.rejects(host.removeVolumeDir(dir), /still mounted/);
    await host.unmount(data);
    assert.equal(await host.isMounted(data), false);
    await host.removeVolumeDir(dir);
  });

  test('mount points and copies resolve symlinks inside the container root', async () => {
    const rootfs = path.join(root, 'rootfs');
    const outside = path.join(root, 'outside');
    await fs.mkdir(path.join(rootfs, 'real', 'content'), { recursive: true });
    await fs.writeFile(path.join(rootfs, 'real', 'content', 'f'), 'inside');
    await fs.symlink(`/../../..${outside}`, path.join(rootfs, 'escape'));
    await fs.symlink('../real', path.join(rootfs, 'rel'));
    await fs.mkdir(outside);
    await fs.writeFile(path.join(outside, 'secret'), 'host');

    assert.equal(await host.makeMountPoint(rootfs, '/escape/deeper'), `${outside}/deeper`);
    assert.ok(existsSync(path.join(rootfs, outside, 'deeper')), 'made inside the root');
    assert.ok(!existsSync(path.join(outside, 'deeper')), 'nothing made outside');
    assert.equal(await host.makeMountPoint(rootfs, '/rel/content'), '/real/content');
    await fs.writeFile(path.join(rootfs, 'afile'), '');
    await assert.rejects(host.makeMountPoint(rootfs, '/afile/x'), /not a directory/);

    const dir = path.join(volumesRoot, 'copy');
    await host.createVolumeDir(dir);
    await host.copyFromRootfs(rootfs, '/escape', path.join(dir, '_data'));
    assert.ok(!existsSync(path.join(dir, '_data', 'secret')), 'the host folder behind a link is not copied');
    await host.copyFromRootfs(rootfs, '/rel', path.join(dir, '_data'));
    assert.equal(await fs.readFile(path.join(dir, '_data', 'content', 'f'), 'utf8'), 'inside');
    await host.copyFromRootfs(rootfs, '/missing', path.join(dir, '_data'));
    await host.removeVolumeDir(dir);
  });
  test('a subpath of a volume: bound from a handle on what was checked, never through a symlink, released', async () => {
    const dir = path.join(volumesRoot, 'parts');
    await host.createVolumeDir(dir);
    const data = path.join(dir, '_data');
    await fs.mkdir(path.join(data, 'app', 'conf'), { recursive: true });
    await fs.writeFile(path.join(data, 'app', 'conf', 'f'), 'inner');
    await fs.symlink(root, path.join(data, 'out'));
    await fs.symlink('app', path.join(data, 'in'));

    const opened = await host.openBeneath(data, 'app/./conf');
    assert.ok(opened.path.startsWith(path.join(volumesRoot, '.subpaths') + '/'));
    assert.equal(await host.isMounted(opened.path), true);
    assert.equal(await fs.readFile(path.join(opened.path, 'f'), 'utf8'), 'inner');
    assert.equal(opened.directory, true);
    const file = await host.openBeneath(data, 'app/conf/f');
    assert.equal(file.directory, false);
    assert.equal(await fs.readFile(file.path, 'utf8'), 'inner');
    await file.close();
    await opened.close();
    assert.ok(!existsSync(opened.path) && !existsSync(file.path), 'released');

    await assert.rejects(host.openBeneath(data, 'out'), /cannot access path .*\/out: too many levels of symbolic links/);
    await assert.rejects(host.openBeneath(data, 'in/conf'), /too many levels of symbolic links/);
    await assert.rejects(host.openBeneath(data, 'app/none'), /cannot access path .*app\/none: no such file or directory/);
    await assert.rejects(host.openBeneath(data, '../..'), /escapes the base directory/);

    // What a stopped daemon left is released at the next start.
    const left = await host.openBeneath(data, 'app');
    await host.releaseStaleSubpaths();
    assert.equal(await host.isMounted(left.path), false);
    assert.ok(!existsSync(left.path));
    await host.removeVolumeDir(dir);
  });
});
