/**
 * docker commit through the real CLI and the API: the container's writable layer (added, changed and
 * deleted files, whiteouts) becomes a layer of the new image, the config is the container's with the
 * caller's changes, and bad requests answer clear errors.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { useEngine } from './harness.js';

describe('commit', () => {
  const engine = useEngine();

  it('docker commit with --change, -m and -a makes an image with the container diff and the new config', async () => {
    await engine.dockerOk([
      'run', '--name', 'src', '-e', 'FOO=bar', 'busybox', 'sh', '-c',
      'echo hello > /greeting && mkdir -p /data/sub && echo x > /data/sub/f && rm /etc/passwd && rm -rf /home',
    ]);
    const id = (await engine.dockerOk(['commit', '--change', 'CMD ["cat", "/greeting"]', '--change', 'ENV BAZ=qux', '-m', 'my message', '-a', 'me <me@example.com>', 'src', 'committed:v1'])).trim();
    assert.match(id, /^sha256:[0-9a-f]{64}$/);
    const [inspect] = JSON.parse(await engine.dockerOk(['image', 'inspect', 'committed:v1']));
    assert.equal(inspect.Id, id);
    assert.deepEqual(inspect.Config.Cmd, ['cat', '/greeting']);
    assert.ok(inspect.Config.Env.includes('FOO=bar'));
    assert.ok(inspect.Config.Env.includes('BAZ=qux'));
    assert.equal(inspect.Comment, 'my message');
    assert.equal(inspect.Author, 'me <me@example.com>');
    assert.equal(inspect.RootFS.Layers.length, 2);
    // Older API versions show the committed container and its config.
    const old = (await engine.request('GET', '/v1.41/images/committed:v1/json')).json();
    assert.match(old.Container, /^[0-9a-f]{64}$/);
    assert.deepEqual(old.ContainerConfig.Cmd, ['sh', '-c', 'echo hello > /greeting && mkdir -p /data/sub && echo x > /data/sub/f && rm /etc/passwd && rm -rf /home']);
    assert.notEqual(inspect.Parent, '');
    const history = JSON.parse(await engine.dockerOk(['history', '--no-trunc', '--format', '{{json .}}', 'committed:v1']).then((o) => `[${o.trim().split('\n').join(',')}]`));
    assert.equal(history[0].Comment, 'my message');
    assert.match(history[0].CreatedBy, /sh -c echo hello/);

    // The new image runs with the committed files; deleted files stay deleted.
    assert.equal(await engine.dockerOk(['run', '--rm', 'committed:v1']), 'hello\n');
    assert.equal(await engine.dockerOk(['run', '--rm', 'committed:v1', 'cat', '/data/sub/f']), 'x\n');
    const gone = await engine.docker(['run', '--rm', 'committed:v1', 'sh', '-c', 'ls /etc/passwd; ls -d /home']);
    assert.notEqual(gone.code, 0);
    assert.match(gone.stderr + gone.stdout, /No such file/);
    // Mount points of the runtime are not part of the layer.
    const diff = await engine.dockerOk(['run', '--rm', 'committed:v1', 'sh', '-c', 'test -e /.dockerenv && echo present || echo absent']);
    assert.equal(diff.trim(), 'absent');
  });

  it('a change value holding several instructions on lines of their own applies each one', async () => {
    await engine.dockerOk(['create', '--name', 'multi', 'busybox', 'true']);
    const changes = encodeURIComponent('ENV A=1\nLABEL x=y\n\n# note\nCMD ["echo", "multi"]');
    const r = await engine.request('POST', `/commit?container=multi&repo=multi&tag=v1&changes=${changes}&changes=${encodeURIComponent('USER nobody')}`);
    assert.equal(r.status, 201, r.text);
    const [inspect] = JSON.parse(await engine.dockerOk(['image', 'inspect', 'multi:v1']));
    assert.ok(inspect.Config.Env.includes('A=1'), JSON.stringify(inspect.Config.Env));
    assert.equal(inspect.Config.Labels.x, 'y');
    assert.deepEqual(inspect.Config.Cmd, ['echo', 'multi']);
    assert.equal(inspect.Config.User, 'nobody');
    await engine.dockerOk(['rm', 'multi']);
    await engine.dockerOk(['rmi', 'multi:v1']);
  });

  it('commits with pause=true while the container exits all answer 201, never a runtime error', async () => {
    for (let round = 0; round < 3; round++) {
      const id = (await engine.dockerOk(['run', '-d', 'busybox', 'sh', '-c', 'echo x > /x; sleep 0.3'])).trim();
      let exited = false;
      for (let i = 0; i < 200 && !exited; i++) {
        exited = JSON.parse(await engine.dockerOk(['inspect', id]))[0].State.Running === false;
        const r = await engine.request('POST', `/commit?container=${id}&pause=1`);
        assert.equal(r.status, 201, `round ${round}, commit ${i}: ${r.text}`);
      }
      assert.ok(exited);
      await engine.dockerOk(['rm', id]);
    }
    await engine.dockerOk(['image', 'prune', '-f']);
  });

  it('a folder replaced in the container replaces it in the image (opaque folder)', async () => {
    await engine.dockerOk(['run', '--name', 'opaque', 'busybox', 'sh', '-c', 'rm -rf /home && mkdir /home && echo only > /home/only']);
    await engine.dockerOk(['commit', 'opaque', 'opaque:1']);
    assert.equal(await engine.dockerOk(['run', '--rm', 'opaque:1', 'ls', '/home']), 'only\n');
  });

  it('commits a running container (paused meanwhile) and publishes the commit event', async () => {
    await engine.dockerOk(['run', '-d', '--name', 'running', 'busybox', 'sh', '-c', 'echo live > /live; sleep 600']);
    const since = Math.floor(Date.now() / 1000) - 1;
    const r = await engine.request('POST', '/v1.45/commit?container=running&repo=live&tag=one&comment=c1', { body: { Labels: { a: 'b' } } });
    assert.equal(r.status, 201, r.text);
    const id = r.json().Id as string;
    const state = JSON.parse(await engine.dockerOk(['inspect', 'running']))[0].State;
    assert.equal(state.Running, true);
    assert.equal(state.Paused, false);
    assert.equal(await engine.dockerOk(['run', '--rm', 'live:one', 'cat', '/live']), 'live\n');
    const [inspect] = JSON.parse(await engine.dockerOk(['image', 'inspect', id]));
    assert.equal(inspect.Config.Labels.a, 'b');
    const events = await engine.dockerOk(['events', '--since', String(since), '--until', String(Math.floor(Date.now() / 1000) + 1), '--filter', 'event=commit', '--format', '{{.Actor.Attributes.imageID}} {{.Actor.Attributes.comment}}']);
    assert.match(events, new RegExp(`${id} c1`));
    await engine.dockerOk(['rm', '-f', 'running']);
  });

  it('answers clear errors: unknown container 404, bad change 400, bad repository 400', async () => {
    await engine.dockerOk(['create', '--name', 'idle', 'busybox', 'true']);
    const missing = await engine.request('POST', '/v1.45/commit?container=nope');
    assert.equal(missing.status, 404);
    assert.match(missing.json().message, /No such container/i);
    const bad = await engine.request('POST', '/v1.45/commit?container=idle&changes=' + encodeURIComponent('RUN echo x'));
    assert.equal(bad.status, 400);
    assert.match(bad.json().message, /RUN is not a valid change command/);
    const repo = await engine.request('POST', '/v1.45/commit?container=idle&repo=Bad%20Name');
    assert.equal(repo.status, 400);
    const body = await engine.request('POST', '/v1.45/commit?container=idle', { body: '[1,2]', headers: { 'content-type': 'application/json' } });
    assert.equal(body.status, 400);
    const cli = await engine.docker(['commit', 'nope']);
    assert.notEqual(cli.code, 0);
    assert.match(cli.stderr, /No such container/i);
    // The daemon still serves.
    assert.equal((await engine.request('GET', '/_ping')).status, 200);
  });
});
