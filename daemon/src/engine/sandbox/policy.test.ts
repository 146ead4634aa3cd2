import assert from 'node:assert/strict';
import { test } from 'node:test';
import { InvalidParameter } from '../../errors.js';
import { compilePolicy, domainMatches, ruleRuns, validatePolicy } from './policy.js';

const refused = (policy: unknown, pattern: RegExp) =>
  assert.throws(() => validatePolicy(policy), (err: unknown) => err instanceof InvalidParameter && pattern.test((err as Error).message));

test('a valid policy gets its defaults; names and CIDRs are normalised', () => {
  const p = validatePolicy({
    defaultAction: 'deny',
    rules: [
      { action: 'allow', domain: 'Example.TEST.' },
      { action: 'allow', cidr: '10.1.2.3/16', protocol: 'tcp', ports: [443, '8000-8100'] },
      { action: 'deny', cidr: '2001:DB8::1/32' },
      { action: 'allow', cidr: '192.0.2.7' },
    ],
  });
  assert.deepEqual(p, {
    defaultAction: 'deny',
    rules: [
      { action: 'allow', protocol: 'any', domain: 'example.test' },
      { action: 'allow', protocol: 'tcp', cidr: '10.1.0.0/16', ports: [443, '8000-8100'] },
      { action: 'deny', protocol: 'any', cidr: '2001:db8::/32' },
      { action: 'allow', protocol: 'any', cidr: '192.0.2.7/32' },
    ],
  });
  assert.deepEqual(validatePolicy({ defaultAction: 'allow' }), { defaultAction: 'allow', rules: [] });
});

test('a bad policy is refused with a message naming what is wrong', () => {
  refused(null, /must be a JSON object/);
  refused({ defaultAction: 'maybe' }, /defaultAction/);
  refused({ defaultAction: 'deny', rules: {} }, /rules must be an array/);
  refused({ defaultAction: 'deny', extra: 1 }, /unknown field "extra"/);
  refused({ defaultAction: 'deny', rules: [{ action: 'permit', cidr: '10.0.0.0/8' }] }, /rules\[0\]\.action/);
  refused({ defaultAction: 'deny', rules: [{ action: 'allow' }] }, /rules\[0\] needs exactly one of cidr and domain/);
  refused({ defaultAction: 'deny', rules: [{ action: 'allow', cidr: '10.0.0.0/8', domain: 'a.test' }] }, /exactly one/);
  refused({ defaultAction: 'deny', rules: [{ action: 'allow', cidr: '10.0.0.300/8' }] }, /rules\[0\]\.cidr is not/);
  refused({ defaultAction: 'deny', rules: [{ action: 'allow', cidr: '10.0.0.0/33' }] }, /cidr is not/);
  refused({ defaultAction: 'deny', rules: [{ action: 'allow', domain: 'bad name.test' }] }, /domain is not a domain name/);
  refused({ defaultAction: 'deny', rules: [{ action: 'allow', domain: '*.*.test' }] }, /domain is not/);
  refused({ defaultAction: 'deny', rules: [{ action: 'allow', domain: 'a.test', protocol: 'icmp' }] }, /protocol must be/);
  refused({ defaultAction: 'deny', rules: [{ action: 'allow', domain: 'a.test', ports: [80] }] }, /ports needs protocol "tcp" or "udp"/);
  refused({ defaultAction: 'deny', rules: [{ action: 'allow', domain: 'a.test', protocol: 'tcp', ports: [0] }] }, /ports\[0\] is not a port/);
  refused({ defaultAction: 'deny', rules: [{ action: 'allow', domain: 'a.test', protocol: 'tcp', ports: ['90-80'] }] }, /ports\[0\] is not a range/);
  refused({ defaultAction: 'deny', rules: [{ action: 'allow', domain: 'a.test', protocol: 'tcp', ports: [] }] }, /non-empty array/);
  refused({ defaultAction: 'deny', rules: [{ action: 'allow', domain: 'a.test', protocol: 'udp', ports: ['x'] }] }, /ports\[0\] must be/);
  refused({ defaultAction: 'deny', rules: [{ action: 'allow', domain: 'a.test', port: 80 }] }, /unknown field "port"/);
});

test('domain rules match exactly, or below a wildcard (not the bare name)', () => {
  assert.ok(domainMatches('example.test', 'EXAMPLE.test.'));
  assert.ok(!domainMatches('example.test', 'www.example.test'));
  assert.ok(domainMatches('*.example.test', 'www.example.test'));
  assert.ok(domainMatches('*.example.test', 'a.b.example.test'));
  assert.ok(!domainMatches('*.example.test', 'example.test'));
  assert.ok(!domainMatches('*.example.test', 'badexample.test'));
});

test('the compiled program keeps the rules in order, merges runs of CIDR rules into one set, and refuses by default', () => {
  const policy = validatePolicy({
    defaultAction: 'deny',
    rules: [
      { action: 'deny', cidr: '10.0.0.0/24' },
      { action: 'deny', cidr: '10.0.1.0/24' },
      { action: 'deny', cidr: '10.0.0.128/25' },
      { action: 'deny', cidr: '10.9.9.9' },
      { action: 'allow', domain: '*.example.test', protocol: 'tcp', ports: [443] },
      { action: 'allow', cidr: '10.0.0.0/8', protocol: 'udp' },
      { action: 'allow', cidr: 'fd00::/8' },
    ],
  });
  const { sets, chain, refuse, chains } = compilePolicy(policy);
  assert.deepEqual(sets.slice(2), ['set d4_4 { type ipv4_addr; flags timeout; }', 'set d4_6 { type ipv6_addr; flags timeout; }']);
  // The flows a domain rule let through: refreshed by their packets, admitted by the rule.
  assert.match(sets[0], /^set flows4 \{ type ipv4_addr \. inet_proto \. inet_service \. inet_service; flags dynamic, timeout; timeout 300s; \}$/);
  assert.deepEqual(chain.slice(3, 5), [
    'meta l4proto { tcp, udp } ip daddr . meta l4proto . th dport . th sport @flows4 update @flows4 { ip daddr . meta l4proto . th dport . th sport } accept',
    'meta l4proto { tcp, udp } ip6 daddr . meta l4proto . th dport . th sport @flows6 update @flows6 { ip6 daddr . meta l4proto . th dport . th sport } accept',
  ]);
  assert.deepEqual(chains[0], { name: 'admit4', rules: ['meta l4proto { tcp, udp } add @flows4 { ip daddr . meta l4proto . th dport . th sport }', 'accept'] });
  assert.deepEqual(chain.slice(5), [
    'ip daddr { 10.0.0.0-10.0.1.255, 10.9.9.9 } goto refuse',
    'ip daddr @d4_4 tcp dport 443 goto admit4',
    'ip6 daddr @d4_6 tcp dport 443 goto admit6',
    'ip daddr 10.0.0.0-10.255.255.255 meta l4proto udp accept',
    'ip6 daddr fd00::-fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff accept',
    'goto refuse',
  ]);
  assert.match(chain[0], /arp accept/);
  assert.deepEqual(refuse, ['meta l4proto tcp reject with tcp reset', 'reject with icmpx type admin-prohibited']);
  assert.equal(compilePolicy(validatePolicy({ defaultAction: 'allow' })).chain.at(-1), 'accept');
  // Without a domain rule that allows, no flow is followed.
  assert.deepEqual(compilePolicy(validatePolicy({ defaultAction: 'deny', rules: [{ action: 'deny', domain: 'a.test' }] })).chains, []);
});

test('a thousand CIDR rules of one kind compile to one lookup', () => {
  const rules = Array.from({ length: 1000 }, (_, i) => ({ action: 'deny', cidr: `10.${i >> 8}.${i & 255}.0/24` }));
  const { chain } = compilePolicy(validatePolicy({ defaultAction: 'allow', rules }));
  assert.deepEqual(chain.slice(3), ['ip daddr 10.0.0.0-10.3.231.255 goto refuse', 'accept']);
});

test('consecutive domain rules of one kind share a pair of sets; another kind starts its own', () => {
  const policy = validatePolicy({
    defaultAction: 'deny',
    rules: [
      { action: 'allow', domain: 'a.test', protocol: 'tcp', ports: [443] },
      { action: 'allow', domain: '*.b.test', protocol: 'tcp', ports: [443] },
      { action: 'allow', domain: 'c.test' },
      { action: 'deny', cidr: '10.0.0.0/8' },
    ],
  });
  assert.deepEqual(ruleRuns(policy), [0, 0, 2, 3]);
  const { sets, chain } = compilePolicy(policy);
  assert.deepEqual(sets.map((s) => s.split(' ')[1]), ['flows4', 'flows6', 'd0_4', 'd0_6', 'd2_4', 'd2_6']);
  assert.deepEqual(chain.slice(5), [
    'ip daddr @d0_4 tcp dport 443 goto admit4',
    'ip6 daddr @d0_6 tcp dport 443 goto admit6',
    'ip daddr @d2_4 goto admit4',
    'ip6 daddr @d2_6 goto admit6',
    'ip daddr 10.0.0.0-10.255.255.255 goto refuse',
    'goto refuse',
  ]);
});
