/**
 * Container health checks against a real berthd, with the docker CLI, dockerode and plain HTTP: the
 * starting -> healthy -> unhealthy transitions and their health_status events, the CMD and CMD-SHELL
 * forms, NONE over an image's check, timeouts, retries, the start period, the `health` filter of the
 * container list, pause and stop, a daemon restart, and the refusals of bad values.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';
import { dockerArchive } from './fixtures/archives.js';
import { buildBusyboxRootfs, busyboxConfig } from './fixtures/busybox.js';
import { eventually, useEngine } from './harness.js';

const engine = useEngine();
const MS = 1_000_000;
/** Generous: probes run as execs, which take a while on a loaded machine. */
const WAIT = 60_000;

interface HealthState {
  Status: string;
  FailingStreak: number;
  Log: Array<{ Start: string; End: string; ExitCode: number; Output: string }>;
}

async function health(id: string): Promise<HealthState | undefined> {
  const r = await engine.request('GET', `/containers/${id}/json`);
  assert.equal(r.status, 200, r.text);
  return r.json().State.Health ?? undefined;
}

async function healthStatus(id: string): Promise<string> {
  return (await engine.dockerOk(['inspect', '--format', '{{if .State.Health}}{{.State.Health.Status}}{{else}}none{{end}}', id])).trim();
}

async function waitStatus(id: string, status: string): Promise<void> {
  await eventually(async () => (await healthStatus(id)) === status, WAIT, 100);
}

async function run(args: string[]): Promise<string> {
  return (await engine.dockerOk(['run', '-d', ...args])).trim();
}

async function remove(id: string): Promise<void> {
  await engine.dockerOk(['rm', '-f', id]);
}

/** Loads an image made of the busybox layer whose config has the given health check. */
async function loadImageWithHealthcheck(tag: string, healthcheck: Record<string, unknown>): Promise<void> {
  const layerFile = path.join(engine.root, `${tag.replace(/\W/g, '_')}-layer.tar`);
  const digest = await buildBusyboxRootfs(layerFile);
  const config = busyboxConfig(digest) as { config: Record<string, unknown> };
  config.config.Healthcheck = healthcheck;
  const archive = await dockerArchive([await fs.readFile(layerFile)], { tags: [tag], config: Buffer.from(JSON.stringify(config)) });
  await fs.rm(layerFile, { force: true });
  const r = await engine.request('POST', '/images/load?quiet=1', { body: archive, headers: { 'Content-Type': 'application/x-tar' }, timeoutMs: 120_000 });
  assert.equal(r.status, 200, r.text);
  assert.doesNotMatch(r.text, /"error"/);
}

describe('health checks', () => {
  test('starting, then healthy, then unhealthy, with health_status events, the list status and the health filter', async (t) => {
    const events = spawn('docker', ['events', '--filter', 'event=health_status', '--format', '{{json .}}'], {
      env: { ...process.env, DOCKER_HOST: engine.host, DOCKER_CONFIG: engine.dockerConfig },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    t.after(() => events.kill('SIGTERM'));
    let out = '';
    events.stdout.on('data', (c: Buffer) => (out += c.toString()));
    await eventually(async () => (await engine.request('GET', '/info')).json().NEventsListener >= 1);

    // Failures during the (long) start period leave it starting; the start interval paces the probes then.
    const id = await run([
      '--name', 'hc-transitions', '--health-cmd', 'test -f /tmp/ok', '--health-interval', '100ms', '--health-start-interval', '100ms',
      '--health-start-period', '1h', '--health-retries', '2', 'busybox', 'sleep', '600',
    ]);
    const hc = JSON.parse(await engine.dockerOk(['inspect', '--format', '{{json .Config.Healthcheck}}', id]));
    assert.deepEqual(hc.Test, ['CMD-SHELL', 'test -f /tmp/ok']);
    assert.equal(hc.Interval, 100 * MS);
    await eventually(async () => ((await health(id))?.Log.length ?? 0) >= 2, WAIT, 100);
    assert.equal(await healthStatus(id), 'starting');
    assert.equal((await health(id))!.FailingStreak, 0);
    assert.match(await engine.dockerOk(['ps', '--filter', `id=${id}`, '--format', '{{.Status}}']), /\(health: starting\)/);
    assert.match(await engine.dockerOk(['ps', '--filter', 'health=starting', '--format', '{{.Names}}']), /hc-transitions/);

    await engine.dockerOk(['exec', id, 'touch', '/tmp/ok']);
    await waitStatus(id, 'healthy');
    assert.equal((await engine.dockerOk(['inspect', '--format', '{{.State.Health.Status}}', id])).trim(), 'healthy');
    assert.match(await engine.dockerOk(['ps', '--filter', `id=${id}`, '--format', '{{.Status}}']), /^Up .* \(healthy\)$/m);
    assert.match(await engine.dockerOk(['ps', '--filter', 'health=healthy', '--format', '{{.Names}}']), /hc-transitions/);
    assert.doesNotMatch(await engine.dockerOk(['ps', '--filter', 'health=unhealthy', '--format', '{{.Names}}']), /hc-transitions/);

    await engine.dockerOk(['exec', id, 'rm', '/tmp/ok']);
    await waitStatus(id, 'unhealthy');
    const h = (await health(id))!;
    assert.ok(h.FailingStreak >= 2);
    assert.ok(h.Log.length <= 5, 'the log keeps the last five probes');
    const last = h.Log[h.Log.length - 1];
    assert.equal(last.ExitCode, 1);
    assert.ok(Date.parse(last.End) >= Date.parse(last.Start));
    assert.match(await engine.dockerOk(['ps', '--filter', `id=${id}`, '--format', '{{.Status}}']), /\(unhealthy\)/);
    assert.match(await engine.dockerOk(['ps', '--filter', 'health=unhealthy', '--format', '{{.Names}}']), /hc-transitions/);

    const seen = (await eventually(() => {
      const actions = out.split('\n').filter(Boolean).map((l) => JSON.parse(l) as { Action: string; Actor: { ID: string; Attributes: Record<string, string> } });
      const mine = actions.filter((e) => e.Actor.ID === id);
      return mine.some((e) => e.Action === 'health_status: unhealthy') ? mine : undefined;
    }, WAIT))!;
    assert.deepEqual(seen.map((e) => e.Action), ['health_status: healthy', 'health_status: unhealthy']);
    assert.equal(seen[0].Actor.Attributes.name, 'hc-transitions');
    assert.equal(seen[0].Actor.Attributes.image, 'busybox');
    await remove(id);
  });

  test('the CMD form runs the command as is; probes are execs with events but not listed in ExecIDs', async () => {
    const docker = engine.dockerode();
    const since = Math.floor(Date.now() / 1000) - 1;
    const container = await docker.createContainer({
      Image: 'busybox',
      Cmd: ['sleep', '600'],
      Hostname: 'probed',
      Healthcheck: { Test: ['CMD', 'cat', '/etc/hostname'], Interval: 100 * MS, Retries: 1 },
    });
    await container.start();
    await eventually(async () => (await container.inspect()).State.Health?.Status === 'healthy', WAIT, 100);
    const info = await container.inspect();
    assert.equal(info.State.Health!.Log[0].ExitCode, 0);
    assert.equal(info.State.Health!.Log[0].Output, 'probed\n');
    assert.equal(info.State.Health!.FailingStreak, 0);
    assert.ok(!info.ExecIDs || info.ExecIDs.length === 0, 'probes are not listed in ExecIDs');
    const until = Math.ceil(Date.now() / 1000) + 1;
    const r = await engine.request('GET', `/events?since=${since}&until=${until}&filters=${encodeURIComponent(JSON.stringify({ container: [container.id] }))}`, { timeoutMs: 20_000 });
    const actions = r.text.split('\n').filter(Boolean).map((l) => JSON.parse(l) as { Action: string; Actor: { Attributes: Record<string, string> } });
    const created = actions.find((e) => e.Action === 'exec_create: cat /etc/hostname');
    assert.ok(created, `exec_create of the probe among ${actions.map((e) => e.Action).join(', ')}`);
    assert.ok(created.Actor.Attributes.execID);
    assert.ok(actions.some((e) => e.Action === 'exec_start: cat /etc/hostname'));
    assert.ok(actions.some((e) => e.Action === 'exec_die' && e.Actor.Attributes.exitCode === '0'));
    assert.ok(actions.some((e) => e.Action === 'health_status: healthy'));
    const filtered = await docker.listContainers({ filters: { health: ['healthy'] } });
    assert.ok(filtered.some((c) => c.Id === container.id));
    // The list shows a health summary from API 1.52 on.
    const summary = async (version: string) =>
      ((await engine.request('GET', `/v${version}/containers/json?all=1`)).json() as Array<{ Id: string; Health?: unknown }>).find((c) => c.Id === container.id)!;
    assert.deepEqual((await summary('1.52')).Health, { Status: 'healthy', FailingStreak: 0 });
    assert.equal((await summary('1.51')).Health, undefined);
    await container.stop({ t: 1 });
    assert.deepEqual((await summary('1.53')).Health, { Status: 'none', FailingStreak: 0 });
    await container.remove({ force: true });
  });

  test('a command that does not exist is a failing probe with the runtime\'s message', async () => {
    const id = await run(['--health-cmd', 'exec /no/such/probe', '--health-interval', '100ms', '--health-retries', '1', 'busybox', 'sleep', '600']);
    await waitStatus(id, 'unhealthy');
    const entry = (await health(id))!.Log[0];
    assert.notEqual(entry.ExitCode, 0);
    assert.match(entry.Output, /no\/such\/probe/);
    await remove(id);
  });

  test('an image\'s check is inherited; NONE disables it; fields left empty take the image\'s', async () => {
    await loadImageWithHealthcheck('hc-image:1', { Test: ['CMD-SHELL', 'exit 0'], Interval: 100 * MS, Retries: 4 });
    const inherited = await run(['hc-image:1', 'sleep', '600']);
    assert.deepEqual(JSON.parse(await engine.dockerOk(['inspect', '--format', '{{json .Config.Healthcheck.Test}}', inherited])), ['CMD-SHELL', 'exit 0']);
    await waitStatus(inherited, 'healthy');

    const merged = await run(['--health-retries', '7', 'hc-image:1', 'sleep', '600']);
    const hc = JSON.parse(await engine.dockerOk(['inspect', '--format', '{{json .Config.Healthcheck}}', merged]));
    assert.deepEqual([hc.Test, hc.Interval, hc.Retries], [['CMD-SHELL', 'exit 0'], 100 * MS, 7]);

    const disabled = await run(['--name', 'hc-disabled', '--no-healthcheck', 'hc-image:1', 'sleep', '600']);
    assert.deepEqual(JSON.parse(await engine.dockerOk(['inspect', '--format', '{{json .Config.Healthcheck.Test}}', disabled])), ['NONE']);
    assert.equal(await health(disabled), undefined, 'no State.Health without a check');
    assert.equal(await healthStatus(disabled), 'none');
    assert.match(await engine.dockerOk(['ps', '--filter', 'health=none', '--format', '{{.Names}}']), /hc-disabled/);
    assert.doesNotMatch(await engine.dockerOk(['ps', '--filter', `id=${disabled}`, '--format', '{{.Status}}']), /health/);
    // NONE stays none: no probe ever runs.
    await eventually(async () => (await health(merged))?.Status === 'healthy', WAIT, 100);
    assert.equal(await health(disabled), undefined);
    for (const id of [inherited, merged, disabled]) await remove(id);
  });

  test('a probe that exceeds its timeout is killed and fails with -1', async () => {
    const id = await run([
      '--health-cmd', 'sleep 30', '--health-timeout', '300ms', '--health-interval', '100ms', '--health-retries', '1', 'busybox', 'sleep', '600',
    ]);
    await waitStatus(id, 'unhealthy');
    const entry = (await health(id))!.Log[0];
    assert.equal(entry.ExitCode, -1);
    assert.equal(entry.Output, 'Health check exceeded timeout (300ms)');
    // Killed, not left behind: the container holds no probe older than the one under way.
    const top = await engine.dockerOk(['top', id]);
    assert.ok(top.split('\n').filter((l) => /sleep 30$/.test(l)).length <= 1, top);
    await remove(id);
  });

  test('retries: the container turns unhealthy only after that many failures in a row', async () => {
    const id = await run(['--health-cmd', 'false', '--health-interval', '100ms', '--health-retries', '3', 'busybox', 'sleep', '600']);
    const observed: Array<[string, number]> = [];
    await eventually(async () => {
      const h = await health(id);
      if (h) observed.push([h.Status, h.FailingStreak]);
      return h?.Status === 'unhealthy';
    }, WAIT, 20);
    for (const [status, streak] of observed) {
      if (status === 'unhealthy') assert.ok(streak >= 3, `unhealthy with a streak of ${streak}`);
      else assert.ok(streak < 3, `${status} with a streak of ${streak}`);
    }
    assert.ok((await health(id))!.Log.every((e) => e.ExitCode === 1));
    await remove(id);
  });

  test('pause stops probing (the status reads unhealthy, as dockerd says), unpause resumes it; stop and start begin again', async () => {
    const id = await run(['--health-cmd', 'true', '--health-interval', '100ms', 'busybox', 'sleep', '600']);
    await waitStatus(id, 'healthy');
    await engine.dockerOk(['pause', id]);
    assert.equal(await healthStatus(id), 'unhealthy');
    const frozen = (await health(id))!.Log.map((e) => e.Start);
    await new Promise((r) => setTimeout(r, 600));
    assert.deepEqual((await health(id))!.Log.map((e) => e.Start), frozen, 'no probe while paused');
    await engine.dockerOk(['unpause', id]);
    await waitStatus(id, 'healthy');

    await engine.dockerOk(['stop', '-t', '1', id]);
    assert.equal(await healthStatus(id), 'unhealthy');
    await engine.dockerOk(['start', id]);
    assert.equal(await healthStatus(id), 'starting');
    assert.equal((await health(id))!.FailingStreak, 0);
    await waitStatus(id, 'healthy');
    await remove(id);
  });

  test('health survives a daemon restart and probing resumes', async () => {
    const id = await run(['--health-cmd', 'test -f /tmp/ok', '--health-interval', '100ms', '--health-retries', '1', 'busybox', 'sh', '-c', 'touch /tmp/ok; exec sleep 600']);
    await waitStatus(id, 'healthy');
    await engine.restart();
    assert.equal(await healthStatus(id), 'healthy');
    assert.ok((await health(id))!.Log.length >= 1);
    await engine.dockerOk(['exec', id, 'rm', '/tmp/ok']);
    await waitStatus(id, 'unhealthy');
    await remove(id);
  });

  test('after a crash: a container that ended meanwhile reads unhealthy, one its policy restarts is probed again', async () => {
    const ended = await run(['--health-cmd', 'true', '--health-interval', '100ms', 'busybox', 'sleep', '600']);
    const restarted = await run(['--restart', 'always', '--health-cmd', 'true', '--health-interval', '100ms', 'busybox', 'sleep', '600']);
    await waitStatus(ended, 'healthy');
    await waitStatus(restarted, 'healthy');
    const pids = await Promise.all([ended, restarted].map(async (id) => Number((await engine.dockerOk(['inspect', '-f', '{{.State.Pid}}', id])).trim())));
    const startedAt = async (id: string) => (await engine.dockerOk(['inspect', '-f', '{{.State.StartedAt}}', id])).trim();
    const firstStart = await startedAt(restarted);
    await engine.crash();
    for (const pid of pids) process.kill(pid, 'SIGKILL');
    await engine.start();
    // conmon may report the kill after the daemon has loaded (the container is then reattached, and its exit
    // recorded when it comes).
    await eventually(async () => (await engine.dockerOk(['inspect', '-f', '{{.State.Status}}', ended])).trim() === 'exited', WAIT, 100);
    await eventually(async () => (await healthStatus(ended)) === 'unhealthy', WAIT, 100);
    await eventually(async () => (await startedAt(restarted)) !== firstStart, WAIT, 100);
    const secondStart = Date.parse(await startedAt(restarted));
    await waitStatus(restarted, 'healthy');
    assert.ok((await health(restarted))!.Log.some((e) => Date.parse(e.Start) >= secondStart), 'probed since the restart');
    for (const id of [ended, restarted]) await remove(id);
  });

  test('bad values are refused with 400 and a message naming them', async () => {
    const create = (healthcheck: Record<string, unknown>, version = '') =>
      engine.request('POST', `${version}/containers/create`, { body: { Image: 'busybox', Cmd: ['true'], Healthcheck: healthcheck } });
    for (const [field, value, message] of [
      ['Interval', 500, /Interval.*1ms/],
      ['Timeout', 999_999, /Timeout.*1ms/],
      ['StartPeriod', 1, /StartPeriod.*1ms/],
      ['StartInterval', 10, /StartInterval.*1ms/],
      ['Retries', -1, /Retries.*negative/],
      ['Interval', -5 * MS, /Interval/],
    ] as const) {
      const r = await create({ Test: ['CMD', 'true'], [field]: value });
      assert.equal(r.status, 400, `${field}=${value}: ${r.text}`);
      assert.match(r.json().message, message);
    }
    const badForm = await create({ Test: ['SHELL', 'true'] });
    assert.equal(badForm.status, 400);
    assert.match(badForm.json().message, /Test/);

    const cli = await engine.docker(['run', '-d', '--health-cmd', 'true', '--health-interval', '500ns', 'busybox', 'true']);
    assert.notEqual(cli.code, 0);
    assert.match(cli.stderr, /Interval/);

    const list = await engine.request('GET', `/containers/json?filters=${encodeURIComponent(JSON.stringify({ health: ['bogus'] }))}`);
    assert.equal(list.status, 400);
    assert.match(list.json().message, /health.*bogus|bogus.*health/);
    const ps = await engine.docker(['ps', '--filter', 'health=bogus']);
    assert.notEqual(ps.code, 0);
    assert.match(ps.stderr, /bogus/);

    // Before API 1.44, StartInterval is not part of the request and is ignored.
    const old = await create({ Test: ['CMD', 'true'], StartInterval: 10 }, '/v1.43');
    assert.equal(old.status, 201, old.text);
    const inspect = await engine.request('GET', `/containers/${old.json().Id}/json`);
    assert.ok(!inspect.json().Config.Healthcheck.StartInterval);
    await engine.request('DELETE', `/containers/${old.json().Id}?force=1`);
  });
});
