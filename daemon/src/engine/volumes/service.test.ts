import assert from 'node:assert/strict';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import { Conflict, InvalidParameter, NotFound } from '../../errors.js';
import { EventBus } from '../events.js';
import { isLocalSubpath, planMounts, subpathsOf, type VolumeContainer } from './mounts.js';
import { VolumeService, type VolumeState } from './service.js';
import { FsStateStore } from '../../state/fs.js';
import type { LocalDriverOptions, VolumeHost } from '../../host/host.js';

/** A volume host on plain folders that records mounts instead of making them. */
class FakeVolumeHost implements VolumeHost {
  constructor(readonly volumesRoot: string) {}
  async listVolumeDirs(): Promise<string[]> {
    return fs.readdir(this.volumesRoot).catch(() => []);
  }
  async openBeneath(base: string, subpath: string) {
    return { path: `${base}/${subpath}`, directory: true, close: async () => undefined };
  }
  readonly mounted = new Map<string, LocalDriverOptions>();
  async createVolumeDir(dir: string): Promise<void> {
    await fs.mkdir(this.volumesRoot, { recursive: true });
    await fs.mkdir(dir);
    await fs.mkdir(path.join(dir, '_data'));
  }
  async removeVolumeDir(dir: string): Promise<void> {
    await fs.rm(dir, { recursive: true, force: true });
  }
  async mount(target: string, opts: LocalDriverOptions & { type: string }): Promise<void> {
    this.mounted.set(target, opts);
  }
  async unmount(target: string): Promise<void> {
    this.mounted.delete(target);
  }
  async isMounted(target: string): Promise<boolean> {
    return this.mounted.has(target);
  }
  async exists(p: string): Promise<boolean> {
    return p === '/existing' || (p.startsWith(`${this.volumesRoot}/`) && (await fs.stat(p).then(() => true, () => false)));
  }
  async isEmpty(dir: string): Promise<boolean> {
    return (await fs.readdir(dir)).length === 0;
  }
  async diskUsage(): Promise<number> {
    return 0;
  }
  async copyFromRootfs(): Promise<void> {}
  async makeMountPoint(_rootfs: string, containerPath: string): Promise<string> {
    return containerPath;
  }
}

/** The daemon's state as files under `root`. */
const fileState = (root: string): VolumeState => new FsStateStore(root);

const roots: string[] = [];
after(async () => {
  for (const r of roots) await fs.rm(r, { recursive: true, force: true });
});

async function service(users: { all?: string[]; running?: string[] } = {}): Promise<{ volumes: VolumeService; host: FakeVolumeHost; events: EventBus; root: string }> {
  const root = await fs.mkdtemp(path.join(os.tmpdir(), 'berth-volumes-'));
  roots.push(root);
  const host = new FakeVolumeHost(path.join(root, 'volumes'));
  const events = new EventBus();
  const volumes = new VolumeService(fileState(root), host, events);
  volumes.setUsers({ containersUsingVolume: () => users.all ?? [], runningContainersUsingVolume: () => users.running ?? [] });
  await volumes.init();
  return { volumes, host, events, root };
}

describe('VolumeService', () => {
  test('create validates before writing, returns an existing volume, reloads from disk', async () => {
    const { volumes, root } = await service();
    await assert.rejects(volumes.create({ Name: 'x' }), InvalidParameter);
    await assert.rejects(volumes.create({ Name: 'ok-name', Driver: 'other' }), NotFound);
    await assert.rejects(volumes.create({ Name: 'ok-name', DriverOpts: { type: 'none', o: 'bind', device: '/missing' } }), /no such file/);
    await assert.rejects(volumes.create({ Name: 'ok-name', DriverOpts: { type: 'ext4', device: '-oops' } }), /must not start with "-"/);
    assert.deepEqual(await fs.readdir(path.join(root, 'volumes')), []);
    const first = await volumes.create({ Name: 'ok-name', Labels: { a: '1' }, DriverOpts: { type: 'none', o: 'bind', device: '/existing' } });
    assert.equal(first.created, true);
    const again = await volumes.create({ Name: 'ok-name', Labels: { b: '2' } });
    assert.equal(again.created, false);
    assert.deepEqual(again.volume.Labels, { a: '1' });
    const reloaded = new VolumeService(fileState(root), new FakeVolumeHost(path.join(root, 'volumes')), new EventBus());
    await reloaded.init();
    assert.deepEqual(await reloaded.inspect('ok-name'), await volumes.inspect('ok-name'));
  });

  test('remove answers 409 while a container uses the volume, even with force', async () => {
    const { volumes } = await service({ all: ['c1'] });
    await volumes.create({ Name: 'busy' });
    await assert.rejects(volumes.remove('busy'), Conflict);
    await assert.rejects(volumes.remove('busy', { force: true }), Conflict);
    await volumes.remove('missing', { force: true });
    await assert.rejects(volumes.remove('missing'), NotFound);
  });

  test('a reserved volume is in use for remove and prune until released', async () => {
    const { volumes } = await service();
    await volumes.create({ Name: 'held', Labels: { 'com.docker.volume.anonymous': '' } });
    const release = volumes.reserve('held');
    await assert.rejects(volumes.remove('held'), Conflict);
    assert.deepEqual((await volumes.prune(new Map(), { all: true })).VolumesDeleted, []);
    release();
    release();
    assert.deepEqual((await volumes.prune(new Map(), { all: true })).VolumesDeleted, ['held']);
  });

  test('DriverOpts volumes are mounted for the first running user and unmounted after the last', async () => {
    const { volumes, host } = await service();
    await volumes.create({ Name: 'ram', DriverOpts: { type: 'tmpfs', o: 'size=1m' } });
    const point = volumes.mountpoint('ram');
    const use = (container: string) => ({ container, destination: '/r', readWrite: true, propagation: '' });
    await volumes.mount('ram', use('a'));
    await volumes.mount('ram', use('b'));
    assert.deepEqual(host.mounted.get(point), { type: 'tmpfs', device: undefined, o: 'size=1m' });
    await volumes.unmount('ram', 'a');
    assert.ok(host.mounted.has(point));
    await volumes.unmount('ram', 'b');
    assert.ok(!host.mounted.has(point));
  });

  test('recover unmounts what no running container holds', async () => {
    const { volumes, host } = await service();
    await volumes.create({ Name: 'ram', DriverOpts: { type: 'tmpfs' } });
    host.mounted.set(volumes.mountpoint('ram'), { type: 'tmpfs' });
    await volumes.recover();
    assert.ok(!host.mounted.has(volumes.mountpoint('ram')));
  });

  test('records are the daemon\'s state; the content is where the Host keeps it', async () => {
    const root = await fs.mkdtemp(path.join(os.tmpdir(), 'berth-volumes-'));
    roots.push(root);
    const hostRoot = path.join(root, 'elsewhere', 'volumes');
    const volumes = new VolumeService(fileState(path.join(root, 'daemon')), new FakeVolumeHost(hostRoot), new EventBus());
    await volumes.init();
    const { volume } = await volumes.create({ Name: 'apart' });
    assert.equal(volume.Mountpoint, path.join(hostRoot, 'apart', '_data'));
    assert.deepEqual(await fs.readdir(path.join(hostRoot, 'apart')), ['_data']);
    assert.deepEqual(await fs.readdir(path.join(root, 'daemon', 'volume-records')), ['apart']);
    await volumes.remove('apart');
    assert.deepEqual(await fs.readdir(hostRoot), []);
    assert.deepEqual(await fs.readdir(path.join(root, 'daemon', 'volume-records')), []);
  });

  test('a name of the longest length allowed (255) is created, stored and found again', async () => {
    const { volumes, root } = await service();
    const name = `v${'x'.repeat(254)}`;
    const { volume } = await volumes.create({ Name: name });
    assert.equal(volume.Name, name);
    const reloaded = new VolumeService(fileState(root), new FakeVolumeHost(path.join(root, 'volumes')), new EventBus());
    await reloaded.init();
    assert.equal(reloaded.find(name)?.Name, name);
    await reloaded.remove(name);
  });

  test('a record of the former layout (volume.json in the volume\'s folder) is moved, its content kept', async () => {
    const root = await fs.mkdtemp(path.join(os.tmpdir(), 'berth-volumes-'));
    roots.push(root);
    const old = path.join(root, 'volumes', 'old-vol');
    await fs.mkdir(path.join(old, '_data'), { recursive: true });
    await fs.writeFile(path.join(old, '_data', 'kept'), 'data\n');
    const record = { Name: 'old-vol', Driver: 'local', CreatedAt: '2024-01-02T03:04:05Z', Labels: { l: '1' }, Options: {} };
    await fs.writeFile(path.join(old, 'volume.json'), JSON.stringify({ FormatVersion: 1, ...record }));
    // A plugin's volume kept a folder with its record only.
    await fs.mkdir(path.join(root, 'volumes', 'plug-vol'));
    await fs.writeFile(path.join(root, 'volumes', 'plug-vol', 'volume.json'), JSON.stringify({ FormatVersion: 1, ...record, Name: 'plug-vol', Driver: 'someplugin' }));
    // A create cut short: an empty folder and no record; and a folder with files but no record, taken in.
    await fs.mkdir(path.join(root, 'volumes', 'half-made', '_data'), { recursive: true });
    await fs.mkdir(path.join(root, 'volumes', 'stray', '_data'), { recursive: true });
    await fs.writeFile(path.join(root, 'volumes', 'stray', '_data', 'f'), 'x');
    const volumes = new VolumeService(fileState(root), new FakeVolumeHost(path.join(root, 'volumes')), new EventBus());
    await volumes.init();
    const view = await volumes.inspect('old-vol');
    assert.deepEqual([view.CreatedAt, view.Labels, view.Mountpoint], [record.CreatedAt, record.Labels, path.join(old, '_data')]);
    assert.equal(volumes.find('plug-vol')?.Driver, 'someplugin');
    assert.deepEqual([volumes.find('stray')?.Driver, volumes.find('stray')?.Labels], ['local', {}]);
    assert.deepEqual((await fs.readdir(path.join(root, 'volumes'))).sort(), ['old-vol', 'stray']);
    assert.deepEqual(await fs.readdir(old), ['_data']);
    assert.equal(await fs.readFile(path.join(old, '_data', 'kept'), 'utf8'), 'data\n');
    assert.deepEqual((await fs.readdir(path.join(root, 'volume-records'))).sort(), ['old-vol', 'plug-vol', 'stray']);
    // And again after a restart, from the new records.
    const again = new VolumeService(fileState(root), new FakeVolumeHost(path.join(root, 'volumes')), new EventBus());
    await again.init();
    assert.deepEqual(await again.inspect('old-vol'), view);
  });

  test('prune takes anonymous volumes only unless all', async () => {
    const { volumes } = await service();
    await volumes.create({ Name: 'named' });
    await volumes.create({ Name: 'anon-like', Labels: { 'com.docker.volume.anonymous': '' } });
    assert.deepEqual((await volumes.prune(new Map(), { all: false })).VolumesDeleted, ['anon-like']);
    assert.deepEqual((await volumes.prune(new Map([['label', ['nope']]]), { all: true })).VolumesDeleted, []);
    assert.deepEqual((await volumes.prune(new Map(), { all: true })).VolumesDeleted, ['named']);
  });
});

describe('planMounts', () => {
  test('binds and tmpfs of Mounts are mount points; VolumeDriver only matters to the volumes that use it', () => {
    const plan = planMounts(
      { HostConfig: { VolumeDriver: 'other', Mounts: [{ Type: 'bind', Source: '/srv//data/', Target: '/d/', ReadOnly: true }, { Type: 'tmpfs', Target: '/t' }] } },
      null,
      none,
      mountpoint,
    );
    assert.deepEqual(plan.mounts, [
      { Type: 'bind', Source: '/srv/data', Destination: '/d', Mode: '', RW: false, Propagation: 'rprivate' },
      { Type: 'tmpfs', Source: '', Destination: '/t', Mode: '', RW: true, Propagation: '' },
    ]);
    assert.deepEqual(plan.volumes, []);
  });

  test('on Windows, `-v C:\\src:/src`, `-v //c/src:/src:ro` and `--mount source=C:\\...` are binds of the daemon machine\'s folders', () => {
    const plan = planMounts(
      {
        HostConfig: {
          Binds: ['C:\\src:/src', '//c/Users/me/app:/app:ro', 'vol:/data'],
          Mounts: [{ Type: 'bind', Source: 'd:/work/./x/', Target: '/w' }],
        },
      },
      null,
      none,
      mountpoint,
      'win32',
    );
    assert.deepEqual(plan.mounts.map((m) => [m.Type, m.Source, m.Destination, m.RW]), [
      ['bind', '//c/Users/me/app', '/app', false],
      ['volume', '/v/vol/_data', '/data', true],
      ['bind', 'C:\\src', '/src', true],
      ['bind', 'D:\\work\\x', '/w', true],
    ]);
    // Elsewhere a drive path is no absolute path: neither a bind nor a volume name.
    assert.throws(() => planMounts({ HostConfig: { Binds: ['C:\\src:/src'] } }, null, none, mountpoint, 'posix'), InvalidParameter);
    assert.throws(() => planMounts({ HostConfig: { Mounts: [{ Type: 'bind', Source: 'C:\\src', Target: '/s' }] } }, null, none, mountpoint, 'posix'), /must be absolute/);
    assert.throws(() => planMounts({ HostConfig: { Mounts: [{ Type: 'bind', Source: 'src', Target: '/s' }] } }, null, none, mountpoint, 'win32'), /must be absolute/);
  });

  test('a Subpath stays inside its volume, lexically', () => {
    for (const ok of ['a', 'a/b', './a', 'a/../b', '.']) assert.equal(isLocalSubpath(ok), true, ok);
    for (const bad of ['', '/a', '..', '../a', 'a/../../b']) assert.equal(isLocalSubpath(bad), false, bad);
    assert.deepEqual([...subpathsOf({ Mounts: [{ Type: 'volume', Source: 'v1', Target: '/m/', VolumeOptions: { Subpath: 'in' } }, { Type: 'bind', Source: '/x', Target: '/b' }] })], [['/m', 'in']]);
  });

  const mountpoint = (name: string) => `/v/${name}/_data`;
  const none = (): VolumeContainer => {
    throw new NotFound('no such container');
  };

  test('precedence: VolumesFrom, then Binds, then Mounts, then anonymous volumes where nothing mounts', () => {
    const other: VolumeContainer = {
      Id: 'o',
      HostConfig: {},
      Mounts: [
        { Type: 'volume', Name: 'shared', Source: mountpoint('shared'), Destination: '/shared', Driver: 'local', Mode: '', RW: true, Propagation: '' },
        { Type: 'volume', Name: 'replaced', Source: mountpoint('replaced'), Destination: '/data', Driver: 'local', Mode: '', RW: true, Propagation: '' },
      ],
    };
    const plan = planMounts(
      {
        Volumes: { '/anon': {}, '/data': {} },
        HostConfig: {
          VolumesFrom: ['other:ro'],
          Binds: ['named:/data:nocopy', '/host:/hostdir:ro'],
          Mounts: [{ Type: 'volume', Source: '', Target: '/m', VolumeOptions: { Labels: { l: 'v' } } }],
          Tmpfs: { '/img': '' },
        },
      },
      { '/img': {}, '/from-image': {} },
      (ref) => (ref === 'other' ? other : none()),
      mountpoint,
    );
    const byDest = Object.fromEntries(plan.mounts.map((m) => [m.Destination, m]));
    assert.deepEqual(Object.keys(byDest).sort(), ['/anon', '/data', '/from-image', '/hostdir', '/m', '/shared']);
    assert.equal(byDest['/shared'].RW, false, 'VolumesFrom :ro');
    assert.equal(byDest['/data'].Name, 'named', 'Binds replace VolumesFrom');
    assert.equal(byDest['/hostdir'].Type, 'bind');
    assert.match(byDest['/m'].Name!, /^[0-9a-f]{64}$/);
    const anonVolume = plan.volumes.find((v) => v.name === byDest['/m'].Name)!;
    assert.deepEqual(anonVolume.labels, { l: 'v', 'com.docker.volume.anonymous': '' });
    assert.deepEqual(plan.copies.map((c) => c.destination).sort(), ['/anon', '/from-image', '/m'], 'no copy for nocopy, VolumesFrom or binds');
  });

  test('bad input is InvalidParameter', () => {
    const bad: Array<[Record<string, unknown>, RegExp]> = [
      [{ Binds: ['a1:/x', 'b1:/x'] }, /Duplicate mount point/],
      [{ Binds: ['a1:/x'], Mounts: [{ Type: 'volume', Source: 'b1', Target: '/x/' }] }, /Duplicate mount point/],
      [{ Mounts: [{ Type: 'volume', Source: 'b1', Target: '/' }] }, /over \//],
      [{ Mounts: [{ Type: 'volume', Source: '/abs', Target: '/y' }] }, /invalid mount config for type "volume"/],
      [{ Mounts: [{ Type: 'volume', Source: 'b1', Target: '/y', VolumeOptions: { NoCopy: 'yes' } }] }, /NoCopy: expected a boolean/],
      [{ VolumesFrom: ['nobody'] }, /no such container: nobody/],
      [{ Mounts: [{ Type: 'volume', Source: 'b1', Target: '/y', VolumeOptions: { Subpath: '../up' } }] }, /subpath must be a relative path within the volume/],
      [{ Mounts: [{ Type: 'volume', Source: '', Target: '/y', VolumeOptions: { Subpath: 'in' } }] }, /must not set Subpath when using anonymous volumes/],
      [{ Mounts: [{ Type: 'bind', Source: '', Target: '/y' }] }, /field Source must not be empty/],
      [{ Mounts: [{ Type: 'tmpfs', Target: '/y', BindOptions: {} }] }, /field BindOptions must not be specified/],
      [{ Binds: ['vol1:/x'], VolumeDriver: 7 }, /Driver must be a string/],
    ];
    for (const [hc, message] of bad) {
      assert.throws(() => planMounts({ HostConfig: hc }, null, none, mountpoint), (err: unknown) => err instanceof InvalidParameter && message.test((err as Error).message), JSON.stringify(hc));
    }
  });

  test('a plugin driver is carried to the volumes it creates (looked up then, not here)', () => {
    const plan = planMounts({ HostConfig: { Binds: ['vol1:/x'], VolumeDriver: 'other', Mounts: [{ Type: 'volume', Source: 'vol2', Target: '/y', VolumeOptions: { DriverConfig: { Name: 'third' } } }] } }, null, none, mountpoint);
    assert.deepEqual(plan.volumes.map((v) => [v.name, v.driver]), [['vol1', 'other'], ['vol2', 'third']]);
  });
});
