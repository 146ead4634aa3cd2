/**
 * Contract tests: responses of a real berthd, holding the busybox image and a container, validated
 * against the published schema of the API version each request asked for (1.24: the fields its
 * document lists).
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { startEngine, type Engine, type HttpResult } from '../harness.js';
import { expectConforms } from './openapi.js';
import { expectV124Fields, type V124Record } from './v124.js';

const VERSIONS = ['1.24', '1.25', '1.41', '1.44', '1.52', '1.53'];

function notServed(r: HttpResult): boolean {
  return r.status === 404 && /page not found/.test(r.text);
}

describe('contract: responses conform to the published schemas', () => {
  let engine: Engine;
  let containerId: string | undefined;
  /** Containers the docker CLI created (it sends "" and null for fields it leaves to the daemon), one privileged. */
  const cliIds: string[] = [];
  let containersServed = false;
  let imagesServed = false;
  const startedAt = Date.now() / 1000 - 1;

  before(async () => {
    engine = await startEngine();
    imagesServed = !notServed(await engine.request('GET', '/images/json'));
    if (imagesServed) await engine.loadBusybox('busybox:latest');
    containersServed = !notServed(await engine.request('GET', '/containers/json'));
    if (containersServed && imagesServed) {
      const created = await engine.request('POST', '/containers/create?name=contract', {
        body: { Image: 'busybox:latest', Cmd: ['sleep', '60'], Labels: { 'com.example.contract': 'yes' } },
      });
      assert.equal(created.status, 201, created.text);
      containerId = created.json().Id;
      const started = await engine.request('POST', `/containers/${containerId}/start`);
      assert.equal(started.status, 204, started.text);
      for (const flags of [[], ['--privileged']]) cliIds.push((await engine.dockerOk(['create', ...flags, 'busybox:latest', 'true'])).trim());
    }
  });
  after(async () => {
    if (containerId) await engine.request('DELETE', `/containers/${containerId}?force=1`).catch(() => undefined);
    await engine?.cleanup();
  });

  /** GETs `path` under version `v` and checks the body against `template`'s 200 schema (or the v1.24 list). */
  async function check(v: string, path: string, template: string, v124?: V124Record, each = false): Promise<unknown> {
    const r = await engine.request('GET', `/v${v}${path}`);
    assert.equal(r.status, 200, `GET /v${v}${path}: ${r.status} ${r.text.slice(0, 500)}`);
    const body = r.json();
    if (v === '1.24') {
      if (v124) for (const item of each ? (body as unknown[]) : [body]) expectV124Fields(v124, item);
      else assert.ok(body && typeof body === 'object');
    } else {
      await expectConforms(v, 'GET', template, 200, body);
    }
    return body;
  }

  for (const v of VERSIONS) {
    describe(`API ${v}`, () => {
      test('GET /version', async () => {
        await check(v, '/version', '/version');
      });

      test('GET /info', async () => {
        const info = (await check(v, '/info', '/info')) as Record<string, number>;
        if (containerId) assert.ok(info.ContainersRunning >= 1);
        if (imagesServed) assert.ok(info.Images >= 1);
      });

      test('GET /images/json', async (t) => {
        if (!imagesServed) return t.skip('images are not served by this build');
        const list = (await check(v, '/images/json', '/images/json', 'image.summary', true)) as unknown[];
        assert.ok(list.length >= 1);
      });

      test('GET /images/{name}/json', async (t) => {
        if (!imagesServed) return t.skip('images are not served by this build');
        await check(v, '/images/busybox:latest/json', '/images/{name}/json', 'image.inspect');
      });

      test('GET /containers/json', async (t) => {
        if (!containerId) return t.skip('containers are not served by this build');
        const list = (await check(v, '/containers/json?all=1', '/containers/json', 'container.summary', true)) as unknown[];
        assert.ok(list.length >= 1);
      });

      test('GET /containers/{id}/json', async (t) => {
        if (!containerId) return t.skip('containers are not served by this build');
        await check(v, `/containers/${containerId}/json`, '/containers/{id}/json', 'container.inspect');
        await check(v, `/containers/${containerId}/json?size=1`, '/containers/{id}/json', 'container.inspect');
        for (const id of cliIds) await check(v, `/containers/${id}/json`, '/containers/{id}/json', 'container.inspect');
      });

      test('GET /networks', async (t) => {
        const r = await engine.request('GET', `/v${v}/networks`);
        if (notServed(r)) return t.skip('networks are not served by this build');
        const list = (await check(v, '/networks', '/networks', 'network', true)) as unknown[];
        assert.ok(list.length >= 1, 'the default networks are listed');
      });

      test('GET /system/df', async (t) => {
        if (v === '1.24') return t.skip('1.24 documents no /system/df');
        await check(v, '/system/df', '/system/df');
      });

      test('GET /events records', async () => {
        const r = await engine.request('GET', `/v${v}/events?since=${startedAt}&until=${Date.now() / 1000}`);
        assert.equal(r.status, 200);
        const records = r.text
          .split('\n')
          .filter((line) => line.trim() !== '')
          .map((line) => JSON.parse(line.replace(/^\u001e/, '')));
        if (imagesServed) assert.ok(records.length > 0, 'loading the image published events');
        for (const record of records) {
          if (v === '1.24') expectV124Fields('event', record);
          else await expectConforms(v, 'GET', '/events', 200, record);
        }
      });
    });
  }
});
