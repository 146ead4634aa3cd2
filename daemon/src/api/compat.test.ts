import assert from 'node:assert/strict';
import { test } from 'node:test';
import { NotFound, NotInSwarm, Unavailable } from '../errors.js';
import { eventActionShown, shape, statusAt } from './compat.js';

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
