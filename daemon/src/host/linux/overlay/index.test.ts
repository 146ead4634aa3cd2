import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ingressRulesets, LinuxOverlayHost, peerCommands, vipRuleset } from './index.js';

const peer = (address: string, mac: string, node: string) => ({ address, mac, node });

test('peer entries: new ones added, changed ones moved, gone ones deleted, kept ones left alone', () => {
  const out = peerCommands(
    [peer('10.0.0.3', '02:42:0a:00:00:03', '192.168.1.2'), peer('10.0.0.4', '02:42:0a:00:00:04', '192.168.1.3'), peer('10.0.0.6', '02:42:0a:00:00:06', '192.168.1.3')],
    [
      { mac: '02:42:0a:00:00:03', dst: '192.168.1.2' },
      { mac: '02:42:0a:00:00:04', dst: '192.168.1.9' },
      { mac: '02:42:0a:00:00:05', dst: '192.168.1.2' },
    ],
    [
      { dst: '10.0.0.3', lladdr: '02:42:0a:00:00:03' },
      { dst: '10.0.0.4', lladdr: '02:42:0a:00:00:04' },
      { dst: '10.0.0.5', lladdr: '02:42:0a:00:00:05' },
    ],
  );
  assert.deepEqual(out.bridgeCommands, [
    'fdb del 02:42:0a:00:00:04 dev vxlan0 dst 192.168.1.9 self',
    'fdb del 02:42:0a:00:00:05 dev vxlan0 dst 192.168.1.2 self',
    'fdb append 02:42:0a:00:00:04 dev vxlan0 dst 192.168.1.3 self permanent',
    'fdb append 02:42:0a:00:00:06 dev vxlan0 dst 192.168.1.3 self permanent',
  ]);
  assert.deepEqual(out.ipCommands, [
    'neigh del 10.0.0.5 dev vxlan0',
    'neigh replace 10.0.0.6 lladdr 02:42:0a:00:00:06 dev vxlan0 nud permanent',
  ]);
  assert.deepEqual(peerCommands([], [], []), { ipCommands: [], bridgeCommands: [] });
});

test('namespaces are named per daemon and refuse ids that are not the cluster\'s', () => {
  const a = new LinuxOverlayHost('/run/berth-a');
  const b = new LinuxOverlayHost('/run/berth-b');
  assert.notEqual(a.namespace('abc123'), b.namespace('abc123'));
  assert.match(a.namespace('abc123'), /^bov[0-9a-f]{6}-abc123$/);
  assert.throws(() => a.namespace('../x'), /invalid overlay network id/);
});

test('VIP rules: each VIP to its backends at random, those without backends left out, an empty list only deletes', () => {
  assert.equal(vipRuleset([{ vip: '10.0.0.2', backends: ['10.0.0.3', '10.0.0.4'] }, { vip: '10.0.0.9', backends: [] }]), [
    'table ip berth_vip',
    'delete table ip berth_vip',
    'table ip berth_vip {',
    '  chain output {',
    '    type nat hook output priority -100; policy accept;',
    '    ip daddr 10.0.0.2 dnat to numgen random mod 2 map { 0 : 10.0.0.3, 1 : 10.0.0.4 }',
    '  }',
    '}',
  ].join('\n') + '\n');
  assert.equal(vipRuleset([]), 'table ip berth_vip\ndelete table ip berth_vip\n');
});

test('routing mesh rules: the node sends its published ports to the sandbox, which spreads them over the tasks from the node\'s endpoint', () => {
  const { node, sandbox } = ingressRulesets({
    networkId: 'n1',
    address: '10.0.1.4',
    ports: [
      { proto: 'tcp', publishedPort: 8080, targetPort: 80, backends: ['10.0.1.5', '10.0.1.6'] },
      { proto: 'udp', publishedPort: 5353, targetPort: 53, backends: [] },
    ],
  });
  assert.match(node, /^table ip berth_ingress\ndelete table ip berth_ingress\n/);
  assert.equal(node.match(/fib daddr type local tcp dport 8080 dnat to 169\.254\.231\.2/g)?.length, 2);
  assert.equal(node.match(/fib daddr type local udp dport 5353 dnat to 169\.254\.231\.2/g)?.length, 2);
  assert.match(sandbox, /iifname "lb0" tcp dport 8080 dnat ip to numgen random mod 2 map \{ 0 : 10\.0\.1\.5 \. 80, 1 : 10\.0\.1\.6 \. 80 \}/);
  assert.doesNotMatch(sandbox, /dport 5353/);
  assert.match(sandbox, /oifname "br0" ct status dnat snat ip to 10\.0\.1\.4/);
});
