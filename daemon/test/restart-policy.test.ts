/**
 * Restart policies against a real berthd: on-failure with a retry limit, always, unless-stopped, the
 * restarting state, and containers coming back after a daemon restart.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { eventually, useEngine } from './harness.js';

const engine = useEngine();

const state = async (name: string) => JSON.parse(await engine.dockerOk(['inspect', '-f', '{{json .State}}', name]));
const restartCount = async (name: string) => Number((await engine.dockerOk(['inspect', '-f', '{{.RestartCount}}', name])).trim());

test('on-failure restarts exactly MaximumRetryCount times, with a doubling delay', async () => {
  const started = Date.now();
  await engine.dockerOk(['run', '-d', '--name', 'flaky', '--restart', 'on-failure:3', 'busybox', 'sh', '-c', 'echo run; exit 2']);
  await eventually(async () => (await restartCount('flaky')) === 3 && (await state('flaky')).Status === 'exited', 15_000);
  // Delays of 100, 200 and 400 ms precede the three restarts.
  assert.ok(Date.now() - started >= 700, 'the restarts were spaced by the doubling delay');
  await new Promise((r) => setTimeout(r, 1000));
  assert.equal(await restartCount('flaky'), 3, 'no fourth restart');
  const s = await state('flaky');
  assert.equal(s.ExitCode, 2);
  assert.equal(s.Restarting, false);
  assert.equal((await engine.dockerOk(['logs', 'flaky'])).split('\n').filter(Boolean).length, 4);
  await engine.dockerOk(['rm', 'flaky']);
});

test('on-failure leaves a container that exits 0 alone', async () => {
  await engine.dockerOk(['run', '-d', '--name', 'fine', '--restart', 'on-failure', 'busybox', 'true']);
  await eventually(async () => (await state('fine')).Status === 'exited');
  await new Promise((r) => setTimeout(r, 500));
  assert.equal(await restartCount('fine'), 0);
  await engine.dockerOk(['rm', 'fine']);
});

test('always restarts, shows the restarting state, and docker stop stops a restarting container', async () => {
  await engine.dockerOk(['run', '-d', '--name', 'looper', '--restart', 'always', 'busybox', 'sh', '-c', 'sleep 0.3; exit 0']);
  await eventually(async () => (await restartCount('looper')) >= 3, 20_000);
  // Catch it between runs at least once.
  await eventually(async () => (await state('looper')).Status === 'restarting', 20_000, 20);
  await engine.dockerOk(['stop', '-t', '1', 'looper']);
  await eventually(async () => (await state('looper')).Status === 'exited');
  const count = await restartCount('looper');
  await new Promise((r) => setTimeout(r, 1500));
  assert.equal(await restartCount('looper'), count, 'a stopped container is not restarted');
  assert.equal((await state('looper')).Status, 'exited');
  await engine.dockerOk(['rm', 'looper']);
});

test('always and unless-stopped come back after a daemon restart; a stopped unless-stopped does not', async () => {
  await engine.dockerOk(['run', '-d', '--name', 'always', '--restart', 'always', 'busybox', 'sleep', '600']);
  await engine.dockerOk(['run', '-d', '--name', 'unless', '--restart', 'unless-stopped', 'busybox', 'sleep', '600']);
  await engine.dockerOk(['run', '-d', '--name', 'parked', '--restart', 'unless-stopped', 'busybox', 'sleep', '600']);
  await engine.dockerOk(['stop', '-t', '0', 'parked']);
  const alwaysPid = (await state('always')).Pid;
  const unlessPid = (await state('unless')).Pid;
  await engine.stop();
  // While the daemon is down, the containers' processes die (as on a reboot).
  process.kill(alwaysPid, 'SIGKILL');
  process.kill(unlessPid, 'SIGKILL');
  await new Promise((r) => setTimeout(r, 500));
  await engine.start();
  await eventually(async () => (await state('always')).Running && (await state('unless')).Running, 15_000);
  assert.notEqual((await state('always')).Pid, alwaysPid);
  assert.equal((await state('parked')).Status, 'exited');
  await engine.dockerOk(['rm', '-f', 'always', 'unless', 'parked']);
});

test('a bad restart policy is refused at create', async () => {
  const r = await engine.request('POST', '/containers/create', { body: { Image: 'busybox', HostConfig: { RestartPolicy: { Name: 'on-failure', MaximumRetryCount: -1 } } } });
  assert.equal(r.status, 400);
  assert.match(r.json().message, /retry count cannot be negative/);
  const auto = await engine.request('POST', '/containers/create', { body: { Image: 'busybox', HostConfig: { AutoRemove: true, RestartPolicy: { Name: 'always' } } } });
  assert.equal(auto.status, 400);
  assert.match(auto.json().message, /AutoRemove/);
});
