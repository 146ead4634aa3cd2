/**
 * The daemon's start: it listens first and restores its state behind the router. `/_ping` answers at once; a
 * request that needs the state, sent as soon as the socket accepts, waits for it and gets the whole answer
 * (never a 404 of a route not registered yet, nor a partial list); a SIGTERM while the state is being restored
 * stops the daemon cleanly, and the next start finds every container.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import http from 'node:http';
import { after, before, describe, test } from 'node:test';
import { BERTHD, Engine, httpRequest, type HttpResult } from './harness.js';

const CONTAINERS = 12;

describe('daemon start', () => {
  const engine = new Engine();
  const ids: string[] = [];
  const oneShot = new http.Agent({ keepAlive: false });

  before(async () => {
    await engine.start();
    await engine.loadBusybox();
    for (let i = 0; i < CONTAINERS; i++) {
      const live = i < 2;
      const res = await engine.request('POST', '/containers/create', {
        body: { Image: 'busybox', Cmd: live ? ['sleep', '600'] : ['true'], HostConfig: { NetworkMode: live && i === 0 ? 'bridge' : 'none' } },
      });
      assert.equal(res.status, 201, res.text);
      ids.push(res.json<{ Id: string }>().Id);
      if (live) assert.equal((await engine.request('POST', `/containers/${ids[i]}/start`)).status, 204);
    }
    await engine.stop();
  });
  after(async () => {
    await engine.cleanup();
  });

  /** Spawns berthd on the engine's roots as the harness does, without waiting for it. */
  function spawnDaemon() {
    const child = spawn(process.execPath, [
      BERTHD, '-H', engine.host, '--data-root', engine.dataRoot, '--exec-root', engine.execRoot,
      '--pidfile', engine.pidfile, '--bridge', engine.bridge, '--runtime', 'crun',
    ], { stdio: ['ignore', 'ignore', 'pipe'] });
    let log = '';
    child.stderr!.on('data', (c: Buffer) => (log += c));
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
    return { child, exited, log: () => log };
  }

  /** The first answer of `GET urlPath`, sent again every few ms until the socket accepts. */
  async function firstAnswer(urlPath: string): Promise<HttpResult> {
    const deadline = Date.now() + 20_000;
    for (;;) {
      const res = await httpRequest(engine.socket, 'GET', urlPath, { agent: oneShot, timeoutMs: 20_000 }).catch((err: NodeJS.ErrnoException) => {
        if (err.code !== 'ENOENT' && err.code !== 'ECONNREFUSED') throw err;
        return undefined;
      });
      if (res) return res;
      if (Date.now() > deadline) throw new Error(`no answer to ${urlPath} within 20 s`);
      await new Promise((r) => setTimeout(r, 2));
    }
  }

  test('requests sent as soon as the socket accepts get whole answers: the list waits for the restored state, /_ping does not', async () => {
    const daemon = spawnDaemon();
    try {
      const [list, ping, version, info] = await Promise.all([
        firstAnswer('/containers/json?all=1'),
        firstAnswer('/_ping'),
        firstAnswer('/v1.41/version'),
        firstAnswer('/info'),
      ]);
      assert.equal(list.status, 200, list.text);
      assert.deepEqual(list.json<Array<{ Id: string }>>().map((c) => c.Id).sort(), [...ids].sort(), 'every container, at the first answer');
      assert.equal(ping.status, 200);
      assert.equal(ping.text, 'OK');
      assert.equal(ping.headers['api-version'], '1.53');
      assert.equal(version.status, 200, version.text);
      assert.equal(version.json<{ ApiVersion: string }>().ApiVersion, '1.53');
      assert.equal(info.status, 200, info.text);
      const counts = info.json<{ Containers: number; ContainersRunning: number }>();
      assert.equal(counts.Containers, CONTAINERS);
      assert.equal(counts.ContainersRunning, 2, 'the running containers were found running again');
    } finally {
      daemon.child.kill('SIGTERM');
      assert.deepEqual(await daemon.exited, { code: 0, signal: null }, daemon.log());
    }
  });

  test('SIGTERM at the first /_ping, while the state is being restored, stops the daemon cleanly; the next start finds every container', async () => {
    const daemon = spawnDaemon();
    const ping = await firstAnswer('/_ping');
    assert.equal(ping.status, 200);
    daemon.child.kill('SIGTERM');
    assert.deepEqual(await daemon.exited, { code: 0, signal: null }, daemon.log());
    assert.doesNotMatch(daemon.log(), /level=error/, 'no error while it stopped half-way through its start');
    await engine.start();
    const list = (await engine.request('GET', '/containers/json?all=1')).json<Array<{ Id: string; State: string }>>();
    assert.equal(list.length, CONTAINERS);
    assert.equal(list.filter((c) => c.State === 'running').length, 2, 'the running containers kept running');
    await engine.stop();
  });
});
