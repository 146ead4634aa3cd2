import assert from 'node:assert/strict';
import { test } from 'node:test';
import { whenIdle } from './idle.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

test('idle work runs once, after the last touch of a burst has been quiet long enough', async () => {
  let runs = 0;
  const idle = whenIdle(() => runs++, 60);
  for (let i = 0; i < 5; i++) {
    idle.touch();
    await sleep(20);
  }
  assert.equal(runs, 0, 'not while touches keep coming');
  await sleep(120);
  assert.equal(runs, 1);
  await sleep(120);
  assert.equal(runs, 1, 'nothing more without new touches');
  idle.touch();
  await sleep(120);
  assert.equal(runs, 2, 'again after the next burst');
  idle.touch();
  idle.close();
  await sleep(120);
  assert.equal(runs, 2, 'not after close');
});

test('idle work keeps its gap from its previous run, and still runs after the last burst', async () => {
  let runs = 0;
  const idle = whenIdle(() => runs++, 20, 300);
  idle.touch();
  await sleep(80);
  assert.equal(runs, 1);
  idle.touch();
  await sleep(80);
  assert.equal(runs, 1, 'a burst right after a run waits for the gap');
  await sleep(300);
  assert.equal(runs, 2, 'then runs once the gap has passed');
  idle.close();
});
