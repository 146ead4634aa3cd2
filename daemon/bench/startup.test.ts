import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { test } from 'node:test';
import { findProcessesMentioning } from './procmem.js';
import { formatReport, missedTargets, parseOptions, runBenchmark } from './startup.js';

test('startup flags: defaults, values, and clear errors', () => {
  assert.deepEqual(parseOptions([]), { iterations: 20, containers: 100, running: 20, json: false, check: false, verbose: false });
  const o = parseOptions(['-n', '3', '-c', '5', '-r', '9', '--json']);
  assert.equal(o?.iterations, 3);
  assert.equal(o?.containers, 5);
  assert.equal(o?.running, 5, 'no more running containers than containers');
  assert.equal(parseOptions(['--help']), undefined);
  assert.throws(() => parseOptions(['-n', '0']), /--iterations wants an integer >= 1/);
  assert.throws(() => parseOptions(['--bogus']), /Unknown option/);
});

test('a short start-up run times every spawn of berthd and of the floor and leaves nothing behind', { skip: process.getuid?.() !== 0 && 'needs root', timeout: 240_000 }, async () => {
  const report = await runBenchmark(parseOptions(['-n', '2', '-c', '4', '-r', '2'])!, () => undefined);
  assert.deepEqual(report.errors, {});
  for (const f of [report.restart!, report.firstStart!]) {
    for (const s of [f.ping, f.listed, f.floor]) {
      assert.equal(s.n, 2);
      assert.ok(s.min > 0 && s.max < 30_000, `${s.min}..${s.max} ms`);
    }
    assert.ok(f.listed.min >= f.ping.min, 'the full list comes after the first ping');
    assert.equal(f.ratio, f.ping.p50 / f.floor.p50);
  }
  assert.deepEqual(report.after, { listed: 4, running: 2 }, 'the containers outlived every restart');
  const root = report.engineRoot;
  assert.equal(existsSync(root), false, 'the temporary root is removed');
  assert.deepEqual(findProcessesMentioning(root), [], 'no process of the run is left');
  const text = formatReport(report);
  assert.match(text, /berthd: first \/_ping\s+\d+\.\d\s+\d+\.\d\s+\d+\.\d$/m);
  assert.match(text, /berthd \/ floor at p50: \d+\.\d\dx/);
  assert.ok(Array.isArray(missedTargets(report)));
});
