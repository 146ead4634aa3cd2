/**
 * Users and API tokens managed over the daemon's unix socket (`/v1/auth/users`, `/v1/auth/tokens`) by root:
 * every status and body shape, the same store as the `berthd user` and `berthd token` subcommands, tokens
 * shown once and kept hashed; refused to a peer that does not run as root (SO_PEERCRED) and on TCP.
 */
import assert from 'node:assert/strict';
import { chmodSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { Ajv } from 'ajv';
import { BERTHD, runCommand, type Engine } from './harness.js';
import { startTcpEngine, tcpRequest } from './tcp-support.js';

/** One request over the unix socket from a process running as `uid` (its answer's status and body). */
async function requestAs(uid: number, socketPath: string, method: string, urlPath: string, body?: unknown): Promise<{ status: number; body: any }> {
  const script = `
    const http = require('node:http');
    const [socketPath, method, path, body] = process.argv.slice(1);
    const req = http.request({ socketPath, method, path, headers: body ? { 'Content-Type': 'application/json' } : {} }, (res) => {
      let text = '';
      res.on('data', (c) => (text += c));
      res.on('end', () => process.stdout.write(JSON.stringify({ status: res.statusCode, text })));
    });
    req.on('error', (err) => { process.stderr.write(err.message); process.exit(1); });
    req.end(body || undefined);`;
  const child = await runCommand(process.execPath, ['-e', script, socketPath, method, urlPath, body === undefined ? '' : JSON.stringify(body)], { uid, gid: uid });
  assert.equal(child.code, 0, child.stderr);
  const r = JSON.parse(child.stdout) as { status: number; text: string };
  let parsed: unknown;
  try {
    parsed = r.text ? JSON.parse(r.text) : undefined;
  } catch {
    parsed = r.text;
  }
  return { status: r.status, body: parsed };
}

const TIME = '^\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\d(\\.\\d+)?Z$';
const USER_SCHEMA = {
  type: 'object',
  required: ['id', 'userName', 'displayName', 'name', 'emails', 'groups', 'active', 'created', 'lastModified'],
  properties: {
    id: { type: 'string', pattern: '^[0-9a-f-]{36}$' },
    userName: { type: 'string' },
    displayName: { type: 'string' },
    name: { type: 'object', properties: { givenName: { type: 'string' }, familyName: { type: 'string' } }, additionalProperties: false },
    emails: { type: 'array', items: { type: 'object', required: ['value', 'primary'], properties: { value: { type: 'string' }, primary: { type: 'boolean' }, display: { type: 'string' } }, additionalProperties: false } },
    groups: { type: 'array', items: { type: 'object', required: ['value'], properties: { value: { type: 'string' }, display: { type: 'string' } }, additionalProperties: false } },
    active: { type: 'boolean' },
    created: { type: 'string', pattern: TIME },
    lastModified: { type: 'string', pattern: TIME },
  },
  additionalProperties: false,
};
const TOKEN_PROPERTIES = {
  id: { type: 'string', pattern: '^[0-9a-f]{16}$' },
  userId: { type: 'string' },
  userName: { type: 'string' },
  description: { type: 'string' },
  permissions: { type: 'array', minItems: 1, items: { enum: ['engineRead', 'engineWrite', 'networkPoliciesRead', 'networkPoliciesWrite', 'scimUsersRead'] } },
  created: { type: 'string', pattern: TIME },
};
const TOKEN_SCHEMA = { type: 'object', required: Object.keys(TOKEN_PROPERTIES), properties: TOKEN_PROPERTIES, additionalProperties: false };
const NEW_TOKEN_SCHEMA = {
  type: 'object',
  required: [...Object.keys(TOKEN_PROPERTIES), 'token'],
  properties: { ...TOKEN_PROPERTIES, token: { type: 'string', pattern: '^berth_[0-9a-f]{16}_[A-Za-z0-9_-]{43}$' } },
  additionalProperties: false,
};
const ERROR_SCHEMA = {
  type: 'object',
  required: ['code', 'message', 'details'],
  properties: { code: { type: 'string' }, message: { type: 'string', minLength: 1 }, details: { type: 'array' } },
  additionalProperties: false,
};
const ajv = new Ajv({ strict: false });
/** A schema's check, with its errors, that does not narrow the value's type. */
function checker(schema: object): ((data: unknown) => boolean) & { errors?: unknown } {
  const validate = ajv.compile(schema);
  const check = (data: unknown): boolean => {
    const ok = validate(data);
    check.errors = validate.errors;
    return ok;
  };
  check.errors = undefined as unknown;
  return check;
}
const validUser = checker(USER_SCHEMA);
const validToken = checker(TOKEN_SCHEMA);
const validNewToken = checker(NEW_TOKEN_SCHEMA);
const validError = checker(ERROR_SCHEMA);

function expectError(r: { status: number; json?: () => any; body?: any }, status: number, code: string, message?: RegExp): void {
  const body = r.json ? r.json() : r.body;
  assert.equal(r.status, status, JSON.stringify(body));
  assert.ok(validError(body), JSON.stringify(validError.errors));
  assert.equal(body.code, code);
  if (message) assert.match(body.message, message);
}

describe('users and tokens over the unix socket', () => {
  let engine: Engine;
  let port: number;
  before(async () => {
    ({ engine, port } = await startTcpEngine());
  });
  after(async () => {
    await engine?.cleanup();
  });
  const call = (method: string, urlPath: string, body?: unknown, headers: Record<string, string> = {}) => engine.request(method, urlPath, { body, headers });
  const berthd = async (args: string[]) => {
    const r = await runCommand(process.execPath, [BERTHD, ...args, '--data-root', engine.dataRoot], { timeoutMs: 30_000 });
    assert.equal(r.code, 0, r.stderr);
    return r.stdout;
  };

  test('root makes, lists, changes and removes users; errors are {code, message, details}', async () => {
    const made = await call('POST', '/v1/auth/users', { userName: 'bob', displayName: 'Bob B', givenName: 'Bob', familyName: 'B', emails: ['bob@example.com'], groups: ['ops'] });
    assert.equal(made.status, 201, made.text);
    const bob = made.json();
    assert.ok(validUser(bob), JSON.stringify(validUser.errors));
    assert.deepEqual([bob.userName, bob.displayName, bob.name, bob.emails, bob.groups, bob.active], [
      'bob', 'Bob B', { givenName: 'Bob', familyName: 'B' }, [{ value: 'bob@example.com', primary: true }], [{ value: 'ops', display: 'ops' }], true,
    ]);
    // The subcommands see the same store.
    assert.match(await berthd(['user', 'list']), new RegExp(`${bob.id}\\s+bob\\s+Bob B\\s+true`));

    expectError(await call('POST', '/v1/auth/users', { userName: 'bob' }), 409, 'failedPrecondition', /already exists/);
    expectError(await call('POST', '/v1/auth/users', { userName: 'bad name!' }), 400, 'invalidArgument', /invalid user name/);
    expectError(await call('POST', '/v1/auth/users', { displayName: 'x' }), 400, 'invalidArgument', /userName is required/);
    expectError(await call('POST', '/v1/auth/users', { userName: 'x', emails: 'x@example.com' }), 400, 'invalidArgument', /emails must be an array/);
    expectError(await call('POST', '/v1/auth/users', { userName: 'x', emails: ['not-an-address'] }), 400, 'invalidArgument', /invalid email/);
    expectError(await call('POST', '/v1/auth/users', { userName: 'x', role: 'admin' }), 400, 'invalidArgument', /unknown field "role"/);
    expectError(await call('POST', '/v1/auth/users', ['x']), 400, 'invalidArgument', /JSON object/);

    const list = await call('GET', '/v1/auth/users');
    assert.equal(list.status, 200);
    assert.deepEqual(list.json().map((u: { userName: string }) => u.userName), ['bob']);
    for (const u of list.json()) assert.ok(validUser(u), JSON.stringify(validUser.errors));
    for (const ref of [bob.id, 'bob']) {
      const one = await call('GET', `/v1/auth/users/${ref}`);
      assert.equal(one.status, 200);
      assert.deepEqual(one.json(), bob);
    }
    expectError(await call('GET', '/v1/auth/users/nobody'), 404, 'notFound', /no such user: nobody/);

    const changed = await call('PATCH', '/v1/auth/users/bob', { displayName: 'Robert', active: false, groups: [] });
    assert.equal(changed.status, 200, changed.text);
    assert.ok(validUser(changed.json()));
    assert.deepEqual([changed.json().displayName, changed.json().active, changed.json().groups, changed.json().created], ['Robert', false, [], bob.created]);
    assert.ok(Date.parse(changed.json().lastModified) > Date.parse(bob.lastModified));
    expectError(await call('PATCH', '/v1/auth/users/bob', { active: 'no' }), 400, 'invalidArgument', /active must be true or false/);
    expectError(await call('PATCH', '/v1/auth/users/bob', { userName: 'rob' }), 400, 'invalidArgument', /unknown field "userName"/);
    expectError(await call('PATCH', '/v1/auth/users/nobody', { active: true }), 404, 'notFound');
    expectError(await call('PUT', '/v1/auth/users/bob', {}), 404, 'notFound');

    const removed = await call('DELETE', `/v1/auth/users/${bob.id}`);
    assert.equal(removed.status, 204);
    assert.equal(removed.text, '');
    expectError(await call('DELETE', '/v1/auth/users/bob'), 404, 'notFound');
    assert.deepEqual((await call('GET', '/v1/auth/users')).json(), []);
  });

  test('root makes, lists and revokes tokens: the text once, only its hash kept, refused from the next request on', async () => {
    const carol = (await call('POST', '/v1/auth/users', { userName: 'carol' })).json();
    const made = await call('POST', '/v1/auth/tokens', { user: 'carol', permissions: ['scimUsersRead', 'engineRead'], description: 'directory' });
    assert.equal(made.status, 201, made.text);
    const token = made.json();
    assert.ok(validNewToken(token), JSON.stringify(validNewToken.errors));
    assert.deepEqual([token.userId, token.userName, token.permissions, token.description], [carol.id, 'carol', ['scimUsersRead', 'engineRead'], 'directory']);
    assert.ok(token.token.startsWith(`berth_${token.id}_`));
    const scim = () => call('GET', `/v2/scim/2.0/Users/${carol.id}`, undefined, { Authorization: `Bearer ${token.token}` });
    assert.equal((await scim()).status, 200);

    // Listed without its text or hash; by user too. The subcommand lists it.
    const list = await call('GET', '/v1/auth/tokens');
    assert.equal(list.status, 200);
    assert.equal(list.json().length, 1);
    assert.ok(validToken(list.json()[0]), JSON.stringify(validToken.errors));
    assert.ok(!list.text.includes(token.token.slice(23)));
    assert.equal((await call('GET', '/v1/auth/tokens?user=carol')).json().length, 1);
    expectError(await call('GET', '/v1/auth/tokens?user=nobody'), 404, 'notFound');
    assert.match(await berthd(['token', 'list']), new RegExp(`${token.id}\\s+carol\\s+scimUsersRead,engineRead`));
    // Neither the text nor its secret part is anywhere in the data root.
    const files = (dir: string): string[] =>
      readdirSync(dir).flatMap((n) => {
        const f = path.join(dir, n);
        const st = statSync(f);
        return st.isDirectory() ? files(f) : st.isFile() ? [f] : [];
      });
    for (const f of files(engine.dataRoot)) assert.ok(!readFileSync(f).includes(token.token.slice(23)), `${f} holds the token's secret`);

    expectError(await call('POST', '/v1/auth/tokens', { user: 'carol', permissions: ['everything'] }), 400, 'invalidArgument', /unknown permission "everything"/);
    expectError(await call('POST', '/v1/auth/tokens', { user: 'carol' }), 400, 'invalidArgument', /at least one permission/);
    expectError(await call('POST', '/v1/auth/tokens', { permissions: ['engineRead'] }), 400, 'invalidArgument', /user is required/);
    expectError(await call('POST', '/v1/auth/tokens', { user: 'nobody', permissions: ['engineRead'] }), 404, 'notFound', /no such user/);

    const revoked = await call('DELETE', `/v1/auth/tokens/${token.id}`);
    assert.equal(revoked.status, 204);
    assert.equal((await scim()).status, 401);
    expectError(await call('DELETE', `/v1/auth/tokens/${token.id}`), 404, 'notFound', /no such token/);
    assert.deepEqual((await call('GET', '/v1/auth/tokens')).json(), []);

    // A user's removal takes their tokens.
    const other = (await call('POST', '/v1/auth/tokens', { user: carol.id, permissions: ['engineRead'] })).json();
    assert.equal((await call('DELETE', '/v1/auth/users/carol')).status, 204);
    assert.deepEqual((await call('GET', '/v1/auth/tokens')).json(), []);
    assert.ok(other.id);
  });

  test('a peer that does not run as root is refused (403 permissionDenied), whatever its token; so is every TCP client', async () => {
    // The socket reachable by another user for this test (its folder is the test's own).
    chmodSync(engine.root, 0o711);
    chmodSync(engine.socket, 0o666);
    const dave = (await call('POST', '/v1/auth/users', { userName: 'dave' })).json();
    const all = (await call('POST', '/v1/auth/tokens', { user: 'dave', permissions: ['engineWrite', 'networkPoliciesWrite', 'scimUsersRead'] })).json();
    for (const [method, urlPath, body] of [
      ['GET', '/v1/auth/users'],
      ['POST', '/v1/auth/users', { userName: 'mallory' }],
      ['PATCH', `/v1/auth/users/${dave.id}`, { active: false }],
      ['DELETE', `/v1/auth/users/${dave.id}`],
      ['GET', '/v1/auth/tokens'],
      ['POST', '/v1/auth/tokens', { user: 'dave', permissions: ['engineWrite'] }],
      ['DELETE', `/v1/auth/tokens/${all.id}`],
    ] as Array<[string, string, unknown?]>) {
      const r = await requestAs(65534, engine.socket, method, urlPath, body);
      expectError(r, 403, 'permissionDenied', /only root/);
      const tcp = await tcpRequest(port, method, urlPath, { Authorization: `Bearer ${all.token}`, 'Content-Type': 'application/json' }, body === undefined ? undefined : JSON.stringify(body));
      expectError(tcp, 403, 'permissionDenied', /unix socket only/);
    }
    // Nothing changed; the engine API stays open to that peer as the socket's mode allows.
    assert.deepEqual((await call('GET', '/v1/auth/users')).json().map((u: { userName: string }) => u.userName), ['dave']);
    assert.equal((await call('GET', '/v1/auth/tokens')).json().length, 1);
    assert.equal((await requestAs(65534, engine.socket, 'GET', '/_ping')).status, 200);
  });
});
