import assert from 'node:assert/strict';
import http from 'node:http';
import { after, before, describe, test } from 'node:test';
import { EventBus, type EngineEvent } from '../engine/events.js';
import { eventMatches, negotiateEventsContentType, parseEventTime, registerEventsRoutes, type EventsApi } from './events.js';
import { parseFilters } from './params.js';
import { Router } from './router.js';
import { serveRouter, type TestServer } from './testing.js';

function fakeEvent(partial: Partial<EngineEvent> & Pick<EngineEvent, 'Type' | 'Action'>, id = 'abc123', attrs: Record<string, string> = {}): EngineEvent {
  return { scope: 'local', time: 1, timeNano: 1_000_000_000n, Actor: { ID: id, Attributes: attrs }, ...partial };
}

/** Opens /events and collects raw chunks; resolves the handle once the headers arrived. */
function openStream(socketPath: string, urlPath: string, headers: Record<string, string> = {}) {
  const chunks: string[] = [];
  let res!: http.IncomingMessage;
  const req = http.request({ socketPath, path: urlPath, headers, agent: false });
  req.on('error', () => undefined);
  const ended = new Promise<void>((resolve) => {
    req.on('response', (r) => {
      r.on('end', () => resolve());
      r.on('error', () => resolve());
      r.on('close', () => resolve());
    });
    req.on('close', () => resolve());
  });
  const ready = new Promise<http.IncomingMessage>((resolve) => {
    req.on('response', (r) => {
      res = r;
      r.setEncoding('latin1');
      r.on('data', (c: string) => chunks.push(c));
      resolve(r);
    });
  });
  req.end();
  return {
    ready,
    ended,
    get text() {
      return chunks.join('');
    },
    get res() {
      return res;
    },
    close: () => req.destroy(),
  };
}

async function until(check: () => boolean, ms = 3000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 10));
  }
}

describe('GET /events', () => {
  let bus: EventBus;
  let api: TestServer;
  let events: EventsApi;

  before(async () => {
    bus = new EventBus();
    const router = new Router();
    events = registerEventsRoutes(router, bus);
    api = await serveRouter(router);
  });
  after(() => api.close());

  test('streams live events one JSON object per line, flushed at once, with timeNano a plain number', async () => {
    const s = openStream(api.socket, '/v1.44/events');
    const res = await s.ready;
    assert.equal(res.statusCode, 200);
    assert.equal(res.headers['content-type'], 'application/json');
    assert.equal(res.headers['transfer-encoding'], 'chunked');
    const e = bus.publish('container', 'create', 'c0ffee', { name: 'web', image: 'busybox' });
    await until(() => s.text.includes('\n'));
    const record = JSON.parse(s.text.split('\n')[0]);
    assert.equal(record.Type, 'container');
    assert.equal(record.Action, 'create');
    assert.deepEqual(record.Actor, { ID: 'c0ffee', Attributes: { name: 'web', image: 'busybox' } });
    assert.equal(record.status, 'create');
    assert.equal(record.id, 'c0ffee');
    assert.equal(record.from, 'busybox');
    assert.match(s.text, new RegExp(`"timeNano":${e.timeNano}[,}]`));
    assert.equal(record.time, Number(e.timeNano / 1_000_000_000n));
    s.close();
  });

  test('1.52 drops the legacy status, id and from fields', async () => {
    const since = bus.publish('container', 'start', 'feed', { image: 'busybox' }).timeNano;
    const r = await api.request('GET', `/v1.52/events?since=${since / 1_000_000_000n}.${(since % 1_000_000_000n).toString().padStart(9, '0')}&until=${Date.now() / 1000 + 0.05}`);
    const record = JSON.parse(r.text.trim().split('\n').pop()!);
    assert.equal(record.Action, 'start');
    assert.equal('status' in record, false);
    assert.equal('id' in record, false);
    assert.equal('from' in record, false);
  });

  test('since replays past events, until ends the stream; RFC 3339 and fractions are read', async () => {
    const start = BigInt(Date.now()) * 1_000_000n;
    await new Promise((r) => setTimeout(r, 5));
    bus.publish('volume', 'create', 'vol1');
    bus.publish('volume', 'destroy', 'vol1');
    const end = BigInt(Date.now() + 1) * 1_000_000n;
    const sinceText = new Date(Number(start / 1_000_000n)).toISOString();
    const r = await api.request('GET', `/events?since=${encodeURIComponent(sinceText)}&until=${Number(end) / 1e9}`);
    assert.equal(r.status, 200);
    const actions = r.text.trim().split('\n').map((l) => JSON.parse(l)).filter((e) => e.Type === 'volume').map((e) => e.Action);
    assert.deepEqual(actions, ['create', 'destroy']);
  });

  test('until in the future ends the stream at that time', async () => {
    const t0 = Date.now();
    const s = openStream(api.socket, `/events?until=${(Date.now() + 400) / 1000}`);
    await s.ready;
    bus.publish('network', 'create', 'net1', { name: 'n1', type: 'bridge' });
    await s.ended;
    const elapsed = Date.now() - t0;
    assert.ok(elapsed >= 300 && elapsed < 3000, `ended after ${elapsed} ms`);
    assert.match(s.text, /"Action":"create"/);
  });

  test('filters: type, event, container by name or id prefix, image, label; unknown keys are 400', async () => {
    const since = (Date.now() - 1) / 1000;
    bus.publish('container', 'create', 'aaaa1111', { name: 'web', image: 'busybox:latest', tier: 'front' });
    bus.publish('container', 'start', 'aaaa1111', { name: 'web', image: 'busybox:latest', tier: 'front' });
    bus.publish('container', 'create', 'bbbb2222', { name: 'db', image: 'postgres:16', tier: 'back' });
    bus.publish('image', 'tag', 'sha256:1234', { name: 'busybox:latest' });
    bus.publish('network', 'connect', 'netid', { container: 'aaaa1111', name: 'bridge', type: 'bridge' });
    const ask = async (filters: object) => {
      const r = await api.request('GET', `/events?since=${since}&until=${(Date.now() + 1) / 1000}&filters=${encodeURIComponent(JSON.stringify(filters))}`);
      assert.equal(r.status, 200, r.text);
      return r.text.trim().split('\n').filter(Boolean).map((l) => JSON.parse(l)).map((e) => `${e.Type}:${e.Action}:${e.Actor.ID}`);
    };
    assert.deepEqual(await ask({ type: ['image'] }), ['image:tag:sha256:1234']);
    assert.deepEqual(await ask({ container: ['web'] }), ['container:create:aaaa1111', 'container:start:aaaa1111']);
    assert.deepEqual(await ask({ container: ['bbbb'] }), ['container:create:bbbb2222']);
    assert.deepEqual(await ask({ event: { start: true } }), ['container:start:aaaa1111']);
    assert.deepEqual(await ask({ type: ['container'], event: ['create'], label: ['tier=back'] }), ['container:create:bbbb2222']);
    assert.deepEqual(await ask({ image: ['busybox'] }), ['container:create:aaaa1111', 'container:start:aaaa1111', 'image:tag:sha256:1234']);
    assert.deepEqual(await ask({ network: ['bridge'] }), ['network:connect:netid']);
    const bad = await api.request('GET', `/events?filters=${encodeURIComponent('{"colour":["red"]}')}`);
    assert.equal(bad.status, 400);
    assert.match(JSON.parse(bad.text).message, /colour/);
  });

  test('bad since/until answer 400 before the stream starts', async () => {
    for (const q of ['since=yesterday', 'until=12abc', `since=${Date.now() / 1000}&until=1000`]) {
      const r = await api.request('GET', `/events?${q}`);
      assert.equal(r.status, 400, q);
      assert.equal(typeof JSON.parse(r.text).message, 'string');
    }
  });

  test('1.52 negotiates json-seq and x-ndjson by Accept; 1.53 also jsonl', async () => {
    const now = Date.now() / 1000;
    bus.publish('daemon', 'reload', 'engine-id', { name: 'host' });
    const seq = await api.request('GET', `/v1.52/events?since=${now - 1}&until=${now + 0.1}`, { headers: { Accept: 'application/json-seq, application/x-ndjson' } });
    assert.equal(seq.headers['content-type'], 'application/json-seq');
    assert.ok(seq.text.length > 0);
    for (const record of seq.text.split('\n').filter(Boolean)) {
      assert.equal(record.charCodeAt(0), 0x1e);
      JSON.parse(record.slice(1));
    }
    const nd = await api.request('GET', `/v1.52/events?since=${now - 1}&until=${now + 0.1}`, { headers: { Accept: 'application/x-ndjson' } });
    assert.equal(nd.headers['content-type'], 'application/x-ndjson');
    assert.equal(nd.text.includes('\u001e'), false);
    const jsonl52 = await api.request('GET', `/v1.52/events?until=${now}`, { headers: { Accept: 'application/jsonl' } });
    assert.equal(jsonl52.headers['content-type'], 'application/json');
    const jsonl53 = await api.request('GET', `/v1.53/events?until=${now}`, { headers: { Accept: 'application/jsonl' } });
    assert.equal(jsonl53.headers['content-type'], 'application/jsonl');
    const old = await api.request('GET', `/v1.51/events?until=${now}`, { headers: { Accept: 'application/json-seq' } });
    assert.equal(old.headers['content-type'], 'application/json');
  });

  test('a client going away ends its subscription', async () => {
    const before = events.listeners();
    const streams = [openStream(api.socket, '/events'), openStream(api.socket, '/v1.41/events')];
    await Promise.all(streams.map((s) => s.ready));
    assert.equal(events.listeners(), before + 2);
    for (const s of streams) s.close();
    await until(() => events.listeners() === before);
    bus.publish('container', 'die', 'x');
    assert.equal(events.listeners(), before);
  });
});

describe('events helpers', () => {
  test('content type negotiation honours q values and falls back to application/json', () => {
    assert.equal(negotiateEventsContentType(undefined, 53), 'application/json');
    assert.equal(negotiateEventsContentType('*/*', 53), 'application/json');
    assert.equal(negotiateEventsContentType('application/json-seq;q=0.5, application/x-ndjson', 52), 'application/x-ndjson');
    assert.equal(negotiateEventsContentType('application/json-seq', 44), 'application/json');
  });

  test('times: Unix seconds with fractions, RFC 3339 with offsets, durations before now', () => {
    assert.equal(parseEventTime('since', '1700000000.5'), 1_700_000_000_500_000_000n);
    assert.equal(parseEventTime('since', '2023-11-14T22:13:20Z'), 1_700_000_000_000_000_000n);
    assert.equal(parseEventTime('since', '2023-11-14T23:13:20.25+01:00'), 1_700_000_000_250_000_000n);
    assert.equal(parseEventTime('since', '1m30s', 100_000_000_000n), 10_000_000_000n);
    assert.throws(() => parseEventTime('since', 'soon'), /invalid value for since/);
  });

  test('exec_start matches by prefix, other events exactly', () => {
    const f = parseFilters('{"event":["exec_start"]}', ['event']);
    assert.equal(eventMatches(fakeEvent({ Type: 'container', Action: 'exec_start: sh -c true' }), f), true);
    const g = parseFilters('{"event":["start"]}', ['event']);
    assert.equal(eventMatches(fakeEvent({ Type: 'container', Action: 'start' }), g), true);
    assert.equal(eventMatches(fakeEvent({ Type: 'container', Action: 'restart' }), g), false);
  });
});
