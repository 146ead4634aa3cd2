import assert from 'node:assert/strict';
import { mkdtempSync, mkdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { expandSource, FolderTree, LayersTree, resolveInTree } from './sources.js';

describe('build sources', () => {
  const root = mkdtempSync(path.join(os.tmpdir(), 'berth-sources-'));
  after(() => rmSync(root, { recursive: true, force: true }));

  it('an image tree never follows a lower layer link that an upper folder hides', async () => {
    const lower = path.join(root, 'lower');
    const upper = path.join(root, 'upper');
    const outside = path.join(root, 'outside');
    mkdirSync(lower, { recursive: true });
    mkdirSync(path.join(upper, 'x'), { recursive: true });
    mkdirSync(outside, { recursive: true });
    writeFileSync(path.join(outside, 'secret'), 'host\n');
    symlinkSync(outside, path.join(lower, 'x'));
    writeFileSync(path.join(lower, 'kept'), 'k');
    const tree = new LayersTree([lower, upper]);
    assert.equal(await tree.lstat('x/secret'), undefined);
    assert.deepEqual(await tree.readdir('x'), []);
    assert.deepEqual(await tree.readdir(''), ['kept', 'x']);
  });

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
