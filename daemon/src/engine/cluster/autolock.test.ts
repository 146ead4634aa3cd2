import assert from 'node:assert/strict';
import { test } from 'node:test';
import { isLocked, lockKeys, unlockKeys } from './autolock.js';
import { newDataKey } from './crypt.js';
import { newUnlockKey } from './tokens.js';

const certs = {
  ca: '-----BEGIN CERTIFICATE-----\nCA\n-----END CERTIFICATE-----\n',
  cert: '-----BEGIN CERTIFICATE-----\nNODE\n-----END CERTIFICATE-----\n',
  key: '-----BEGIN PRIVATE KEY-----\nSECRET\n-----END PRIVATE KEY-----\n',
  caKey: '-----BEGIN PRIVATE KEY-----\nCA-SECRET\n-----END PRIVATE KEY-----\n',
  dataKey: newDataKey(),
};

test('autolock: the keys are sealed under the unlock key, the certificates stay in clear', () => {
  const key = newUnlockKey();
  const locked = lockKeys(certs, key);
  assert.ok(isLocked(locked));
  assert.ok(!isLocked(certs));
  assert.equal(locked.ca, certs.ca);
  assert.equal(locked.cert, certs.cert);
  for (const k of ['key', 'caKey', 'dataKey'] as const) {
    assert.ok(locked[k]!.startsWith('berth-locked:'));
    assert.ok(!locked[k]!.includes(certs[k]));
  }
  assert.deepEqual(unlockKeys(locked, key), certs);
  assert.deepEqual(unlockKeys(locked, `  ${key}\n`), certs);
  // A worker's keys (no CA key, no data key) round-trip too.
  const worker = { ca: certs.ca, cert: certs.cert, key: certs.key };
  assert.deepEqual(unlockKeys(lockKeys(worker, key), key), { ...worker, caKey: undefined, dataKey: undefined });
});

test('autolock: another key, or no key at all, is refused with Docker\'s messages', () => {
  const locked = lockKeys(certs, newUnlockKey());
  assert.throws(() => unlockKeys(locked, newUnlockKey()), /swarm could not be unlocked: invalid key provided/);
  assert.throws(() => unlockKeys(locked, 'SWMKEY-1-short'), /invalid key string/);
  assert.throws(() => unlockKeys(locked, 'not a key'), /invalid key string/);
});
