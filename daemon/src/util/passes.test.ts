import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Passes } from './passes.js';

test('asks during a pass make one more pass, not one each', async () => {
  let passes = 0;
  let release!: () => void;
  const p = new Passes(async () => {
    passes++;
    if (passes === 1) await new Promise<void>((r) => (release = r));
  });
  const first = p.run();
  assert.equal(p.busy, true);
  const joined = [p.run(), p.run(), p.run()];
  release();
  await Promise.all([first, ...joined]);
  assert.equal(passes, 2);
  assert.equal(p.busy, false);
});

test('a failure ends the passes and reaches kick once; goOn false stops the next pass', async () => {
  const errors: unknown[] = [];
  let release!: () => void;
  const failing = new Passes(async () => {
    await new Promise<void>((r) => (release = r));
    throw new Error('boom');
  });
  failing.kick((e) => errors.push(e));
  failing.kick((e) => errors.push(e));
  release();
  await new Promise((r) => setImmediate(r));
  assert.equal(errors.length, 1);
  assert.equal(failing.busy, false);

  let passes = 0;
  let stopped = false;
  let hold!: () => void;
  const stopping = new Passes(
    async () => {
      passes++;
      await new Promise<void>((r) => (hold = r));
    },
    () => !stopped,
  );
  const done = stopping.run();
  stopping.run();
  stopped = true;
  hold();
  await done;
  assert.equal(passes, 1);
});
