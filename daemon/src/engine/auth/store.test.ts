import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import { Conflict, InvalidParameter, NotFound } from '../../errors.js';
import { AuthStoreReader, AuthStoreWriter, parsePermissions, storeFile } from './store.js';
import { FsStateStore } from '../../state/fs.js';

const roots: string[] = [];
after(() => roots.forEach((r) => rmSync(r, { recursive: true, force: true })));
function dataRoot(): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'berth-auth-'));
  roots.push(dir);
  return dir;
}

test('auth store: users are added with their SCIM fields, names are unique, removal takes their tokens', async () => {
  const root = dataRoot();
  const writer = new AuthStoreWriter(new FsStateStore(root), () => new Date('2026-01-02T03:04:05.000Z'));
  const alice = await writer.addUser({ userName: 'alice', displayName: 'Alice A', givenName: 'Alice', familyName: 'A', emails: ['a@example.com', 'alice@example.org'], groups: ['ops'] });
  assert.match(alice.id, /^[0-9a-f-]{36}$/);
  assert.deepEqual(alice.emails, [{ value: 'a@example.com', primary: true }, { value: 'alice@example.org', primary: false }]);
  assert.deepEqual(alice.groups, [{ value: 'ops', display: 'ops' }]);
  assert.equal(alice.active, true);
  assert.equal(alice.created, '2026-01-02T03:04:05.000Z');
  await assert.rejects(writer.addUser({ userName: 'alice' }), Conflict);
  await assert.rejects(writer.addUser({ userName: 'bad name' }), InvalidParameter);
  await assert.rejects(writer.addUser({ userName: 'bob', emails: ['nope'] }), InvalidParameter);

  await writer.createToken('alice', ['scimUsersRead']);
  const bob = await writer.addUser({ userName: 'bob' });
  await writer.createToken(bob.id, ['engineRead']);
  assert.equal((await writer.listTokens()).length, 2);
  await writer.removeUser(alice.id);
  assert.deepEqual((await writer.listUsers()).map((u) => u.userName), ['bob']);
  assert.deepEqual((await writer.listTokens()).map((t) => t.userId), [bob.id]);
  await assert.rejects(writer.removeUser('alice'), NotFound);
  // The store is private to root and no temporary or lock file stays behind.
  assert.equal(statSync(storeFile(root)).mode & 0o777, 0o600);
  assert.deepEqual(readdirSync(path.dirname(storeFile(root))), ['store.json']);
});

test('auth store: a token is shown once, stored as its SHA-256 only, checked and revoked', async () => {
  const root = dataRoot();
  const writer = new AuthStoreWriter(new FsStateStore(root));
  const reader = new AuthStoreReader(new FsStateStore(root));
  await writer.addUser({ userName: 'carol' });
  const { token, text } = await writer.createToken('carol', ['networkPoliciesRead', 'scimUsersRead'], 'dashboard');
  assert.match(text, /^berth_[0-9a-f]{16}_[A-Za-z0-9_-]{43}$/);
  assert.ok(text.includes(token.id));
  const stored = readFileSync(storeFile(root), 'utf8');
  assert.ok(!stored.includes(text.slice(23)), 'the secret part is not in the store');
  assert.equal(JSON.parse(stored).tokens[0].sha256, createHash('sha256').update(text).digest('hex'));
  assert.equal(JSON.parse(stored).version, 1);

  const principal = await reader.verify(text);
  assert.equal(principal?.user.userName, 'carol');
  assert.deepEqual(principal?.token.permissions, ['networkPoliciesRead', 'scimUsersRead']);
  // One character changed, a truncated token, another prefix: refused.
  const last = text.at(-1) === 'A' ? 'B' : 'A';
  assert.equal(await reader.verify(text.slice(0, -1) + last), undefined);
  assert.equal(await reader.verify(text.slice(0, -1)), undefined);
  assert.equal(await reader.verify(text.replace('berth_', 'other_')), undefined);
  assert.equal(await reader.verify(''), undefined);

  // The reader sees the writer's changes at its next check.
  await writer.revokeToken(token.id);
  assert.equal(await reader.verify(text), undefined);
  await assert.rejects(writer.revokeToken(token.id), NotFound);
  const again = await writer.createToken('carol', ['engineWrite']);
  assert.equal((await reader.verify(again.text))?.token.id, again.token.id);
});

test('auth store: an inactive user\'s tokens are refused; permissions are checked by name', async () => {
  const root = dataRoot();
  const writer = new AuthStoreWriter(new FsStateStore(root));
  await writer.addUser({ userName: 'dave', active: false });
  const { text } = await writer.createToken('dave', ['engineRead']);
  assert.equal(await new AuthStoreReader(new FsStateStore(root)).verify(text), undefined);
  assert.deepEqual(parsePermissions(['engineRead,scimUsersRead', 'engineRead']), ['engineRead', 'scimUsersRead']);
  assert.throws(() => parsePermissions(['everything']), InvalidParameter);
  assert.throws(() => parsePermissions([]), InvalidParameter);
  await assert.rejects(writer.createToken('nobody', ['engineRead']), NotFound);
});

test('auth store: a user\'s fields are changed, lastModified moves on, deactivation refuses their tokens', async () => {
  const root = dataRoot();
  let now = new Date('2026-01-02T00:00:00.000Z');
  const writer = new AuthStoreWriter(new FsStateStore(root), () => now);
  const reader = new AuthStoreReader(new FsStateStore(root));
  const erin = await writer.addUser({ userName: 'erin', emails: ['e@example.com'] });
  const { text } = await writer.createToken('erin', ['scimUsersRead']);
  assert.ok(await reader.verify(text));
  now = new Date('2026-01-03T00:00:00.000Z');
  const changed = await writer.updateUser('erin', { displayName: 'Erin E', groups: ['a', 'b'], active: false });
  assert.equal(changed.displayName, 'Erin E');
  assert.deepEqual(changed.emails, erin.emails);
  assert.deepEqual(changed.groups.map((g) => g.value), ['a', 'b']);
  assert.equal(changed.created, '2026-01-02T00:00:00.000Z');
  assert.equal(changed.lastModified, '2026-01-03T00:00:00.000Z');
  assert.equal(await reader.verify(text), undefined);
  // The clock standing still still moves lastModified on.
  const again = await writer.updateUser(erin.id, { active: true });
  assert.ok(again.lastModified > changed.lastModified);
  assert.equal((await reader.user(erin.id))?.active, true);
  assert.ok(await reader.verify(text));
  await assert.rejects(writer.updateUser('erin', { emails: ['bad'] }), InvalidParameter);
});

test('auth store: concurrent writers do not lose each other\'s changes', async () => {
  const root = dataRoot();
  const writers = [new AuthStoreWriter(new FsStateStore(root)), new AuthStoreWriter(new FsStateStore(root)), new AuthStoreWriter(new FsStateStore(root))];
  await Promise.all(Array.from({ length: 12 }, (_, i) => writers[i % 3]!.addUser({ userName: `user${i}` })));
  assert.equal((await writers[0]!.listUsers()).length, 12);
});
