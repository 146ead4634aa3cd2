import assert from 'node:assert/strict';
import { test } from 'node:test';
import { newDataKey, sealer } from '../crypt.js';
import type { ClusterStore } from '../store.js';
import { nextRing, primaryOf, withNetworkKeys, type RingKey } from './keys.js';

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

test('a node gets the ring (in clear, with the primary key) only with an encrypted network', () => {
  const seal = sealer(newDataKey());
  const ring: RingKey[] = [1, 2, 3].map((Tag) => ({ Tag, Key: seal.seal(Buffer.alloc(20, Tag)), Created: 0 }));
  const store = { get: (kind: string, id: string) => (kind === 'netkeys' && id === 'overlay' ? { obj: { Keys: ring } } : undefined) } as unknown as ClusterStore;
  const plain = { Networks: [{ ID: 'a', Encrypted: false }] };
  assert.equal(withNetworkKeys(plain, store, seal), plain);
  const given = withNetworkKeys({ Networks: [{ ID: 'a' }, { ID: 'b', Encrypted: true }] }, store, seal);
  assert.deepEqual(given.Keys, [1, 2, 3].map((Tag) => ({ Tag, Key: Buffer.alloc(20, Tag).toString('base64'), Created: 0 })));
  assert.equal(given.PrimaryKey, 2);
  // In the store they are sealed.
  assert.ok(ring.every((k) => !k.Key.includes(Buffer.alloc(20, k.Tag).toString('base64'))));
});
