import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { InvalidParameter } from '../errors.js';
import { familiarString, matchReferencePattern, parseNormalizedNamed, parseReference, referenceString } from './reference.js';

describe('image references', () => {
  const cases: Array<[string, string, string]> = [
    ['busybox', 'docker.io/library/busybox:latest', 'busybox:latest'],
    ['busybox:1.36', 'docker.io/library/busybox:1.36', 'busybox:1.36'],
    ['library/busybox', 'docker.io/library/busybox:latest', 'busybox:latest'],
    ['docker.io/busybox', 'docker.io/library/busybox:latest', 'busybox:latest'],
    ['index.docker.io/me/app', 'docker.io/me/app:latest', 'me/app:latest'],
    ['me/app:v1', 'docker.io/me/app:v1', 'me/app:v1'],
    ['localhost/app', 'localhost/app:latest', 'localhost/app:latest'],
    ['localhost:5000/team/app:1', 'localhost:5000/team/app:1', 'localhost:5000/team/app:1'],
    ['registry.example.com/a/b/c', 'registry.example.com/a/b/c:latest', 'registry.example.com/a/b/c:latest'],
    ['[::1]:5000/app:x', '[::1]:5000/app:x', '[::1]:5000/app:x'],
    [`busybox@sha256:${'a'.repeat(64)}`, `docker.io/library/busybox@sha256:${'a'.repeat(64)}`, `busybox@sha256:${'a'.repeat(64)}`],
    [`app:v1@sha256:${'b'.repeat(64)}`, `docker.io/library/app:v1@sha256:${'b'.repeat(64)}`, `app:v1@sha256:${'b'.repeat(64)}`],
  ];
  for (const [input, full, familiar] of cases) {
    it(`normalises ${input}`, () => {
      const ref = parseNormalizedNamed(input);
      assert.equal(referenceString(ref), full);
      assert.equal(familiarString(ref), familiar);
    });
  }

  it('refuses what Docker refuses', () => {
    for (const bad of ['', 'Busybox', 'upper/Case', 'a:b:c', 'app@sha256:short', 'x/', '-lead', 'a'.repeat(64), `${'n'.repeat(250)}/long`]) {
      assert.throws(() => parseReference(bad), InvalidParameter, bad);
    }
    assert.throws(() => parseReference('Busybox'), /must be lowercase/);
  });

  it('treats a first component with a dot, a port or localhost as a registry, and uppercase there as one', () => {
    assert.equal(parseReference('Registry.Example.com/app').domain, 'Registry.Example.com');
    assert.equal(parseReference('foo/bar').domain, 'docker.io');
  });

  it('matches reference filter patterns against familiar names with and without tag', () => {
    const ref = parseNormalizedNamed('me/app:v1');
    assert.ok(matchReferencePattern('me/app', ref));
    assert.ok(matchReferencePattern('me/*', ref));
    assert.ok(matchReferencePattern('me/app:v*', ref));
    assert.ok(!matchReferencePattern('app', ref));
    assert.ok(!matchReferencePattern('*', ref));
    assert.ok(matchReferencePattern('*', parseNormalizedNamed('busybox')));
  });
});
