import assert from 'node:assert/strict';
import { mkdtempSync, mkdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { FolderTree } from '../../state/fs-scratch.js';
import { expandSource, resolveInTree } from './sources.js';

describe('build sources', () => {
  const root = mkdtempSync(path.join(os.tmpdir(), 'berth-sources-'));
  after(() => rmSync(root, { recursive: true, force: true }));

  it('context links resolve inside the context; wildcards match names', async () => {
    const ctx = path.join(root, 'ctx');
    mkdirSync(path.join(ctx, 'dir'), { recursive: true });
    writeFileSync(path.join(ctx, 'dir', 'a.txt'), 'a');
    writeFileSync(path.join(ctx, 'dir', 'b.txt'), 'b');
    symlinkSync('/dir', path.join(ctx, 'abs'));
    symlinkSync('../../..', path.join(ctx, 'dir', 'up'));
    const tree = new FolderTree(ctx);
    assert.equal(await resolveInTree(tree, 'abs/a.txt'), 'dir/a.txt');
    assert.equal(await resolveInTree(tree, 'dir/up/dir/b.txt'), 'dir/b.txt');
    assert.deepEqual(await expandSource(tree, 'dir/*.txt'), ['dir/a.txt', 'dir/b.txt']);
    assert.deepEqual(await expandSource(tree, 'dir/?.none'), []);
  });
});
