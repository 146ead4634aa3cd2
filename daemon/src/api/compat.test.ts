import assert from 'node:assert/strict';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { InvalidParameter, NotFound, NotInSwarm, Unavailable } from '../errors.js';
import { BEHAVIOURS, eventActionShown, readRequest, REQUEST_RULES, shape, statusAt, supports } from './compat.js';

test('compat: fields appear from addedIn and disappear from removedIn', () => {
  const v = () => ({ Version: '1', MinAPIVersion: '1.24', Platform: { Name: 'x' }, Components: [] });
  assert.deepEqual(Object.keys(shape('system.version', 24, v())), ['Version']);
  assert.deepEqual(Object.keys(shape('system.version', 34, v())), ['Version', 'MinAPIVersion']);
  assert.deepEqual(Object.keys(shape('system.version', 35, v())), ['Version', 'MinAPIVersion', 'Platform', 'Components']);
  const e = () => ({ Type: 'container', Action: 'start', status: 'start', id: 'x', from: 'busybox' });
  assert.deepEqual(shape('event', 51, e()), e());
  assert.deepEqual(shape('event', 52, e()), { Type: 'container', Action: 'start' });
});

test('compat: omitEmptyFrom drops only empty values, wildcards reach every map entry, lists shape item by item', () => {
  const img = () => ({ Parent: '', Comment: 'kept', Config: { Cmd: null, Env: ['A=1'], Labels: {} } });
  assert.deepEqual(shape('image.inspect', 52, img()), { Comment: 'kept', Config: { Env: ['A=1'] } });
  assert.deepEqual(shape('image.inspect', 51, img()), img());
  const list = [
    { Id: 'a', NetworkSettings: { Networks: { bridge: { DNSNames: ['a'], GwPriority: 0 }, other: { DNSNames: null, GwPriority: 1 } } } },
  ];
  const shaped = shape('container.summary', 44, list);
  assert.deepEqual(shaped[0].NetworkSettings.Networks, { bridge: { DNSNames: ['a'] }, other: { DNSNames: null } });
});

test('compat: before 1.45 an endpoint lists its short id among its Aliases; DriverOpts are shown in every version', () => {
  const c = () => ({
    NetworkSettings: {
      Networks: {
        mine: { Aliases: ['web'], DNSNames: ['app', 'web', '0123456789ab'], DriverOpts: { a: 'b' } },
        bridge: { Aliases: null, DNSNames: [], DriverOpts: null },
      },
    },
  });
  assert.deepEqual(shape('container.inspect', 45, c()), c());
  const old = shape('container.inspect', 44, c());
  assert.deepEqual(old.NetworkSettings.Networks.mine, { Aliases: ['web', '0123456789ab'], DNSNames: ['app', 'web', '0123456789ab'], DriverOpts: { a: 'b' } });
  assert.equal(old.NetworkSettings.Networks.bridge.Aliases, null);
  const older = shape('container.inspect', 41, c());
  assert.deepEqual(older.NetworkSettings.Networks.mine, { Aliases: ['web', '0123456789ab'], DriverOpts: { a: 'b' } });
});

test('compat: "not part of a swarm" answers 406 before API 1.25 and its own status after; other errors keep theirs', () => {
  assert.equal(statusAt(new NotInSwarm('x'), 503, 24), 406);
  assert.equal(statusAt(new NotInSwarm('x'), 503, 25), 503);
  assert.equal(statusAt(new NotInSwarm('x'), 503, undefined), 503);
  assert.equal(statusAt(new Unavailable('x'), 503, 24), 503);
  assert.equal(statusAt(new NotFound('x'), 404, 24), 404);
});

test('compat: prune events are shown from API 1.41 on, other actions always', () => {
  assert.equal(eventActionShown('prune', 40), false);
  assert.equal(eventActionShown('prune', 41), true);
  assert.equal(eventActionShown('start', 24), true);
});

test('compat: the image list shows <none> for empty repository lists before 1.43 and Containers -1 before 1.51', () => {
  const list = () => [
    { Id: 'a', RepoTags: [], RepoDigests: [], Containers: 2, VirtualSize: 1 },
    { Id: 'b', RepoTags: ['x:1'], RepoDigests: ['x@sha256:0'], Containers: 0, VirtualSize: 1 },
  ];
  assert.deepEqual(shape('image.list', 42, list()), [
    { Id: 'a', RepoTags: ['<none>:<none>'], RepoDigests: ['<none>@<none>'], Containers: -1, VirtualSize: 1 },
    { Id: 'b', RepoTags: ['x:1'], RepoDigests: ['x@sha256:0'], Containers: -1, VirtualSize: 1 },
  ]);
  const at50 = shape('image.list', 50, list());
  assert.deepEqual(at50[0], { Id: 'a', RepoTags: [], RepoDigests: [], Containers: -1 });
  assert.deepEqual(shape('image.list', 51, list())[0], { Id: 'a', RepoTags: [], RepoDigests: [], Containers: 2 });
  // Each summary gets its own list, not one shared value.
  const shaped = shape('image.list', 24, list());
  assert.notEqual(shaped[0].RepoTags, shape('image.list', 24, list())[0].RepoTags);
  // The summaries of /system/df keep their values.
  assert.deepEqual(shape('image.summary', 42, list())[0], { Id: 'a', RepoTags: [], RepoDigests: [], Containers: 2, VirtualSize: 1 });
});

test('compat: a create body drops the fields its version does not have and refuses a subpath before 1.45', () => {
  const body = () => ({
    Image: 'busybox',
    Healthcheck: { Test: ['NONE'], StartInterval: 5 },
    HostConfig: { KernelMemory: 1024, Memory: 1, Mounts: [{ Type: 'volume', Source: 'v', Target: '/v', VolumeOptions: { Subpath: 'a' } }] },
    NetworkingConfig: { EndpointsConfig: { mine: { MacAddress: '02:42:ac:11:00:02', Aliases: ['x'] }, other: null } },
  });
  const at = (v: number) => readRequest('container.create', v, body());
  assert.throws(() => at(44), (err: unknown) => err instanceof InvalidParameter && err.message === 'VolumeOptions.Subpath needs API v1.45 or newer');
  const v45 = at(45);
  assert.equal(v45.Healthcheck.StartInterval, 5);
  assert.equal('KernelMemory' in v45.HostConfig, false);
  assert.equal(v45.NetworkingConfig.EndpointsConfig.mine.MacAddress, '02:42:ac:11:00:02');
  const noSubpath = () => {
    const b = body();
    b.HostConfig.Mounts[0].VolumeOptions.Subpath = '';
    return b;
  };
  const v41 = readRequest('container.create', 41, noSubpath());
  assert.equal(v41.HostConfig.KernelMemory, 1024);
  assert.equal('StartInterval' in v41.Healthcheck, false);
  assert.deepEqual(v41.NetworkingConfig.EndpointsConfig, { mine: { Aliases: ['x'] }, other: null });
  const v43 = readRequest('container.create', 43, noSubpath());
  assert.equal('KernelMemory' in v43.HostConfig, false);
  assert.equal('StartInterval' in v43.Healthcheck, false);
  // Bodies of other shapes are left as they are (the engine's validation answers them).
  assert.equal(readRequest('container.create', 53, null), null);
  assert.deepEqual(readRequest('container.create', 24, { HostConfig: [1], Healthcheck: 'x' }), { HostConfig: [1], Healthcheck: 'x' });
});

test('compat: KernelMemory is one rule for create, update and inspect', () => {
  assert.deepEqual(readRequest('container.update', 41, { KernelMemory: 1, Memory: 2 }), { KernelMemory: 1, Memory: 2 });
  assert.deepEqual(readRequest('container.update', 42, { KernelMemory: 1, Memory: 2 }), { Memory: 2 });
  const create = REQUEST_RULES['container.create'].find((r) => r.field === 'HostConfig.KernelMemory');
  const update = REQUEST_RULES['container.update'].find((r) => r.field === 'KernelMemory');
  assert.ok(create && update);
  assert.equal(create.removedIn, update.removedIn);
  assert.deepEqual(Object.keys(shape('container.inspect', 41, { HostConfig: { KernelMemory: 0 } }).HostConfig), ['KernelMemory']);
  assert.deepEqual(Object.keys(shape('container.inspect', create.removedIn!, { HostConfig: { KernelMemory: 0 } }).HostConfig), []);
});

test('compat: behaviours exist from their first version and up to their last', () => {
  assert.equal(supports(31, 'images.pull.platform'), false);
  assert.equal(supports(32, 'images.pull.platform'), true);
  assert.equal(supports(40, 'images.list.filter'), true);
  assert.equal(supports(41, 'images.list.filter'), false);
  assert.deepEqual([51, 52, 53].map((v) => supports(v, 'system.df.listsUnlessVerbose')), [false, true, false]);
  assert.deepEqual([24, 25].map((v) => [supports(v, 'plugins.pull.oneCall'), supports(v, 'plugins.settingsShape')]), [[true, false], [false, true]]);
  // Every span is within the served versions and not empty.
  for (const [name, span] of Object.entries(BEHAVIOURS) as [string, { from?: number; until?: number }][]) {
    assert.ok(span.from !== undefined || span.until !== undefined, name);
    if (span.from !== undefined && span.until !== undefined) assert.ok(span.from <= span.until, name);
  }
});

test('compat: no api module but compat.ts and version.ts compares the request version with a number or a constant', async () => {
  // This file runs from daemon/dist/src/api; the sources are in daemon/src/api.
  const dir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..', 'src', 'api');
  const names = (await fs.readdir(dir)).filter((n) => n.endsWith('.ts') && !n.endsWith('.test.ts') && n !== 'compat.ts' && n !== 'version.ts');
  assert.ok(names.length > 10, `api sources found in ${dir}`);
  const inline = /\bversion\s*(<|>|<=|>=|===|!==)\s*[0-9A-Z_]|[0-9]\s*(<|>|<=|>=)\s*(req\.)?version\b/;
  const found: string[] = [];
  for (const name of names) {
    const lines = (await fs.readFile(path.join(dir, name), 'utf8')).split('\n');
    lines.forEach((line, i) => inline.test(line) && found.push(`${name}:${i + 1}: ${line.trim()}`));
  }
  assert.deepEqual(found, [], 'version rules belong in compat.ts (RULES, REQUEST_RULES or BEHAVIOURS)');
});
