import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { CredentialStore, registryAuthHeader, registryOfImage } from '../src/credentials.js';
import { fakeSafeStorage } from './fakes.js';

function tmp(): string {
  return mkdtempSync(path.join(os.tmpdir(), 'berth-creds-'));
}

describe('registry credentials', () => {
  it('keeps the password encrypted on disk, lists logins without it, and decrypts it for a registry', async () => {
    const dir = tmp();
    try {
      const file = path.join(dir, 'registries.json');
      const safe = fakeSafeStorage();
      const store = new CredentialStore(file, safe);
      await store.load();
      await store.save({ serveraddress: 'localhost:5000', username: 'ann', password: 's3cret-pass' });
      await store.save({ serveraddress: 'https://index.docker.io/v1/', username: 'bob', password: 'hub-pass' });
      const onDisk = readFileSync(file, 'utf8');
      assert.doesNotMatch(onDisk, /s3cret-pass|hub-pass/);
      assert.doesNotMatch(Buffer.from(onDisk).toString('base64'), /s3cret/);
      assert.equal(JSON.parse(onDisk).version, 1);
      assert.deepEqual(store.list(), [
        { serveraddress: 'localhost:5000', username: 'ann' },
        { serveraddress: 'https://index.docker.io/v1/', username: 'bob' },
      ]);
      assert.equal(JSON.stringify(store.list()).includes('pass'), false);

      const again = new CredentialStore(file, safe);
      await again.load();
      assert.equal(again.credentialsFor('localhost:5000')?.password, 's3cret-pass');
      assert.equal(again.credentialsFor(registryOfImage('busybox'))?.username, 'bob');
      assert.equal(again.credentialsFor(registryOfImage('localhost:5000/team/app:1'))?.username, 'ann');
      assert.equal(again.credentialsFor('other.example:443'), undefined);
      const header = JSON.parse(Buffer.from(registryAuthHeader(again.credentialsFor('localhost:5000')!), 'base64url').toString());
      assert.deepEqual(header, { username: 'ann', password: 's3cret-pass', serveraddress: 'localhost:5000' });

      // Another key (another user's keychain) cannot read them.
      const stranger = new CredentialStore(file, fakeSafeStorage());
      await stranger.load();
      assert.equal(stranger.credentialsFor('localhost:5000'), undefined);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('replaces the login of the same registry, and removes one', async () => {
    const dir = tmp();
    try {
      const store = new CredentialStore(path.join(dir, 'registries.json'), fakeSafeStorage());
      await store.load();
      await store.save({ serveraddress: 'localhost:5000', username: 'ann', password: 'one' });
      await store.save({ serveraddress: 'http://LOCALHOST:5000/', username: 'ann2', password: 'two' });
      assert.deepEqual(store.list(), [{ serveraddress: 'http://LOCALHOST:5000/', username: 'ann2' }]);
      assert.equal(await store.remove('localhost:5000'), true);
      assert.deepEqual(store.list(), []);
      assert.equal(await store.remove('localhost:5000'), false);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('refuses to keep a password without a keychain: no encryption, or the basic_text fallback', async () => {
    for (const safe of [fakeSafeStorage({ available: false }), fakeSafeStorage({ backend: 'basic_text' })]) {
      const dir = tmp();
      try {
        const file = path.join(dir, 'registries.json');
        const store = new CredentialStore(file, safe);
        await store.load();
        assert.equal(store.available, false);
        await assert.rejects(store.save({ serveraddress: 'localhost:5000', username: 'ann', password: 'clear?' }), /no OS keychain/);
        assert.equal(safe.calls, 0);
        assert.throws(() => readFileSync(file), /ENOENT/);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    }
  });
});
