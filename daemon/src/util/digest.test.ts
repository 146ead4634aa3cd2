import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { describe, it } from 'node:test';
import { StreamDigest } from './digest.js';

describe('stream digest', () => {
  it('gives the sha256 of the chunks in order, whatever their sizes, waiting when asked to', async () => {
    const sizes = [0, 1, 63, 4096, 65536, 1 << 20, (1 << 20) + 7, 3 << 20, 5, 9 << 20, 12345];
    const chunks = sizes.map((n) => randomBytes(n));
    const digest = new StreamDigest();
    for (const chunk of chunks) {
      const wait = digest.update(chunk);
      if (wait) await wait;
    }
    const expected = createHash('sha256');
    for (const chunk of chunks) expected.update(chunk);
    assert.equal(await digest.digest(), `sha256:${expected.digest('hex')}`);
    assert.equal(digest.size, sizes.reduce((a, b) => a + b, 0));
  });

  it('gives the digest of nothing, and of chunks given without waiting', async () => {
    assert.equal(await new StreamDigest().digest(), `sha256:${createHash('sha256').digest('hex')}`);
    const digest = new StreamDigest();
    const expected = createHash('sha256');
    for (let i = 0; i < 40; i++) {
      const chunk = randomBytes(300_000 + i);
      expected.update(chunk);
      void digest.update(chunk);
    }
    assert.equal(await digest.digest(), `sha256:${expected.digest('hex')}`);
  });
});
