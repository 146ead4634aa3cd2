import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseReference } from '../../reference.js';
import { domainOfServerAddress, RegistryConfig } from './config.js';
import { pullReference } from './index.js';

describe('registry endpoints', () => {
  it('Docker Hub names go to registry-1.docker.io over https, with the library/ prefix for official images', () => {
    const config = new RegistryConfig();
    const ref = parseReference('busybox');
    assert.equal(ref.domain, 'docker.io');
    assert.equal(ref.path, 'library/busybox');
    assert.deepEqual(config.endpoints(ref.domain), [{ url: 'https://registry-1.docker.io', skipVerify: false, mirror: false }]);
    assert.equal(parseReference('index.docker.io/me/app:v1').path, 'me/app');
    assert.equal(parseReference('docker.io/library/alpine').name, 'docker.io/library/alpine');
  });

  it('mirrors come first for Docker Hub only', () => {
    const config = new RegistryConfig({ mirrors: ['https://mirror.example.com/'] });
    assert.deepEqual(
      config.endpoints('docker.io').map((e) => e.url),
      ['https://mirror.example.com', 'https://registry-1.docker.io'],
    );
    assert.deepEqual(config.endpoints('ghcr.io').map((e) => e.url), ['https://ghcr.io']);
    assert.throws(() => new RegistryConfig({ mirrors: ['ftp://x'] }), /invalid registry mirror/);
  });

  it('loopback is insecure by default (https, then plain http); others only when named', () => {
    const config = new RegistryConfig({ insecure: ['10.1.0.0/16', 'registry.local:5000'] });
    assert.deepEqual(config.endpoints('127.0.0.1:5000').map((e) => e.url), ['https://127.0.0.1:5000', 'http://127.0.0.1:5000']);
    assert.equal(config.isInsecure('localhost:5000'), true);
    assert.equal(config.isInsecure('[::1]:5000'), true);
    assert.equal(config.isInsecure('10.1.2.3:443'), true);
    assert.equal(config.isInsecure('10.2.0.1'), false);
    assert.equal(config.isInsecure('registry.local:5000'), true);
    assert.equal(config.isInsecure('registry.local:6000'), false);
    assert.deepEqual(config.endpoints('example.com').map((e) => e.url), ['https://example.com']);
    assert.deepEqual((config.info() as { InsecureRegistryCIDRs: string[] }).InsecureRegistryCIDRs, ['127.0.0.0/8', '::1/128', '10.1.0.0/16']);
  });

  it('login server addresses name registries as the CLI sends them', () => {
    assert.equal(domainOfServerAddress('https://index.docker.io/v1/'), 'docker.io');
    assert.equal(domainOfServerAddress(undefined), 'docker.io');
    assert.equal(domainOfServerAddress('127.0.0.1:5000'), '127.0.0.1:5000');
    assert.equal(domainOfServerAddress('https://registry.example.com/'), 'registry.example.com');
  });

  it('pull references: tag, digest in the tag parameter, and all tags', () => {
    assert.deepEqual(pullReference('busybox', 'musl').ref.tag, 'musl');
    assert.equal(pullReference('busybox', undefined).allTags, true);
    assert.equal(pullReference('busybox:1.36', undefined).allTags, false);
    const digest = `sha256:${'a'.repeat(64)}`;
    const byDigest = pullReference('busybox', digest).ref;
    assert.equal(byDigest.digest, digest);
    assert.equal(byDigest.tag, undefined);
    assert.throws(() => pullReference('busybox', 'bad tag'), /invalid tag/);
  });
});
