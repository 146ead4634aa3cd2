/**
 * The layers' import rules hold: dependency-cruiser checks daemon/src and renderer/src against
 * .dependency-cruiser.cjs (host never imports engine, api never imports host, the engine imports no fs,
 * child_process or native addon and no Host implementation, the renderer imports neither the daemon nor
 * Electron). Violations that remain are listed in .dependency-cruiser-known-violations.json: a new one
 * fails, and so does a listed one that is gone (the list may only shrink, and must say what is true).
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

/** The repository root (this file runs from daemon/dist/test). */
const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
const CONFIG = '.dependency-cruiser.cjs';
const KNOWN = '.dependency-cruiser-known-violations.json';

interface Violation {
  from: string;
  to: string;
  rule: { name: string; severity: string };
}

const describe = (v: Violation) => `${v.rule.name}: ${v.from} -> ${v.to}`;

function depcruiseBin(): string {
  // The package's entry is <package>/src/main/index.mjs; its command line is <package>/bin.
  const entry = fileURLToPath(import.meta.resolve('dependency-cruiser'));
  return path.join(path.dirname(entry), '..', '..', 'bin', 'dependency-cruise.mjs');
}

test('imports follow the layers (dependency-cruiser)', { timeout: 300_000 }, (t) => {
  const run = spawnSync(process.execPath, [depcruiseBin(), '--config', CONFIG, '--output-type', 'json', 'daemon/src', 'renderer/src'], {
    cwd: ROOT,
    encoding: 'utf8',
    maxBuffer: 512 << 20,
  });
  let result: { summary: { violations: Violation[]; totalCruised: number; totalDependenciesCruised: number } };
  try {
    result = JSON.parse(run.stdout);
  } catch {
    assert.fail(`dependency-cruiser gave no report (exit ${run.status}): ${run.stderr}`);
  }
  const found = result.summary.violations.map(describe).sort();
  const known = (JSON.parse(readFileSync(path.join(ROOT, KNOWN), 'utf8')) as Violation[]).map(describe).sort();
  const knownSet = new Set(known);
  const foundSet = new Set(found);
  const fresh = found.filter((v) => !knownSet.has(v));
  const gone = known.filter((v) => !foundSet.has(v));
  t.diagnostic(
    `${result.summary.totalCruised} modules, ${result.summary.totalDependenciesCruised} dependencies cruised; ` +
      `${found.length} violations, all of them known: ${fresh.length === 0}`,
  );
  for (const v of found) t.diagnostic(`${knownSet.has(v) ? 'known' : 'NEW'} ${v}`);
  assert.deepEqual(fresh, [], `imports that break the layers' rules (${CONFIG}): move the work behind the Host, or the type below both layers`);
  assert.deepEqual(gone, [], `known violations that no longer occur: remove them from ${KNOWN} (e.g. npx depcruise --config ${CONFIG} --output-type baseline daemon/src renderer/src > ${KNOWN})`);
});
