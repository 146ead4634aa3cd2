import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseLimits, readCapabilityBoundingSet, readRlimits } from './facts.js';

test('facts: /proc limits are read by RLIMIT name, unlimited as the largest safe integer', () => {
  const text = [
    'Limit                     Soft Limit           Hard Limit           Units',
    'Max cpu time              unlimited            unlimited            seconds',
    'Max open files            1024                 20000                files',
    'Max processes             63704                63704                processes',
  ].join('\n');
  const limits = parseLimits(text);
  assert.deepEqual(limits.RLIMIT_NOFILE, { soft: 1024, hard: 20000 });
  assert.deepEqual(limits.RLIMIT_CPU, { soft: Number.MAX_SAFE_INTEGER, hard: Number.MAX_SAFE_INTEGER });
  assert.equal(limits.RLIMIT_STACK, undefined);
});

test('facts: this process has an open-files limit and a capability bounding set', () => {
  assert.ok(readRlimits().RLIMIT_NOFILE!.hard > 0);
  assert.match(readCapabilityBoundingSet() ?? '', /^[0-9a-f]+$/);
});
