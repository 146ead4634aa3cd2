import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { test } from 'node:test';
import { findProcessesMentioning } from './procmem.js';
import { chunks, formatReport, missedTargets, parseOptions, runBenchmark } from './run.js';

test('flags: defaults, values, and clear errors', () => {
  assert.deepEqual(parseOptions([]), { iterations: 50, containers: 20, rounds: 5, warmup: 3, runtime: 'crun', json: false, check: false, verbose: false });
  const o = parseOptions(['-n', '3', '-k', '2', '--rounds', '9', '--runtime', 'runc', '--json', '--check']);
  assert.equal(o?.iterations, 3);
  assert.equal(o?.rounds, 3, 'no more rounds than iterations');
  assert.equal(o?.runtime, 'runc');
  assert.equal(parseOptions(['--help']), undefined);
  assert.throws(() => parseOptions(['-n', '0']), /--iterations wants an integer >= 1/);
  assert.throws(() => parseOptions(['--runtime', 'youki']), /crun or runc/);
  assert.throws(() => parseOptions(['--bogus']), /Unknown option/);
});

test('chunks split iterations into rounds that differ by at most one', () => {
  assert.deepEqual(chunks(50, 5), [10, 10, 10, 10, 10]);
  assert.deepEqual(chunks(7, 3), [3, 2, 2]);
  assert.deepEqual(chunks(2, 2), [1, 1]);
});

test('a short run measures every part against a real daemon and leaves nothing behind', { skip: process.getuid?.() !== 0 && 'needs root', timeout: 240_000 }, async () => {
  const opts = parseOptions(['-n', '2', '-k', '2', '--rounds', '1', '--warmup', '0'])!;
  const report = await runBenchmark(opts, () => undefined);
  assert.deepEqual(report.errors, {});
  assert.equal(report.api?.n, 2);
  assert.equal(report.cli?.n, 2);
  assert.equal(report.crun?.n, 2);
  assert.equal(report.runc?.n, 2);
  assert.equal(report.apiConnections, 1, 'the API loop keeps one connection alive');
  assert.ok(report.ratios.apiToCrunP50! > 0);
  assert.ok(report.idleRssMB! > 10 && report.idleRssMB! < 1000, `idle RSS ${report.idleRssMB} MB`);
  assert.ok(report.memory!.helpers >= 2, `one monitor per running container, found ${report.memory!.helpers}`);
  assert.ok(report.memory!.helpersRssMB > 0);
  assert.equal(existsSync(report.engineRoot), false, 'the temporary root is removed');
  assert.deepEqual(findProcessesMentioning(report.engineRoot), [], 'no process of the run is left');
  const text = formatReport(report);
  assert.match(text, /\(a\) API create\+start\+wait\+delete\s+\d+\.\d\s+\d+\.\d\s+\d+\.\d\dx/);
  assert.match(text, /daemon idle RSS\s+\d+\.\d\s+<= 60/);
  assert.ok(Array.isArray(missedTargets(report)));
});
