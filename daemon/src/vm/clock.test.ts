import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ClockKeeper } from './clock.js';

test('the guest clock is synced at start, after a host sleep, and at the period', async () => {
  let now = 1_000_000;
  const synced: number[] = [];
  const keeper = new ClockKeeper({
    sync: async (d) => void synced.push(d.getTime()),
    tickMs: 5000,
    wakeThresholdMs: 10_000,
    periodMs: 60_000,
    now: () => now,
    setInterval: () => ({}),
    clearInterval: () => undefined,
  });
  await keeper.start();
  assert.deepEqual(synced, [1_000_000]);
  // Ticks on time: nothing until the period.
  for (let i = 0; i < 5; i++) {
    now += 5000;
    keeper.tick();
  }
  await Promise.resolve();
  assert.equal(synced.length, 1);
  // The host slept an hour: the next tick comes an hour late.
  now += 3_600_000;
  keeper.tick();
  await Promise.resolve();
  assert.deepEqual(synced.slice(1), [now]);
  assert.deepEqual(keeper.wakes, [3_595_000]);
  // Awake: a sync once the period passed.
  for (let i = 0; i < 12; i++) {
    now += 5000;
    keeper.tick();
    await Promise.resolve();
  }
  assert.equal(synced.length, 3);
  keeper.stop();
});

test('a failed sync is reported and tried again at the next occasion', async () => {
  let now = 0;
  const errors: unknown[] = [];
  let fail = true;
  let calls = 0;
  const keeper = new ClockKeeper({
    sync: async () => {
      calls++;
      if (fail) throw new Error('agent gone');
    },
    tickMs: 1000,
    periodMs: 2000,
    now: () => now,
    setInterval: () => ({}),
    onError: (e) => errors.push(e),
  });
  await keeper.start();
  assert.equal(errors.length, 1);
  fail = false;
  now += 1000;
  keeper.tick();
  await Promise.resolve();
  assert.equal(calls, 2);
});
