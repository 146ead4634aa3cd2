import assert from 'node:assert/strict';
import { mkdtempSync, promises as fs, rmSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import { FsStateStore } from './fs.js';
import { readJSON, writeJSON } from './state.js';

const roots: string[] = [];
after(() => roots.forEach((r) => rmSync(r, { recursive: true, force: true })));

function store(): FsStateStore {
  const root = mkdtempSync(path.join(os.tmpdir(), 'berth-state-'));
  roots.push(root);
  return new FsStateStore(root);
}

test('records are written atomically, read back, listed and removed', async () => {
  const state = store();
  assert.equal(await state.read('thing/a.json'), undefined);
  assert.deepEqual(await state.list('thing'), []);
  assert.equal(statSync(path.join(state.root, 'thing')).mode & 0o777, 0o700);
  await writeJSON(state, 'thing/a.json', { a: 1 });
  await writeJSON(state, 'thing/a.json', { a: 2 }, { durable: false });
  assert.deepEqual(await readJSON(state, 'thing/a.json'), { a: 2 });
  assert.equal(statSync(path.join(state.root, 'thing/a.json')).mode & 0o777, 0o600);
  assert.deepEqual(await state.list('thing'), ['a.json'], 'no temporary file is left beside it');
  await state.remove('thing/a.json');
  await state.remove('thing/a.json');
  assert.deepEqual(await state.list('thing'), []);
});

test('create makes a new record once, in a folder made for it', async () => {
  const state = store();
  await state.makeFolder('c');
  await state.create('c/1/record.json', 'one', { dirMode: 0o710 });
  assert.equal((await state.read('c/1/record.json'))?.toString(), 'one');
  assert.equal(statSync(path.join(state.root, 'c/1')).mode & 0o777, 0o710);
  await assert.rejects(state.create('c/1/record.json', 'two'), (err: NodeJS.ErrnoException) => err.code === 'EEXIST');
});

test('rename moves a folder aside and answers false for a missing one; remove takes a folder whole', async () => {
  const state = store();
  await state.makeFolder('c');
  await state.create('c/1/record.json', 'one');
  assert.equal(await state.rename('c/1', 'c/.removing-1'), true);
  assert.equal(await state.rename('c/1', 'c/.removing-1'), false);
  assert.deepEqual(await state.list('c'), ['.removing-1']);
  await state.remove('c/.removing-1');
  assert.deepEqual(await state.list('c'), []);
});

test('stamps change with the content; a missing record has its own', async () => {
  const state = store();
  assert.equal(await state.stamp('s.json'), 'missing');
  await state.write('s.json', 'a');
  const first = await state.stamp('s.json');
  await state.write('s.json', 'bb');
  assert.notEqual(await state.stamp('s.json'), first);
});

test('a lock is held until released, and one whose owner is gone is taken over', async () => {
  const state = store();
  const release = await state.lock('l.lock');
  await assert.rejects(state.lock('l.lock', { timeoutMs: 50 }), /held by process/);
  await release();
  (await state.lock('l.lock'))();
  await fs.writeFile(path.join(state.root, 'l.lock'), '999999999\n');
  await (await state.lock('l.lock', { timeoutMs: 50 }))();
});

test('a name that leaves the root is refused', async () => {
  const state = store();
  await assert.rejects(state.read('../outside'), /leaves/);
  await assert.rejects(state.write('a/../../outside', 'x'), /leaves/);
});
