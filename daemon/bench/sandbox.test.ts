import assert from 'node:assert/strict';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { runCommand } from '../test/harness.js';
import { benchPolicy } from './sandbox.js';

test('the benchmark policy: 1,000 rules, the server allowed last by CIDR or by name', () => {
  const byCidr = benchPolicy('172.30.0.0/16') as { defaultAction: string; rules: Array<Record<string, unknown>> };
  const byName = benchPolicy('172.30.0.0/16', 'sbx-server') as typeof byCidr;
  assert.equal(byCidr.rules.length, 1000);
  assert.equal(byCidr.defaultAction, 'deny');
  assert.deepEqual(byCidr.rules.at(-1), { action: 'allow', cidr: '172.30.0.0/16' });
  assert.deepEqual(byName.rules.at(-1), { action: 'allow', domain: 'sbx-server', protocol: 'tcp' });
});

test('a short sandbox benchmark run measures every figure against a real daemon', { skip: process.getuid?.() !== 0 && 'needs root', timeout: 300_000 }, async () => {
  const script = path.join(path.dirname(fileURLToPath(import.meta.url)), 'sandbox.js');
  const run = await runCommand(process.execPath, [script, '--repeat', '1', '--mb', '128', '--connections', '10', '--json'], { timeoutMs: 300_000 });
  assert.equal(run.code, 0, run.stderr);
  const report = JSON.parse(run.stdout);
  assert.equal(report.rules, 1000);
  assert.equal(report.rounds, 1);
  for (const state of ['domain', 'cidr', 'none', 'plain']) {
    assert.ok(report.connectionMs[state] > 0, `connection ${state}`);
    assert.ok(report.throughputMiBs[state] > 0, `throughput ${state}`);
  }
  for (const figures of [report.cidr, report.domain, report.bridged.cidr, report.bridged.domain]) {
    assert.ok(Number.isFinite(figures.addedMs) && figures.ratio > 0, JSON.stringify(figures));
  }
});
