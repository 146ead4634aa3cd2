/**
 * Removal of containers: what users see when `rm` answers (record, name, events, volumes), and the clean-up that
 * follows it (runtime state, cgroups, the root filesystem's mount, folders), also when the daemon dies before
 * that clean-up is done.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, promises as fs, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';
import { eventually, useEngine, type Engine } from './harness.js';
import { freePort } from './tcp-support.js';

const engine = useEngine();

/** What a container still holds on this machine: mounts, runtime state, cgroups, folders. */
async function leftovers(e: Engine, id: string): Promise<string[]> {
  const found: string[] = [];
  for (const line of readFileSync('/proc/self/mountinfo', 'utf8').split('\n')) {
    if (line.includes(id)) found.push(`mount: ${line.split(' ')[4]}`);
  }
  const folders = [
    path.join(e.dataRoot, 'containers'),
    path.join(e.dataRoot, 'runtime'),
    path.join(e.execRoot, 'conmon'),
    path.join(e.execRoot, 'runtime'),
    path.join(e.execRoot, 'exits'),
    path.join(e.execRoot, 'bundles'),
  ];
  for (const dir of folders) {
    for (const name of await fs.readdir(dir).catch(() => [] as string[])) if (name.includes(id)) found.push(path.join(dir, name));
  }
  for (const controller of await fs.readdir('/sys/fs/cgroup').catch(() => [] as string[])) {
    const cgroup = path.join('/sys/fs/cgroup', controller, 'berth', id);
    if (existsSync(cgroup)) found.push(cgroup);
  }
  return found;
}

async function run(e: Engine, args: string[]): Promise<string> {
  return (await e.dockerOk(['run', '-d', '--network', 'none', ...args])).trim();
}

describe('container removal', () => {
  test('once rm answers, the container is gone for every client, and its name is free at once', async () => {
    const since = Math.floor(Date.now() / 1000) - 1;
    const id = await run(engine, ['--name', 'quick-rm', 'busybox', 'true']);
    assert.equal((await engine.request('POST', `/containers/${id}/wait`)).json<{ StatusCode: number }>().StatusCode, 0);
    const removed = await engine.request('DELETE', `/containers/${id}`);
    assert.equal(removed.status, 204);
    // No await of anything else between the answer and these: what the removal promised holds already.
    const [inspect, list, df, again] = await Promise.all([
      engine.request('GET', `/containers/${id}/json`),
      engine.request('GET', '/containers/json?all=1'),
      engine.request('GET', '/v1.44/system/df'),
      engine.request('POST', '/containers/create?name=quick-rm', { body: { Image: 'busybox', Cmd: ['true'], HostConfig: { NetworkMode: 'none' } } }),
    ]);
    assert.equal(inspect.status, 404);
    assert.equal(list.json<Array<{ Id: string }>>().some((c) => c.Id === id), false);
    assert.equal(df.json<{ Containers: Array<{ Id: string }> }>().Containers.some((c) => c.Id === id), false);
    assert.equal(again.status, 201, again.text);
    const events = await engine.dockerOk(['events', '--since', String(since), '--until', String(Math.floor(Date.now() / 1000) + 1), '--filter', `container=${id}`, '--format', '{{.Action}}']);
    assert.deepEqual(events.split('\n').filter(Boolean).slice(-2), ['die', 'destroy']);
    await eventually(async () => (await leftovers(engine, id)).length === 0, 15_000);
    await engine.dockerOk(['rm', 'quick-rm']);
  });

  test('the published port and the static address of a removed container are released when rm answers', async () => {
    const port = await freePort();
    await engine.dockerOk(['network', 'create', '--subnet', '10.213.7.0/24', 'rmnet']);
    const body = {
      Image: 'busybox',
      Cmd: ['true'],
      ExposedPorts: { '80/tcp': {} },
      HostConfig: { NetworkMode: 'rmnet', PortBindings: { '80/tcp': [{ HostPort: String(port) }] } },
      NetworkingConfig: { EndpointsConfig: { rmnet: { IPAMConfig: { IPv4Address: '10.213.7.9' } } } },
    };
    let previous: string | undefined;
    for (let i = 0; i < 5; i++) {
      const created = await engine.request('POST', '/containers/create', { body });
      assert.equal(created.status, 201, created.text);
      const id = created.json<{ Id: string }>().Id;
      const started = await engine.request('POST', `/containers/${id}/start`);
      assert.equal(started.status, 204, `start right after the removal of ${previous}: ${started.text}`);
      await engine.request('POST', `/containers/${id}/wait`);
      assert.equal((await engine.request('DELETE', `/containers/${id}`)).status, 204);
      const rules = spawnSync('iptables-save', [], { encoding: 'utf8' }).stdout.split('\n').filter((l) => l.includes(id.slice(0, 12)));
      assert.deepEqual(rules, [], 'the port rules of a removed container are gone when rm answers');
      previous = id;
    }
    await engine.dockerOk(['network', 'rm', 'rmnet']);
  });

  test('run --rm: the container is gone when the client returns, with its anonymous volumes, and nothing stays', async () => {
    const since = Math.floor(Date.now() / 1000) - 1;
    const ran = await engine.docker(['run', '--rm', '--name', 'self-rm', '--network', 'none', 'busybox', 'sh', '-c', 'echo bye; exit 3']);
    assert.equal(ran.code, 3);
    assert.equal(ran.stdout, 'bye\n');
    assert.equal((await engine.docker(['inspect', 'self-rm'])).code, 1);
    const events = await engine.dockerOk(['events', '--since', String(since), '--until', String(Math.floor(Date.now() / 1000) + 1), '--filter', 'container=self-rm', '--format', '{{.Action}}']);
    assert.deepEqual(events.split('\n').filter(Boolean).slice(-2), ['die', 'destroy']);
    const volumesBefore = (await engine.dockerOk(['volume', 'ls', '-q'])).trim();
    await engine.dockerOk(['run', '--rm', '-v', '/scratch', 'busybox', 'true']);
    assert.equal((await engine.dockerOk(['volume', 'ls', '-q'])).trim(), volumesBefore);
    // The name is free at once.
    await engine.dockerOk(['run', '--rm', '--name', 'self-rm', '--network', 'none', 'busybox', 'true']);
    const held: string[] = [];
    for (const dir of [path.join(engine.dataRoot, 'containers'), path.join(engine.dataRoot, 'runtime'), path.join(engine.execRoot, 'runtime')]) {
      held.push(...(await fs.readdir(dir).catch(() => [] as string[])).filter((n) => /^[0-9a-f]{64}$/.test(n)));
    }
    assert.deepEqual(held, []);
  });

  test('rm -v of a container with an anonymous volume removes the volume before it answers', async () => {
    const id = await run(engine, ['-v', '/data', 'busybox', 'true']);
    await engine.dockerOk(['wait', id]);
    const volume = (await engine.dockerOk(['inspect', '-f', '{{range .Mounts}}{{.Name}}{{end}}', id])).trim();
    assert.ok(volume);
    await engine.dockerOk(['rm', '-v', id]);
    assert.equal((await engine.docker(['volume', 'inspect', volume])).code, 1);
  });

  test('a burst of removals of containers that just ended leaves nothing behind', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push(await run(engine, ['busybox', 'true']));
    await Promise.all(ids.map((id) => engine.request('POST', `/containers/${id}/wait`)));
    const answers = await Promise.all(ids.map((id) => engine.request('DELETE', `/containers/${id}`)));
    assert.deepEqual(answers.map((a) => a.status), ids.map(() => 204));
    for (const id of ids) await eventually(async () => (await leftovers(engine, id)).length === 0, 15_000);
  });

  test('a removal whose clean-up a crash cut short is finished at the next start', async () => {
    // The state a crash leaves right after the record went aside: the runtime still holds the container, its
    // root filesystem is mounted, its cgroups exist. A running container, its record put aside by hand while
    // the daemon is down, and then ended, is exactly that.
    const id = await run(engine, ['busybox', 'sleep', '3600']);
    const pid = Number((await engine.dockerOk(['inspect', '-f', '{{.State.Pid}}', id])).trim());
    await engine.crash();
    const containers = path.join(engine.dataRoot, 'containers');
    await fs.rename(path.join(containers, id), path.join(containers, `.removing-${id}`));
    process.kill(pid, 'SIGKILL');
    await eventually(() => existsSync(path.join(engine.execRoot, 'exits', id)), 15_000);
    assert.ok((await leftovers(engine, id)).some((l) => l.startsWith('mount:')), 'the root filesystem is still mounted before the restart');
    await engine.start();
    assert.equal((await engine.request('GET', `/containers/${id}/json`)).status, 404);
    await eventually(async () => (await leftovers(engine, id)).length === 0, 15_000);
  });

  test('a daemon stopped right after rm answered has released the container when it exits', async () => {
    const id = await run(engine, ['busybox', 'true']);
    await engine.request('POST', `/containers/${id}/wait`);
    assert.equal((await engine.request('DELETE', `/containers/${id}`)).status, 204);
    await engine.stop();
    // Folders go later (their names aside); mounts, runtime state and cgroups are gone with the stop.
    const held = (await leftovers(engine, id)).filter((l) => !path.basename(l).startsWith('.removing-'));
    assert.deepEqual(held, []);
    await engine.start();
    await eventually(async () => (await leftovers(engine, id)).length === 0, 15_000);
  });

  test('a crash right after rm answered leaves nothing behind once the daemon is back', async () => {
    const id = await run(engine, ['--name', 'crash-rm', 'busybox', 'true']);
    await engine.request('POST', `/containers/${id}/wait`);
    assert.equal((await engine.request('DELETE', `/containers/${id}`)).status, 204);
    await engine.crash();
    await engine.start();
    assert.equal((await engine.request('GET', `/containers/${id}/json`)).status, 404);
    await eventually(async () => (await leftovers(engine, id)).length === 0, 15_000);
    await engine.dockerOk(['create', '--name', 'crash-rm', 'busybox', 'true']);
    await engine.dockerOk(['rm', 'crash-rm']);
  });
});
