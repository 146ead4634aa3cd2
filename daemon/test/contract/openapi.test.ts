/**
 * The contract validator itself: it must accept what the schemas allow and refuse what they do not, or
 * the contract tests prove nothing.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { conformanceErrors, convertSchema, expectConforms, findPathTemplate } from './openapi.js';
import { v124Errors } from './v124.js';

const version = {
  Platform: { Name: 'Berth' },
  Components: [{ Name: 'Engine', Version: '0.1.0', Details: {} }],
  Version: '0.1.0',
  ApiVersion: '1.53',
  MinAPIVersion: '1.24',
  GitCommit: 'x',
  GoVersion: 'node v20',
  Os: 'linux',
  Arch: 'amd64',
  KernelVersion: '6.1',
  BuildTime: '2026-01-01T00:00:00Z',
};

test('every published schema file loads and compiles', async () => {
  for (let minor = 25; minor <= 53; minor++) {
    await expectConforms(`1.${minor}`, 'GET', '/version', 200, version);
  }
});

test('a body of the wrong type is refused, with the path of the bad field', () => {
  const errors = conformanceErrors('1.44', 'GET', '/version', 200, { ...version, Os: 42 });
  assert.ok(errors);
  assert.match(errors, /\/Os must be string/);
  assert.rejects(expectConforms('1.44', 'GET', '/version', 200, { ...version, Components: [{ Version: '1' }] }), /Name/);
});

test('x-nullable allows null; fields without it do not', async () => {
  // SystemInfo.RegistryConfig is x-nullable; SystemInfo.Containers is not.
  await expectConforms('1.53', 'GET', '/info', 200, { RegistryConfig: null });
  assert.ok(conformanceErrors('1.53', 'GET', '/info', 200, { Containers: null }));
  assert.deepEqual(convertSchema({ type: 'string', 'x-nullable': true, example: 'x' }, 'v'), { type: ['string', 'null'] });
  assert.deepEqual(convertSchema({ $ref: '#/definitions/A', 'x-nullable': true }, 'v'), { anyOf: [{ $ref: 'v#/definitions/A' }, { type: 'null' }] });
  // A property named like a Swagger keyword is kept.
  assert.deepEqual(convertSchema({ type: 'object', properties: { example: { type: 'string' } } }, 'v'), { type: 'object', properties: { example: { type: 'string' } } });
});

test('responses are checked against the version asked for', () => {
  // The event record's Type became an enum in 1.41: an unknown type passes in 1.25 and fails in 1.41.
  const event = { Type: 'spaceship', Action: 'launch', Actor: { ID: 'x', Attributes: {} }, scope: 'local', time: 1, timeNano: 1 };
  assert.equal(conformanceErrors('1.25', 'GET', '/events', 200, event), undefined);
  assert.match(conformanceErrors('1.41', 'GET', '/events', 200, event) ?? '', /\/Type must be equal to one of the allowed values/);
  assert.throws(() => conformanceErrors('1.25', 'GET', '/containers/{id}/nope', 200, {}), /no operation/);
  assert.throws(() => conformanceErrors('1.24', 'GET', '/version', 200, {}), /no published schema/);
});

test('path templates are found for concrete paths', () => {
  assert.equal(findPathTemplate('1.44', 'GET', '/containers/json'), '/containers/json');
  assert.equal(findPathTemplate('1.44', 'GET', '/containers/abc/json'), '/containers/{id}/json');
  assert.equal(findPathTemplate('1.44', 'GET', '/images/registry:5000/team/app:1/json'), '/images/{name}/json');
  assert.equal(findPathTemplate('1.44', 'DELETE', '/networks/n1'), '/networks/{id}');
  assert.equal(findPathTemplate('1.44', 'GET', '/nope'), undefined);
});

test('the v1.24 field lists catch missing and mistyped fields', () => {
  const event = { Type: 'container', Action: 'start', Actor: { ID: 'x', Attributes: { name: 'a' } }, time: 1, timeNano: 1, status: 'start', id: 'x', from: 'busybox' };
  assert.deepEqual(v124Errors('event', event), []);
  const { timeNano: _dropped, ...noNano } = event;
  assert.deepEqual(v124Errors('event', noNano), ['timeNano is missing']);
  assert.deepEqual(v124Errors('event', { ...event, time: '1' }), ['time should be integer, got "1"']);
  assert.deepEqual(v124Errors('event', { ...event, Actor: { ID: 'x', Attributes: { n: 1 } } }), ['Actor.Attributes should be strmap, got {"n":1}']);
});

test('schema errata: IPAM.Options is a map in every version, as engines and clients have it', () => {
  const network = (options: unknown) => [{ Name: 'bridge', Id: 'x', IPAM: { Driver: 'default', Options: options, Config: [] } }];
  for (const v of ['1.25', '1.38', '1.39', '1.53']) {
    assert.equal(conformanceErrors(v, 'GET', '/networks', 200, network({ foo: 'bar' })), undefined, v);
    assert.ok(conformanceErrors(v, 'GET', '/networks', 200, network([{ foo: 'bar' }])), v);
  }
});

test("schema errata: a container's ExecIDs is a list of ids (or null) in every version", () => {
  for (const v of ['1.25', '1.40', '1.41', '1.53']) {
    const id = 'a'.repeat(64);
    const inspect = { Id: id, ExecIDs: ['e1'] };
    assert.equal(conformanceErrors(v, 'GET', '/containers/{id}/json', 200, inspect), undefined, v);
    assert.equal(conformanceErrors(v, 'GET', '/containers/{id}/json', 200, { Id: id, ExecIDs: null }), undefined, v);
    assert.ok(conformanceErrors(v, 'GET', '/containers/{id}/json', 200, { Id: id, ExecIDs: 'e1' }), v);
  }
});

test('schema errata: old versions take the port map and the "no" restart policy', () => {
  const id = 'b'.repeat(64);
  const inspect = { Id: id, NetworkSettings: { Ports: { '80/tcp': [{ HostIp: '0.0.0.0', HostPort: '8080' }], '53/udp': null } }, HostConfig: { RestartPolicy: { Name: 'no', MaximumRetryCount: 0 } } };
  for (const v of ['1.25', '1.34', '1.35', '1.53']) {
    assert.equal(conformanceErrors(v, 'GET', '/containers/{id}/json', 200, inspect), undefined, v);
  }
  const badPolicy = { Id: id, HostConfig: { RestartPolicy: { Name: 'sometimes' } } };
  assert.ok(conformanceErrors('1.25', 'GET', '/containers/{id}/json', 200, badPolicy));
});

test('schema errata: /system/df lists container summaries, not lists of them', () => {
  const container = { Id: 'c'.repeat(64), Names: ['/x'], Image: 'busybox', State: 'running', SizeRw: 1 };
  for (const v of ['1.25', '1.39', '1.40', '1.44']) {
    assert.equal(conformanceErrors(v, 'GET', '/system/df', 200, { Containers: [container] }), undefined, v);
    assert.ok(conformanceErrors(v, 'GET', '/system/df', 200, { Containers: [[container]] }), v);
  }
});

test('schema errata: IPAM.Options, and an endpoint\'s Links and Aliases, may be null (none given), as dockerd sends them', () => {
  const network = [{ Name: 'bridge', Id: 'x', IPAM: { Driver: 'default', Options: null, Config: [] } }];
  const id = 'd'.repeat(64);
  const inspect = { Id: id, NetworkSettings: { Networks: { bridge: { Links: null, Aliases: null, NetworkID: 'n' } } } };
  for (const v of ['1.25', '1.41', '1.44', '1.53']) {
    assert.equal(conformanceErrors(v, 'GET', '/networks', 200, network), undefined, v);
    assert.equal(conformanceErrors(v, 'GET', '/containers/{id}/json', 200, inspect), undefined, v);
    const wrong = { Id: id, NetworkSettings: { Networks: { bridge: { Links: 'x', Aliases: 1 } } } };
    // (1.25's draft of NetworkSettings does not describe the endpoints.)
    if (v !== '1.25') assert.ok(conformanceErrors(v, 'GET', '/containers/{id}/json', 200, wrong), v);
  }
});
