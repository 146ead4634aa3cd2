import { test } from 'node:test';
import assert from 'node:assert/strict';
import { LocalSession } from './local-session.js';
import { PERMISSIONS } from './store.js';

test('the local session knows its own token only, and grants it every permission', () => {
  const a = new LocalSession();
  const b = new LocalSession();
  assert.notEqual(a.token, b.token);
  assert.deepEqual(a.verify(a.token)?.token.permissions, [...PERMISSIONS]);
  assert.equal(a.verify(b.token), undefined);
  assert.equal(a.verify(a.token.slice(0, -1)), undefined);
  assert.equal(a.verify(''), undefined);
});
