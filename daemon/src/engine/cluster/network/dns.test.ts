import assert from 'node:assert/strict';
import { test } from 'node:test';
import { lookupService, vipsOf } from './dns.js';
import type { NodeNetworks } from './plane.js';

const view: NodeNetworks = {
  DataPathPort: 4789,
  LocalAddr: '192.168.1.1',
  Networks: [
    {
      ID: 'n1', Name: 'front', VNI: 4096, Subnet: '10.0.0.0/24', Gateway: '10.0.0.1', MTU: 1450, Internal: false, Peers: [],
      Services: [
        { ID: 's1', Name: 'web', Aliases: ['www'], VIP: '10.0.0.2', Tasks: ['10.0.0.3', '10.0.0.4'] },
        { ID: 's2', Name: 'db', Aliases: [], Tasks: ['10.0.0.6'] },
        { ID: 's3', Name: 'idle', Aliases: [], Tasks: [] },
      ],
    },
    { ID: 'n2', Name: 'back', VNI: 4097, Subnet: '10.0.1.0/24', Gateway: '10.0.1.1', MTU: 1450, Internal: false, Peers: [], Services: [{ ID: 's4', Name: 'hidden', Aliases: [], VIP: '10.0.1.2', Tasks: ['10.0.1.3'] }] },
  ],
};

test('a vip service answers its VIP, a dnsrr one its tasks, tasks.<name> the tasks; aliases too', () => {
  assert.deepEqual(lookupService(view, ['n1'], 'web'), ['10.0.0.2']);
  assert.deepEqual(lookupService(view, ['n1'], 'WWW.'), ['10.0.0.2']);
  assert.deepEqual(lookupService(view, ['n1'], 'tasks.web'), ['10.0.0.3', '10.0.0.4']);
  assert.deepEqual(lookupService(view, ['n1'], 'db'), ['10.0.0.6']);
  assert.deepEqual(lookupService(view, ['n1'], 'idle'), []);
});

test('services of networks the task is not on, and other names, are not the swarm\'s to answer', () => {
  assert.equal(lookupService(view, ['n1'], 'hidden'), undefined);
  assert.equal(lookupService(view, ['n1'], 'example.com'), undefined);
  assert.equal(lookupService(undefined, ['n1'], 'web'), undefined);
  assert.deepEqual(lookupService(view, ['n1', 'n2'], 'hidden'), ['10.0.1.2']);
});

test('VIPs with their running tasks', () => {
  assert.deepEqual(vipsOf(view, ['n1']), [{ vip: '10.0.0.2', backends: ['10.0.0.3', '10.0.0.4'] }]);
  assert.deepEqual(vipsOf(view, []), []);
});
