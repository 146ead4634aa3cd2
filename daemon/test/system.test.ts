/**
 * System endpoints against a real berthd: /_ping, /version, /info, through plain HTTP and the docker CLI.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import os from 'node:os';
import { after, before, describe, test } from 'node:test';
import { expectConforms } from './contract/openapi.js';
import { eventually, startEngine, type Engine } from './harness.js';

describe('system endpoints', () => {
  let engine: Engine;
  before(async () => {
    engine = await startEngine();
  });
  after(() => engine?.cleanup());

  test('GET and HEAD /_ping answer OK with the headers clients read', async () => {
    for (const method of ['GET', 'HEAD']) {
      for (const path of ['/_ping', '/v1.24/_ping', '/v1.53/_ping']) {
        const r = await engine.request(method, path);
        assert.equal(r.status, 200, `${method} ${path}`);
        assert.equal(r.text, method === 'GET' ? 'OK' : '');
        assert.equal(r.headers['api-version'], '1.53');
        assert.equal(r.headers.ostype, 'linux');
        assert.equal(r.headers['docker-experimental'], 'false');
        assert.equal(r.headers['builder-version'], '1');
        assert.equal(r.headers.swarm, 'inactive');
        assert.match(String(r.headers['cache-control']), /no-cache.*no-store/);
        assert.equal(r.headers.pragma, 'no-cache');
        assert.match(String(r.headers['content-type']), /^text\/plain/);
      }
    }
  });

  test('GET /version reports the engine, the API range and the kernel', async () => {
    const r = await engine.request('GET', '/version');
    assert.equal(r.status, 200);
    const v = r.json();
    assert.equal(v.ApiVersion, '1.53');
    assert.equal(v.MinAPIVersion, '1.24');
    assert.equal(v.Os, 'linux');
    assert.equal(v.Arch, process.arch === 'x64' ? 'amd64' : process.arch);
    assert.equal(v.KernelVersion, os.release());
    assert.equal(v.GoVersion, `node ${process.version}`);
    assert.ok(!Number.isNaN(Date.parse(v.BuildTime)));
    assert.equal(v.Components[0].Name, 'Engine');
    assert.equal(v.Components[0].Version, v.Version);
    assert.ok(v.Components.some((c: { Name: string }) => c.Name === 'crun'));
    assert.equal(typeof v.Platform.Name, 'string');
  });

  test('GET /version is shaped per version', async () => {
    const v124 = (await engine.request('GET', '/v1.24/version')).json();
    assert.equal('MinAPIVersion' in v124, false);
    assert.equal('Components' in v124, false);
    const v134 = (await engine.request('GET', '/v1.34/version')).json();
    assert.equal(v134.MinAPIVersion, '1.24');
    assert.equal('Platform' in v134, false);
    const v135 = (await engine.request('GET', '/v1.35/version')).json();
    assert.ok(Array.isArray(v135.Components));
  });

  test('GET /info reports the machine and the engine', async () => {
    const info = (await engine.request('GET', '/info')).json();
    assert.equal(info.DockerRootDir, engine.dataRoot);
    assert.equal(info.Driver, 'overlay2');
    assert.equal(info.NCPU, os.availableParallelism());
    const memKb = Number(/^MemTotal:\s+(\d+)/m.exec(readFileSync('/proc/meminfo', 'utf8'))![1]);
    assert.equal(info.MemTotal, memKb * 1024);
    assert.equal(info.KernelVersion, os.release());
    assert.equal(info.Name, os.hostname());
    assert.equal(info.OSType, 'linux');
    assert.equal(info.Architecture, os.machine());
    assert.match(info.OperatingSystem, /\S/);
    assert.ok(info.CgroupVersion === '1' || info.CgroupVersion === '2');
    assert.equal(info.CgroupDriver, 'cgroupfs');
    assert.equal(info.DefaultRuntime, 'crun');
    assert.ok('crun' in info.Runtimes && 'runc' in info.Runtimes);
    assert.equal(typeof info.ID, 'string');
    assert.ok(info.ID.length > 0);
    assert.equal(info.Containers, info.ContainersRunning + info.ContainersPaused + info.ContainersStopped);
    assert.equal(typeof info.Images, 'number');
    assert.equal(info.Swarm.LocalNodeState, 'inactive');
    assert.equal(info.ServerVersion, (await engine.request('GET', '/version')).json().Version);
  });

  test('GET /info counts the images the engine holds', async (t) => {
    const before = (await engine.request('GET', '/info')).json().Images;
    const list = await engine.request('GET', '/images/json');
    if (list.status === 404) return t.skip('the image service is not served by this build');
    await engine.loadBusybox('busybox:latest');
    const after = (await engine.request('GET', '/info')).json().Images;
    assert.equal(after, before + 1);
  });

  test('GET /info counts running and stopped containers', async (t) => {
    const probe = await engine.request('GET', '/containers/json');
    if (probe.status === 404) return t.skip('containers are not served by this build');
    const images = (await engine.request('GET', '/images/json')).json() as Array<{ RepoTags: string[] }>;
    if (!images.some((i) => i.RepoTags.includes('busybox:latest'))) await engine.loadBusybox();
    const before = (await engine.request('GET', '/info')).json();
    const running = (await engine.dockerOk(['run', '-d', 'busybox', 'sleep', '60'])).trim();
    await engine.dockerOk(['run', 'busybox', 'true']);
    await engine.dockerOk(['create', 'busybox', 'true']);
    try {
      const info = (await engine.request('GET', '/info')).json();
      assert.equal(info.Containers, before.Containers + 3);
      assert.equal(info.ContainersRunning, before.ContainersRunning + 1);
      assert.equal(info.ContainersStopped, before.ContainersStopped + 2);
      assert.equal(info.ContainersPaused, before.ContainersPaused);
      const out = await engine.dockerOk(['info', '--format', '{{.ContainersRunning}}/{{.Containers}}']);
      assert.equal(out.trim(), `${info.ContainersRunning}/${info.Containers}`);
    } finally {
      await engine.docker(['rm', '-f', running]);
    }
  });

  test('GET /info is shaped per version', async () => {
    const v140 = (await engine.request('GET', '/v1.40/info')).json();
    assert.equal('CgroupVersion' in v140, false);
    assert.equal('OSVersion' in v140, false);
    const v141 = (await engine.request('GET', '/v1.41/info')).json();
    assert.ok('CgroupVersion' in v141);
    const v149 = (await engine.request('GET', '/v1.49/info')).json();
    assert.ok('BridgeNfIptables' in v149);
    const v150 = (await engine.request('GET', '/v1.50/info')).json();
    assert.equal('BridgeNfIptables' in v150, false);
  });

  test('the engine ID survives a restart', async () => {
    const id = (await engine.request('GET', '/info')).json().ID;
    await engine.restart();
    assert.equal((await engine.request('GET', '/info')).json().ID, id);
  });

  test('docker version prints our server values', async () => {
    const out = await engine.dockerOk(['version']);
    assert.match(out, /Server: Berth Engine/);
    assert.match(out, /API version:\s+1\.53 \(minimum version 1\.24\)/);
    assert.match(out, new RegExp(`Go version:\\s+node ${process.version.replace(/\./g, '\\.')}`));
    const fmt = (await engine.dockerOk(['version', '--format', '{{.Server.APIVersion}} {{.Server.Os}} {{.Server.KernelVersion}}'])).trim();
    assert.equal(fmt, `1.53 linux ${os.release()}`);
  });

  test('docker info prints our server values', async () => {
    const r = await engine.docker(['info']);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /Storage Driver: overlay2/);
    assert.match(r.stdout, new RegExp(`Docker Root Dir: ${engine.dataRoot}`));
    assert.match(r.stdout, /Default Runtime: crun/);
    assert.match(r.stdout, /Cgroup Driver: cgroupfs/);
    assert.match(r.stdout, new RegExp(`Kernel Version: ${os.release().replace(/\./g, '\\.')}`));
    assert.match(r.stdout, new RegExp(`CPUs: ${os.availableParallelism()}`));
    const fmt = (await engine.dockerOk(['info', '--format', '{{.Driver}} {{.NCPU}} {{.DockerRootDir}}'])).trim();
    assert.equal(fmt, `overlay2 ${os.availableParallelism()} ${engine.dataRoot}`);
  });

  test('GET /system/df reports the images per version, and conforms', async (t) => {
    if ((await engine.request('GET', '/images/json')).status === 404) return t.skip('the image service is not served by this build');
    const images = (await engine.request('GET', '/images/json')).json() as Array<{ RepoTags: string[] }>;
    if (!images.some((i) => i.RepoTags.includes('busybox:latest'))) await engine.loadBusybox();
    const v141 = (await engine.request('GET', '/v1.41/system/df')).json();
    await expectConforms('1.41', 'GET', '/system/df', 200, v141);
    assert.ok(v141.LayersSize > 0);
    assert.ok(v141.Images.length >= 1);
    assert.ok(v141.Images.every((i: { Size: number; VirtualSize: number }) => i.Size > 0 && i.VirtualSize === i.Size));
    assert.deepEqual(v141.BuildCache, []);
    assert.ok(Array.isArray(v141.Containers) && Array.isArray(v141.Volumes));

    const onlyImages = (await engine.request('GET', '/v1.44/system/df?type=image')).json();
    assert.deepEqual(Object.keys(onlyImages).sort(), ['Images', 'LayersSize']);
    assert.equal('VirtualSize' in onlyImages.Images[0], false);
    const bad = await engine.request('GET', '/v1.44/system/df?type=disks');
    assert.equal(bad.status, 400);

    const v152 = (await engine.request('GET', '/v1.52/system/df')).json();
    assert.equal(v152.LayersSize, v141.LayersSize);
    assert.equal(v152.ImageUsage.TotalSize, v141.LayersSize);
    assert.equal(v152.ImageUsage.TotalCount, v141.Images.length);
    assert.equal('Items' in v152.ImageUsage, false);
    const v152verbose = (await engine.request('GET', '/v1.52/system/df?verbose=1')).json();
    assert.equal('LayersSize' in v152verbose, false);
    assert.equal(v152verbose.ImageUsage.Items.length, v141.Images.length);
    const v153 = (await engine.request('GET', '/v1.53/system/df')).json();
    await expectConforms('1.53', 'GET', '/system/df', 200, v153);
    assert.deepEqual(Object.keys(v153).sort(), ['BuildCacheUsage', 'ContainerUsage', 'ImageUsage', 'VolumeUsage']);
    assert.ok(v153.ImageUsage.Reclaimable <= v153.ImageUsage.TotalSize);
  });

  test('GET /system/df lists containers with their sizes', async (t) => {
    if ((await engine.request('GET', '/containers/json')).status === 404) return t.skip('containers are not served by this build');
    const images = (await engine.request('GET', '/images/json')).json() as Array<{ RepoTags: string[] }>;
    if (!images.some((i) => i.RepoTags.includes('busybox:latest'))) await engine.loadBusybox();
    const id = (await engine.dockerOk(['run', '-d', 'busybox', 'sh', '-c', 'head -c 300000 /dev/zero > /big; sleep 60'])).trim();
    try {
      const df = await eventually(async () => {
        const body = (await engine.request('GET', '/v1.44/system/df')).json();
        const mine = body.Containers.find((c: { Id: string }) => c.Id === id);
        return mine && mine.SizeRw >= 300000 ? body : undefined;
      });
      await expectConforms('1.44', 'GET', '/system/df', 200, df);
      const mine = df.Containers.find((c: { Id: string }) => c.Id === id);
      assert.equal(mine.State, 'running');
      assert.ok(mine.SizeRootFs >= mine.SizeRw);
      const v153 = (await engine.request('GET', '/v1.53/system/df?type=container')).json();
      assert.deepEqual(Object.keys(v153), ['ContainerUsage']);
      assert.ok(v153.ContainerUsage.ActiveCount >= 1);
      assert.ok(v153.ContainerUsage.TotalSize >= mine.SizeRw);
      const out = await engine.dockerOk(['system', 'df', '--format', '{{.Type}} {{.Active}}']);
      assert.match(out, /^Containers [1-9]/m);
    } finally {
      await engine.docker(['rm', '-f', id]);
    }
  });

  test('docker system df prints the image totals', async (t) => {
    if ((await engine.request('GET', '/images/json')).status === 404) return t.skip('the image service is not served by this build');
    const df = (await engine.request('GET', '/v1.50/system/df')).json();
    const out = await engine.dockerOk(['system', 'df', '--format', '{{.Type}} {{.TotalCount}}']);
    assert.match(out, new RegExp(`^Images ${df.Images.length}$`, 'm'));
    assert.match(out, /^Build Cache 0$/m);
  });

  test('dockerode reads ping, version and info', async () => {
    const docker = engine.dockerode();
    assert.equal(String(await docker.ping()), 'OK');
    assert.equal((await docker.version()).ApiVersion, '1.53');
    assert.equal((await docker.info()).DockerRootDir, engine.dataRoot);
    const old = engine.dockerode('1.41');
    assert.equal((await old.version()).MinAPIVersion, '1.24');
  });
});
