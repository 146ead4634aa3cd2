/**
 * GET /events against a real berthd with real clients: the docker CLI (`docker events` live, with
 * --since/--until and --filter), dockerode, and plain HTTP for the content types and disconnects.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import http from 'node:http';
import { after, before, describe, test } from 'node:test';
import { eventually, startEngine, type Engine } from './harness.js';

interface EventRecord {
  Type: string;
  Action: string;
  Actor: { ID: string; Attributes: Record<string, string> };
  time: number;
  timeNano: number;
  status?: string;
}

describe('events with real clients', () => {
  let engine: Engine;
  let imagesServed = false;
  before(async () => {
    engine = await startEngine();
    imagesServed = (await engine.request('GET', '/images/json')).status !== 404;
    if (imagesServed) await engine.loadBusybox('busybox:latest');
  });
  after(() => engine?.cleanup());

  test('docker events streams live events as they happen', async (t) => {
    if (!imagesServed) return t.skip('images are not served by this build');
    const child = spawn('docker', ['events', '--format', '{{json .}}'], {
      env: { ...process.env, DOCKER_HOST: engine.host, DOCKER_CONFIG: engine.dockerConfig },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    t.after(() => child.kill('SIGTERM'));
    let out = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString()));
    // The CLI has subscribed once the engine counts a listener.
    await eventually(async () => (await engine.request('GET', '/info')).json().NEventsListener >= 1);
    await engine.dockerOk(['tag', 'busybox:latest', 'events-live:1']);
    const line = await eventually(() => out.split('\n').find((l) => l.includes('events-live')));
    const event = JSON.parse(line!) as EventRecord;
    assert.equal(event.Type, 'image');
    assert.equal(event.Action, 'tag');
    assert.equal(event.Actor.Attributes.name, 'events-live:1');
  });

  test('docker events --since/--until replays past events and ends', async (t) => {
    if (!imagesServed) return t.skip('images are not served by this build');
    const since = Math.floor(Date.now() / 1000) - 1;
    await engine.dockerOk(['tag', 'busybox:latest', 'events-replay:1']);
    await engine.dockerOk(['rmi', 'events-replay:1']);
    const until = Math.ceil(Date.now() / 1000) + 1;
    const r = await engine.docker(['events', '--since', String(since), '--until', String(until), '--format', '{{.Type}} {{.Action}} {{.Actor.Attributes.name}}'], { timeoutMs: 20_000 });
    assert.equal(r.code, 0, r.stderr);
    const lines = r.stdout.split('\n').filter((l) => l.includes('events-replay'));
    assert.deepEqual(lines, ['image tag events-replay:1', 'image untag events-replay:1']);
  });

  test('docker events --filter narrows the stream', async (t) => {
    if (!imagesServed) return t.skip('images are not served by this build');
    const since = Math.floor(Date.now() / 1000) - 1;
    await engine.dockerOk(['tag', 'busybox:latest', 'events-filter:1']);
    await engine.dockerOk(['rmi', 'events-filter:1']);
    const until = String(Math.ceil(Date.now() / 1000) + 1);
    const r = await engine.docker(['events', '--since', String(since), '--until', until, '--filter', 'type=image', '--filter', 'event=untag', '--format', '{{.Action}} {{.Actor.Attributes.name}}'], { timeoutMs: 20_000 });
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual(r.stdout.trim().split('\n'), ['untag events-filter:1']);
    const none = await engine.docker(['events', '--since', String(since), '--until', until, '--filter', 'type=volume'], { timeoutMs: 20_000 });
    assert.equal(none.code, 0, none.stderr);
    assert.equal(none.stdout.trim(), '');
  });

  test('dockerode reads the stream and sees the legacy fields in old versions only', async (t) => {
    if (!imagesServed) return t.skip('images are not served by this build');
    const since = Date.now() / 1000 - 0.5;
    await engine.dockerOk(['tag', 'busybox:latest', 'events-node:1']);
    const until = Date.now() / 1000 + 0.5;
    const read = async (version?: string) => {
      const stream = (await engine.dockerode(version).getEvents({ since, until, filters: { type: ['image'] } })) as NodeJS.ReadableStream;
      let text = '';
      for await (const chunk of stream) text += chunk.toString();
      return text.split('\n').filter((l) => l.trim()).map((l) => JSON.parse(l) as EventRecord).filter((e) => e.Actor.Attributes.name === 'events-node:1');
    };
    const [old] = await read('1.41');
    assert.equal(old.Action, 'tag');
    assert.equal(old.status, 'tag');
    const [current] = await read();
    assert.equal(current.Action, 'tag');
    assert.equal('status' in current, false);
  });

  test('a container run shows in docker events in order, filtered by container name', async (t) => {
    if (!imagesServed || (await engine.request('GET', '/containers/json')).status === 404) return t.skip('containers are not served by this build');
    const since = String(Math.floor(Date.now() / 1000) - 1);
    await engine.dockerOk(['run', '--name', 'events-run', 'busybox', 'sh', '-c', 'exit 3']).catch(() => undefined);
    await engine.docker(['rm', 'events-run']);
    const until = String(Math.ceil(Date.now() / 1000) + 1);
    const r = await engine.docker(['events', '--since', since, '--until', until, '--filter', 'container=events-run', '--format', '{{.Type}} {{.Action}} {{.Actor.Attributes.name}} {{.Actor.Attributes.exitCode}}'], { timeoutMs: 20_000 });
    assert.equal(r.code, 0, r.stderr);
    const lines = r.stdout.trim().split('\n').map((l) => l.trim());
    const actions = lines.map((l) => l.split(' ')[1]);
    for (const action of ['create', 'start', 'die', 'destroy']) assert.ok(actions.includes(action), `${action} in ${actions.join(',')}`);
    assert.ok(actions.indexOf('create') < actions.indexOf('start') && actions.indexOf('start') < actions.indexOf('die') && actions.indexOf('die') < actions.indexOf('destroy'));
    assert.ok(lines.every((l) => l.startsWith('container ') && l.includes(' events-run')), lines.join('\n'));
    assert.match(lines.find((l) => l.includes(' die '))!, / 3$/);
  });

  test('a client that goes away is unsubscribed, and timeNano keeps its nanoseconds', async () => {
    const base = (await engine.request('GET', '/info')).json().NEventsListener as number;
    const req = http.request({ socketPath: engine.socket, path: '/v1.53/events', headers: { Accept: 'application/json-seq' } });
    const res = await new Promise<http.IncomingMessage>((resolve, reject) => {
      req.on('response', resolve);
      req.on('error', reject);
      req.end();
    });
    assert.equal(res.headers['content-type'], 'application/json-seq');
    await eventually(async () => (await engine.request('GET', '/info')).json().NEventsListener === base + 1);
    req.destroy();
    await eventually(async () => (await engine.request('GET', '/info')).json().NEventsListener === base);

    const r = await engine.request('GET', `/events?since=0&until=${Date.now() / 1000}`);
    const raw = r.text.split('\n').find((l) => l.trim());
    if (raw) {
      const nano = /"timeNano":(\d+)/.exec(raw)![1];
      assert.ok(nano.length >= 19, `timeNano ${nano} is a plain number in nanoseconds`);
      assert.equal(nano.slice(0, 10), String(JSON.parse(raw).time));
    }
  });
});
