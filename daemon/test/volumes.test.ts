/**
 * Volumes against a real berthd: the /volumes API (plain HTTP, dockerode, the docker CLI), named and
 * anonymous volumes in containers (Binds, Mounts, Config.Volumes, VolumesFrom), the copy of an image's
 * content into a new volume, the local driver's tmpfs and bind DriverOpts, prune per API version, events,
 * and volumes kept across a daemon restart. Bad input answers 4xx with a message and leaves nothing behind.
 */
import assert from 'node:assert/strict';
import { existsSync, promises as fs, readdirSync, readFileSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { expectConforms } from './contract/openapi.js';
import { buildBusyboxArchive } from './fixtures/busybox.js';
import { runCommand, startEngine, type Engine } from './harness.js';

let engine: Engine;
const IMAGE_WITH_DATA = 'voldata:1';

before(async () => {
  engine = await startEngine();
  await engine.loadBusybox();
  const tarball = path.join(engine.root, 'voldata.tar');
  await buildBusyboxArchive(tarball, { tag: IMAGE_WITH_DATA, extraFiles: { '/data/hello.txt': 'from the image\n', '/data/sub/deep.txt': 'deep\n' } });
  await engine.dockerOk(['load', '-i', tarball], { timeoutMs: 120_000 });
});

after(async () => {
  await engine?.cleanup();
});

const volumesDir = () => path.join(engine.dataRoot, 'volumes');
const volumeFolders = () => readdirSync(volumesDir()).sort();

function isMounted(p: string): boolean {
  return readFileSync('/proc/self/mountinfo', 'utf8').split('\n').some((line) => line.split(' ')[4] === p);
}

async function volumeEvents(sinceSeconds: number): Promise<Array<{ Action: string; Actor: { ID: string; Attributes: Record<string, string> } }>> {
  const until = Math.ceil(Date.now() / 1000) + 1;
  const filters = encodeURIComponent(JSON.stringify({ type: ['volume'] }));
  const res = await engine.request('GET', `/events?since=${sinceSeconds}&until=${until}&filters=${filters}`, { timeoutMs: 30_000 });
  return res.text.split('\n').filter(Boolean).map((l) => JSON.parse(l));
}

describe('the /volumes API', () => {
  test('create, inspect, list with filters, remove (plain HTTP, schema of every version)', async () => {
    const created = await engine.request('POST', '/v1.53/volumes/create', { body: { Name: 'api-one', Labels: { team: 'blue', tier: '' } } });
    assert.equal(created.status, 201, created.text);
    const v = created.json();
    assert.equal(v.Name, 'api-one');
    assert.equal(v.Driver, 'local');
    assert.equal(v.Scope, 'local');
    assert.equal(v.Mountpoint, path.join(volumesDir(), 'api-one', '_data'));
    assert.deepEqual(v.Labels, { team: 'blue', tier: '' });
    assert.deepEqual(v.Options, {});
    assert.match(v.CreatedAt, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
    assert.ok(existsSync(v.Mountpoint), 'the volume folder exists');
    await expectConforms('1.53', 'post', '/volumes/create', 201, v);

    const inspected = await engine.request('GET', '/v1.53/volumes/api-one');
    assert.equal(inspected.status, 200);
    assert.equal(inspected.json().UsageData, null);
    for (const version of ['1.25', '1.41', '1.44', '1.53']) {
      const r = await engine.request('GET', `/v${version}/volumes/api-one`);
      await expectConforms(version, 'get', '/volumes/{name}', 200, r.json());
      const list = await engine.request('GET', `/v${version}/volumes`);
      await expectConforms(version, 'get', '/volumes', 200, list.json());
    }
    assert.equal((await engine.request('GET', '/v1.30/volumes/api-one')).json().CreatedAt, undefined, 'CreatedAt comes with 1.31');

    // Creating an existing name answers that volume.
    const again = await engine.request('POST', '/volumes/create', { body: { Name: 'api-one', Labels: { other: 'x' } } });
    assert.equal(again.status, 201);
    assert.deepEqual(again.json().Labels, { team: 'blue', tier: '' });

    const generated = await engine.request('POST', '/volumes/create', { body: {} });
    assert.equal(generated.status, 201);
    assert.match(generated.json().Name, /^[0-9a-f]{64}$/);

    const names = async (filters: object) => {
      const r = await engine.request('GET', `/volumes?filters=${encodeURIComponent(JSON.stringify(filters))}`);
      assert.equal(r.status, 200, r.text);
      assert.deepEqual(r.json().Warnings, []);
      return (r.json().Volumes as Array<{ Name: string }>).map((x) => x.Name);
    };
    assert.deepEqual(await names({ name: ['api-o'] }), ['api-one']);
    assert.deepEqual(await names({ label: ['team'] }), ['api-one']);
    assert.deepEqual(await names({ label: ['team=blue'] }), ['api-one']);
    assert.deepEqual(await names({ label: ['team=red'] }), []);
    assert.ok((await names({ driver: ['local'] })).includes(generated.json().Name));
    assert.ok((await names({ dangling: ['true'] })).includes('api-one'));
    assert.ok(!(await names({ dangling: ['false'] })).includes('api-one'));
    assert.equal((await engine.request('GET', `/volumes?filters=${encodeURIComponent('{"colour":["x"]}')}`)).status, 400);

    assert.equal((await engine.request('DELETE', '/volumes/api-one')).status, 204);
    assert.equal((await engine.request('DELETE', `/volumes/${generated.json().Name}`)).status, 204);
    assert.ok(!existsSync(v.Mountpoint), 'the folder went with the volume');
    const missing = await engine.request('DELETE', '/volumes/api-one');
    assert.equal(missing.status, 404);
    assert.match(missing.json().message, /no such volume/);
    assert.equal((await engine.request('DELETE', '/volumes/api-one?force=1')).status, 204, 'force skips a missing volume');
    assert.equal((await engine.request('GET', '/volumes/api-one')).status, 404);
  });

  test('bad input answers 4xx with a message and creates nothing', async () => {
    const before = volumeFolders();
    const cases: Array<[object, number, RegExp]> = [
      [{ Name: 'a' }, 400, /invalid volume name/],
      [{ Name: 'bad name!' }, 400, /invalid volume name.*\[a-zA-Z0-9\]/],
      [{ Name: '../escape' }, 400, /invalid volume name/],
      [{ Name: 'plugged', Driver: 'nfs-plugin' }, 404, /^create plugged: error looking up volume plugin nfs-plugin: plugin "nfs-plugin" not found$/],
      [{ Name: 'nodevice', DriverOpts: { type: 'none', o: 'bind' } }, 400, /missing required option "device"/],
      [{ Name: 'notype', DriverOpts: { device: '/tmp' } }, 400, /missing required option "type"/],
      [{ Name: 'unknownopt', DriverOpts: { type: 'tmpfs', colour: 'red' } }, 400, /invalid option "colour"/],
      [{ Name: 'nobind', DriverOpts: { type: 'none', device: '/tmp' } }, 400, /o=bind/],
      [{ Name: 'nohost', DriverOpts: { type: 'none', o: 'bind', device: '/does/not/exist' } }, 400, /no such file/],
      [{ Name: 'notstrings', DriverOpts: { type: 1 } }, 400, /DriverOpts must be a map of strings/],
      [{ Name: 'badlabels', Labels: ['x'] }, 400, /Labels must be a map of strings/],
      [{ Name: 42 }, 400, /Name must be a string/],
    ];
    for (const [body, status, message] of cases) {
      const r = await engine.request('POST', '/volumes/create', { body });
      assert.equal(r.status, status, `${JSON.stringify(body)}: ${r.text}`);
      assert.match(r.json().message, message, JSON.stringify(body));
    }
    const notJson = await engine.request('POST', '/volumes/create', { body: '[1]', headers: { 'Content-Type': 'application/json' } });
    assert.equal(notJson.status, 400);
    assert.deepEqual(volumeFolders(), before, 'no folder left behind');
  });

  test('docker volume create / ls / inspect / rm, and dockerode', async () => {
    assert.equal((await engine.dockerOk(['volume', 'create', '--label', 'cli=yes', 'cli-vol'])).trim(), 'cli-vol');
    const ls = await engine.dockerOk(['volume', 'ls', '--format', '{{.Driver}} {{.Name}}', '--filter', 'label=cli']);
    assert.equal(ls.trim(), 'local cli-vol');
    const inspected = JSON.parse(await engine.dockerOk(['volume', 'inspect', 'cli-vol']));
    assert.equal(inspected[0].Mountpoint, path.join(volumesDir(), 'cli-vol', '_data'));
    const bad = await engine.docker(['volume', 'create', '--driver', 'nope', 'x1']);
    assert.notEqual(bad.code, 0);
    assert.match(bad.stderr, /plugin "nope" not found/);

    const docker = engine.dockerode();
    const made = await docker.createVolume({ Name: 'dockerode-vol', Labels: { via: 'dockerode' } });
    assert.equal((made as unknown as { name: string }).name, 'dockerode-vol');
    const info = await docker.getVolume('dockerode-vol').inspect();
    assert.equal(info.Labels.via, 'dockerode');
    const listed = await docker.listVolumes({ filters: { name: ['dockerode'] } });
    assert.deepEqual(listed.Volumes.map((x) => x.Name), ['dockerode-vol']);
    await docker.getVolume('dockerode-vol').remove();
    assert.equal((await engine.dockerOk(['volume', 'rm', 'cli-vol'])).trim(), 'cli-vol');
  });
});

describe('volumes in containers', () => {
  test('data written in a named volume is read by another container; inspect shows the mount', async () => {
    await engine.dockerOk(['run', '--rm', '-v', 'shared-data:/data', 'busybox', 'sh', '-c', 'echo kept > /data/note && chown 1000:1000 /data/note']);
    const out = await engine.dockerOk(['run', '--rm', '-v', 'shared-data:/srv/x:ro', 'busybox', 'sh', '-c', 'cat /srv/x/note; stat -c %u /srv/x/note; touch /srv/x/other 2>&1 || echo read-only']);
    assert.equal(out, 'kept\n1000\n' + out.split('\n').slice(2).join('\n'));
    assert.match(out, /read-only/);
    assert.equal(readFileSync(path.join(volumesDir(), 'shared-data', '_data', 'note'), 'utf8'), 'kept\n');

    const id = (await engine.dockerOk(['create', '-v', 'shared-data:/data', '--mount', 'type=volume,src=second-vol,dst=/two,readonly', 'busybox', 'true'])).trim();
    const mounts = JSON.parse(await engine.dockerOk(['inspect', id]))[0].Mounts as Array<Record<string, unknown>>;
    const data = mounts.find((m) => m.Destination === '/data')!;
    assert.equal(data.Type, 'volume');
    assert.equal(data.Name, 'shared-data');
    assert.equal(data.Source, path.join(volumesDir(), 'shared-data', '_data'));
    assert.equal(data.Driver, 'local');
    assert.equal(data.RW, true);
    const two = mounts.find((m) => m.Destination === '/two')!;
    assert.equal(two.Name, 'second-vol');
    assert.equal(two.RW, false);
    assert.equal((await engine.request('GET', '/volumes/second-vol')).status, 200, 'created on demand');
    const listed = await engine.request('GET', `/containers/json?all=1&filters=${encodeURIComponent(JSON.stringify({ volume: ['second-vol'] }))}`);
    assert.deepEqual(listed.json().map((c: { Id: string }) => c.Id), [id]);

    // In use by a container that never ran: 409, even with force.
    for (const url of ['/volumes/shared-data', '/volumes/shared-data?force=1']) {
      const r = await engine.request('DELETE', url);
      assert.equal(r.status, 409, r.text);
      assert.match(r.json().message, /volume is in use/);
    }
    await engine.dockerOk(['rm', '-v', id]);
    assert.equal((await engine.request('GET', '/volumes/shared-data')).status, 200, 'rm -v keeps named volumes');
    assert.equal((await engine.request('DELETE', '/volumes/shared-data')).status, 204);
    assert.equal((await engine.request('DELETE', '/volumes/second-vol')).status, 204);
  });

  test("a new volume gets the image's content, unless nocopy; an existing one keeps its own", async () => {
    assert.equal(await engine.dockerOk(['run', '--rm', '-v', 'copied:/data', IMAGE_WITH_DATA, 'cat', '/data/hello.txt', '/data/sub/deep.txt']), 'from the image\ndeep\n');
    assert.equal(readFileSync(path.join(volumesDir(), 'copied', '_data', 'hello.txt'), 'utf8'), 'from the image\n');
    assert.equal(await engine.dockerOk(['run', '--rm', '-v', 'not-copied:/data:nocopy', IMAGE_WITH_DATA, 'ls', '-A', '/data']), '');
    assert.equal(await engine.dockerOk(['run', '--rm', '--mount', 'type=volume,src=not-copied2,dst=/data,volume-nocopy', IMAGE_WITH_DATA, 'ls', '-A', '/data']), '');
    await engine.dockerOk(['run', '--rm', '-v', 'own-content:/data', 'busybox', 'sh', '-c', 'echo mine > /data/mine']);
    assert.equal(await engine.dockerOk(['run', '--rm', '-v', 'own-content:/data', IMAGE_WITH_DATA, 'ls', '-A', '/data']), 'mine\n');
    // Anonymous (-v /data, Config.Volumes): a fresh volume with the image's content, labelled anonymous.
    const id = (await engine.dockerOk(['create', '-v', '/data', IMAGE_WITH_DATA, 'cat', '/data/hello.txt'])).trim();
    const mount = JSON.parse(await engine.dockerOk(['inspect', id]))[0].Mounts[0];
    assert.equal(mount.Type, 'volume');
    assert.match(mount.Name, /^[0-9a-f]{64}$/);
    const anon = (await engine.request('GET', `/volumes/${mount.Name}`)).json();
    assert.deepEqual(anon.Labels, { 'com.docker.volume.anonymous': '' });
    assert.equal(await engine.dockerOk(['start', '-a', id]), 'from the image\n');
    await engine.dockerOk(['rm', '-v', id]);
    assert.equal((await engine.request('GET', `/volumes/${mount.Name}`)).status, 404, 'rm -v removed the anonymous volume');
    for (const name of ['copied', 'not-copied', 'not-copied2', 'own-content']) await engine.dockerOk(['volume', 'rm', name]);
  });

  test("an image's VOLUME gets an anonymous volume with the image's content (dockerode)", async () => {
    const base = (await engine.dockerOk(['create', IMAGE_WITH_DATA, 'true'])).trim();
    const exported = await engine.request('GET', `/containers/${base}/export`, { timeoutMs: 60_000 });
    const imported = await engine.request('POST', `/images/create?fromSrc=-&repo=withvolume&tag=1&changes=${encodeURIComponent('VOLUME /data')}&changes=${encodeURIComponent('CMD ["cat", "/data/hello.txt"]')}`, {
      body: exported.body,
      headers: { 'Content-Type': 'application/x-tar' },
      timeoutMs: 60_000,
    });
    assert.equal(imported.status, 200, imported.text);
    await engine.dockerOk(['rm', base]);
    const docker = engine.dockerode();
    const container = await docker.createContainer({ Image: 'withvolume:1' });
    const info = await container.inspect();
    assert.equal(info.Mounts.length, 1);
    const mount = info.Mounts[0] as unknown as { Type: string; Name: string; Destination: string; Source: string };
    assert.equal(mount.Type, 'volume');
    assert.equal(mount.Destination, '/data');
    assert.equal(readFileSync(path.join(mount.Source, 'hello.txt'), 'utf8'), 'from the image\n');
    await container.start();
    await container.wait();
    const logs = (await container.logs({ stdout: true })).toString('utf8');
    assert.match(logs, /from the image/);
    // A named volume at the same place replaces the image's anonymous one.
    const named = await docker.createContainer({ Image: 'withvolume:1', HostConfig: { Binds: ['instead:/data'] } });
    const namedMounts = (await named.inspect()).Mounts as unknown as Array<{ Name: string }>;
    assert.deepEqual(namedMounts.map((m) => m.Name), ['instead']);
    await named.remove({ v: true });
    await container.remove({ v: true });
    assert.equal((await engine.request('GET', `/volumes/${mount.Name}`)).status, 404);
    await docker.getVolume('instead').remove();
  });

  test('the copy into a new volume keeps owners and modes', async () => {
    const base = (await engine.dockerOk(['create', 'busybox', 'sh', '-c', 'mkdir -p /owned/sub && echo x > /owned/sub/f && chown -R 1000:1000 /owned/sub && chmod 640 /owned/sub/f && chmod 1770 /owned && ln -s sub/f /owned/link'])).trim();
    await engine.dockerOk(['start', '-a', base]);
    const exported = await engine.request('GET', `/containers/${base}/export`, { timeoutMs: 60_000 });
    const imported = await engine.request('POST', '/images/create?fromSrc=-&repo=owned&tag=1', { body: exported.body, headers: { 'Content-Type': 'application/x-tar' }, timeoutMs: 60_000 });
    assert.equal(imported.status, 200, imported.text);
    await engine.dockerOk(['rm', base]);
    const out = await engine.dockerOk(['run', '--rm', '-v', 'owned-vol:/owned', 'owned:1', 'stat', '-c', '%n %u %g %a', '/owned', '/owned/sub', '/owned/sub/f']);
    assert.equal(out, '/owned 0 0 1770\n/owned/sub 1000 1000 755\n/owned/sub/f 1000 1000 640\n');
    const data = path.join(volumesDir(), 'owned-vol', '_data');
    assert.equal(await fs.readlink(path.join(data, 'link')), 'sub/f', 'links are copied as links');
    await engine.dockerOk(['volume', 'rm', 'owned-vol']);
  });

  test('rm -v removes anonymous volumes only; --rm removes them too', async () => {
    const id = (await engine.dockerOk(['create', '-v', 'keep-me:/named', '-v', '/anon', 'busybox', 'true'])).trim();
    const mounts = JSON.parse(await engine.dockerOk(['inspect', id]))[0].Mounts as Array<{ Name: string; Destination: string }>;
    const anon = mounts.find((m) => m.Destination === '/anon')!.Name;
    assert.equal((await engine.request('GET', `/volumes/${anon}`)).status, 200);
    await engine.dockerOk(['rm', '-v', id]);
    assert.equal((await engine.request('GET', `/volumes/${anon}`)).status, 404);
    assert.equal((await engine.request('GET', '/volumes/keep-me')).status, 200);
    assert.ok(!existsSync(path.join(volumesDir(), anon)));

    const id2 = (await engine.dockerOk(['create', '-v', '/anon2', 'busybox', 'true'])).trim();
    const anon2 = JSON.parse(await engine.dockerOk(['inspect', id2]))[0].Mounts[0].Name as string;
    await engine.dockerOk(['rm', id2]);
    assert.equal((await engine.request('GET', `/volumes/${anon2}`)).status, 200, 'rm without -v keeps it');
    await engine.dockerOk(['volume', 'rm', anon2]);

    const before = (await engine.request('GET', '/volumes')).json().Volumes.length;
    await engine.dockerOk(['run', '--rm', '-v', '/scratch', 'busybox', 'true']);
    await engine.dockerOk(['volume', 'rm', 'keep-me']);
    assert.equal((await engine.request('GET', '/volumes')).json().Volumes.length, before - 1, '--rm took its anonymous volume with it');
  });

  test('prune: every unused volume before 1.42, only anonymous ones from 1.42 unless all=true; label filters', async () => {
    const make = async (name: string, labels: Record<string, string> = {}) => {
      assert.equal((await engine.request('POST', '/volumes/create', { body: { Name: name, Labels: labels } })).status, 201);
    };
    const anonymousId = (await engine.dockerOk(['create', '-v', '/p-anon', 'busybox', 'true'])).trim();
    const anon = JSON.parse(await engine.dockerOk(['inspect', anonymousId]))[0].Mounts[0].Name as string;
    await engine.dockerOk(['rm', anonymousId]);
    await make('p-named', { prunetest: '1' });
    await make('p-labelled', { prunetest: '1', prune: 'me' });
    await make('p-used', { prunetest: '1' });
    const user = (await engine.dockerOk(['create', '-v', 'p-used:/x', 'busybox', 'true'])).trim();
    await fs.writeFile(path.join(volumesDir(), 'p-named', '_data', 'blob'), Buffer.alloc(4096));

    const r142 = await engine.request('POST', '/v1.42/volumes/prune');
    assert.equal(r142.status, 200, r142.text);
    assert.ok(r142.json().VolumesDeleted.includes(anon), r142.text);
    assert.ok(!r142.json().VolumesDeleted.some((n: string) => n.startsWith('p-')), 'named volumes stay from 1.42 on');
    await expectConforms('1.42', 'post', '/volumes/prune', 200, r142.json());

    const byLabel = await engine.request('POST', `/v1.44/volumes/prune?filters=${encodeURIComponent(JSON.stringify({ all: ['true'], label: ['prune=me'] }))}`);
    assert.deepEqual(byLabel.json().VolumesDeleted, ['p-labelled']);

    const old = await engine.request('POST', `/v1.41/volumes/prune?filters=${encodeURIComponent(JSON.stringify({ label: ['prunetest'], 'label!': ['keep'] }))}`);
    assert.deepEqual(old.json().VolumesDeleted, ['p-named'], 'before 1.42 named volumes go too; the used one stays');
    assert.equal(old.json().SpaceReclaimed, 4096);
    assert.equal((await engine.request('GET', '/volumes/p-used')).status, 200);

    await engine.dockerOk(['rm', user]);
    const all = await engine.request('POST', `/v1.53/volumes/prune?filters=${encodeURIComponent(JSON.stringify({ all: ['1'] }))}`);
    assert.ok(all.json().VolumesDeleted.includes('p-used'));
    const cli = await engine.dockerOk(['volume', 'prune', '-f']);
    assert.match(cli, /Total reclaimed space/);
  });

  test('tmpfs DriverOpts: mounted for running users only', async () => {
    await engine.dockerOk(['volume', 'create', '--opt', 'type=tmpfs', '--opt', 'device=tmpfs', '--opt', 'o=size=2m', 'ram-vol']);
    const inspected = JSON.parse(await engine.dockerOk(['volume', 'inspect', 'ram-vol']))[0];
    assert.deepEqual(inspected.Options, { type: 'tmpfs', device: 'tmpfs', o: 'size=2m' });
    const mountpoint = inspected.Mountpoint as string;
    assert.ok(!isMounted(mountpoint), 'not mounted before first use');
    const id = (await engine.dockerOk(['run', '-d', '-v', 'ram-vol:/ram', 'busybox', 'sh', '-c', 'echo in-ram > /ram/f; grep " /ram " /proc/mounts; sleep 600'])).trim();
    const line = await eventuallyText(() => engine.dockerOk(['logs', id]));
    assert.match(line, /^tmpfs \/ram tmpfs .*size=2048k/);
    assert.ok(isMounted(mountpoint), 'mounted while a container runs');
    assert.equal(readFileSync(path.join(mountpoint, 'f'), 'utf8'), 'in-ram\n');
    // A second user shares the same mount.
    assert.equal(await engine.dockerOk(['run', '--rm', '-v', 'ram-vol:/r', 'busybox', 'cat', '/r/f']), 'in-ram\n');
    assert.ok(isMounted(mountpoint), 'still mounted for the first container');
    await engine.dockerOk(['rm', '-f', id]);
    assert.ok(!isMounted(mountpoint), 'unmounted after the last user stopped');
    await engine.dockerOk(['volume', 'rm', 'ram-vol']);
  });

  test('Mounts of type volume create their volume with its Labels and DriverConfig (dockerode)', async () => {
    const docker = engine.dockerode();
    const container = await docker.createContainer({
      Image: 'busybox',
      Cmd: ['sh', '-c', 'grep " /cfg " /proc/mounts'],
      HostConfig: {
        Mounts: [{ Type: 'volume', Source: 'from-mount', Target: '/cfg', VolumeOptions: { NoCopy: false, Labels: { made: 'by-mount' }, DriverConfig: { Name: 'local', Options: { type: 'tmpfs', o: 'size=1m' } } } }],
      },
    });
    const volume = await docker.getVolume('from-mount').inspect();
    assert.deepEqual(volume.Labels, { made: 'by-mount' });
    assert.deepEqual(volume.Options, { type: 'tmpfs', o: 'size=1m' });
    await container.start();
    assert.equal((await container.wait()).StatusCode, 0);
    assert.match((await container.logs({ stdout: true })).toString('utf8'), /tmpfs \/cfg tmpfs/);
    await container.remove({ v: true });
    assert.equal((await engine.request('GET', '/volumes/from-mount')).status, 200, 'a named volume stays after rm -v');
    await docker.getVolume('from-mount').remove();
  });

  test('bind DriverOpts: a host folder as a volume', async () => {
    const hostDir = path.join(engine.root, 'bind-source');
    await fs.mkdir(hostDir, { recursive: true });
    await fs.writeFile(path.join(hostDir, 'from-host'), 'host file\n');
    await engine.dockerOk(['volume', 'create', '--opt', 'type=none', '--opt', 'o=bind', '--opt', `device=${hostDir}`, 'bind-vol']);
    const out = await engine.dockerOk(['run', '--rm', '-v', 'bind-vol:/b', IMAGE_WITH_DATA, 'sh', '-c', 'cat /b/from-host; echo back > /b/from-container; ls /b']);
    assert.equal(out, 'host file\nfrom-container\nfrom-host\n', 'no image content copied into a host folder');
    assert.equal(readFileSync(path.join(hostDir, 'from-container'), 'utf8'), 'back\n');
    assert.ok(!isMounted(path.join(volumesDir(), 'bind-vol', '_data')));
    await engine.dockerOk(['volume', 'rm', 'bind-vol']);
    assert.ok(existsSync(path.join(hostDir, 'from-host')), 'removing the volume leaves the host folder alone');
  });

  test('VolumesFrom brings the volumes and binds of another container, ro when asked', async () => {
    const hostDir = path.join(engine.root, 'vf-bind');
    await fs.mkdir(hostDir, { recursive: true });
    await fs.writeFile(path.join(hostDir, 'b'), 'bound\n');
    const source = (await engine.dockerOk(['create', '--name', 'vf-source', '-v', 'vf-named:/named', '-v', '/anon', '-v', `${hostDir}:/bound`, 'busybox', 'true'])).trim();
    await engine.dockerOk(['run', '--rm', '--volumes-from', 'vf-source', 'busybox', 'sh', '-c', 'echo n > /named/n; echo a > /anon/a']);
    const out = await engine.dockerOk(['run', '--rm', '--volumes-from', 'vf-source:ro', 'busybox', 'sh', '-c', 'cat /named/n /anon/a /bound/b; touch /named/x 2>/dev/null || echo ro']);
    assert.equal(out, 'n\na\nbound\nro\n');
    const bad = await engine.docker(['create', '--volumes-from', 'no-such-container', 'busybox', 'true']);
    assert.notEqual(bad.code, 0);
    assert.match(bad.stderr, /no such container: no-such-container/);
    await engine.dockerOk(['rm', '-v', source]);
    await engine.dockerOk(['volume', 'rm', 'vf-named']);
  });

  test('a volume place that is a symlink in the image is resolved inside the container root', async () => {
    const escape = path.join(engine.root, 'escaped');
    const base = (await engine.dockerOk(['create', 'busybox', 'sh', '-c', `ln -s /../../../..${escape} /data && mkdir -p /real && ln -s ../real /rel`])).trim();
    await engine.dockerOk(['start', '-a', base]);
    const exported = await engine.request('GET', `/containers/${base}/export`, { timeoutMs: 60_000 });
    assert.equal(exported.status, 200);
    const imported = await engine.request('POST', '/images/create?fromSrc=-&repo=linkimg&tag=1', { body: exported.body, headers: { 'Content-Type': 'application/x-tar' }, timeoutMs: 60_000 });
    assert.equal(imported.status, 200, imported.text);
    const out = await engine.dockerOk(['run', '--rm', '-v', 'link-vol:/data', '-v', 'rel-vol:/rel', 'linkimg:1', 'sh', '-c', `echo in > /data/f; echo r > /rel/g; cat ${escape}/f /real/g`]);
    assert.equal(out, 'in\nr\n');
    assert.ok(!existsSync(escape), 'nothing was made outside the container root');
    assert.equal(readFileSync(path.join(volumesDir(), 'link-vol', '_data', 'f'), 'utf8'), 'in\n');
    assert.equal(readFileSync(path.join(volumesDir(), 'rel-vol', '_data', 'g'), 'utf8'), 'r\n');
    await engine.dockerOk(['rm', base]);
    await engine.dockerOk(['volume', 'rm', 'link-vol', 'rel-vol']);
  });

  test('docker cp reaches into a volume of a stopped container', async () => {
    const id = (await engine.dockerOk(['create', '-v', 'cp-vol:/data', 'busybox', 'true'])).trim();
    const file = path.join(engine.root, 'cp-in.txt');
    await fs.writeFile(file, 'copied in\n');
    await engine.dockerOk(['cp', file, `${id}:/data/cp-in.txt`]);
    assert.equal(readFileSync(path.join(volumesDir(), 'cp-vol', '_data', 'cp-in.txt'), 'utf8'), 'copied in\n');
    await engine.dockerOk(['rm', id]);
    await engine.dockerOk(['volume', 'rm', 'cp-vol']);
  });

  test('volume events: create, mount, unmount, destroy', async () => {
    const since = Math.floor(Date.now() / 1000) - 1;
    await engine.dockerOk(['run', '--rm', '-v', 'evt-vol:/e:ro', 'busybox', 'true']);
    await engine.dockerOk(['volume', 'rm', 'evt-vol']);
    const events = (await volumeEvents(since)).filter((e) => e.Actor.ID === 'evt-vol');
    assert.deepEqual(events.map((e) => e.Action), ['create', 'mount', 'unmount', 'destroy']);
    const mount = events[1].Actor.Attributes;
    assert.equal(mount.destination, '/e');
    assert.equal(mount['read/write'], 'false');
    assert.equal(mount.driver, 'local');
    assert.match(mount.container, /^[0-9a-f]{64}$/);
    assert.equal(events[2].Actor.Attributes.container, mount.container);
  });

  test('bad volume mounts answer 400 with a message and leave nothing behind', async () => {
    const before = volumeFolders();
    const create = (hostConfig: object, extra: object = {}) => engine.request('POST', '/containers/create', { body: { Image: 'busybox', Cmd: ['true'], HostConfig: hostConfig, ...extra } });
    const cases: Array<[object, RegExp, object?]> = [
      [{ Mounts: [{ Type: 'volume', Source: '/abs/path', Target: '/d' }] }, /invalid mount config for type "volume".*Source/],
      [{ Mounts: [{ Type: 'volume', Source: 'bad name', Target: '/d' }] }, /invalid mount config for type "volume"/],
      [{ Mounts: [{ Type: 'volume', Source: 'okname', Target: 'relative' }] }, /must be absolute/],
      [{ Mounts: [{ Type: 'volume', Source: 'okname', Target: '/d', VolumeOptions: { DriverConfig: { Name: 'weird' } } }] }, /plugin "weird" not found/],
      [{ Mounts: [{ Type: 'volume', Source: 'okname', Target: '/d', VolumeOptions: { DriverConfig: { Options: { type: 'none', o: 'bind' } } } }] }, /missing required option "device"/],
      [{ Mounts: [{ Type: 'volume', Source: 'okname', Target: '/d', BindOptions: { Propagation: 'shared' } }] }, /BindOptions/],
      [{ Binds: ['good-one:/d', 'x!:/e'] }, /neither an absolute path nor a valid volume name/],
      [{ Binds: ['good-one:/d', 'other-one:/d'] }, /Duplicate mount point: \/d/],
      [{ Binds: ['good-one:/d'], Mounts: [{ Type: 'volume', Source: 'other-one', Target: '/d' }] }, /Duplicate mount point/],
      [{ VolumesFrom: ['a:b:c'] }, /expected <container>\[:ro\|rw\]/],
      [{ Mounts: [null] }, /HostConfig.Mounts\[0\]: expected an object/],
      [{ Mounts: [{ Type: 7, Target: '/x' }] }, /HostConfig.Mounts\[0\].Type: expected a string/],
      [{ Binds: ['good-one:/d'], VolumeDriver: 'flocker' }, /^create good-one: error looking up volume plugin flocker: plugin "flocker" not found$/],
      [{ Binds: ['good-one:/d'] }, /no such image|No such image/i, { Image: 'no-such-image:1' }],
    ];
    for (const [hc, message, extra] of cases) {
      const r = await create(hc, extra);
      assert.ok(r.status === 400 || r.status === 404, `${JSON.stringify(hc)}: ${r.status} ${r.text}`);
      assert.match(r.json().message, message, JSON.stringify(hc));
    }
    // A later volume that cannot be made undoes the ones made before it.
    const partial = await create({ Binds: ['made-first:/a'], Mounts: [{ Type: 'volume', Source: 'fails-second', Target: '/b', VolumeOptions: { DriverConfig: { Options: { type: 'none', o: 'bind', device: '/no/such/dir' } } } }] });
    assert.equal(partial.status, 400, partial.text);
    assert.deepEqual(volumeFolders(), before, 'no volume folder left behind');
    assert.equal((await engine.request('GET', '/volumes/made-first')).status, 404);
  });

  test('system df lists volumes with their sizes', async () => {
    await engine.dockerOk(['run', '--rm', '-v', 'df-vol:/d', 'busybox', 'sh', '-c', 'head -c 3000 /dev/zero > /d/z']);
    const df = (await engine.request('GET', '/v1.44/system/df')).json();
    const v = df.Volumes.find((x: { Name: string }) => x.Name === 'df-vol');
    assert.deepEqual(v.UsageData, { Size: 3000, RefCount: 0 });
    const cli = await engine.dockerOk(['system', 'df', '-v']);
    assert.match(cli, /df-vol/);
    await engine.dockerOk(['volume', 'rm', 'df-vol']);
  });
});

describe('volumes through docker-py', () => {
  const hasDockerPy = spawnSync('python3', ['-c', 'import docker'], { stdio: 'ignore' }).status === 0;
  test('create, use in a container, list by label, remove', { skip: hasDockerPy ? false : 'docker-py is not installed' }, async () => {
    const script = [
      'import docker, sys',
      'c = docker.DockerClient(base_url=sys.argv[1])',
      "v = c.volumes.create(name='py-vol', labels={'via': 'docker-py'})",
      "out = c.containers.run('busybox', ['sh', '-c', 'echo py > /v/f; cat /v/f'], volumes={'py-vol': {'bind': '/v', 'mode': 'rw'}}, remove=True)",
      "assert out == b'py\\n', out",
      "assert c.volumes.get('py-vol').attrs['Labels'] == {'via': 'docker-py'}",
      "assert [x.name for x in c.volumes.list(filters={'label': 'via=docker-py'})] == ['py-vol']",
      'v.remove()',
      "assert 'SpaceReclaimed' in c.volumes.prune()",
      "print('done')",
    ].join('\n');
    const r = await runCommand('python3', ['-c', script, engine.host], { timeoutMs: 120_000 });
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout.trim(), 'done');
    assert.equal((await engine.request('GET', '/volumes/py-vol')).status, 404);
  });
});

describe('volumes across a daemon restart', () => {
  test('volumes and their users survive; a running tmpfs user keeps its mount', async () => {
    await engine.dockerOk(['volume', 'create', '--label', 'survives=1', 'durable']);
    await engine.dockerOk(['volume', 'create', '--opt', 'type=tmpfs', '--opt', 'device=tmpfs', 'durable-ram']);
    const stopped = (await engine.dockerOk(['create', '-v', 'durable:/d', 'busybox', 'true'])).trim();
    const running = (await engine.dockerOk(['run', '-d', '-v', 'durable-ram:/r', 'busybox', 'sleep', '600'])).trim();
    // What a create cut short by a crash leaves (an empty folder without its record) is removed at start.
    await fs.mkdir(path.join(volumesDir(), 'half-made', '_data'), { recursive: true });
    // A folder with files and no record (its record lost) is taken in as a volume, as dockerd's local driver does.
    await fs.mkdir(path.join(volumesDir(), 'found-again', '_data'), { recursive: true });
    await fs.writeFile(path.join(volumesDir(), 'found-again', '_data', 'f'), 'still here\n');
    await engine.restart();
    assert.ok(!existsSync(path.join(volumesDir(), 'half-made')));
    assert.equal(await engine.dockerOk(['run', '--rm', '-v', 'found-again:/v', 'busybox', 'cat', '/v/f']), 'still here\n');
    await engine.dockerOk(['volume', 'rm', 'found-again']);
    const v = JSON.parse(await engine.dockerOk(['volume', 'inspect', 'durable']))[0];
    assert.deepEqual(v.Labels, { survives: '1' });
    assert.equal((await engine.request('DELETE', '/volumes/durable')).status, 409, 'the stopped user is still known');
    assert.equal((await engine.request('DELETE', '/volumes/durable-ram')).status, 409, 'the running user is still known');
    const ramPoint = path.join(volumesDir(), 'durable-ram', '_data');
    assert.ok(isMounted(ramPoint));
    await engine.dockerOk(['rm', '-f', running]);
    assert.ok(!isMounted(ramPoint), 'unmounted when the user that ran across the restart stopped');
    await engine.dockerOk(['rm', stopped]);
    await engine.dockerOk(['volume', 'rm', 'durable', 'durable-ram']);
  });

  test('a volume of the former layout (its record as volume.json in its folder) is found after the upgrade', async () => {
    const dir = path.join(volumesDir(), 'legacy-vol');
    await fs.mkdir(path.join(dir, '_data'), { recursive: true });
    await fs.writeFile(path.join(dir, '_data', 'old.txt'), 'from before\n');
    const record = { FormatVersion: 1, Name: 'legacy-vol', Driver: 'local', CreatedAt: '2025-01-02T03:04:05Z', Labels: { era: 'old' }, Options: {} };
    await fs.writeFile(path.join(dir, 'volume.json'), JSON.stringify(record));
    await engine.restart();
    const v = JSON.parse(await engine.dockerOk(['volume', 'inspect', 'legacy-vol']))[0];
    assert.deepEqual([v.CreatedAt, v.Labels, v.Mountpoint], [record.CreatedAt, record.Labels, path.join(dir, '_data')]);
    assert.equal(await engine.dockerOk(['run', '--rm', '-v', 'legacy-vol:/v', 'busybox', 'cat', '/v/old.txt']), 'from before\n');
    // The record moved out of the volume's folder, and stays known across the next restart.
    assert.ok(!existsSync(path.join(dir, 'volume.json')));
    await engine.restart();
    assert.ok((await engine.dockerOk(['volume', 'ls', '-q'])).split('\n').includes('legacy-vol'));
    await engine.dockerOk(['volume', 'rm', 'legacy-vol']);
    assert.ok(!existsSync(dir));
  });
});

async function eventuallyText(read: () => Promise<string>, timeoutMs = 20_000): Promise<string> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const text = await read();
    if (text.trim() !== '') return text;
    if (Date.now() > deadline) throw new Error('no output in time');
    await new Promise((r) => setTimeout(r, 100));
  }
}
