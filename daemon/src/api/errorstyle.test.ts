import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Permission, Principal } from '../engine/auth/store.js';
import { Conflict, InvalidParameter, NotFound } from '../errors.js';
import { errorBody, SCIM_ERROR_SCHEMA } from './httpstatus.js';
import { Router } from './router.js';
import { serveRouter, type TestServer } from './testing.js';

test('error styles: engine, SCIM and control bodies', () => {
  assert.deepEqual(errorBody('engine', 404, 'no such thing'), { body: { message: 'no such thing' }, contentType: 'application/json' });
  assert.deepEqual(errorBody('scim', 404, 'no such user: x'), {
    body: { schemas: [SCIM_ERROR_SCHEMA], status: '404', detail: 'no such user: x' },
    contentType: 'application/scim+json',
  });
  assert.equal((errorBody('scim', 400, 'bad').body as { scimType?: string }).scimType, 'invalidValue');
  const codes = [400, 401, 403, 404, 500].map((s) => (errorBody('control', s, 'm').body as { code: string }).code);
  assert.deepEqual(codes, ['invalidArgument', 'unauthenticated', 'permissionDenied', 'notFound', 'internal']);
  assert.deepEqual(errorBody('control', 404, 'no such sandbox: s').body, { code: 'notFound', message: 'no such sandbox: s', details: [] });
});

describe('unversioned routes, error styles and bearer tokens', () => {
  let plain: TestServer;
  let guarded: TestServer;
  const tokens: Record<string, Permission[]> = {
    scim: ['scimUsersRead'],
    read: ['engineRead'],
    write: ['engineWrite'],
  };
  const verify = async (text: string): Promise<Principal | undefined> => {
    const permissions = tokens[text];
    if (!permissions) return undefined;
    return { user: { id: 'u' } as Principal['user'], token: { id: text, permissions } as Principal['token'] };
  };

  before(async () => {
    const router = new Router()
      .get('/containers/json', (_req, res) => res.json(200, []))
      .post('/containers/create', (_req, res) => res.json(201, { Id: 'x' }))
      .get('/v2/scim/2.0/Users/:id', (req) => {
        if (req.params.id === 'bad') throw new InvalidParameter('invalid user id');
        throw new NotFound(`no such user: ${req.params.id}`);
      }, { unversioned: true, errorStyle: 'scim', permission: 'scimUsersRead' })
      .get('/v1/sandboxes/:sandbox/network-policies', (req) => {
        throw new Conflict(`sandbox ${req.params.sandbox} is busy`);
      }, { unversioned: true, errorStyle: 'control' })
      .get('/v1/open', (req, res) => res.json(200, { path: req.path }), { unversioned: true });
    plain = await serveRouter(router, { auth: { verify, engine: false } });
    guarded = await serveRouter(router, { auth: { verify, engine: true } });
  });
  after(async () => {
    await plain.close();
    await guarded.close();
  });

  test('routes under /v1/ and /v2/ are matched on the whole path, never as engine paths', async () => {
    let r = await plain.request('GET', '/v1/open');
    assert.equal(r.status, 200);
    assert.deepEqual(JSON.parse(r.text), { path: '/v1/open' });
    // Under an engine version prefix these are no routes; an engine path under /v1/ is none either.
    for (const p of ['/v1.44/v1/open', '/v1.44/v2/scim/2.0/Users/x', '/v1/containers/json']) {
      r = await plain.request('GET', p);
      assert.equal(r.status, 404, p);
      assert.equal(JSON.parse(r.text).message, 'page not found');
    }
    // The engine keeps its unprefixed and prefixed paths.
    assert.equal((await plain.request('GET', '/containers/json')).status, 200);
    assert.equal((await plain.request('GET', '/v1.44/containers/json')).status, 200);
  });

  test('a route names its error style: SCIM errors and control errors', async () => {
    let r = await plain.request('GET', '/v2/scim/2.0/Users/nobody', { headers: { Authorization: 'Bearer scim' } });
    assert.equal(r.status, 404);
    assert.equal(r.headers['content-type'], 'application/scim+json');
    assert.deepEqual(JSON.parse(r.text), { schemas: [SCIM_ERROR_SCHEMA], status: '404', detail: 'no such user: nobody' });
    r = await plain.request('GET', '/v2/scim/2.0/Users/bad', { headers: { Authorization: 'Bearer scim' } });
    assert.equal(r.status, 400);
    assert.equal(JSON.parse(r.text).scimType, 'invalidValue');
    // A malformed escape in the path is the client's mistake, in the route's style.
    r = await plain.request('GET', '/v2/scim/2.0/Users/%zz', { headers: { Authorization: 'Bearer scim' } });
    assert.equal(r.status, 400);
    assert.equal(JSON.parse(r.text).status, '400');
    // A method the path lacks is answered in the path's style.
    r = await plain.request('DELETE', '/v2/scim/2.0/Users/nobody');
    assert.equal(r.status, 404);
    assert.deepEqual(JSON.parse(r.text).schemas, [SCIM_ERROR_SCHEMA]);
    r = await plain.request('GET', '/v1/sandboxes/s1/network-policies');
    assert.equal(r.status, 409);
    assert.deepEqual(JSON.parse(r.text), { code: 'failedPrecondition', message: 'sandbox s1 is busy', details: [] });
  });

  test('a route that names a permission: 401 without a valid token, 403 without the permission', async () => {
    for (const headers of [{} as Record<string, string>, { Authorization: 'Bearer nope' }, { Authorization: 'Basic c2NpbQ==' }, { Authorization: 'Bearer' }]) {
      const r = await plain.request('GET', '/v2/scim/2.0/Users/x', { headers });
      assert.equal(r.status, 401, JSON.stringify(headers));
      assert.equal(r.headers['www-authenticate'], 'Bearer realm="berth"');
      const body = JSON.parse(r.text);
      assert.equal(body.status, '401');
      assert.deepEqual(body.schemas, [SCIM_ERROR_SCHEMA]);
    }
    const r = await plain.request('GET', '/v2/scim/2.0/Users/x', { headers: { Authorization: 'Bearer read' } });
    assert.equal(r.status, 403);
    assert.match(JSON.parse(r.text).detail, /scimUsersRead/);
    // Without token authentication, the engine API needs no token.
    assert.equal((await plain.request('POST', '/containers/create')).status, 201);
  });

  test('with token authentication on, engineRead reads, engineWrite writes too', async () => {
    let r = await guarded.request('GET', '/containers/json');
    assert.equal(r.status, 401);
    assert.equal(typeof JSON.parse(r.text).message, 'string');
    r = await guarded.request('GET', '/v1.44/containers/json', { headers: { Authorization: 'Bearer read' } });
    assert.equal(r.status, 200);
    r = await guarded.request('POST', '/containers/create', { headers: { Authorization: 'Bearer read' }, body: '{}' });
    assert.equal(r.status, 403);
    assert.match(JSON.parse(r.text).message, /engineWrite/);
    assert.equal((await guarded.request('POST', '/containers/create', { headers: { Authorization: 'Bearer write' } })).status, 201);
    assert.equal((await guarded.request('GET', '/containers/json', { headers: { Authorization: 'bearer write' } })).status, 200);
    // A token for SCIM only is no engine token.
    assert.equal((await guarded.request('GET', '/containers/json', { headers: { Authorization: 'Bearer scim' } })).status, 403);
  });
});
