import assert from 'node:assert/strict';
import { test } from 'node:test';
import { nextRing, primaryOf, type RingKey } from './keys.js';

test('the ring: two keys at first, then one more each interval (three at most); the second newest is primary', () => {
  let n = 0;
  const key = () => `k${++n}`;
  const first = nextRing([], 1000, 500, key)!;
  assert.deepEqual(first.map((k) => k.Tag), [1, 2]);
  assert.equal(primaryOf(first)!.Tag, 1);
  assert.equal(nextRing(first, 1499, 500, key), undefined);
  const second = nextRing(first, 1500, 500, key)!;
  assert.deepEqual(second.map((k) => k.Tag), [1, 2, 3]);
  assert.equal(primaryOf(second)!.Tag, 2);
  const third = nextRing(second, 2000, 500, key)!;
  assert.deepEqual(third.map((k) => k.Tag), [2, 3, 4]);
  assert.equal(primaryOf(third)!.Tag, 3);
  // The key that was primary is still accepted after it stopped being sent under.
  assert.ok(third.some((k: RingKey) => k.Tag === primaryOf(second)!.Tag));
  assert.equal(new Set(third.map((k) => k.Key)).size, 3);
  assert.equal(primaryOf([{ Tag: 7, Key: 'x', Created: 0 }])!.Tag, 7);
});
