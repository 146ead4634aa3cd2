import assert from 'node:assert/strict';
import { test } from 'node:test';
import { cpuSeconds, realSeconds } from './commands.js';

test('busybox time -p: the real seconds, and the CPU seconds as user plus system', () => {
  const out = '1024+0 records in\n1024+0 records out\nreal 0.61\nuser 0.01\nsys 0.23\n';
  assert.equal(realSeconds(out), 0.61);
  assert.ok(Math.abs(cpuSeconds(out) - 0.24) < 1e-9);
  assert.throws(() => cpuSeconds('real 0.61\n'), /no CPU times/);
});
