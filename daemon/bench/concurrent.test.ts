import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { test } from 'node:test';
import { formatReport, missedTargets, parseOptions, runBenchmark } from './concurrent.js';
import { findProcessesMentioning } from './procmem.js';

test('concurrent flags: defaults, values, and clear errors', () => {
  assert.deepEqual(parseOptions([]), { containers: 100, clients: 8, warmup: 4, runtime: 'crun', json: false, check: false, verbose: false });
  const o = parseOptions(['-n', '3', '-c', '9', '--warmup', '0', '--runtime', 'runc', '--json', '--check']);
  assert.equal(o?.containers, 3);
  assert.equal(o?.clients, 3, 'no more clients than containers');
  assert.equal(o?.runtime, 'runc');
  assert.equal(parseOptions(['--help']), undefined);
  assert.throws(() => parseOptions(['-c', '0']), /--clients wants an integer >= 1/);
  assert.throws(() => parseOptions(['--runtime', 'youki']), /crun or runc/);
  assert.throws(() => parseOptions(['--bogus']), /Unknown option/);
});

test('a short concurrent run measures both kinds against a real daemon and leaves nothing behind', { skip: process.getuid?.() !== 0 && 'needs root', timeout: 240_000 }, async () => {
  const opts = parseOptions(['-n', '6', '-c', '3', '--warmup', '1'])!;
  const report = await runBenchmark(opts, () => undefined);
  assert.deepEqual(report.errors, {});
  assert.equal(report.api?.steps.create.n, 6);
  assert.equal(report.api?.steps.delete.n, 6);
  assert.ok(report.api!.perSecond > 0);
  assert.equal(report.crun?.run.n, 6);
  assert.ok(report.ratio! > 0);
  assert.equal(existsSync(report.engineRoot), false, 'the temporary root is removed');
  assert.deepEqual(findProcessesMentioning(report.engineRoot), [], 'no process of the run is left');
  assert.match(formatReport(report), /\(a\) API create\+start\+stop\+delete\s+\d+\.\d\s+\d+\.\d\d\s+>= 25/);
  assert.ok(Array.isArray(missedTargets(report)));
});
