/**
 * The container list after each change of a container, against a real berthd over plain HTTP: the list
 * keeps what it built of a container until the container changes, so every answer must show the new name,
 * state, Status text, health and networks right after the change (and the Status text moves on with time
 * alone). Two API versions asked in a row must each get their own shape.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { randomInt } from 'node:crypto';
import { eventually, useEngine } from './harness.js';

const engine = useEngine();
/** Generous: probes run as execs, which take a while on a loaded machine. */
const WAIT = 60_000;
const LABEL = 'berth.test=list-cache';

interface Summary {
  Id: string;
  Names: string[];
  State: string;
  Status: string;
  Health?: { Status: string; FailingStreak: number };
  Ports: unknown[];
  Labels: Record<string, string>;
  NetworkSettings: { Networks: Record<string, { IPAddress: string; NetworkID: string; DNSNames?: unknown }> };
  SizeRw?: number;
}

async function list(version = '1.53', query = ''): Promise<Summary[]> {
  const filters = encodeURIComponent(JSON.stringify({ label: [LABEL] }));
  const r = await engine.request('GET', `/v${version}/containers/json?all=1&filters=${filters}${query}`);
  assert.equal(r.status, 200, r.text);
  assert.match(String(r.headers['content-type']), /^application\/json/);
  return r.json();
}

async function listed(id: string, version = '1.53'): Promise<Summary> {
  const found = (await list(version)).find((c) => c.Id === id);
  assert.ok(found, `container ${id} is in the list`);
  return found;
}

/** What inspect (built afresh on every request) says of the container's networks. */
async function inspectNetworks(id: string): Promise<Record<string, unknown>> {
  const r = await engine.request('GET', `/v1.53/containers/${id}/json`);
  assert.equal(r.status, 200, r.text);
  return r.json().NetworkSettings.Networks;
}

async function ok(method: string, path: string, body?: unknown): Promise<void> {
  const r = await engine.request(method, path, { body, timeoutMs: WAIT });
  assert.ok(r.status >= 200 && r.status < 300, `${method} ${path}: ${r.status} ${r.text}`);
}

describe('the container list follows every change of a container', () => {
  test('create, start, health, rename, network connect and disconnect, pause, unpause, stop, remove', async () => {
    const created = await engine.request('POST', '/v1.53/containers/create?name=lc-first', {
      body: {
        Image: 'busybox',
        Cmd: ['sleep', '600'],
        Labels: { 'berth.test': 'list-cache' },
        Healthcheck: { Test: ['CMD', 'true'], Interval: 300_000_000, Timeout: 30_000_000_000, Retries: 3 },
      },
    });
    assert.equal(created.status, 201, created.text);
    const id: string = created.json().Id;
    const netName = `lc-net-${randomInt(1_000_000)}`;
    let netCreated = false;
    try {
      let c = await listed(id);
      assert.deepEqual(c.Names, ['/lc-first']);
      assert.equal(c.State, 'created');
      assert.equal(c.Status, 'Created');
      assert.deepEqual(c.Health, { Status: 'none', FailingStreak: 0 });
      assert.deepEqual(c.Labels, { 'berth.test': 'list-cache' });
      assert.deepEqual(c.NetworkSettings.Networks, await inspectNetworks(id));
      assert.equal(c.NetworkSettings.Networks.bridge.IPAddress, '');

      await ok('POST', `/v1.53/containers/${id}/start`);
      c = await listed(id);
      assert.equal(c.State, 'running');
      assert.match(c.Status, /^Up (Less than a second|\d+ seconds?)( \(health: starting\)| \(healthy\))$/);
      assert.ok(['starting', 'healthy'].includes(c.Health!.Status), JSON.stringify(c.Health));
      assert.match(c.NetworkSettings.Networks.bridge.IPAddress, /^\d+\.\d+\.\d+\.\d+$/);
      assert.deepEqual(c.NetworkSettings.Networks, await inspectNetworks(id));

      // The first probe settles the health (a change made under the container's lock, with no request).
      c = (await eventually(async () => {
        const now = await listed(id);
        return now.Health!.Status === 'healthy' ? now : undefined;
      }, WAIT, 100))!;
      assert.match(c.Status, /^Up .* \(healthy\)$/);

      // Time alone changes the Status text: it is never served from what was kept.
      await eventually(async () => /^Up [1-9]\d* seconds? \(healthy\)$/.test((await listed(id)).Status), WAIT, 100);

      await ok('POST', `/v1.53/containers/${id}/rename?name=lc-second`);
      c = await listed(id);
      assert.deepEqual(c.Names, ['/lc-second']);
      assert.equal(c.State, 'running');

      await ok('POST', '/v1.53/networks/create', { Name: netName, Driver: 'bridge' });
      netCreated = true;
      await ok('POST', `/v1.53/networks/${netName}/connect`, { Container: id });
      c = await listed(id);
      assert.deepEqual(Object.keys(c.NetworkSettings.Networks).sort(), ['bridge', netName].sort());
      assert.match(c.NetworkSettings.Networks[netName].IPAddress, /^\d+\.\d+\.\d+\.\d+$/);
      assert.deepEqual(c.NetworkSettings.Networks, await inspectNetworks(id));

      await ok('POST', `/v1.53/networks/${netName}/disconnect`, { Container: id });
      c = await listed(id);
      assert.deepEqual(Object.keys(c.NetworkSettings.Networks), ['bridge']);
      assert.deepEqual(c.NetworkSettings.Networks, await inspectNetworks(id));

      await ok('POST', `/v1.53/containers/${id}/pause`);
      c = await listed(id);
      assert.equal(c.State, 'paused');
      assert.match(c.Status, /^Up .*\(Paused\)$/);
      // Probing stops while paused, and dockerd then reports the container unhealthy.
      assert.equal(c.Health!.Status, 'unhealthy');

      await ok('POST', `/v1.53/containers/${id}/unpause`);
      c = await listed(id);
      assert.equal(c.State, 'running');
      assert.match(c.Status, /^Up .+ \((unhealthy|healthy)\)$/);

      await ok('POST', `/v1.53/containers/${id}/stop?t=1`);
      c = await listed(id);
      assert.equal(c.State, 'exited');
      assert.match(c.Status, /^Exited \(\d+\) (Less than a second|\d+ seconds?) ago$/);
      assert.deepEqual(c.Health, { Status: 'none', FailingStreak: 0 });
      assert.deepEqual(c.NetworkSettings.Networks, await inspectNetworks(id));

      await ok('DELETE', `/v1.53/containers/${id}`);
      assert.equal((await list()).find((s) => s.Id === id), undefined);
    } finally {
      await engine.request('DELETE', `/containers/${id}?force=1`);
      if (netCreated) await engine.request('DELETE', `/networks/${netName}`);
    }
  });

  test('two API versions in a row each get their own shape, and size=1 adds the sizes', async () => {
    const created = await engine.request('POST', '/v1.53/containers/create?name=lc-versions', {
      body: { Image: 'busybox', Cmd: ['sleep', '600'], Labels: { 'berth.test': 'list-cache' } },
    });
    assert.equal(created.status, 201, created.text);
    const id: string = created.json().Id;
    try {
      await ok('POST', `/containers/${id}/start`);
      for (let round = 0; round < 2; round++) {
        const newest = await listed(id, '1.53');
        assert.deepEqual(newest.Health, { Status: 'none', FailingStreak: 0 });
        assert.ok('DNSNames' in newest.NetworkSettings.Networks.bridge, 'DNSNames from 1.44');
        const oldest = await listed(id, '1.24');
        assert.equal('Health' in oldest, false, 'no Health before 1.52');
        assert.equal('DNSNames' in oldest.NetworkSettings.Networks.bridge, false, 'no DNSNames before 1.44');
        assert.equal(oldest.State, 'running');
        assert.match(oldest.Status, /^Up /);
        const middle = await listed(id, '1.45');
        assert.equal('Health' in middle, false);
        assert.ok('DNSNames' in middle.NetworkSettings.Networks.bridge);
      }
      const sized = (await list('1.53', '&size=1')).find((s) => s.Id === id);
      assert.equal(typeof sized?.SizeRw, 'number');
      assert.equal((await listed(id)).SizeRw, undefined);
    } finally {
      await engine.request('DELETE', `/containers/${id}?force=1`);
    }
  });
});
