import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseAuthHeader, parseChallenges } from './auth.js';

describe('registry credentials', () => {
  it('X-Registry-Auth is base64url JSON with username/password or identitytoken', () => {
    const header = Buffer.from(JSON.stringify({ username: 'me', password: 'p?>>', serveraddress: 'r:5000' })).toString('base64url');
    assert.deepEqual(parseAuthHeader(header), { username: 'me', password: 'p?>>', email: undefined, serveraddress: 'r:5000', identitytoken: undefined, registrytoken: undefined });
    const std = Buffer.from(JSON.stringify({ identitytoken: 'tok' })).toString('base64');
    assert.equal(parseAuthHeader(std)?.identitytoken, 'tok');
    assert.equal(parseAuthHeader(Buffer.from('{}').toString('base64')), undefined);
    assert.equal(parseAuthHeader(''), undefined);
    assert.equal(parseAuthHeader(Buffer.from(JSON.stringify({ auth: Buffer.from('u:p:w').toString('base64') })).toString('base64'))?.password, 'p:w');
    assert.throws(() => parseAuthHeader('bm90IGpzb24'), /not base64 encoded JSON/);
  });

  it('WWW-Authenticate challenges', () => {
    assert.deepEqual(parseChallenges('Bearer realm="https://auth.docker.io/token",service="registry.docker.io",scope="repository:library/busybox:pull"'), [
      { scheme: 'bearer', params: { realm: 'https://auth.docker.io/token', service: 'registry.docker.io', scope: 'repository:library/busybox:pull' } },
    ]);
    assert.deepEqual(parseChallenges('Basic realm="Registry Realm"'), [{ scheme: 'basic', params: { realm: 'Registry Realm' } }]);
    assert.deepEqual(parseChallenges(undefined), []);
  });
});
