import assert from 'node:assert/strict';
import { PassThrough } from 'node:stream';
import { describe, test } from 'node:test';
import { rfc3339Nano, nowNano } from '../../util/json.js';
import { EventBus } from '../events.js';
import { buildRecord } from './create.js';
import { ExecService, type InternalExecOptions } from './exec.js';
import {
  goDuration, HealthMonitor, MAX_OUTPUT_BYTES, mergeHealthcheck, ProbeOutput, probeCommand, probeTiming, recordProbe, type Health,
} from './health.js';
import type { ContainerRecord } from './model.js';
import { type ExecProcess } from '../../host/host.js';

const MS = 1_000_000;

describe('health check configuration', () => {
  test('the image check is taken when the container has none; empty fields take the image values', () => {
    const image = { Test: ['CMD', 'true'], Interval: 5000 * MS, Retries: 7 };
    assert.deepEqual(mergeHealthcheck(undefined, image), image);
    assert.deepEqual(mergeHealthcheck(null, image), image);
    assert.deepEqual(mergeHealthcheck({ Interval: 100 * MS }, image), { Test: ['CMD', 'true'], Interval: 100 * MS, Retries: 7 });
    assert.deepEqual(mergeHealthcheck({ Test: ['NONE'] }, image), { Test: ['NONE'], Interval: 5000 * MS, Retries: 7 });
    assert.equal(mergeHealthcheck(undefined, undefined), undefined);
  });

  test('probe commands of each form; NONE, empty and unknown forms have none', () => {
    assert.deepEqual(probeCommand({ Healthcheck: { Test: ['CMD', 'test', '-f', '/ok'] } }), ['test', '-f', '/ok']);
    assert.deepEqual(probeCommand({ Healthcheck: { Test: ['CMD-SHELL', 'test -f /ok'] } }), ['/bin/sh', '-c', 'test -f /ok']);
    assert.deepEqual(probeCommand({ Healthcheck: { Test: ['CMD-SHELL', 'x'] }, Shell: ['/bin/ash', '-ec'] }), ['/bin/ash', '-ec', 'x']);
    assert.equal(probeCommand({ Healthcheck: { Test: ['NONE'] } }), undefined);
    assert.equal(probeCommand({ Healthcheck: { Test: [] } }), undefined);
    assert.equal(probeCommand({ Healthcheck: { Test: ['CMD'] } }), undefined);
    assert.equal(probeCommand({}), undefined);
  });

  test('defaults fill in zero durations and retries', () => {
    assert.deepEqual(probeTiming(undefined), { intervalNs: 30_000 * MS, timeoutNs: 30_000 * MS, startPeriodNs: 0, startIntervalNs: 5_000 * MS, retries: 3 });
    assert.deepEqual(probeTiming({ Interval: 100 * MS, Timeout: 0, Retries: 1, StartPeriod: 2000 * MS, StartInterval: 50 * MS }), {
      intervalNs: 100 * MS, timeoutNs: 30_000 * MS, startPeriodNs: 2000 * MS, startIntervalNs: 50 * MS, retries: 1,
    });
  });

  test('durations are written as Go writes them', () => {
    assert.equal(goDuration(30_000 * MS), '30s');
    assert.equal(goDuration(1000 * MS), '1s');
    assert.equal(goDuration(1500 * MS), '1.5s');
    assert.equal(goDuration(200 * MS), '200ms');
    assert.equal(goDuration(1_500_000), '1.5ms');
    assert.equal(goDuration(90_000 * MS), '1m30s');
    assert.equal(goDuration(3_600_000 * MS), '1h0m0s');
    assert.equal(goDuration(0), '0s');
  });

  test('probe output is cut at 4096 bytes, marked with ...', () => {
    const out = new ProbeOutput();
    out.write(Buffer.from('ok\n'));
    assert.equal(out.toString(), 'ok\n');
    out.write(Buffer.alloc(MAX_OUTPUT_BYTES, 'a'));
    const text = out.toString();
    assert.equal(text.length, MAX_OUTPUT_BYTES + 3);
    assert.ok(text.startsWith('ok\naaa') && text.endsWith('a...'));
  });
});

describe('health state', () => {
  const entry = (code: number, startMs = 10_000) => ({ Start: 's', End: 'e', ExitCode: code, Output: '', startMs });
  const opts = { retries: 2, startPeriodNs: 0, startedAtMs: 0 };

  test('success makes healthy; retries failures in a row make unhealthy; success heals', () => {
    const h: Health = { Status: 'starting', FailingStreak: 0, Log: [] };
    assert.equal(recordProbe(h, entry(0), opts), true);
    assert.equal(h.Status, 'healthy');
    assert.equal(recordProbe(h, entry(1), opts), false);
    assert.deepEqual([h.Status, h.FailingStreak], ['healthy', 1]);
    assert.equal(recordProbe(h, entry(1), opts), true);
    assert.deepEqual([h.Status, h.FailingStreak], ['unhealthy', 2]);
    assert.equal(recordProbe(h, entry(0), opts), true);
    assert.deepEqual([h.Status, h.FailingStreak], ['healthy', 0]);
  });

  test('the log keeps the last five probes', () => {
    const h: Health = { Status: 'starting', FailingStreak: 0, Log: [] };
    for (let i = 0; i < 8; i++) recordProbe(h, entry(i), { ...opts, retries: 100 });
    assert.deepEqual(h.Log.map((e) => e.ExitCode), [3, 4, 5, 6, 7]);
    assert.ok(!('startMs' in h.Log[0]));
  });

  test('failures within the start period do not count while starting', () => {
    const h: Health = { Status: 'starting', FailingStreak: 0, Log: [] };
    const period = { retries: 1, startPeriodNs: 5000 * MS, startedAtMs: 10_000 };
    assert.equal(recordProbe(h, entry(1, 12_000), period), false);
    assert.deepEqual([h.Status, h.FailingStreak], ['starting', 0]);
    assert.equal(recordProbe(h, entry(1, 15_000), period), true);
    assert.deepEqual([h.Status, h.FailingStreak], ['unhealthy', 1]);
  });
});

/**
 * A container engine and exec runner in memory: probes answer from `results` (exit codes, or 'hang' until
 * killed), then with `fallback`.
 */
function fixture(healthcheck: Record<string, unknown>, fallback: number | 'hang' = 0) {
  const events = new EventBus();
  const record = {
    Id: 'c'.repeat(64),
    Name: '/probed',
    Config: { Healthcheck: healthcheck, Labels: {}, Image: 'busybox' },
    State: { Status: 'created', Running: false, Paused: false, StartedAt: '0001-01-01T00:00:00Z' },
  } as unknown as ContainerRecord;
  const results: Array<number | 'hang'> = [];
  const runs: string[][] = [];
  const saved: string[] = [];
  const published: string[] = [];
  events.subscribe((e) => published.push(e.Action));
  const execs = {
    async runInternal(_r: ContainerRecord, cmd: string[], o: InternalExecOptions): Promise<number> {
      runs.push(cmd);
      const next = results.shift() ?? fallback;
      o.onStarted?.();
      if (next === 'hang') {
        o.onOutput(Buffer.from('still going'));
        await new Promise<void>((resolve) => o.signal?.addEventListener('abort', () => resolve(), { once: true }));
        return 137;
      }
      o.onOutput(Buffer.from(`exit ${next}\n`));
      return next;
    },
  };
  const monitor = new HealthMonitor({
    containers: {
      find: (id) => (id === record.Id ? record : undefined),
      all: () => [record],
      serialised: (_id, fn) => fn(),
      save: async (r) => void saved.push(r.State.Health?.Status ?? 'none'),
      containerEvent: (r, action, extra) => void events.publish('container', action, r.Id, { name: r.Name.slice(1), ...extra }),
    },
    execs,
    events,
  });
  const start = () => {
    Object.assign(record.State, { Status: 'running', Running: true, Paused: false, StartedAt: rfc3339Nano(nowNano()) });
    events.publish('container', 'start', record.Id, {});
  };
  return { events, record, results, runs, saved, published, monitor, start };
}

async function until(check: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

describe('health monitor', () => {
  test('starting at start, healthy after a success, unhealthy after the retries, with events', async () => {
    const f = fixture({ Test: ['CMD-SHELL', 'test -f /tmp/ok'], Interval: 2 * MS, Retries: 2 }, 1);
    f.results.push(0);
    f.start();
    assert.equal(f.record.State.Health?.Status, 'starting');
    await until(() => f.published.includes('health_status: unhealthy'), 'unhealthy');
    f.monitor.close();
    assert.deepEqual(f.published.filter((a) => a.startsWith('health_status')), ['health_status: healthy', 'health_status: unhealthy']);
    assert.deepEqual(f.runs[0], ['/bin/sh', '-c', 'test -f /tmp/ok']);
    const h = f.record.State.Health!;
    assert.ok(h.FailingStreak >= 2);
    assert.deepEqual(h.Log.slice(0, 3).map((e) => [e.ExitCode, e.Output]), [[0, 'exit 0\n'], [1, 'exit 1\n'], [1, 'exit 1\n']]);
    assert.ok(f.saved.includes('healthy'));
  });

  test('a probe beyond its timeout is killed and fails with -1', async () => {
    const f = fixture({ Test: ['CMD', 'sleep', '10'], Interval: 2 * MS, Timeout: 20 * MS, Retries: 1 }, 'hang');
    f.start();
    await until(() => f.record.State.Health?.Status === 'unhealthy', 'unhealthy');
    f.monitor.close();
    const first = f.record.State.Health!.Log[0];
    assert.equal(first.ExitCode, -1);
    assert.equal(first.Output, 'Health check exceeded timeout (20ms): still going');
  });

  test('a probe that cannot run fails with its error', async () => {
    const f = fixture({ Test: ['CMD', 'nope'], Interval: 2 * MS, Retries: 1 });
    (f as { monitor: HealthMonitor }).monitor.close();
    const events = new EventBus();
    const record = f.record;
    const monitor = new HealthMonitor({
      containers: { find: () => record, all: () => [record], serialised: (_i, fn) => fn(), save: async () => undefined, containerEvent: () => undefined },
      execs: { runInternal: async () => Promise.reject(new Error('exec: "nope": executable file not found in $PATH')) },
      events,
    });
    Object.assign(record.State, { Running: true, StartedAt: rfc3339Nano(nowNano()) });
    events.publish('container', 'start', record.Id);
    await until(() => record.State.Health?.Status === 'unhealthy', 'unhealthy');
    monitor.close();
    assert.deepEqual([record.State.Health!.Log[0].ExitCode, record.State.Health!.Log[0].Output], [-1, 'exec: "nope": executable file not found in $PATH']);
  });

  test('no probes while paused or after the exit; the status then reads unhealthy; a new start is starting again', async () => {
    const f = fixture({ Test: ['CMD', 'true'], Interval: 2 * MS });
    f.start();
    await until(() => f.record.State.Health?.Status === 'healthy', 'healthy');
    f.events.publish('container', 'pause', f.record.Id);
    assert.equal(f.record.State.Health?.Status, 'unhealthy');
    const probes = f.runs.length;
    await new Promise((r) => setTimeout(r, 50));
    assert.ok(f.runs.length <= probes + 1, 'at most the probe under way when paused');
    f.events.publish('container', 'unpause', f.record.Id);
    await until(() => f.record.State.Health?.Status === 'healthy', 'healthy again');
    f.events.publish('container', 'die', f.record.Id);
    assert.equal(f.record.State.Health?.Status, 'unhealthy');
    const afterDie = f.runs.length;
    await new Promise((r) => setTimeout(r, 50));
    assert.ok(f.runs.length <= afterDie + 1);
    f.start();
    assert.equal(f.record.State.Health?.Status, 'starting');
    assert.equal(f.record.State.Health?.FailingStreak, 0);
    assert.ok(f.record.State.Health!.Log.length > 0, 'the log of earlier probes is kept');
    f.monitor.close();
  });

  test('NONE keeps the container without a Health object', async () => {
    const f = fixture({ Test: ['NONE'] });
    f.start();
    assert.equal(f.record.State.Health, undefined);
    f.monitor.close();
  });

  test('recover resumes probing a running container with its recorded status', async () => {
    const f = fixture({ Test: ['CMD', 'true'], Interval: 2 * MS });
    f.monitor.close();
    Object.assign(f.record.State, { Status: 'running', Running: true, StartedAt: rfc3339Nano(nowNano()), Health: { Status: 'unhealthy', FailingStreak: 3, Log: [] } });
    const events = new EventBus();
    let probes = 0;
    const monitor = new HealthMonitor({
      containers: { find: () => f.record, all: () => [f.record], serialised: (_i, fn) => fn(), save: async () => undefined, containerEvent: () => undefined },
      execs: { runInternal: async () => (probes++, 0) },
      events,
    });
    monitor.recover();
    assert.equal(f.record.State.Health?.Status, 'unhealthy');
    await until(() => f.record.State.Health?.Status === 'healthy', 'healthy');
    monitor.close();
    assert.ok(probes >= 1);
  });
});

describe('probe execs', () => {
  /** An ExecService over a fake host whose processes print, then exit with `code` (or hang until killed). */
  function execFixture(behaviour: { code?: number; hang?: boolean; fail?: Error }) {
    const events = new EventBus();
    const published: Array<{ action: string; attributes: Record<string, string> }> = [];
    const image = { id: 'sha256:' + 'a'.repeat(64), reference: 'busybox:latest', config: { Cmd: ['sh'], Env: ['PATH=/bin'] }, os: 'linux', architecture: 'amd64', chainIds: [] };
    const record = buildRecord({ Image: 'busybox', Cmd: ['sleep', '600'], User: 'app', WorkingDir: '/srv' }, '/probed', image, '/nonexistent');
    Object.assign(record.State, { Status: 'running', Running: true });
    const specs: Array<Record<string, any>> = [];
    const killed: number[] = [];
    const released: string[] = [];
    const host = {
      async exec(_id: string, _execId: string, spec: object): Promise<ExecProcess> {
        if (behaviour.fail) throw behaviour.fail;
        specs.push(spec as Record<string, any>);
        const output = new PassThrough({ objectMode: true });
        let finish!: (code: number) => void;
        const exit = new Promise<number>((resolve) => (finish = resolve));
        output.write({ stream: 'stdout', data: Buffer.from('out ') });
        output.write({ stream: 'stderr', data: Buffer.from('err') });
        if (!behaviour.hang) {
          output.end();
          setImmediate(() => finish(behaviour.code ?? 0));
        }
        return {
          pid: 4242,
          streams: { output, input: new PassThrough(), close: () => output.destroy() },
          exit,
          resize: async () => undefined,
          kill: async (signal: number) => {
            killed.push(signal);
            output.end();
            finish(128 + signal);
          },
        };
      },
      releaseExec: async (id: string) => void released.push(id),
      readFileFromLayers: async (_dirs: string[], file: string) =>
        Buffer.from(file === '/etc/passwd' ? 'root:x:0:0::/root:/bin/sh\napp:x:1000:1000::/home/app:/bin/sh\n' : 'root:x:0:\napp:x:1000:\n'),
    };
    const containers = {
      get: () => record,
      find: () => record,
      containerEvent: (_r: ContainerRecord, action: string, attributes: Record<string, string> = {}) => void published.push({ action, attributes }),
    };
    const execs = new ExecService({ containers, host, lowerDirs: () => [], events });
    return { execs, record, published, specs, killed, released };
  }

  test('runs as the container user in its folder, collects both streams, publishes the exec events, lists nothing', async () => {
    const f = execFixture({ code: 3 });
    let output = '';
    let started = false;
    const code = await f.execs.runInternal(f.record, ['/bin/sh', '-c', 'exit 3'], { onOutput: (d) => (output += d.toString()), onStarted: () => (started = true) });
    assert.equal(code, 3);
    assert.equal(output, 'out err');
    assert.ok(started);
    assert.deepEqual(f.specs[0].args, ['/bin/sh', '-c', 'exit 3']);
    assert.equal(f.specs[0].cwd, '/srv');
    assert.equal(f.specs[0].user.uid, 1000);
    assert.equal(f.specs[0].terminal, false);
    assert.deepEqual(f.published.map((e) => e.action), ['exec_create: /bin/sh -c exit 3', 'exec_start: /bin/sh -c exit 3', 'exec_die']);
    const execId = f.published[0].attributes.execID;
    assert.ok(f.published.every((e) => e.attributes.execID === execId));
    assert.equal(f.published[2].attributes.exitCode, '3');
    assert.ok(!f.record.ExecIDs || f.record.ExecIDs.length === 0);
    assert.throws(() => f.execs.get(execId), /No such exec instance/);
    assert.deepEqual(f.released, [execId]);
  });

  test('aborting kills the process', async () => {
    const f = execFixture({ hang: true });
    const abort = new AbortController();
    const run = f.execs.runInternal(f.record, ['sleep', '30'], { onOutput: () => undefined, onStarted: () => abort.abort(), signal: abort.signal });
    assert.equal(await run, 137);
    assert.deepEqual(f.killed, [9]);
    assert.equal(f.published.at(-1)!.attributes.exitCode, '137');
  });

  test('a process that cannot start is refused with the runtime error, and has died with 126', async () => {
    const f = execFixture({ fail: new Error('exec: "nope": executable file not found in $PATH') });
    await assert.rejects(f.execs.runInternal(f.record, ['nope'], { onOutput: () => undefined }), /executable file not found/);
    assert.deepEqual(f.published.map((e) => [e.action, e.attributes.exitCode]), [['exec_create: nope', undefined], ['exec_die', '126']]);
  });

  test('a container that is not running or is paused is refused', async () => {
    const f = execFixture({});
    f.record.State.Paused = true;
    await assert.rejects(f.execs.runInternal(f.record, ['true'], { onOutput: () => undefined }), /paused/);
    Object.assign(f.record.State, { Paused: false, Running: false });
    await assert.rejects(f.execs.runInternal(f.record, ['true'], { onOutput: () => undefined }), /not running/);
    assert.deepEqual(f.published, []);
  });
});
