import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { test } from 'node:test';
import { findProcessesMentioning } from './procmem.js';
import { formatReport, missedTargets, parseOptions, runBenchmark } from './soak.js';

test('soak flags: defaults, values, and clear errors', () => {
  assert.deepEqual(parseOptions([]), { rounds: 10, containers: 200, clients: 8, json: false, check: false, verbose: false });
  const o = parseOptions(['--rounds', '3', '-n', '4', '-c', '9', '--json', '--check']);
  assert.equal(o?.rounds, 3);
  assert.equal(o?.containers, 4);
  assert.equal(o?.clients, 4, 'no more clients than containers');
  assert.equal(parseOptions(['--help']), undefined);
  assert.throws(() => parseOptions(['--rounds', '0']), /--rounds wants an integer >= 1/);
  assert.throws(() => parseOptions(['-n', 'x']), /--containers wants an integer >= 1/);
  assert.throws(() => parseOptions(['--bogus']), /Unknown option/);
});

test('a short soak measures every round against a real daemon and leaves nothing behind', { skip: process.getuid?.() !== 0 && 'needs root', timeout: 240_000 }, async () => {
  const report = await runBenchmark(parseOptions(['--rounds', '2', '-n', '4', '-c', '2'])!, () => undefined);
  assert.deepEqual(report.errors, {});
  assert.ok(report.startRssMB! > 10 && report.startRssMB! < 1000, `start RSS ${report.startRssMB} MB`);
  assert.deepEqual(report.figures.map((f) => f.round), [0, 1, 2]);
  for (const f of report.figures) {
    assert.ok(f.idleRssMB > 10 && f.idleRssMB < 1000, `round ${f.round}: idle RSS ${f.idleRssMB} MB`);
    assert.equal(f.growthMB, f.idleRssMB - report.figures[0]!.idleRssMB);
    if (f.round > 0) {
      assert.ok(f.seconds > 0, `round ${f.round} took time`);
      assert.ok(f.cpuSeconds >= 0, `round ${f.round}: daemon CPU ${f.cpuSeconds} s`);
    }
  }
  assert.equal(report.containersLeft, 0, 'every container of the rounds was removed');
  assert.equal(existsSync(report.engineRoot), false, 'the temporary root is removed');
  assert.deepEqual(findProcessesMentioning(report.engineRoot), [], 'no process of the run is left');
  const text = formatReport(report);
  assert.match(text, /^2\s+\d+\.\d\s+\d+\.\d\s+\d+\.\d\s+[+-]\d+\.\d$/m);
  assert.match(text, /round 2 vs round 0: [+-]\d+\.\d MB \(target at most \+15\)/);
  assert.ok(Array.isArray(missedTargets(report)));
});
