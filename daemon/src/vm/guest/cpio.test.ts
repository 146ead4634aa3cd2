import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { buffer } from 'node:stream/consumers';
import { cpioStream } from './cpio.js';

test('a folder as a newc cpio: parents first, fixed dates, links, same bytes twice', async () => {
  const root = mkdtempSync(path.join(os.tmpdir(), 'berth-cpio-'));
  try {
    await fs.mkdir(path.join(root, 'usr/bin'), { recursive: true });
    await fs.writeFile(path.join(root, 'usr/bin/tool'), 'abc', { mode: 0o755 });
    await fs.symlink('usr/bin', path.join(root, 'bin'));
    await fs.writeFile(path.join(root, 'init'), '#!/bin/sh\n', { mode: 0o700 });
    const a = await buffer(cpioStream(root, 1234));
    await fs.utimes(path.join(root, 'init'), 99, 99);
    const b = await buffer(cpioStream(root, 1234));
    assert.ok(a.equals(b), 'the archive depends on nothing but names, modes and contents');
    const text = a.toString('latin1');
    assert.ok(text.startsWith('070701'));
    const names = [...text.matchAll(/070701[0-9a-f]{104}([^\0]+)\0/g)].map((m) => m[1]);
    assert.deepEqual(names, ['bin', 'init', 'usr', 'usr/bin', 'usr/bin/tool', 'TRAILER!!!']);
    assert.equal(a.length % 4, 0);
    // busybox's cpio reads it back (when present).
    const bb = spawnSync('busybox', ['cpio', '-t'], { input: a, encoding: 'utf8' });
    if (bb.status === 0) assert.deepEqual(bb.stdout.trim().split('\n'), ['bin', 'init', 'usr', 'usr/bin', 'usr/bin/tool']);
  } finally {
    await fs.rm(root, { recursive: true, force: true });
  }
});
