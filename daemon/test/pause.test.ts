/**
 * Pause and unpause through the docker CLI against a real berthd: the container's processes stop running
 * (its output stops growing), exec and attach are refused while paused, stop and kill still work, events;
 * and top, which lists the container's processes from the host's ps.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { eventually, useEngine } from './harness.js';

const engine = useEngine();

const ticker = ['sh', '-c', 'i=0; while true; do i=$((i+1)); echo $i; sleep 0.05; done'];

async function logLines(id: string): Promise<number> {
  return (await engine.dockerOk(['logs', id])).split('\n').filter(Boolean).length;
}

describe('pause and unpause', () => {
  test('freezes the processes and thaws them', async () => {
    const id = (await engine.dockerOk(['run', '-d', 'busybox', ...ticker])).trim();
    await eventually(async () => (await logLines(id)) > 2);
    await engine.dockerOk(['pause', id]);
    const state = JSON.parse(await engine.dockerOk(['inspect', '-f', '{{json .State}}', id]));
    assert.equal(state.Status, 'paused');
    assert.equal(state.Paused, true);
    assert.equal(state.Running, true);
    assert.match(await engine.dockerOk(['ps', '--filter', `id=${id}`, '--format', '{{.Status}}']), /\(Paused\)/);
    const frozenAt = await logLines(id);
    await new Promise((r) => setTimeout(r, 500));
    assert.equal(await logLines(id), frozenAt, 'no output while paused');
    await engine.dockerOk(['unpause', id]);
    assert.equal((await engine.dockerOk(['inspect', '-f', '{{.State.Status}}', id])).trim(), 'running');
    await eventually(async () => (await logLines(id)) > frozenAt + 2);
    await engine.dockerOk(['rm', '-f', id]);
  });

  test('refuses exec, attach and a second pause while paused; unpause of a running container is 409', async () => {
    const id = (await engine.dockerOk(['run', '-d', 'busybox', 'sleep', '600'])).trim();
    const notPaused = await engine.request('POST', `/containers/${id}/unpause`);
    assert.equal(notPaused.status, 409);
    assert.match(notPaused.json().message, /is not paused/);
    await engine.dockerOk(['pause', id]);
    const exec = await engine.request('POST', `/containers/${id}/exec`, { body: { Cmd: ['true'] } });
    assert.equal(exec.status, 409);
    assert.match(exec.json().message, /is paused/);
    const attach = await engine.request('POST', `/containers/${id}/attach?stream=1&stdout=1`);
    assert.equal(attach.status, 409);
    const again = await engine.request('POST', `/containers/${id}/pause`);
    assert.equal(again.status, 409);
    assert.match(again.json().message, /already paused/);
    await engine.dockerOk(['unpause', id]);
    await engine.dockerOk(['rm', '-f', id]);
  });

  test('an exec created before the pause cannot start while paused', async () => {
    const id = (await engine.dockerOk(['run', '-d', 'busybox', 'sleep', '600'])).trim();
    const execId = (await engine.request('POST', `/containers/${id}/exec`, { body: { Cmd: ['true'] } })).json().Id;
    await engine.dockerOk(['pause', id]);
    const start = await engine.request('POST', `/exec/${execId}/start`, { body: {} });
    assert.equal(start.status, 409);
    await engine.dockerOk(['unpause', id]);
    await engine.dockerOk(['rm', '-f', id]);
  });

  test('stop and kill reach a paused container', async () => {
    const stopped = (await engine.dockerOk(['run', '-d', 'busybox', 'sh', '-c', 'trap "exit 3" TERM; while true; do sleep 0.1; done'])).trim();
    await engine.dockerOk(['pause', stopped]);
    const started = Date.now();
    await engine.dockerOk(['stop', '-t', '5', stopped]);
    assert.ok(Date.now() - started < 4000, 'the stop signal reached the process without waiting for the timeout');
    assert.equal((await engine.dockerOk(['inspect', '-f', '{{.State.Status}} {{.State.Paused}} {{.State.ExitCode}}', stopped])).trim(), 'exited false 3');

    const killed = (await engine.dockerOk(['run', '-d', 'busybox', 'sleep', '600'])).trim();
    await engine.dockerOk(['pause', killed]);
    await engine.dockerOk(['kill', killed]);
    assert.equal((await engine.dockerOk(['wait', killed])).trim(), '137');

    const removed = (await engine.dockerOk(['run', '-d', 'busybox', 'sleep', '600'])).trim();
    await engine.dockerOk(['pause', removed]);
    const rm = await engine.request('DELETE', `/containers/${removed}`);
    assert.equal(rm.status, 409);
    assert.match(rm.json().message, /paused/);
    await engine.dockerOk(['rm', '-f', removed]);
    await engine.dockerOk(['rm', stopped, killed]);
  });

  test('a stopped container cannot be paused; unknown containers are 404', async () => {
    const id = (await engine.dockerOk(['create', 'busybox', 'true'])).trim();
    const r = await engine.request('POST', `/containers/${id}/pause`);
    assert.equal(r.status, 409);
    assert.match(r.json().message, /is not running/);
    assert.equal((await engine.request('POST', '/containers/no-such/pause')).status, 404);
    assert.equal((await engine.request('POST', '/containers/no-such/unpause')).status, 404);
    await engine.dockerOk(['rm', id]);
  });

  test('publishes pause and unpause events', async () => {
    const id = (await engine.dockerOk(['run', '-d', 'busybox', 'sleep', '600'])).trim();
    const since = Math.floor(Date.now() / 1000) - 1;
    await engine.dockerOk(['pause', id]);
    await engine.dockerOk(['unpause', id]);
    const until = Math.floor(Date.now() / 1000) + 1;
    const r = await engine.request('GET', `/events?since=${since}&until=${until}&filters=${encodeURIComponent(JSON.stringify({ container: [id] }))}`);
    const actions = r.text.trim().split('\n').map((l) => JSON.parse(l).Action);
    assert.deepEqual(actions.filter((a) => a === 'pause' || a === 'unpause'), ['pause', 'unpause']);
    await engine.dockerOk(['rm', '-f', id]);
  });
});

describe('top', () => {
  test('lists the container processes only, with ps -ef titles by default', async () => {
    const id = (await engine.dockerOk(['run', '-d', 'busybox', 'sh', '-c', 'sleep 600 & sleep 700; true'])).trim();
    await eventually(async () => (await engine.request('GET', `/containers/${id}/top`)).json().Processes?.length === 3);
    const top = (await engine.request('GET', `/containers/${id}/top`)).json();
    assert.deepEqual(top.Titles, ['UID', 'PID', 'PPID', 'C', 'STIME', 'TTY', 'TIME', 'CMD']);
    const commands = top.Processes.map((p: string[]) => p[7]).sort();
    assert.deepEqual(commands, ['sh -c sleep 600 & sleep 700; true', 'sleep 600', 'sleep 700']);
    const pid = (await engine.dockerOk(['inspect', '-f', '{{.State.Pid}}', id])).trim();
    assert.ok(top.Processes.some((p: string[]) => p[1] === pid));

    const aux = (await engine.request('GET', `/containers/${id}/top?ps_args=aux`)).json();
    assert.equal(aux.Titles[0], 'USER');
    assert.equal(aux.Titles.at(-1), 'COMMAND');
    assert.equal(aux.Processes.length, 3);
    assert.match(await engine.dockerOk(['top', id]), /sleep 700/);
    await engine.dockerOk(['rm', '-f', id]);
  });

  test('a paused container can be listed; a stopped one is 409; bad ps_args are 400', async () => {
    const id = (await engine.dockerOk(['run', '-d', 'busybox', 'sleep', '600'])).trim();
    await engine.dockerOk(['pause', id]);
    assert.equal((await engine.request('GET', `/containers/${id}/top`)).json().Processes.length, 1);
    await engine.dockerOk(['unpause', id]);
    const noPid = await engine.request('GET', `/containers/${id}/top?ps_args=${encodeURIComponent('-o comm')}`);
    assert.equal(noPid.status, 400);
    assert.match(noPid.json().message, /PID/);
    assert.equal((await engine.request('GET', `/containers/${id}/top?ps_args=${encodeURIComponent('-ef; rm -rf /')}`)).status, 400);
    await engine.dockerOk(['rm', '-f', id]);
    const created = (await engine.dockerOk(['create', 'busybox', 'true'])).trim();
    const r = await engine.request('GET', `/containers/${created}/top`);
    assert.equal(r.status, 409);
    assert.equal((await engine.request('GET', '/containers/no-such/top')).status, 404);
    await engine.dockerOk(['rm', created]);
  });

  test('top while the container stops, starts and restarts: its processes or 409, never a 5xx', async () => {
    // PID 1 leaves at SIGTERM within a second, so that stops and restarts come quickly one after the other.
    const id = (await engine.dockerOk(['run', '-d', 'busybox', 'sh', '-c', 'trap "exit 0" TERM; while :; do sleep 1; done'])).trim();
    const changes = ['restart?t=1', 'stop?t=1', 'start', 'kill?signal=TERM'];
    const end = Date.now() + 8000;
    const answers = new Map<number, number>();
    const churn = async (from: number) => {
      for (let i = from; Date.now() < end; i++) await engine.request('POST', `/containers/${id}/${changes[i % changes.length]}`);
    };
    await Promise.all([
      churn(0),
      churn(1),
      (async () => {
        while (Date.now() < end) {
          const r = await engine.request('GET', `/containers/${id}/top`);
          answers.set(r.status, (answers.get(r.status) ?? 0) + 1);
          assert.ok(r.status === 200 || r.status === 409, `top answered ${r.status}: ${r.text}`);
        }
      })(),
    ]);
    assert.ok(answers.get(200), `some answers listed processes: ${JSON.stringify([...answers])}`);
    await engine.dockerOk(['rm', '-f', id]);
  });
});
