/**
 * Users and API tokens: made, listed and revoked with the `berthd user` and `berthd token` subcommands on a
 * running daemon's data root; the SCIM user lookup and its errors over the unix socket and a TCP listener;
 * `--auth-tokens` holding the engine API on TCP to bearer tokens while the unix socket stays open to root.
 */
import assert from 'node:assert/strict';
import { mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { Ajv } from 'ajv';
import { BERTHD, runCommand, type Engine, type HttpResult } from './harness.js';
import { startTcpEngine, tcpRequest } from './tcp-support.js';

/** Every file's bytes under a folder (the data root is small here: no image is loaded). */
function filesUnder(dir: string): Array<{ file: string; bytes: Buffer }> {
  const out: Array<{ file: string; bytes: Buffer }> = [];
  for (const name of readdirSync(dir)) {
    const file = path.join(dir, name);
    const st = statSync(file);
    if (st.isDirectory()) out.push(...filesUnder(file));
    else if (st.isFile()) out.push({ file, bytes: readFileSync(file) });
  }
  return out;
}

/** The SCIM user of the spec's table (RFC 7643 core schema), as a JSON schema. */
const SCIM_USER_SCHEMA = {
  type: 'object',
  required: ['schemas', 'id', 'userName', 'meta'],
  properties: {
    schemas: { type: 'array', items: { type: 'string' }, contains: { const: 'urn:ietf:params:scim:schemas:core:2.0:User' } },
    id: { type: 'string' },
    userName: { type: 'string' },
    displayName: { type: 'string' },
    active: { type: 'boolean' },
    name: { type: 'object', properties: { familyName: { type: 'string' }, givenName: { type: 'string' } }, additionalProperties: false },
    emails: {
      type: 'array',
      items: { type: 'object', properties: { display: { type: 'string' }, primary: { type: 'boolean' }, value: { type: 'string' } }, additionalProperties: false },
    },
    groups: { type: 'array', items: { type: 'object', properties: { display: { type: 'string' }, value: { type: 'string' } }, additionalProperties: false } },
    meta: {
      type: 'object',
      required: ['created', 'lastModified', 'location', 'resourceType'],
      properties: {
        created: { type: 'string', pattern: '^\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\d(\\.\\d+)?(Z|[+-]\\d\\d:\\d\\d)$' },
        lastModified: { type: 'string', pattern: '^\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\d(\\.\\d+)?(Z|[+-]\\d\\d:\\d\\d)$' },
        location: { type: 'string', pattern: '^https?://' },
        resourceType: { const: 'User' },
      },
      additionalProperties: false,
    },
  },
  additionalProperties: false,
};

const SCIM_ERROR_SCHEMA = {
  type: 'object',
  required: ['schemas', 'status'],
  properties: {
    schemas: { type: 'array', items: { type: 'string' }, contains: { const: 'urn:ietf:params:scim:api:messages:2.0:Error' } },
    status: { type: 'string', pattern: '^[1-5]\\d\\d$' },
    scimType: { type: 'string' },
    detail: { type: 'string' },
  },
  additionalProperties: false,
};

const ajv = new Ajv({ strict: false });
const validUser = ajv.compile(SCIM_USER_SCHEMA);
const validError = ajv.compile(SCIM_ERROR_SCHEMA);

function expectScimError(r: HttpResult, status: number): void {
  assert.equal(r.status, status, r.text);
  assert.equal(r.headers['content-type'], 'application/scim+json');
  const body = r.json();
  assert.ok(validError(body), JSON.stringify(validError.errors));
  assert.equal(body.status, String(status));
}

describe('users, API tokens and the SCIM user lookup', () => {
  let engine: Engine;
  let port: number;
  let aliceId: string;
  let scimToken: string;
  let scimTokenId: string;
  let readToken: string;

  async function berthd(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
    return runCommand(process.execPath, [BERTHD, ...args, '--data-root', engine.dataRoot], { timeoutMs: 30_000 });
  }
  async function berthdOk(args: string[]): Promise<string> {
    const r = await berthd(args);
    assert.equal(r.code, 0, `berthd ${args.join(' ')}: ${r.stderr}`);
    return r.stdout;
  }
  const bearer = (token: string) => ({ Authorization: `Bearer ${token}` });

  before(async () => {
    ({ engine, port } = await startTcpEngine(['--auth-tokens']));
  });
  after(async () => {
    await engine?.cleanup();
  });

  test('the subcommands add a user and make tokens on a running daemon\'s data root; a token is shown once and stored hashed', async () => {
    aliceId = (await berthdOk(['user', 'add', 'alice', '--display-name', 'Alice Liddell', '--given-name', 'Alice', '--family-name', 'Liddell',
      '--email', 'alice@example.com', '--group', 'readers'])).trim();
    assert.match(aliceId, /^[0-9a-f-]{36}$/);
    const users = await berthdOk(['user', 'list']);
    assert.match(users, new RegExp(`${aliceId}\\s+alice\\s+Alice Liddell\\s+true`));
    const dup = await berthd(['user', 'add', 'alice']);
    assert.equal(dup.code, 1);
    assert.match(dup.stderr, /already exists/);

    const made = await berthd(['token', 'create', 'alice', '--permission', 'scimUsersRead', '--description', 'directory sync']);
    assert.equal(made.code, 0, made.stderr);
    scimToken = made.stdout.trim();
    assert.match(scimToken, /^berth_[0-9a-f]{16}_[A-Za-z0-9_-]{43}$/);
    scimTokenId = /^berth_([0-9a-f]{16})_/.exec(scimToken)![1]!;
    assert.match(made.stderr, /only time/);
    readToken = (await berthdOk(['token', 'create', aliceId, '--permission', 'engineRead'])).trim();
    assert.notEqual(readToken, scimToken);

    const bad = await berthd(['token', 'create', 'alice', '--permission', 'everything']);
    assert.equal(bad.code, 1);
    assert.match(bad.stderr, /unknown permission "everything"/);
    assert.equal((await berthd(['token', 'create', 'nobody', '--permission', 'engineRead'])).code, 1);

    // Listed by id, permissions and description, never with their text or hash.
    const list = await berthdOk(['token', 'list']);
    assert.match(list, new RegExp(`${scimTokenId}\\s+alice\\s+scimUsersRead\\s+\\S+\\s+directory sync`));
    assert.equal(list.split('\n').filter(Boolean).length, 3);
    const json = JSON.parse(await berthdOk(['token', 'list', 'alice', '--json'])) as Array<Record<string, unknown>>;
    assert.equal(json.length, 2);
    for (const t of json) assert.equal(t.sha256, undefined);
    for (const text of [list, JSON.stringify(json)]) {
      assert.ok(!text.includes(scimToken.slice(23)) && !text.includes(readToken.slice(23)));
    }

    // Neither token's text, nor its secret part, is anywhere in the data root.
    for (const { file, bytes } of filesUnder(engine.dataRoot)) {
      for (const token of [scimToken, readToken]) {
        assert.ok(!bytes.includes(token.slice(23)), `${file} holds a token's secret`);
      }
    }
    const store = path.join(engine.dataRoot, 'auth', 'store.json');
    assert.equal(statSync(store).mode & 0o777, 0o600);
  });

  test('GET /v2/scim/2.0/Users/{id}: the user in the SCIM core schema, over the unix socket and TCP', async () => {
    for (const via of ['unix', 'tcp'] as const) {
      const r = via === 'unix'
        ? await engine.request('GET', `/v2/scim/2.0/Users/${aliceId}`, { headers: bearer(scimToken) })
        : await tcpRequest(port, 'GET', `/v2/scim/2.0/Users/${aliceId}`, bearer(scimToken));
      assert.equal(r.status, 200, `${via}: ${r.text}`);
      assert.equal(r.headers['content-type'], 'application/scim+json');
      const user = r.json();
      assert.ok(validUser(r.json()), JSON.stringify(validUser.errors));
      assert.equal(user.id, aliceId);
      assert.equal(user.userName, 'alice');
      assert.equal(user.displayName, 'Alice Liddell');
      assert.equal(user.active, true);
      assert.deepEqual(user.name, { familyName: 'Liddell', givenName: 'Alice' });
      assert.deepEqual(user.emails, [{ display: 'alice@example.com', primary: true, value: 'alice@example.com' }]);
      assert.deepEqual(user.groups, [{ display: 'readers', value: 'readers' }]);
      assert.equal(user.meta.created, user.meta.lastModified);
      const expected = via === 'tcp' ? `http://127.0.0.1:${port}/v2/scim/2.0/Users/${aliceId}` : `http://localhost/v2/scim/2.0/Users/${aliceId}`;
      assert.equal(user.meta.location, expected);
    }
    // A change of the user shows at once, with its lastModified.
    await berthdOk(['user', 'set', 'alice', '--display-name', 'Alice L.', '--email', 'al@example.org', '--email', 'alice@example.com']);
    const changed = (await engine.request('GET', `/v2/scim/2.0/Users/${aliceId}`, { headers: bearer(scimToken) })).json();
    assert.equal(changed.displayName, 'Alice L.');
    assert.deepEqual(changed.emails.map((e: { value: string; primary: boolean }) => [e.value, e.primary]), [['al@example.org', true], ['alice@example.com', false]]);
    assert.ok(Date.parse(changed.meta.lastModified) > Date.parse(changed.meta.created));
    assert.equal((await berthd(['user', 'set', 'alice', '--active', 'maybe'])).code, 2);
    // The SCIM path is not an engine path under a version prefix.
    const prefixed = await engine.request('GET', `/v1.44/v2/scim/2.0/Users/${aliceId}`, { headers: bearer(scimToken) });
    assert.equal(prefixed.status, 404);
  });

  test('SCIM errors: 401 without a token, with a wrong one and a revoked one; 403 without scimUsersRead; 404 for an unknown user', async () => {
    const userPath = `/v2/scim/2.0/Users/${aliceId}`;
    let r = await engine.request('GET', userPath);
    expectScimError(r, 401);
    assert.equal(r.headers['www-authenticate'], 'Bearer realm="berth"');
    const forged = scimToken.slice(0, -4) + (scimToken.endsWith('AAAA') ? 'BBBB' : 'AAAA');
    expectScimError(await engine.request('GET', userPath, { headers: bearer(forged) }), 401);
    expectScimError(await tcpRequest(port, 'GET', userPath, bearer('berth_not-a-token')), 401);
    r = await engine.request('GET', userPath, { headers: bearer(readToken) });
    expectScimError(r, 403);
    assert.match(r.json().detail, /scimUsersRead/);
    r = await engine.request('GET', '/v2/scim/2.0/Users/00000000-0000-0000-0000-000000000000', { headers: bearer(scimToken) });
    expectScimError(r, 404);
    assert.match(r.json().detail, /no such user/);

    // 400: an id no user can have (a control character), with the RFC's scimType.
    r = await engine.request('GET', '/v2/scim/2.0/Users/a%01b', { headers: bearer(scimToken) });
    expectScimError(r, 400);
    assert.equal(r.json().scimType, 'invalidValue');
    // 500: a store the daemon cannot read (a version it does not know), as a SCIM error too; then back.
    const store = path.join(engine.dataRoot, 'auth', 'store.json');
    const saved = readFileSync(store);
    writeFileSync(store, JSON.stringify({ version: 99, users: [], tokens: [] }));
    try {
      r = await engine.request('GET', userPath, { headers: bearer(scimToken) });
      expectScimError(r, 500);
      assert.match(r.json().detail, /not a version 1 user and token store/);
    } finally {
      writeFileSync(store, saved);
    }
    assert.equal((await engine.request('GET', userPath, { headers: bearer(scimToken) })).status, 200);

    // Revoked by the subcommand while the daemon runs: refused from the next request on.
    assert.equal((await berthdOk(['token', 'revoke', scimTokenId])).trim(), scimTokenId);
    expectScimError(await engine.request('GET', userPath, { headers: bearer(scimToken) }), 401);
    assert.doesNotMatch(await berthdOk(['token', 'list']), new RegExp(scimTokenId));
    assert.equal((await berthd(['token', 'revoke', scimTokenId])).code, 1);
  });

  test('--auth-tokens: on TCP a read token lists containers and is refused a write; the unix socket and the docker CLI are as before', async () => {
    let r = await tcpRequest(port, 'GET', '/containers/json');
    assert.equal(r.status, 401);
    assert.match(r.json().message, /bearer token/);
    r = await tcpRequest(port, 'GET', '/v1.44/containers/json?all=1', bearer(readToken));
    assert.equal(r.status, 200, r.text);
    assert.ok(Array.isArray(r.json()));
    r = await tcpRequest(port, 'HEAD', '/_ping', bearer(readToken));
    assert.equal(r.status, 200);
    r = await tcpRequest(port, 'POST', '/containers/create', { ...bearer(readToken), 'Content-Type': 'application/json' }, JSON.stringify({ Image: 'busybox' }));
    assert.equal(r.status, 403);
    assert.match(r.json().message, /engineWrite/);
    r = await tcpRequest(port, 'POST', '/volumes/create', bearer(readToken), '{}');
    assert.equal(r.status, 403);
    // The websocket attach is a GET that carries the container's input: a read token may not open it.
    for (const target of ['/containers/none/attach/ws?stdin=1&stream=1', '/v1.41/containers/none/attach/ws']) {
      r = await tcpRequest(port, 'GET', target, { ...bearer(readToken), Connection: 'Upgrade', Upgrade: 'websocket' });
      assert.equal(r.status, 403, `${target}: ${r.text}`);
      assert.match(r.json().message, /engineWrite/);
    }

    // A write token may change things over TCP.
    const writeToken = (await berthdOk(['token', 'create', 'alice', '--permission', 'engineWrite'])).trim();
    r = await tcpRequest(port, 'POST', '/volumes/create', { ...bearer(writeToken), 'Content-Type': 'application/json' }, JSON.stringify({ Name: 'tokens-test' }));
    assert.equal(r.status, 201, r.text);

    // The unix socket needs no token: the docker CLI works as before.
    assert.match(await engine.dockerOk(['volume', 'ls', '-q']), /tokens-test/);
    await engine.dockerOk(['volume', 'rm', 'tokens-test']);
    assert.equal((await engine.request('GET', '/containers/json')).status, 200);
    // The docker CLI over TCP: refused without a token; with a read token in its configuration's HttpHeaders,
    // it lists and is refused a change.
    const cli = await engine.docker(['ps'], { env: { DOCKER_HOST: `tcp://127.0.0.1:${port}` } });
    assert.notEqual(cli.code, 0);
    const config = path.join(engine.root, 'docker-config-token');
    mkdirSync(config);
    writeFileSync(path.join(config, 'config.json'), JSON.stringify({ HttpHeaders: { Authorization: `Bearer ${readToken}` } }));
    const env = { DOCKER_HOST: `tcp://127.0.0.1:${port}`, DOCKER_CONFIG: config };
    const ps = await engine.docker(['ps', '-a'], { env });
    assert.equal(ps.code, 0, ps.stderr);
    assert.match(ps.stdout, /CONTAINER ID/);
    const create = await engine.docker(['volume', 'create', 'refused'], { env });
    assert.notEqual(create.code, 0);
    assert.match(create.stderr, /engineWrite/);

    // A deactivated user's tokens are refused until the user is active again.
    await berthdOk(['user', 'set', aliceId, '--active', 'false']);
    assert.equal((await tcpRequest(port, 'GET', '/containers/json', bearer(readToken))).status, 401);
    await berthdOk(['user', 'set', aliceId, '--active', 'true']);
    assert.equal((await tcpRequest(port, 'GET', '/containers/json', bearer(readToken))).status, 200);

    // A removed user's tokens go with it.
    await berthdOk(['user', 'rm', 'alice']);
    assert.equal((await tcpRequest(port, 'GET', '/containers/json', bearer(readToken))).status, 401);
    assert.equal((await berthdOk(['token', 'list'])).trim().split('\n').length, 1);
  });
});
