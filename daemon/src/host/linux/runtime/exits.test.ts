import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, utimesSync, writeFileSync, renameSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ExitWatcher, LOST_EXIT_CODE, readExitFile, type ExitSource } from './exits.js';

function source(dir: string, alive: () => boolean = () => true): ExitSource {
  return {
    exitFile: (id) => path.join(dir, id),
    oomFiles: (id) => [path.join(dir, `${id}.oom`)],
    monitorAlive: async () => alive(),
  };
}

test('readExitFile gives the code, the time of the file and the OOM mark', async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'berth-exits-'));
  try {
    const src = source(dir);
    assert.equal(await readExitFile(src, 'c1'), undefined);
    writeFileSync(path.join(dir, 'c1'), '137');
    utimesSync(path.join(dir, 'c1'), 1_700_000_000, 1_700_000_000);
    writeFileSync(path.join(dir, 'c1.oom'), '');
    assert.deepEqual(await readExitFile(src, 'c1'), { exitCode: 137, finishedAtNano: 1_700_000_000_000_000_000n, oomKilled: true });
    writeFileSync(path.join(dir, 'c2'), '-1');
    assert.equal((await readExitFile(src, 'c2'))?.exitCode, LOST_EXIT_CODE);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a wait resolves when conmon renames the exit file into place, and at once for an earlier exit', async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'berth-exits-'));
  const watcher = new ExitWatcher(dir, source(dir));
  try {
    const waiting = watcher.wait('later');
    await new Promise((r) => setTimeout(r, 50));
    writeFileSync(path.join(dir, 'later.TMP123'), '3');
    renameSync(path.join(dir, 'later.TMP123'), path.join(dir, 'later'));
    assert.equal((await waiting).exitCode, 3);
    writeFileSync(path.join(dir, 'before'), '0');
    assert.equal((await watcher.wait('before')).exitCode, 0);
  } finally {
    watcher.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a wait ends with the lost exit code when the monitor is gone without an exit file', async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'berth-exits-'));
  let alive = true;
  const watcher = new ExitWatcher(dir, source(dir, () => alive), 20);
  try {
    const waiting = watcher.wait('vanished');
    await new Promise((r) => setTimeout(r, 60));
    alive = false;
    assert.equal((await waiting).exitCode, LOST_EXIT_CODE);
  } finally {
    watcher.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
