import assert from 'node:assert/strict';
import { test } from 'node:test';
import { capabilityHeld, hostRlimits, machineFacts, useMachineFacts } from './machine.js';

test('machine facts: capabilities and limits are those the probe gave', () => {
  useMachineFacts({ rlimits: { RLIMIT_NOFILE: { soft: 1024, hard: 4096 } }, capabilityBoundingSet: '0000000000000005', machineId: 'abc', blkio: { weight: true, weightDevice: true, throttle: true } });
  assert.equal(capabilityHeld(0), true);
  assert.equal(capabilityHeld(1), false);
  assert.equal(capabilityHeld(2), true);
  assert.deepEqual(hostRlimits().get('RLIMIT_NOFILE'), { soft: 1024, hard: 4096 });
  assert.equal(machineFacts().machineId, 'abc');
  useMachineFacts({ rlimits: {}, machineId: '', blkio: { weight: true, weightDevice: true, throttle: true } });
  assert.equal(capabilityHeld(40), true, 'an unknown bounding set holds every capability');
  assert.equal(hostRlimits().size, 0);
});
