import assert from 'node:assert/strict';
import { test } from 'node:test';
import { allocateAddress, allocateSubnet, allocateVni, defaultGateway, FIRST_VNI, inSubnet, macOf } from './allocator.js';

test('subnets come from the pools in blocks of the size, past those in use', () => {
  assert.equal(allocateSubnet(['10.0.0.0/8'], 24, []), '10.0.0.0/24');
  assert.equal(allocateSubnet(['10.0.0.0/8'], 24, ['10.0.0.0/24', '10.0.1.0/24']), '10.0.2.0/24');
  // A user's wider subnet covers several blocks.
  assert.equal(allocateSubnet(['10.0.0.0/8'], 24, ['10.0.0.0/22']), '10.0.4.0/24');
  // The next pool when the first is full.
  assert.equal(allocateSubnet(['10.9.0.0/24', '10.20.0.0/16'], 24, ['10.9.0.0/24']), '10.20.0.0/24');
  assert.throws(() => allocateSubnet(['10.9.0.0/24'], 24, ['10.9.0.0/24']), /non-overlapping/);
  assert.throws(() => allocateSubnet(['nonsense'], 24, []), /invalid address pool/);
});

test('VXLAN ids start at 4096 and fill gaps', () => {
  assert.equal(allocateVni([]), FIRST_VNI);
  assert.equal(allocateVni([4096, 4098]), 4097);
});

test('addresses skip the gateway, the network and broadcast addresses, and those in use', () => {
  assert.equal(defaultGateway('10.0.3.0/24'), '10.0.3.1');
  assert.equal(allocateAddress('10.0.3.0/24', '10.0.3.1', new Set()), '10.0.3.2');
  assert.equal(allocateAddress('10.0.3.0/24', '10.0.3.1', new Set(['10.0.3.2', '10.0.3.3'])), '10.0.3.4');
  assert.equal(allocateAddress('10.0.3.0/24', '10.0.3.1', new Set(), '10.0.3.128/25'), '10.0.3.128');
  const full = new Set(Array.from({ length: 2 }, (_, i) => `10.0.3.${i + 2}`));
  assert.throws(() => allocateAddress('10.0.3.0/30', '10.0.3.1', full), /no address left/);
  assert.equal(allocateAddress('10.0.3.0/30', '10.0.3.1', new Set()), '10.0.3.2');
  assert.throws(() => allocateAddress('10.0.3.0/30', '10.0.3.1', new Set(['10.0.3.2'])), /no address left in 10.0.3.0\/30/);
});

test('an endpoint\'s MAC is derived from its address', () => {
  assert.equal(macOf('10.0.3.2'), '02:42:0a:00:03:02');
  assert.ok(inSubnet('10.0.3.0/24', '10.0.3.9'));
  assert.ok(!inSubnet('10.0.3.0/24', '10.0.4.9'));
});
