/**
 * Local images through real clients: docker load / images / inspect / history / save / import / tag /
 * rmi / image prune, dockerode, and the events they publish.
 */
import assert from 'node:assert/strict';
import { createReadStream, existsSync, readdirSync, readFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { buildBusyboxArchive, buildBusyboxRootfs } from './fixtures/busybox.js';
import { runCommand, startEngine, type Engine } from './harness.js';

describe('images', () => {
  let engine: Engine;
  let busyboxTar: string;
  let busyboxId: string;

  before(async () => {
    engine = await startEngine();
    busyboxTar = path.join(engine.root, 'busybox.tar');
    await buildBusyboxArchive(busyboxTar);
  });
  after(async () => {
    await engine?.cleanup();
  });

  const layerDirs = () => readdirSync(path.join(engine.dataRoot, 'image', 'layers'));

  it('docker load of the busybox fixture tags busybox:latest and unpacks its layer once', async () => {
    const out = await engine.dockerOk(['load', '-i', busyboxTar]);
    assert.match(out, /Loaded image: busybox:latest/);
    const list = await engine.dockerOk(['images', '--format', '{{.Repository}}:{{.Tag}} {{.ID}}']);
    assert.match(list, /^busybox:latest [0-9a-f]{12}$/m);
    busyboxId = (await engine.dockerOk(['image', 'inspect', '-f', '{{.Id}}', 'busybox'])).trim();
    assert.match(busyboxId, /^sha256:[0-9a-f]{64}$/);
    const dirs = layerDirs();
    assert.equal(dirs.length, 1);
    const diff = path.join(engine.dataRoot, 'image', 'layers', dirs[0], 'diff');
    assert.ok(existsSync(path.join(diff, 'bin', 'busybox')));
    assert.match(readFileSync(path.join(diff, 'etc', 'passwd'), 'utf8'), /^app:x:1000:1000/m);
    // Loading again changes nothing.
    await engine.dockerOk(['load', '-i', busyboxTar]);
    assert.deepEqual(layerDirs(), dirs);
  });

  it('inspect and history show the configuration, layers and tags', async () => {
    const [inspect] = JSON.parse(await engine.dockerOk(['image', 'inspect', 'busybox:latest']));
    assert.equal(inspect.Id, busyboxId);
    assert.deepEqual(inspect.RepoTags, ['busybox:latest']);
    assert.deepEqual(inspect.Config.Cmd, ['sh']);
    assert.equal(inspect.Os, 'linux');
    assert.equal(inspect.RootFS.Type, 'layers');
    assert.equal(inspect.RootFS.Layers.length, 1);
    assert.equal(inspect.Created, '2024-01-01T00:00:00Z');
    assert.ok(inspect.Size > 1_000_000);
    assert.equal(inspect.GraphDriver.Name, 'overlay2');
    // By short id and by full reference too.
    const short = await engine.request('GET', `/v1.45/images/${busyboxId.slice(7, 19)}/json`);
    assert.equal(short.status, 200);
    assert.equal(short.json().Id, busyboxId);
    const full = await engine.request('GET', '/v1.45/images/docker.io/library/busybox:latest/json');
    assert.equal(full.json().Id, busyboxId);
    const missing = await engine.request('GET', '/v1.45/images/nosuch:1/json');
    assert.equal(missing.status, 404);
    assert.match(missing.json().message, /No such image: nosuch:1/);

    const history = JSON.parse(await engine.dockerOk(['history', '--no-trunc', '--format', '{{json .}}', 'busybox']).then((s) => `[${s.trim().split('\n').join(',')}]`));
    assert.equal(history.length, 2);
    assert.equal(history[0].ID, busyboxId);
    assert.equal(history[1].ID, '<missing>');
    assert.match(history[1].CreatedBy, /ADD busybox rootfs/);
    const raw = (await engine.request('GET', '/v1.45/images/busybox/history')).json();
    assert.deepEqual(raw[0].Tags, ['busybox:latest']);
    assert.ok(raw[1].Size > 1_000_000);
  });

  it('API versions shape the list and inspect answers', async () => {
    const old = (await engine.request('GET', '/v1.41/images/busybox/json')).json();
    assert.ok('ContainerConfig' in old);
    assert.ok('VirtualSize' in old);
    assert.ok('Hostname' in old.Config);
    const current = (await engine.request('GET', '/v1.53/images/busybox/json')).json();
    assert.ok(!('ContainerConfig' in current));
    assert.ok(!('VirtualSize' in current));
    assert.ok(!('Hostname' in current.Config));
    assert.ok(!('Volumes' in current.Config));
    const list41 = (await engine.request('GET', '/v1.41/images/json')).json();
    assert.ok('VirtualSize' in list41[0]);
    assert.equal(list41[0].SharedSize, -1);
  });

  it('docker save | docker load gives back the same image id', async () => {
    const saved = path.join(engine.root, 'saved.tar');
    await engine.dockerOk(['save', '-o', saved, 'busybox:latest']);
    const listing = await runCommand('tar', ['tf', saved]);
    assert.match(listing.stdout, /^manifest\.json$/m);
    assert.match(listing.stdout, /^repositories$/m);
    assert.match(listing.stdout, /^index\.json$/m);
    assert.match(listing.stdout, /^[0-9a-f]{64}\/layer\.tar$/m);
    const rmi = await engine.dockerOk(['rmi', 'busybox']);
    assert.match(rmi, /Untagged: busybox:latest/);
    assert.match(rmi, new RegExp(`Deleted: ${busyboxId}`));
    assert.deepEqual(layerDirs(), []);
    const out = await engine.dockerOk(['load', '-i', saved]);
    assert.match(out, /Loaded image: busybox:latest/);
    assert.equal((await engine.dockerOk(['image', 'inspect', '-f', '{{.Id}}', 'busybox'])).trim(), busyboxId);
    // GET /images/get?names= streams the same kind of archive.
    const multi = await engine.request('GET', '/v1.45/images/get?names=busybox');
    assert.equal(multi.status, 200);
    assert.equal(multi.headers['content-type'], 'application/x-tar');
    assert.ok(multi.body.length > 2_000_000);
  });

  it('docker tag and docker rmi untag before they delete', async () => {
    await engine.dockerOk(['tag', 'busybox', 'me/app:v1']);
    await engine.dockerOk(['tag', 'busybox', 'localhost:5000/team/app']);
    const tags = (await engine.dockerOk(['image', 'inspect', '-f', '{{json .RepoTags}}', 'busybox'])).trim();
    assert.deepEqual(JSON.parse(tags), ['busybox:latest', 'localhost:5000/team/app:latest', 'me/app:v1']);
    const untag = await engine.dockerOk(['rmi', 'me/app:v1']);
    assert.equal(untag.trim(), 'Untagged: me/app:v1');
    const conflict = await engine.docker(['rmi', busyboxId.slice(7, 19)]);
    assert.notEqual(conflict.code, 0);
    assert.match(conflict.stderr, /must be forced.*multiple repositories/);
    await engine.dockerOk(['rmi', 'localhost:5000/team/app']);
    const bad = await engine.docker(['tag', 'busybox', 'Bad/Name']);
    assert.notEqual(bad.code, 0);
    assert.match(bad.stderr, /must be lowercase|invalid reference format/);
    const tagMissing = await engine.request('POST', '/v1.45/images/nosuch/tag?repo=x');
    assert.equal(tagMissing.status, 404);
  });

  it('docker import takes --change and --message and tags the result', async () => {
    const rootfs = path.join(engine.root, 'rootfs.tar');
    await buildBusyboxRootfs(rootfs);
    const out = await engine.dockerOk(['import', '--change', 'CMD ["/bin/echo", "hi"]', '--change', 'ENV FOO=bar', '--change', 'LABEL tier=test', '--change', 'EXPOSE 8080', '--message', 'from a tar', rootfs, 'imported:v1']);
    const id = out.trim();
    assert.match(id, /^sha256:[0-9a-f]{64}$/);
    const [inspect] = JSON.parse(await engine.dockerOk(['image', 'inspect', 'imported:v1']));
    assert.equal(inspect.Id, id);
    assert.deepEqual(inspect.Config.Cmd, ['/bin/echo', 'hi']);
    assert.deepEqual(inspect.Config.Env, ['FOO=bar']);
    assert.deepEqual(inspect.Config.Labels, { tier: 'test' });
    assert.deepEqual(inspect.Config.ExposedPorts, { '8080/tcp': {} });
    assert.equal(inspect.Comment, 'from a tar');
    const bad = await engine.docker(['import', '--change', 'RUN rm -rf /', rootfs, 'imported:bad']);
    assert.notEqual(bad.code, 0);
    assert.match(bad.stderr, /RUN is not a valid change command/);
    // From a URL: served here on loopback.
    const server = http.createServer((req, res) => {
      if (req.url !== '/rootfs.tar') {
        res.writeHead(404).end();
        return;
      }
      res.writeHead(200, { 'Content-Type': 'application/x-tar' });
      createReadStream(rootfs).pipe(res);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
    try {
      const port = (server.address() as AddressInfo).port;
      const fromUrl = await engine.dockerOk(['import', `http://127.0.0.1:${port}/rootfs.tar`, 'from-url:1']);
      assert.match(fromUrl.trim(), /^sha256:[0-9a-f]{64}$/);
      assert.equal((await engine.dockerOk(['image', 'inspect', '-f', '{{.Id}}', 'from-url:1'])).trim(), fromUrl.trim());
      const missing = await engine.request('POST', `/v1.45/images/create?fromSrc=${encodeURIComponent(`http://127.0.0.1:${port}/nope.tar`)}&repo=x`);
      assert.equal(missing.status, 400);
      assert.match(missing.json().message, /answered 404/);
    } finally {
      server.close();
    }
    await engine.dockerOk(['rmi', 'from-url:1']);
    const ftp = await engine.request('POST', '/v1.45/images/create?fromSrc=ftp://127.0.0.1/x.tar&repo=x');
    assert.equal(ftp.status, 501);
  });

  it('docker images filters: dangling, reference, label, before, since', async () => {
    const names = async (args: string[]) => (await engine.dockerOk(['images', '--format', '{{.Repository}}:{{.Tag}}', ...args])).trim().split('\n').filter(Boolean).sort();
    assert.deepEqual(await names(['--filter', 'reference=busy*']), ['busybox:latest']);
    assert.deepEqual(await names(['imported']), ['imported:v1']);
    assert.deepEqual(await names(['--filter', 'label=tier=test']), ['imported:v1']);
    assert.deepEqual(await names(['--filter', 'label=tier']), ['imported:v1']);
    assert.deepEqual(await names(['--filter', 'since=busybox']), ['imported:v1']);
    assert.deepEqual(await names(['--filter', 'before=imported:v1']), ['busybox:latest']);
    assert.deepEqual(await names(['--filter', 'dangling=true']), []);
    const bad = await engine.request('GET', `/v1.45/images/json?filters=${encodeURIComponent(JSON.stringify({ colour: ['red'] }))}`);
    assert.equal(bad.status, 400);
  });

  it('label filters of the image list select as Docker does: key, key=value, all of them, own labels only', async () => {
    const rootfs = path.join(engine.root, 'rootfs-labels.tar');
    await buildBusyboxRootfs(rootfs);
    await engine.dockerOk(['import', '--change', 'LABEL a=1 b= c=x=y', rootfs, 'labelled:one']);
    await engine.dockerOk(['import', '--change', 'LABEL a=2', rootfs, 'labelled:two']);
    await engine.dockerOk(['import', rootfs, 'labelled:none']);
    try {
      const names = async (...labels: string[]) => {
        const filters = encodeURIComponent(JSON.stringify({ reference: ['labelled'], label: labels }));
        const r = await engine.request('GET', `/images/json?filters=${filters}`);
        assert.equal(r.status, 200, r.text);
        return r.json<Array<{ RepoTags: string[] }>>().flatMap((i) => i.RepoTags).sort();
      };
      assert.deepEqual(await names('a'), ['labelled:one', 'labelled:two']);
      assert.deepEqual(await names('a=1'), ['labelled:one']);
      assert.deepEqual(await names('b'), ['labelled:one']);
      assert.deepEqual(await names('b='), ['labelled:one']);
      assert.deepEqual(await names('c=x=y'), ['labelled:one']);
      assert.deepEqual(await names('a=2', 'b'), []);
      assert.deepEqual(await names('a', 'b'), ['labelled:one']);
      // Names an object has by inheritance are not labels.
      assert.deepEqual(await names('constructor'), []);
      assert.deepEqual(await names('toString'), []);
      const cli = (await engine.dockerOk(['images', '--format', '{{.Repository}}:{{.Tag}}', '--filter', 'label=a=2'])).trim();
      assert.equal(cli, 'labelled:two');
    } finally {
      await engine.dockerOk(['rmi', 'labelled:one', 'labelled:two', 'labelled:none']);
    }
  });

  it('a tag moved to a new image leaves the old one dangling, and image prune removes it with its layer', async () => {
    const other = path.join(engine.root, 'busybox-other.tar');
    await buildBusyboxArchive(other, { extraFiles: { '/etc/motd': 'second build\n' } });
    const layersBefore = layerDirs().length;
    const out = await engine.dockerOk(['load', '-i', other]);
    assert.match(out, /Loaded image: busybox:latest/);
    const newId = (await engine.dockerOk(['image', 'inspect', '-f', '{{.Id}}', 'busybox'])).trim();
    assert.notEqual(newId, busyboxId);
    const dangling = (await engine.dockerOk(['images', '-q', '--no-trunc', '--filter', 'dangling=true'])).trim();
    assert.equal(dangling, busyboxId);
    const list = (await engine.request('GET', '/v1.41/images/json')).json() as Array<{ Id: string; RepoTags: string[] }>;
    assert.deepEqual(list.find((i) => i.Id === busyboxId)?.RepoTags, ['<none>:<none>']);
    assert.equal(layerDirs().length, layersBefore + 1);
    const prune = await engine.dockerOk(['image', 'prune', '-f']);
    assert.match(prune, new RegExp(`deleted: ${busyboxId}`));
    assert.equal((await engine.dockerOk(['images', '-q', '--filter', 'dangling=true'])).trim(), '');
    // The old image's layer is the layer imported:v1 was made from (same tar): it stays for that image.
    assert.equal(layerDirs().length, layersBefore + 1);
    busyboxId = newId;
  });

  it('dockerode lists, inspects and removes images', async () => {
    const docker = engine.dockerode();
    const images = await docker.listImages();
    assert.ok(images.some((i) => i.RepoTags?.includes('busybox:latest')));
    const info = await docker.getImage('imported:v1').inspect();
    assert.deepEqual(info.Config.Cmd, ['/bin/echo', 'hi']);
    const removed = await docker.getImage('imported:v1').remove();
    assert.deepEqual(removed[0], { Untagged: 'imported:v1' });
    assert.ok(removed.some((r: { Deleted?: string }) => r.Deleted === info.Id));
    // Its layer had no other user left: gone from disk with it.
    assert.ok(removed.some((r: { Deleted?: string }) => r.Deleted === info.RootFS.Layers?.[0]));
    assert.equal(layerDirs().length, 1);
  });

  it('docker rmi answers 409 while a container uses the image, and force only untags it', async () => {
    await engine.dockerOk(['tag', 'busybox', 'inuse:1']);
    const container = (await engine.dockerOk(['create', 'inuse:1', 'true'])).trim();
    const refused = await engine.docker(['rmi', busyboxId]);
    assert.notEqual(refused.code, 0);
    assert.match(refused.stderr, /must be forced\) - image is being used by container/);
    const untag = await engine.dockerOk(['rmi', 'inuse:1']);
    assert.equal(untag.trim(), 'Untagged: inuse:1');
    await engine.dockerOk(['tag', 'busybox', 'inuse:1']);
    await engine.dockerOk(['rmi', 'busybox']);
    const last = await engine.docker(['rmi', 'inuse:1']);
    assert.notEqual(last.code, 0);
    assert.match(last.stderr, new RegExp(`unable to remove repository reference "inuse:1" \\(must force\\) - container ${container.slice(0, 12)} is using`));
    const forced = await engine.dockerOk(['rmi', '-f', 'inuse:1']);
    assert.equal(forced.trim(), 'Untagged: inuse:1');
    assert.equal((await engine.dockerOk(['image', 'inspect', '-f', '{{.Id}}', busyboxId])).trim(), busyboxId);
    await engine.dockerOk(['rm', container]);
    await engine.dockerOk(['tag', busyboxId, 'busybox:latest']);
  });

  it('pulling from a registry that cannot be reached answers a clear error, and docker run shows it', async () => {
    // A loopback port nothing listens on: no name lookup, no traffic off the machine.
    const pull = await engine.docker(['pull', '127.0.0.1:1/alpine']);
    assert.notEqual(pull.code, 0);
    assert.match(pull.stderr, /cannot reach the registry 127\.0\.0\.1:1/);
    const run = await engine.docker(['run', '--rm', '127.0.0.1:1/alpine:3', 'true']);
    assert.notEqual(run.code, 0);
    assert.match(run.stderr, /cannot reach the registry 127\.0\.0\.1:1/);
  });

  it('publishes image events for load, tag, untag, delete, save and import', async () => {
    const since = Math.floor(Date.now() / 1000) - 600;
    const until = Math.floor(Date.now() / 1000) + 1;
    const res = await engine.request('GET', `/v1.45/events?since=${since}&until=${until}&filters=${encodeURIComponent(JSON.stringify({ type: ['image'] }))}`);
    assert.equal(res.status, 200);
    const actions = new Set(res.text.trim().split('\n').filter(Boolean).map((l) => JSON.parse(l).Action));
    for (const action of ['load', 'tag', 'untag', 'delete', 'save', 'import', 'prune']) assert.ok(actions.has(action), `missing ${action} in ${[...actions].join(',')}`);
  });

  it('images survive a daemon restart', async () => {
    await engine.restart();
    const id = (await engine.dockerOk(['image', 'inspect', '-f', '{{.Id}}', 'busybox'])).trim();
    assert.equal(id, busyboxId);
    const info = (await engine.request('GET', '/v1.45/info')).json();
    assert.equal(info.Images, 1);
  });
});
