import assert from 'node:assert/strict';
import { test } from 'node:test';
import { contains, defaultBridgeCandidates, formatIPv4, formatSubnet, macFromIPv4, overlaps, parseCIDR, parseIPv4, parseMac } from './ipv4.js';
import { InvalidParameter } from '../../errors.js';

test('parseIPv4 accepts dotted quads and refuses everything else', () => {
  assert.equal(parseIPv4('172.17.0.2'), 0xac110002);
  assert.equal(formatIPv4(parseIPv4('255.255.255.255')!), '255.255.255.255');
  for (const bad of ['172.17.0', '172.17.0.256', '1.2.3.4.5', 'a.b.c.d', '01.2.3.4', '', ' 1.2.3.4', '::1']) {
    assert.equal(parseIPv4(bad), undefined, bad);
  }
});

test('parseCIDR keeps the address apart from the subnet', () => {
  const c = parseCIDR('10.20.30.1/24')!;
  assert.equal(formatIPv4(c.address), '10.20.30.1');
  assert.equal(formatSubnet(c.subnet), '10.20.30.0/24');
  assert.equal(parseCIDR('10.0.0.0/33'), undefined);
  assert.equal(parseCIDR('10.0.0.0'), undefined);
  assert.equal(formatSubnet(parseCIDR('0.0.0.0/0')!.subnet), '0.0.0.0/0');
});

test('contains and overlaps', () => {
  const s = parseCIDR('172.17.0.0/16')!.subnet;
  assert.ok(contains(s, parseIPv4('172.17.255.254')!));
  assert.ok(!contains(s, parseIPv4('172.18.0.1')!));
  assert.ok(overlaps(s, parseCIDR('172.17.5.0/24')!.subnet));
  assert.ok(overlaps(parseCIDR('172.0.0.0/8')!.subnet, s));
  assert.ok(!overlaps(s, parseCIDR('172.18.0.0/16')!.subnet));
});

test('the MAC of an endpoint is 02:42 and the bytes of its address, as Docker derives it', () => {
  assert.equal(macFromIPv4(parseIPv4('172.17.0.2')!), '02:42:ac:11:00:02');
  assert.equal(macFromIPv4(parseIPv4('192.168.255.10')!), '02:42:c0:a8:ff:0a');
});

test('parseMac refuses malformed and multicast addresses with the field name', () => {
  assert.equal(parseMac('02:42:AC:11:00:02', 'f'), '02:42:ac:11:00:02');
  assert.throws(() => parseMac('02:42:ac:11:00', 'EndpointsConfig.bridge.MacAddress'), (e: Error) => e instanceof InvalidParameter && /EndpointsConfig\.bridge\.MacAddress/.test(e.message));
  assert.throws(() => parseMac('01:00:5e:00:00:01', 'f'), /multicast/);
});

test('default bridge candidates are 172.17-31/16 then 192.168.x/20', () => {
  const c = defaultBridgeCandidates().map(formatSubnet);
  assert.equal(c[0], '172.17.0.0/16');
  assert.equal(c[14], '172.31.0.0/16');
  assert.equal(c[15], '192.168.0.0/20');
  assert.equal(c.at(-1), '192.168.240.0/20');
});
