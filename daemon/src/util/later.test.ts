import assert from 'node:assert/strict';
import { test } from 'node:test';
import { removeLater, removeQueuedNow } from './later.js';

test('queued folders are deleted together in a later batch, one at a time; failures are reported', async () => {
  const removed: string[] = [];
  const errors: string[] = [];
  let running = 0;
  const remove = async (p: string) => {
    running++;
    assert.equal(running, 1, 'one deletion at a time');
    await new Promise((r) => setImmediate(r));
    running--;
    if (p === 'bad') throw new Error('EBUSY');
    removed.push(p);
  };
  const onError = (err: unknown) => errors.push((err as Error).message);
  for (const p of ['a', 'bad', 'b']) removeLater(p, remove, onError);
  // Not at once: the request that removed them does not wait for, nor run beside, their deletion.
  await new Promise((r) => setImmediate(r));
  assert.deepEqual(removed, []);
  await removeQueuedNow();
  assert.deepEqual(removed, ['a', 'b']);
  assert.deepEqual(errors, ['EBUSY']);
});

test('without a flush the batch still comes, and a folder queued during a batch is deleted too', async () => {
  const removed: string[] = [];
  const remove = async (p: string) => {
    removeLater('during', async (q) => void removed.push(q), () => undefined);
    removed.push(p);
  };
  removeLater('first', remove, () => undefined);
  const deadline = Date.now() + 30_000;
  while (!removed.includes('during') && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  assert.deepEqual(removed, ['first', 'during']);
});
