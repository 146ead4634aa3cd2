import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { test } from 'node:test';
import { association, espRuleset, fresh, open, seal, SEQ_PER_SECOND, spiOf, taken } from './esp.js';

test('ESP: a VXLAN payload sealed under an association opens under the same one only, and not once altered', () => {
  const key = randomBytes(20);
  const out = association(key, '10.1.0.1', '10.1.0.2', 3);
  const peerIn = association(key, '10.1.0.1', '10.1.0.2', 3);
  const vxlan = Buffer.concat([Buffer.from('0800000000138800', 'hex'), randomBytes(77)]);
  const packet = seal(out, vxlan, 40000, 7789);
  assert.equal(packet.readUInt32BE(0), out.spi);
  assert.equal(packet.readUInt32BE(4), 1);
  assert.equal((packet.length - 16 - 16) % 4, 0);
  assert.equal(packet.indexOf(vxlan.subarray(8)), -1);
  assert.deepEqual(open(peerIn, packet), vxlan);
  // Another direction, another key, a changed byte: nothing.
  assert.equal(open(association(key, '10.1.0.2', '10.1.0.1', 3), packet), undefined);
  assert.equal(open(association(randomBytes(20), '10.1.0.1', '10.1.0.2', 3), packet), undefined);
  const altered = Buffer.from(packet);
  altered[20]! ^= 1;
  assert.equal(open(peerIn, altered), undefined);
  const renumbered = Buffer.from(packet);
  renumbered.writeUInt32BE(9, 4);
  assert.equal(open(peerIn, renumbered), undefined);
  // Each packet its own IV.
  const second = seal(out, vxlan, 40000, 7789);
  assert.equal(second.readUInt32BE(4), 2);
  assert.notDeepEqual(second.subarray(8, 16), packet.subarray(8, 16));
});

test('ESP: SPIs differ by direction and key, and stay above the reserved range', () => {
  const spis = new Set([spiOf('a', 'b', 1), spiOf('b', 'a', 1), spiOf('a', 'b', 2)]);
  assert.equal(spis.size, 3);
  for (const s of spis) assert.ok(s >= 256);
});

test('ESP rules: encrypted VNIs turned aside to port 4500 when they leave, dropped in clear either way', () => {
  const rules = espRuleset({ localAddr: '192.168.5.2', port: 7789, keys: [], primary: 1, networks: [{ vni: 4098, peers: [] }, { vni: 4097, peers: [] }] });
  assert.match(rules, /^table ip berth_esp\ndelete table ip berth_esp\n/);
  assert.match(rules, /ip daddr != 192\.168\.5\.2 udp dport 7789 @th,96,24 \{ 4097, 4098 \} ct zone set 58/);
  assert.match(rules, /ct zone 58 ip daddr != 192\.168\.5\.2 udp dport 7789 dnat to 192\.168\.5\.2:4500/);
  assert.match(rules, /oifname != "lo" udp dport 7789 @th,96,24 \{ 4097, 4098 \} drop/);
  assert.match(rules, /iifname != "lo" udp dport 7789 @th,96,24 \{ 4097, 4098 \} drop/);
  assert.match(rules, /iifname != "lo" ip saddr 192\.168\.5\.2 udp dport 4500 drop/);
});

test('ESP replays: a sequence number is taken in once, out of order within 64 of the highest, never below', () => {
  const sa = association(randomBytes(20), 'a', 'b', 1);
  for (const seq of [5, 3, 70, 7]) {
    assert.ok(fresh(sa, seq), `seq ${seq}`);
    taken(sa, seq);
  }
  // Zero, those taken, and one 64 below the highest: refused.
  for (const seq of [0, 5, 3, 70, 6]) assert.equal(fresh(sa, seq), false, `seq ${seq}`);
  assert.ok(fresh(sa, 8));
  assert.ok(fresh(sa, 69));
  taken(sa, 1000);
  assert.equal(fresh(sa, 936), false);
  assert.ok(fresh(sa, 937));
});

test('ESP replays: a sender that starts again (a daemon restart) goes on past the numbers it used', () => {
  const key = randomBytes(20);
  const made = 1_000_000;
  const first = association(key, 'a', 'b', 1, made, made + 10_000);
  const receiver = association(key, 'a', 'b', 1, made, made + 10_000);
  for (let i = 0; i < 1000; i++) {
    const p = seal(first, Buffer.alloc(30), 1, 2);
    const seq = p.readUInt32BE(4);
    assert.ok(fresh(receiver, seq) && open(receiver, p));
    taken(receiver, seq);
  }
  // A second later, the new run's numbers are past the first's.
  const again = association(key, 'a', 'b', 1, made, made + 11_000);
  const p = seal(again, Buffer.alloc(30), 1, 2);
  assert.equal(p.readUInt32BE(4), 11 * SEQ_PER_SECOND + 1);
  assert.ok(fresh(receiver, p.readUInt32BE(4)) && open(receiver, p));
  // A packet of the first run sent again is refused.
  assert.equal(fresh(receiver, 10 * SEQ_PER_SECOND + 500), false);
});
