import assert from 'node:assert/strict';
import { test } from 'node:test';
import { percentile, summarize } from './stats.js';

test('percentile picks the nearest-rank sample', () => {
  const samples = [5, 1, 4, 2, 3, 10, 9, 8, 7, 6];
  assert.equal(percentile(samples, 50), 5);
  assert.equal(percentile(samples, 90), 9);
  assert.equal(percentile(samples, 100), 10);
  assert.equal(percentile([42], 50), 42);
  assert.equal(percentile([1, 2], 50), 1);
  assert.ok(Number.isNaN(percentile([], 50)));
  assert.throws(() => percentile(samples, 0), RangeError);
});

test('summarize reports n, p50, p90, min, max and mean without reordering the input', () => {
  const samples = [3, 1, 2];
  const s = summarize(samples);
  assert.deepEqual(s, { n: 3, p50: 2, p90: 3, min: 1, max: 3, mean: 2 });
  assert.deepEqual(samples, [3, 1, 2]);
  assert.equal(summarize([]).n, 0);
});
