/**
 * Endpoints that answer what a daemon without the feature answers, and the small ones beside them:
 * container prune (`docker container prune`, `docker system prune`, its filters and event), image search
 * against a search server of the test's own on loopback (`docker search 127.0.0.1:PORT/term`), swarm
 * endpoints answering "not a swarm manager" (406 at API 1.24, 503 from 1.25), plugins (an empty list, a
 * named one not found), and BuildKit's session endpoint.
 */
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { expectConforms } from './contract/openapi.js';
import { startEngine, type Engine } from './harness.js';

let engine: Engine;

before(async () => {
  engine = await startEngine();
  await engine.loadBusybox();
});

after(async () => {
  await engine?.cleanup();
});

async function containerIds(): Promise<string[]> {
  return (await engine.request('GET', '/containers/json?all=1')).json<Array<{ Id: string }>>().map((c) => c.Id);
}

async function eventsOf(version: string, sinceSeconds: number, filters: Record<string, string[]>): Promise<Array<{ Type: string; Action: string; Actor: { ID: string; Attributes: Record<string, string> } }>> {
  const until = Math.ceil(Date.now() / 1000) + 1;
  const r = await engine.request('GET', `/v${version}/events?since=${sinceSeconds}&until=${until}&filters=${encodeURIComponent(JSON.stringify(filters))}`);
  assert.equal(r.status, 200, r.text);
  return r.text.split('\n').filter((l) => l.trim() !== '').map((l) => JSON.parse(l));
}

describe('container prune', () => {
  test('docker container prune removes created and exited containers, not running ones nor those the filters keep', async () => {
    const since = Math.floor(Date.now() / 1000) - 1;
    const created = (await engine.dockerOk(['create', '--label', 'tier=web', 'busybox', 'true'])).trim();
    const exited = (await engine.dockerOk(['run', '-d', 'busybox', 'sh', '-c', 'echo data > /file'])).trim();
    await engine.dockerOk(['wait', exited]);
    const kept = (await engine.dockerOk(['create', '--label', 'keep=yes', 'busybox', 'true'])).trim();
    const running = (await engine.dockerOk(['run', '-d', 'busybox', 'sleep', '60'])).trim();
    try {
      const out = await engine.dockerOk(['container', 'prune', '-f', '--filter', 'label!=keep']);
      assert.match(out, /Deleted Containers:/);
      assert.ok(out.includes(created) && out.includes(exited), out);
      assert.ok(!out.includes(kept) && !out.includes(running), out);
      assert.match(out, /Total reclaimed space: \d/);
      const left = await containerIds();
      assert.ok(!left.includes(created) && !left.includes(exited));
      assert.ok(left.includes(kept) && left.includes(running));

      // The prune event carries the bytes reclaimed (the exited container's file counts), from API 1.41 on.
      const events = await eventsOf('1.41', since, { type: ['container'], event: ['prune'] });
      assert.equal(events.length, 1, JSON.stringify(events));
      assert.ok(Number(events[0].Actor.Attributes.reclaimed) > 0, JSON.stringify(events[0]));
      assert.deepEqual(await eventsOf('1.40', since, { type: ['container'], event: ['prune'] }), []);
    } finally {
      await engine.docker(['rm', '-f', kept, running]);
    }
  });

  test('label and until filters narrow a prune; a filter prune does not know is refused', async () => {
    const a = (await engine.dockerOk(['create', '--label', 'tier=db', 'busybox', 'true'])).trim();
    const b = (await engine.dockerOk(['create', '--label', 'tier=web', 'busybox', 'true'])).trim();
    try {
      // Created after the `until` time: nothing goes.
      const before = encodeURIComponent(JSON.stringify({ until: ['2000-01-01T00:00:00Z'] }));
      const none = await engine.request('POST', `/containers/prune?filters=${before}`);
      assert.equal(none.status, 200, none.text);
      assert.deepEqual(none.json(), { ContainersDeleted: [], SpaceReclaimed: 0 });
      const byLabel = encodeURIComponent(JSON.stringify({ label: ['tier=db'] }));
      const one = await engine.request('POST', `/containers/prune?filters=${byLabel}`);
      assert.equal(one.status, 200, one.text);
      assert.deepEqual(one.json().ContainersDeleted, [a]);
      await expectConforms('1.53', 'post', '/containers/prune', 200, one.json());
      await expectConforms('1.25', 'post', '/containers/prune', 200, none.json());
      const bad = await engine.request('POST', `/containers/prune?filters=${encodeURIComponent(JSON.stringify({ status: ['exited'] }))}`);
      assert.equal(bad.status, 400, bad.text);
      assert.match(bad.json().message, /status/);
      assert.ok((await containerIds()).includes(b));
    } finally {
      await engine.docker(['rm', '-f', a, b]);
    }
  });

  test('docker system prune removes stopped containers', async () => {
    const stopped = (await engine.dockerOk(['create', 'busybox', 'true'])).trim();
    const out = await engine.dockerOk(['system', 'prune', '-f']);
    assert.ok(out.includes(stopped), out);
    assert.ok(!(await containerIds()).includes(stopped));
  });
});

describe('image search', () => {
  let server: http.Server;
  let port: number;
  const queries: URLSearchParams[] = [];

  before(async () => {
    server = http.createServer((req, res) => {
      const url = new URL(req.url ?? '/', 'http://index');
      if (url.pathname === '/v1/_ping') {
        res.writeHead(200, { 'Content-Type': 'application/json' }).end('true');
        return;
      }
      if (url.pathname === '/v1/search') {
        queries.push(url.searchParams);
        if (url.searchParams.get('q') === 'broken') {
          res.writeHead(502).end('bad gateway');
          return;
        }
        const results = [
          { name: 'library/busybox', description: 'Busybox base image.', star_count: 3000, is_official: true, is_automated: false },
          { name: 'someone/busybox-tools', description: 'Tools on busybox', star_count: 12, is_official: false, is_automated: true },
          { name: 'other/busybox-tiny', description: 'Tiny', star_count: 1, is_official: false, is_automated: false },
        ];
        const body = JSON.stringify({ num_results: results.length, query: url.searchParams.get('q'), results });
        res.writeHead(200, { 'Content-Type': 'application/json' }).end(body);
        return;
      }
      res.writeHead(404).end();
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as AddressInfo).port;
  });
  after(() => {
    server?.close();
  });

  test('docker search asks the registry the term names and prints its results', async () => {
    const out = await engine.dockerOk(['search', `127.0.0.1:${port}/busybox`]);
    assert.match(out, /NAME\s+DESCRIPTION\s+STARS\s+OFFICIAL/);
    assert.match(out, /library\/busybox\s+Busybox base image\.\s+3000\s+\[OK\]/);
    assert.match(out, /someone\/busybox-tools/);
    const last = queries[queries.length - 1];
    assert.equal(last.get('q'), 'busybox');
    assert.equal(last.get('n'), '25');
  });

  test('limit and the is-official and stars filters', async () => {
    const official = await engine.dockerOk(['search', '--filter', 'is-official=true', '--limit', '5', `127.0.0.1:${port}/busybox`]);
    assert.match(official, /library\/busybox/);
    assert.doesNotMatch(official, /someone|other/);
    assert.equal(queries[queries.length - 1].get('n'), '5');
    const starred = await engine.request('GET', `/images/search?term=127.0.0.1:${port}/busybox&filters=${encodeURIComponent(JSON.stringify({ stars: ['10'] }))}`);
    assert.equal(starred.status, 200, starred.text);
    const results = starred.json<Array<{ name: string; is_automated: boolean }>>();
    assert.deepEqual(results.map((r) => r.name), ['library/busybox', 'someone/busybox-tools']);
    assert.ok(results.every((r) => r.is_automated === false));
    await expectConforms('1.53', 'get', '/images/search', 200, results);
    await expectConforms('1.25', 'get', '/images/search', 200, results);
    const zero = await engine.request('GET', `/images/search?term=127.0.0.1:${port}/busybox&limit=0`);
    assert.equal(zero.status, 200, zero.text);
    assert.equal(queries[queries.length - 1].get('n'), '25');
    const badLimit = await engine.request('GET', `/images/search?term=127.0.0.1:${port}/busybox&limit=101`);
    assert.equal(badLimit.status, 400, badLimit.text);
    assert.match(badLimit.json().message, /limit 101 is outside the range of \[1, 100\]/);
    const badFilter = await engine.request('GET', `/images/search?term=127.0.0.1:${port}/busybox&filters=${encodeURIComponent(JSON.stringify({ stars: ['many'] }))}`);
    assert.equal(badFilter.status, 400, badFilter.text);
    assert.match(badFilter.json().message, /invalid filter 'stars=many'/);
  });

  test('a registry that cannot be reached, or that fails the search, is an error as in dockerd', async () => {
    const spare = http.createServer();
    await new Promise<void>((resolve) => spare.listen(0, '127.0.0.1', resolve));
    const closedPort = (spare.address() as AddressInfo).port;
    await new Promise<void>((resolve) => spare.close(() => resolve()));
    const r = await engine.request('GET', `/images/search?term=127.0.0.1:${closedPort}/busybox`);
    assert.equal(r.status, 400, r.text);
    assert.match(r.json().message, new RegExp(`invalid registry endpoint "http://127\\.0\\.0\\.1:${closedPort}/v1/"\\. HTTPS attempt: .*\\. HTTP attempt: .*connection refused`));
    const cli = await engine.docker(['search', `127.0.0.1:${closedPort}/busybox`]);
    assert.notEqual(cli.code, 0);
    assert.match(cli.stderr, /Error response from daemon: invalid registry endpoint/);

    const failed = await engine.request('GET', `/images/search?term=127.0.0.1:${port}/broken`);
    assert.equal(failed.status, 500, failed.text);
    assert.match(failed.json().message, /Unexpected status code 502/);
  });
});

describe('swarm and plugins, as a daemon outside a swarm and without plugins', () => {
  const NOT_MANAGER = 'This node is not a swarm manager. Use "docker swarm init" or "docker swarm join" to connect this node to swarm and try again.';

  test('swarm, nodes, services, tasks, secrets and configs answer "not a swarm manager": 406 at API 1.24, 503 from 1.25', async () => {
    for (const [method, path] of [
      ['GET', '/swarm'], ['GET', '/nodes'], ['GET', '/nodes/n1'], ['GET', '/services'], ['POST', '/services/create'],
      ['GET', '/tasks'], ['GET', '/tasks/t1'], ['GET', '/secrets'], ['GET', '/configs'], ['GET', '/swarm/unlockkey'],
    ] as const) {
      for (const [version, status] of [['1.24', 406], ['1.25', 503], ['1.44', 503], ['1.53', 503]] as const) {
        const r = await engine.request(method, `/v${version}${path}`);
        assert.equal(r.status, status, `${method} /v${version}${path}: ${r.status} ${r.text}`);
        assert.equal(r.json().message, NOT_MANAGER);
      }
    }
    const leave = await engine.request('POST', '/v1.24/swarm/leave');
    assert.equal(leave.status, 406);
    assert.equal(leave.json().message, 'This node is not part of a swarm');
    assert.equal((await engine.request('POST', '/v1.53/swarm/leave')).status, 503);
    // Init and join with bad input are refused before anything starts.
    const init = await engine.request('POST', '/swarm/init', { body: { ListenAddr: '0.0.0.0:99999' } });
    assert.equal(init.status, 400, init.text);
    assert.match(init.json().message, /invalid port/);
    const join = await engine.request('POST', '/swarm/join', { body: { RemoteAddrs: ['127.0.0.1:2377'] } });
    assert.equal(join.status, 400, join.text);
    assert.match(join.json().message, /join token/);
    assert.equal((await engine.request('GET', '/info')).json().Swarm.LocalNodeState, 'inactive');
  });

  test('the docker CLI reports the daemon\'s message', async () => {
    const r = await engine.docker(['node', 'ls']);
    assert.notEqual(r.code, 0);
    assert.ok(r.stderr.includes(NOT_MANAGER), r.stderr);
  });

  test('plugins: an empty list, a named plugin not found, a pull without its remote refused', async () => {
    const list = await engine.request('GET', '/plugins');
    assert.equal(list.status, 200, list.text);
    assert.deepEqual(list.json(), []);
    assert.equal((await engine.dockerOk(['plugin', 'ls', '-q'])).trim(), '');
    assert.equal((await engine.dockerOk(['plugin', 'ls', '-q', '--filter', 'enabled=true'])).trim(), '');
    const badFilter = await engine.request('GET', `/plugins?filters=${encodeURIComponent(JSON.stringify({ colour: ['red'] }))}`);
    assert.equal(badFilter.status, 400, badFilter.text);
    for (const [method, path] of [
      ['GET', '/plugins/vieux/sshfs:latest/json'], ['POST', '/plugins/vieux/sshfs:latest/enable'], ['POST', '/plugins/vieux/sshfs:latest/disable'],
      ['DELETE', '/plugins/vieux/sshfs:latest'], ['POST', '/plugins/vieux/sshfs:latest/set'], ['GET', '/v1.24/plugins/vieux/sshfs:latest'],
    ] as const) {
      const r = await engine.request(method, path);
      assert.equal(r.status, 404, `${method} ${path}: ${r.text}`);
      assert.equal(r.json().message, 'plugin "vieux/sshfs:latest" not found');
    }
    const pull = await engine.request('POST', '/plugins/pull');
    assert.equal(pull.status, 400, pull.text);
    assert.equal(pull.json().message, 'query parameter remote is required');
  });

  test('the session endpoint refuses an upgrade without BuildKit', async () => {
    const plain = await engine.request('POST', '/session');
    assert.equal(plain.status, 400);
    assert.equal(plain.json().message, 'no upgrade proto in request');
  });
});
