import assert from 'node:assert/strict';
import { mkdtempSync, mkdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { LayersTree } from './tree.js';

describe('layers read as one tree', () => {
  const root = mkdtempSync(path.join(os.tmpdir(), 'berth-tree-'));
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

  it('upper layers hide lower ones, whiteouts delete, and files are read from the layer that holds them', async () => {
    const lower = path.join(root, 'l2');
    const upper = path.join(root, 'u2');
    mkdirSync(path.join(lower, 'etc'), { recursive: true });
    mkdirSync(path.join(upper, 'etc'), { recursive: true });
    writeFileSync(path.join(lower, 'etc', 'passwd'), 'root:x:0:0\n');
    writeFileSync(path.join(lower, 'etc', 'group'), 'root:x:0\n');
    writeFileSync(path.join(upper, 'etc', 'passwd'), 'root:x:0:0\napp:x:10:10\n');
    writeFileSync(path.join(upper, 'etc', '.wh.group'), '');
    const tree = new LayersTree([lower, upper]);
    assert.deepEqual(await tree.readdir('etc'), ['passwd']);
    assert.equal(await tree.lstat('etc/group'), undefined);
    const info = await tree.lstat('etc/passwd');
    assert.equal(info?.type, 'file');
    assert.equal(info?.size, 23);
    const chunks: Buffer[] = [];
    for await (const chunk of await tree.open('etc/passwd')) chunks.push(chunk as Buffer);
    assert.equal(Buffer.concat(chunks).toString(), 'root:x:0:0\napp:x:10:10\n');
    await assert.rejects(tree.open('etc/group'), { name: 'NotFound' });
  });
});
