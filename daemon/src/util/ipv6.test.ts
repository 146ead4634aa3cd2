import assert from 'node:assert/strict';
import { test } from 'node:test';
import { contains6, formatIPv6, formatSubnet6, overlaps6, parseCIDR6, parseIPv6, poolSubnets, subnetSize6, ulaPrefix, ULA_RANGE } from './ipv6.js';

test('parseIPv6 reads every text form and refuses the rest', () => {
  assert.equal(parseIPv6('::'), 0n);
  assert.equal(parseIPv6('::1'), 1n);
  assert.equal(parseIPv6('fd00:1::2'), (0xfd00n << 112n) | (1n << 96n) | 2n);
  assert.equal(parseIPv6('FD00:0001:0000:0000:0000:0000:0000:0002'), parseIPv6('fd00:1::2'));
  assert.equal(parseIPv6('::ffff:192.0.2.1'), (0xffffn << 32n) | 0xc0000201n);
  assert.equal(parseIPv6('1:2:3:4:5:6:7::'), parseIPv6('1:2:3:4:5:6:7:0'));
  for (const bad of ['', ':', '1::2::3', '12345::', 'g::1', '1:2:3:4:5:6:7:8:9', '1:2:3:4:5:6:7', '::1%eth0', '172.17.0.1', '::1.2.3', '::256.1.1.1', 'fd00::/64', '1:2:3:4:5:6:7::8']) {
    assert.equal(parseIPv6(bad), undefined, bad);
  }
});

test('formatIPv6 writes the canonical form of RFC 5952', () => {
  const cases: Array<[string, string]> = [
    ['fd00:0001:0:0:0:0:0:1', 'fd00:1::1'],
    ['2001:db8:0:0:1:0:0:1', '2001:db8::1:0:0:1'],
    ['2001:db8:0:1:1:1:1:1', '2001:db8:0:1:1:1:1:1'],
    ['0:0:0:0:0:0:0:0', '::'],
    ['1:0:0:0:0:0:0:0', '1::'],
    ['FE80::ABCD', 'fe80::abcd'],
  ];
  for (const [input, want] of cases) assert.equal(formatIPv6(parseIPv6(input)!), want, input);
});

test('parseCIDR6 keeps the address apart from the subnet; contains and overlaps', () => {
  const c = parseCIDR6('fd00:1::1/64')!;
  assert.equal(formatIPv6(c.address), 'fd00:1::1');
  assert.equal(formatSubnet6(c.subnet), 'fd00:1::/64');
  assert.equal(parseCIDR6('fd00::/129'), undefined);
  assert.equal(parseCIDR6('fd00::'), undefined);
  assert.equal(parseCIDR6('10.0.0.0/8'), undefined);
  assert.equal(subnetSize6(c.subnet), 1n << 64n);
  assert.ok(contains6(c.subnet, parseIPv6('fd00:1::ffff:ffff:ffff:ffff')!));
  assert.ok(!contains6(c.subnet, parseIPv6('fd00:2::1')!));
  assert.ok(overlaps6(c.subnet, parseCIDR6('fd00:1::/80')!.subnet));
  assert.ok(overlaps6(parseCIDR6('fd00::/16')!.subnet, c.subnet));
  assert.ok(!overlaps6(c.subnet, parseCIDR6('fd00:2::/64')!.subnet));
});

test('the default pool is a /48 of unique local addresses that differs by seed, cut into /64s', () => {
  const a = ulaPrefix('/var/lib/berth machine-a');
  const b = ulaPrefix('/tmp/other machine-a');
  assert.equal(a.prefix, 48);
  assert.ok(contains6(ULA_RANGE, a.base));
  assert.notEqual(a.base, b.base);
  assert.equal(ulaPrefix('/var/lib/berth machine-a').base, a.base);
  const [first, second] = poolSubnets(a);
  assert.equal(first.prefix, 64);
  assert.equal(first.base, a.base);
  assert.equal(second.base - first.base, 1n << 64n);
  assert.equal([...poolSubnets(a, 64, 3)].length, 3);
});
