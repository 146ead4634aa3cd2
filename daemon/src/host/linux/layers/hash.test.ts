import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { after, test } from 'node:test';
import { digestsOffThread, StreamDigest, useOffThreadHasher } from '../../../util/digest.js';
import { loadLayerHasher } from './hash.js';

after(() => useOffThreadHasher(undefined));

test('stream digests on the layerhash addon match node:crypto, in batches and waits', { skip: !loadLayerHasher() && 'the layerhash addon is not built' }, async () => {
  useOffThreadHasher(loadLayerHasher);
  assert.equal(digestsOffThread(), true);
  const chunks = [0, 5, 1 << 20, (3 << 20) + 1, 9 << 20, 77].map((n) => randomBytes(n));
  const digest = new StreamDigest();
  const expected = createHash('sha256');
  for (const chunk of chunks) {
    expected.update(chunk);
    const wait = digest.update(chunk);
    if (wait) await wait;
  }
  assert.equal(await digest.digest(), `sha256:${expected.digest('hex')}`);
});

test('BERTH_LAYERHASH_ADDON=none hashes in the main thread', () => {
  const before = process.env.BERTH_LAYERHASH_ADDON;
  process.env.BERTH_LAYERHASH_ADDON = 'none';
  try {
    useOffThreadHasher(loadLayerHasher);
    assert.equal(digestsOffThread(), false);
  } finally {
    if (before === undefined) delete process.env.BERTH_LAYERHASH_ADDON;
    else process.env.BERTH_LAYERHASH_ADDON = before;
  }
});
