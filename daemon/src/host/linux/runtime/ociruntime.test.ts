import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { isUnknownContainer, runtimeUnusableReason } from './ociruntime.js';

function cgroupRoot(controllers: string | undefined): string {
  const root = mkdtempSync(path.join(os.tmpdir(), 'berth-cg-'));
  if (controllers !== undefined) {
    mkdirSync(path.join(root, 'unified'));
    writeFileSync(path.join(root, 'unified', 'cgroup.controllers'), controllers);
  }
  return root;
}

test('crun is unusable on hybrid cgroups with controllers on the cgroup2 side', () => {
  const hybridBusy = cgroupRoot('hugetlb\n');
  const hybridEmpty = cgroupRoot('\n');
  const unified = cgroupRoot(undefined);
  try {
    assert.match(runtimeUnusableReason('crun', hybridBusy)!, /hybrid cgroups.*hugetlb/);
    assert.equal(runtimeUnusableReason('crun', hybridEmpty), undefined);
    assert.equal(runtimeUnusableReason('crun', unified), undefined);
    assert.equal(runtimeUnusableReason('runc', hybridBusy), undefined);
  } finally {
    for (const d of [hybridBusy, hybridEmpty, unified]) rmSync(d, { recursive: true, force: true });
  }
});

test('unknown-container errors of crun and runc are recognised', () => {
  assert.ok(isUnknownContainer('container `abc` does not exist'));
  assert.ok(isUnknownContainer('error reading state: open /run/x/abc/status: No such file or directory'));
  assert.ok(!isUnknownContainer('permission denied'));
});
