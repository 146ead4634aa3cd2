import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Permission, Principal } from '../engine/auth/store.js';
import { InvalidParameter, NotFound } from '../errors.js';
import { Router } from './router.js';
import { registerSandboxRoutes, type SandboxPolicies } from './sandbox.js';
import { serveRouter, type TestServer } from './testing.js';

/** A fake engine side: one sandbox `s1` with a policy; `rules` must be a list. */
class FakePolicies implements SandboxPolicies {
  readonly installed = new Map<string, unknown>([['s1', { rules: [] }]]);
  async view(ref: string): Promise<unknown> {
    const policy = this.installed.get(ref);
    if (!policy) throw new NotFound(`no such sandbox: ${ref}`);
    return { effective: policy, exact: policy };
  }
  async install(ref: string, policy: unknown): Promise<unknown> {
    if (!this.installed.has(ref)) throw new NotFound(`no such sandbox: ${ref}`);
    if (!Array.isArray((policy as { rules?: unknown }).rules)) throw new InvalidParameter('rules must be a list');
    this.installed.set(ref, policy);
    return this.view(ref);
  }
}

describe('sandbox network policies', () => {
  let api: TestServer;
  const fake = new FakePolicies();
  const tokens: Record<string, Permission[]> = {
    read: ['networkPoliciesRead'],
    write: ['networkPoliciesWrite'],
    engine: ['engineWrite'],
  };
  const verify = async (text: string): Promise<Principal | undefined> =>
    tokens[text] ? { user: { id: 'u' } as Principal['user'], token: { id: text, permissions: tokens[text] } as Principal['token'] } : undefined;
  const as = (token: string) => ({ Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' });

  before(async () => {
    const router = new Router();
    registerSandboxRoutes(router, fake);
    api = await serveRouter(router, { auth: { verify, engine: false } });
  });
  after(() => api.close());

  test('GET needs networkPoliciesRead and answers the installed policy', async () => {
    let r = await api.request('GET', '/v1/sandboxes/s1/network-policies', { headers: as('read') });
    assert.equal(r.status, 200);
    assert.deepEqual(JSON.parse(r.text), { effective: { rules: [] }, exact: { rules: [] } });
    r = await api.request('GET', '/v1/sandboxes/s1/network-policies');
    assert.equal(r.status, 401);
    assert.equal(JSON.parse(r.text).code, 'unauthenticated');
    for (const token of ['write', 'engine']) {
      r = await api.request('GET', '/v1/sandboxes/s1/network-policies', { headers: as(token) });
      assert.equal(r.status, 403);
      assert.equal(JSON.parse(r.text).code, 'permissionDenied');
    }
    r = await api.request('GET', '/v1/sandboxes/nope/network-policies', { headers: as('read') });
    assert.equal(r.status, 404);
    assert.deepEqual(JSON.parse(r.text), { code: 'notFound', message: 'no such sandbox: nope', details: [] });
  });

  test('PUT needs networkPoliciesWrite; a bad policy or body is invalidArgument', async () => {
    const policy = JSON.stringify({ rules: [{ allow: 'example.com' }] });
    let r = await api.request('PUT', '/v1/sandboxes/s1/network-policies', { headers: as('read'), body: policy });
    assert.equal(r.status, 403);
    assert.equal(JSON.parse(r.text).code, 'permissionDenied');
    r = await api.request('PUT', '/v1/sandboxes/s1/network-policies', { headers: as('write'), body: policy });
    assert.equal(r.status, 200, r.text);
    assert.deepEqual(fake.installed.get('s1'), { rules: [{ allow: 'example.com' }] });
    for (const body of ['{"rules": 1}', '{not json', '', '[]']) {
      r = await api.request('PUT', '/v1/sandboxes/s1/network-policies', { headers: as('write'), body });
      assert.equal(r.status, 400, body);
      assert.equal(JSON.parse(r.text).code, 'invalidArgument', body);
    }
    r = await api.request('PUT', '/v1/sandboxes/nope/network-policies', { headers: as('write'), body: policy });
    assert.equal(r.status, 404);
    assert.equal(JSON.parse(r.text).code, 'notFound');
    assert.deepEqual(fake.installed.get('s1'), { rules: [{ allow: 'example.com' }] });
  });
});
