/**
 * Container create, inspect and remove as Docker answers them, against a real berthd: HostConfig.Mounts binds
 * and tmpfs in inspect's Mounts, a volume's Subpath (API 1.45), volumes created without a name are anonymous
 * (and pruned), a restarting container is not removed without force, LogConfig (an empty Type keeps its
 * Config; unknown drivers and options with Docker's words, after the image is found), HostConfig.VolumeDriver
 * (kept as given, an error only for a volume that needs it), StorageOpt the storage cannot honour, bind
 * propagation on a private source, and the `before`/`since` query parameters of API 1.24. Through the docker
 * CLI, plain HTTP for statuses, and docker-py (Debian's python3-docker) where it is the natural client.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';
import { expectConforms } from './contract/openapi.js';
import { eventually, runCommand, useEngine } from './harness.js';

const engine = useEngine();

const create = (body: object, query = '', version = '1.53') =>
  engine.request('POST', `/v${version}/containers/create${query}`, { body: { Image: 'busybox', Cmd: ['true'], ...body } });
const inspect = async (id: string, version = '1.53') => (await engine.request('GET', `/v${version}/containers/${id}/json`)).json();
const remove = (id: string) => engine.request('DELETE', `/containers/${id}?force=1&v=1`);
const containerCount = async () => (await engine.request('GET', '/containers/json?all=1')).json().length as number;

/** A folder of the engine's temporary root (removed with it). */
function hostDir(name: string): string {
  const dir = path.join(engine.root, name);
  mkdirSync(dir, { recursive: true });
  return dir;
}

describe('HostConfig.Mounts in inspect', () => {
  test('binds and tmpfs of Mounts appear in Mounts as Docker shows them, and work', async () => {
    const dir = hostDir('mounts-bind');
    writeFileSync(path.join(dir, 'hello.txt'), 'from the host\n');
    const id = (await engine.dockerOk(['create', '--mount', `type=bind,src=${dir}/,dst=/h/,readonly`, '--mount', 'type=tmpfs,dst=/t', '--mount', `type=bind,src=${dir},dst=/s,bind-propagation=private`, 'busybox', 'sh', '-c', 'cat /h/hello.txt; grep " /t " /proc/mounts | cut -d" " -f3'])).trim();
    const c = await inspect(id);
    const byDest = Object.fromEntries((c.Mounts as Array<{ Destination: string }>).map((m) => [m.Destination, m]));
    assert.deepEqual(byDest['/h'], { Type: 'bind', Source: dir, Destination: '/h', Mode: '', RW: false, Propagation: 'rprivate' });
    assert.deepEqual(byDest['/t'], { Type: 'tmpfs', Source: '', Destination: '/t', Mode: '', RW: true, Propagation: '' });
    assert.deepEqual(byDest['/s'], { Type: 'bind', Source: dir, Destination: '/s', Mode: '', RW: true, Propagation: 'private' });
    await expectConforms('1.53', 'get', '/containers/{id}/json', 200, c);
    const summary = (await engine.request('GET', `/containers/json?all=1&filters=${encodeURIComponent(JSON.stringify({ id: [id] }))}`)).json()[0];
    assert.equal(summary.Mounts.length, 3, 'the list shows them too');
    assert.equal(await engine.dockerOk(['start', '-a', id]), 'from the host\ntmpfs\n');
    await remove(id);
  });

  test('a bind of Mounts whose source is missing or relative answers 400 with Docker words', async () => {
    const before = await containerCount();
    const missing = await create({ HostConfig: { Mounts: [{ Type: 'bind', Source: '/no/such/dir', Target: '/x' }] } });
    assert.equal(missing.status, 400);
    assert.equal(missing.json().message, 'invalid mount config for type "bind": bind source path does not exist: /no/such/dir');
    const relative = await create({ HostConfig: { Mounts: [{ Type: 'bind', Source: 'rel', Target: '/x' }] } });
    assert.equal(relative.status, 400);
    assert.match(relative.json().message, /invalid mount config for type "bind": invalid mount path: 'rel' mount path must be absolute/);
    const badProp = await create({ HostConfig: { Mounts: [{ Type: 'bind', Source: '/tmp', Target: '/x', BindOptions: { Propagation: 'sideways' } }] } });
    assert.equal(badProp.status, 400);
    assert.match(badProp.json().message, /invalid propagation mode: sideways/);
    const tmpfsSource = await create({ HostConfig: { Mounts: [{ Type: 'tmpfs', Source: '/tmp', Target: '/x' }] } });
    assert.equal(tmpfsSource.status, 400);
    assert.match(tmpfsSource.json().message, /invalid mount config for type "tmpfs": field Source must not be specified/);
    assert.equal(await containerCount(), before);
  });
});

describe('VolumeOptions.Subpath', () => {
  test('a part of a named volume is mounted (docker CLI), read-write, and the volume shows in Mounts', async () => {
    await engine.dockerOk(['volume', 'create', 'subvol']);
    await engine.dockerOk(['run', '--rm', '-v', 'subvol:/v', 'busybox', 'sh', '-c', 'mkdir -p /v/app/conf && echo inner > /v/app/conf/file && echo outer > /v/top']);
    const out = await engine.dockerOk(['run', '--rm', '--mount', 'type=volume,src=subvol,dst=/m,volume-subpath=app/conf', 'busybox', 'sh', '-c', 'ls /m; cat /m/file; echo written > /m/new']);
    assert.equal(out, 'file\ninner\n');
    const check = await engine.dockerOk(['run', '--rm', '-v', 'subvol:/v', 'busybox', 'cat', '/v/app/conf/new']);
    assert.equal(check, 'written\n');
    // A part that is a file is mounted as a file.
    assert.equal(await engine.dockerOk(['run', '--rm', '--mount', 'type=volume,src=subvol,dst=/etc/app.conf,volume-subpath=app/conf/file', 'busybox', 'cat', '/etc/app.conf']), 'inner\n');
    const id = (await create({ HostConfig: { Mounts: [{ Type: 'volume', Source: 'subvol', Target: '/m', VolumeOptions: { Subpath: 'app' } }] } })).json().Id;
    const [m] = (await inspect(id)).Mounts;
    assert.equal(m.Type, 'volume');
    assert.equal(m.Name, 'subvol');
    assert.equal(m.Source, path.join(engine.dataRoot, 'volumes', 'subvol', '_data'));
    // docker cp sees the part of the volume at the mount point, as the container does.
    const local = path.join(hostDir('cp-src'), 'copied.txt');
    writeFileSync(local, 'copied\n');
    await engine.dockerOk(['cp', local, `${id}:/m/copied.txt`]);
    assert.equal(await engine.dockerOk(['run', '--rm', '-v', 'subvol:/v', 'busybox', 'cat', '/v/app/copied.txt']), 'copied\n');
    assert.equal(await engine.dockerOk(['cp', `${id}:/m/conf/file`, '-']).then((tar) => tar.includes('inner')), true);
    await remove(id);
  });

  test('escaping, absolute and anonymous Subpaths, and clients older than 1.45, are refused at create', async () => {
    const before = await containerCount();
    const mount = (Subpath: string, Source = 'subvol') => ({ HostConfig: { Mounts: [{ Type: 'volume', Source, Target: '/m', VolumeOptions: { Subpath } }] } });
    for (const sub of ['../escape', 'a/../../b', '/etc']) {
      const r = await create(mount(sub));
      assert.equal(r.status, 400, sub);
      assert.equal(r.json().message, 'invalid mount config for type "volume": subpath must be a relative path within the volume');
    }
    const anonymous = await create(mount('app', ''));
    assert.equal(anonymous.status, 400);
    assert.equal(anonymous.json().message, 'invalid mount config for type "volume": must not set Subpath when using anonymous volumes');
    const old = await create(mount('app'), '', '1.44');
    assert.equal(old.status, 400);
    assert.equal(old.json().message, 'VolumeOptions.Subpath needs API v1.45 or newer');
    assert.equal((await create(mount('app/./conf/../conf'))).status, 201, 'a path that stays inside is fine');
    assert.equal(await containerCount(), before + 1);
    for (const c of (await engine.request('GET', '/containers/json?all=1')).json()) await remove(c.Id);
  });

  test('a missing Subpath, or one through a symlink, fails the start (404) and nothing of the volume leaks', async () => {
    await engine.dockerOk(['run', '--rm', '-v', 'subvol:/v', 'busybox', 'sh', '-c', 'ln -sfn /etc /v/link && ln -sfn app /v/inner-link']);
    for (const [sub, reason] of [['nothing/here', 'no such file or directory'], ['link', 'too many levels of symbolic links'], ['inner-link/conf', 'too many levels of symbolic links']]) {
      const id = (await create({ Cmd: ['cat', '/m/passwd'], HostConfig: { Mounts: [{ Type: 'volume', Source: 'subvol', Target: '/m', VolumeOptions: { Subpath: sub } }] } })).json().Id;
      const started = await engine.request('POST', `/containers/${id}/start`);
      assert.equal(started.status, 404, `${sub}: ${started.text}`);
      assert.equal(started.json().message, `cannot access path ${path.join(engine.dataRoot, 'volumes', 'subvol', '_data', sub)}: ${reason}`);
      assert.equal((await inspect(id)).State.Running, false);
      await remove(id);
    }
  });
});

describe('volumes created without a name', () => {
  test('are labelled anonymous as Docker labels them, and `volume prune` (API >= 1.42) removes them', async () => {
    const anon = await engine.request('POST', '/volumes/create', { body: { Labels: { mine: 'yes' } } });
    assert.equal(anon.status, 201);
    assert.deepEqual(anon.json().Labels, { mine: 'yes', 'com.docker.volume.anonymous': '' });
    const fromCli = (await engine.dockerOk(['volume', 'create'])).trim();
    const named = await engine.request('POST', '/volumes/create', { body: { Name: 'kept-named' } });
    assert.deepEqual(named.json().Labels, {});
    const pruned = await engine.dockerOk(['volume', 'prune', '-f']);
    assert.match(pruned, new RegExp(anon.json().Name));
    assert.match(pruned, new RegExp(fromCli));
    assert.equal((await engine.request('GET', `/volumes/${anon.json().Name}`)).status, 404);
    assert.equal((await engine.request('GET', '/volumes/kept-named')).status, 200, 'a named volume is kept');
    await engine.request('DELETE', '/volumes/kept-named');
  });
});

describe('removing a restarting container', () => {
  test('answers 409 without force, and force removes it', async () => {
    const id = (await engine.dockerOk(['run', '-d', '--restart', 'always', 'busybox', 'sh', '-c', 'exit 3'])).trim();
    // Each quick exit doubles the delay before the next start: after a few the container waits in restarting.
    await eventually(async () => {
      const c = await inspect(id);
      return c.RestartCount >= 5 && c.State.Status === 'restarting';
    }, 30_000, 20);
    const r = await engine.request('DELETE', `/containers/${id}`);
    assert.equal(r.status, 409, r.text);
    assert.equal(r.json().message, `cannot remove container "${id}": container is restarting: stop the container before removing or force remove`);
    const cli = await engine.docker(['rm', id.slice(0, 12)]);
    assert.notEqual(cli.code, 0);
    assert.match(cli.stderr, new RegExp(`cannot remove container "${id.slice(0, 12)}": container is restarting`));
    assert.equal((await engine.request('DELETE', `/containers/${id}?force=1`)).status, 204);
    assert.equal((await engine.request('GET', `/containers/${id}/json`)).status, 404);
  });
});

describe('LogConfig', () => {
  test('an empty Type is the default driver with the Config given', async () => {
    const r = await create({ HostConfig: { LogConfig: { Type: '', Config: { 'max-size': '10m', 'max-file': '2' } } } });
    assert.equal(r.status, 201, r.text);
    assert.deepEqual((await inspect(r.json().Id)).HostConfig.LogConfig, { Type: 'json-file', Config: { 'max-size': '10m', 'max-file': '2' } });
    const cli = (await engine.dockerOk(['create', '--log-opt', 'max-size=5m', 'busybox', 'true'])).trim();
    assert.deepEqual((await inspect(cli)).HostConfig.LogConfig, { Type: 'json-file', Config: { 'max-size': '5m' } });
    await remove(r.json().Id);
    await remove(cli);
  });

  test('an unknown driver or option answers 400 with Docker words, once the image is found', async () => {
    const before = await containerCount();
    const unknown = await create({ HostConfig: { LogConfig: { Type: 'syslogx', Config: {} } } });
    assert.equal(unknown.status, 400);
    assert.equal(unknown.json().message, 'error looking up logging plugin syslogx: plugin "syslogx" not found');
    const cli = await engine.docker(['create', '--log-driver', 'fluentdx', 'busybox', 'true']);
    assert.notEqual(cli.code, 0);
    assert.match(cli.stderr, /error looking up logging plugin fluentdx: plugin "fluentdx" not found/);
    const opt = await create({ HostConfig: { LogConfig: { Type: 'json-file', Config: { colour: 'red' } } } });
    assert.equal(opt.json().message, "unknown log opt 'colour' for json-file log driver");
    const local = await create({ HostConfig: { LogConfig: { Type: 'local', Config: { colour: 'red' } } } });
    assert.equal(local.json().message, "unknown log opt 'colour' for log driver local");
    const mode = await create({ HostConfig: { LogConfig: { Type: 'json-file', Config: { mode: 'sometimes' } } } });
    assert.equal(mode.json().message, 'logger: logging mode not supported: sometimes');
    const noImage = await create({ Image: 'no-such-image:9', HostConfig: { LogConfig: { Type: 'syslogx' } } });
    assert.equal(noImage.status, 404, 'the image is looked up first');
    assert.equal(await containerCount(), before);
  });
});

describe('HostConfig.VolumeDriver', () => {
  test('is kept as given when no volume needs it, and names the volume that does', async () => {
    const kept = await create({ HostConfig: { VolumeDriver: 'flocker' } });
    assert.equal(kept.status, 201, kept.text);
    assert.equal((await inspect(kept.json().Id)).HostConfig.VolumeDriver, 'flocker');
    await remove(kept.json().Id);
    const before = await containerCount();
    const named = await engine.docker(['create', '--volume-driver', 'flocker', '-v', 'vd-data:/d', 'busybox', 'true']);
    assert.notEqual(named.code, 0);
    assert.match(named.stderr, /create vd-data: error looking up volume plugin flocker: plugin "flocker" not found/);
    const anonymous = await create({ Volumes: { '/anon': {} }, HostConfig: { VolumeDriver: 'flocker' } });
    assert.equal(anonymous.status, 400);
    assert.match(anonymous.json().message, /^create [0-9a-f]{64}: error looking up volume plugin flocker: plugin "flocker" not found$/);
    assert.equal(await containerCount(), before);
    assert.equal((await engine.request('GET', '/volumes/vd-data')).status, 404);
  });
});

describe('StorageOpt', () => {
  test('size, which needs overlay on xfs with pquota, and unknown keys are refused with the words Docker uses (400)', async () => {
    const before = await containerCount();
    const size = await create({ HostConfig: { StorageOpt: { size: '1G' } } });
    assert.equal(size.status, 400);
    assert.equal(size.json().message, "--storage-opt is supported only for overlay over xfs with 'pquota' mount option");
    const cli = await engine.docker(['create', '--storage-opt', 'size=20G', 'busybox', 'true']);
    assert.notEqual(cli.code, 0);
    assert.match(cli.stderr, /--storage-opt is supported only for overlay over xfs with 'pquota' mount option/);
    const unknown = await create({ HostConfig: { StorageOpt: { Colour: 'red' } } });
    assert.equal(unknown.status, 400);
    assert.equal(unknown.json().message, 'Unknown option colour');
    assert.equal(await containerCount(), before);
  });
});

describe('bind propagation', () => {
  /** A tmpfs mounted in the engine's temporary root (cleanup() unmounts it) with the propagation given. */
  function mountWith(name: string, propagation: 'private' | 'shared'): string {
    const dir = hostDir(name);
    for (const args of [['-t', 'tmpfs', 'tmpfs', dir], [`--make-${propagation}`, dir]]) {
      const r = spawnSync('mount', args, { encoding: 'utf8' });
      assert.equal(r.status, 0, r.stderr);
    }
    return dir;
  }

  test('rshared or rslave on a source whose mount is private fails the start with the words Docker uses (400)', async () => {
    const dir = mountWith('private-mount', 'private');
    for (const [mode, words] of [['rshared', 'a shared mount'], ['rslave', 'a shared or slave mount']]) {
      const run = await engine.docker(['run', '--name', `prop-${mode}`, '-v', `${dir}:/m:${mode}`, 'busybox', 'true']);
      assert.notEqual(run.code, 0);
      assert.match(run.stderr, new RegExp(`path ${dir} is mounted on ${dir} but it is not ${words}`));
      const id = (await inspect(`prop-${mode}`)).Id;
      const again = await engine.request('POST', `/containers/${id}/start`);
      assert.equal(again.status, 400);
      assert.equal(again.json().message, `path ${dir} is mounted on ${dir} but it is not ${words}`);
      await remove(id);
    }
    // Through Mounts too, and for a folder below the mount.
    const below = path.join(dir, 'below');
    mkdirSync(below);
    const id = (await create({ HostConfig: { Mounts: [{ Type: 'bind', Source: below, Target: '/m', BindOptions: { Propagation: 'shared' } }] } })).json().Id;
    const started = await engine.request('POST', `/containers/${id}/start`);
    assert.equal(started.json().message, `path ${below} is mounted on ${dir} but it is not a shared mount`);
    await remove(id);
  });

  test('rshared on a shared mount runs, and a mount made on the host afterwards reaches the container', async () => {
    const dir = mountWith('shared-mount', 'shared');
    const id = (await engine.dockerOk(['run', '-d', '-v', `${dir}:/m:rshared`, 'busybox', 'sleep', '60'])).trim();
    const inner = hostDir('shared-mount/inner');
    const r = spawnSync('mount', ['-t', 'tmpfs', 'tmpfs', inner], { encoding: 'utf8' });
    assert.equal(r.status, 0, r.stderr);
    writeFileSync(path.join(inner, 'late.txt'), 'late\n');
    assert.equal(await engine.dockerOk(['exec', id, 'cat', '/m/inner/late.txt']), 'late\n');
    await remove(id);
  });
});

describe('the before and since query parameters (API 1.24)', () => {
  test('list the containers created before or since one, stopped ones included', async () => {
    const ids: string[] = [];
    for (const name of ['q-first', 'q-second', 'q-third']) ids.push((await engine.dockerOk(['create', '--name', name, 'busybox', 'true'])).trim());
    const names = async (query: string) => {
      const r = await engine.request('GET', `/v1.24/containers/json?${query}`);
      assert.equal(r.status, 200, r.text);
      return (r.json() as Array<{ Names: string[] }>).map((c) => c.Names[0]).filter((n) => n.startsWith('/q-'));
    };
    assert.deepEqual(await names('before=q-third'), ['/q-second', '/q-first']);
    assert.deepEqual(await names(`before=${ids[1]!.slice(0, 12)}`), ['/q-first']);
    assert.deepEqual(await names('since=q-first'), ['/q-third', '/q-second']);
    assert.deepEqual(await names('since=q-first&before=q-third'), ['/q-second']);
    assert.equal((await engine.request('GET', '/v1.24/containers/json?before=no-such-container')).status, 404);
    for (const id of ids) await remove(id);
  });
});

describe('through docker-py', () => {
  const python = '/usr/bin/python3';
  const hasDockerPy = existsSync(python) && spawnSync(python, ['-c', 'import docker'], { stdio: 'ignore' }).status === 0;
  test('log driver errors, LogConfig, Mounts binds, anonymous volumes and the before parameter', { skip: hasDockerPy ? false : 'python3-docker is not installed' }, async () => {
    const dir = hostDir('docker-py-bind');
    const script = `
import sys, docker
from docker.types import LogConfig, Mount
c = docker.DockerClient(base_url=sys.argv[1], version='1.41')
api = c.api
try:
    api.create_container('busybox', ['true'], host_config=api.create_host_config(log_config=LogConfig(type='asdf', config={})))
    raise SystemExit('created with an unknown log driver')
except docker.errors.APIError as e:
    assert e.status_code == 400, e.status_code
    assert e.explanation == 'error looking up logging plugin asdf: plugin "asdf" not found', e.explanation
first = api.create_container('busybox', ['true'], host_config=api.create_host_config(log_config=LogConfig(type='', config={'max-file': '3'})))
assert api.inspect_container(first)['HostConfig']['LogConfig'] == {'Type': 'json-file', 'Config': {'max-file': '3'}}
second = c.containers.create('busybox', ['true'], mounts=[Mount('/h', sys.argv[2], type='bind', read_only=True)])
assert second.attrs['Mounts'] == [{'Type': 'bind', 'Source': sys.argv[2], 'Destination': '/h', 'Mode': '', 'RW': False, 'Propagation': 'rprivate'}], second.attrs['Mounts']
assert [x['Id'] for x in api.containers(before=second.id, all=True)] == [first['Id']]
assert [x['Id'] for x in api.containers(since=first['Id'])] == [second.id]
v = c.volumes.create()
assert v.attrs['Labels'] == {'com.docker.volume.anonymous': ''}, v.attrs
pruned = docker.DockerClient(base_url=sys.argv[1], version='1.42').volumes.prune()
assert v.name in pruned['VolumesDeleted'], pruned
api.remove_container(first, force=True)
second.remove(force=True)
print('ok')
`;
    const r = await runCommand(python, ['-c', script, `unix://${engine.socket}`, dir], { timeoutMs: 60_000 });
    assert.equal(r.code, 0, r.stderr + r.stdout);
    assert.equal(r.stdout.trim(), 'ok');
  });
});
