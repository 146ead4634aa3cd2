import assert from 'node:assert/strict';
import { test } from 'node:test';
import { keptVips, NetworkAllocator, nodeNetworks } from './attachments.js';
import { memoryStore } from './memstore.testing.js';

const net = { ID: 'n1', Name: 'ov', Subnet: '10.0.0.0/24', Gateway: '10.0.0.1', VNI: 4096, MTU: 1450 };
const attached = (address: string) => [{ Network: { ID: 'n1' }, Addresses: [`${address}/24`] }];
const task = (id: string, node: string, address: string, state = 'running', desired = 'running') =>
  ({ ID: id, ServiceID: 's1', NodeID: node, DesiredState: desired, Status: { State: state }, NetworksAttachments: attached(address) });

test('a node builds the networks of its tasks, with the other nodes\' live endpoints as peers and the running ones behind the VIP', () => {
  const store = memoryStore({
    cluster: [{ ID: 'default', DataPathPort: 7789 }],
    nodes: [{ ID: 'a', Status: { Addr: '192.168.1.1' } }, { ID: 'b', Status: { Addr: '192.168.1.2' } }, { ID: 'c', Status: { Addr: '192.168.1.3' } }],
    networks: [net],
    services: [{ ID: 's1', Spec: { Name: 'web', TaskTemplate: { Networks: [{ Target: 'n1', Aliases: ['www'] }] } }, Endpoint: { VirtualIPs: [{ NetworkID: 'n1', Addr: '10.0.0.2/24' }] } }],
    tasks: [
      task('t1', 'a', '10.0.0.3'),
      task('t2', 'b', '10.0.0.4'),
      task('t3', 'b', '10.0.0.5', 'starting'),
      task('t4', 'c', '10.0.0.6', 'shutdown', 'shutdown'),
    ],
  });
  const view = nodeNetworks(store, 'a');
  assert.equal(view.DataPathPort, 7789);
  assert.equal(view.LocalAddr, '192.168.1.1');
  assert.equal(view.Networks.length, 1);
  const n = view.Networks[0]!;
  assert.deepEqual(n.Peers, [
    { address: '10.0.0.4', mac: '02:42:0a:00:00:04', node: '192.168.1.2' },
    { address: '10.0.0.5', mac: '02:42:0a:00:00:05', node: '192.168.1.2' },
  ]);
  assert.deepEqual(n.Services, [{ ID: 's1', Name: 'web', Aliases: ['www'], VIP: '10.0.0.2', Tasks: ['10.0.0.3', '10.0.0.4'] }]);
  // A node without tasks on the network builds none.
  assert.deepEqual(nodeNetworks(store, 'c').Networks, []);
});

test('new tasks get free addresses: past the gateway, the VIPs, the live tasks\' and those just given', () => {
  const store = memoryStore({
    networks: [net],
    services: [{ ID: 's2', Spec: { Name: 'api', TaskTemplate: { Networks: [{ Target: 'n1' }] } }, Endpoint: { VirtualIPs: [{ NetworkID: 'n1', Addr: '10.0.0.2/24' }] } }],
    tasks: [task('t1', 'a', '10.0.0.3'), task('t9', 'a', '10.0.0.4', 'failed', 'shutdown')],
  });
  const allocator = new NetworkAllocator(store);
  const service = { ID: 's3', Spec: { Name: 'db', TaskTemplate: { Networks: [{ Target: 'n1' }] } } };
  assert.deepEqual(allocator.taskAttachments(service).map((a) => a.Addresses), [['10.0.0.4/24']]);
  assert.deepEqual(allocator.taskAttachments(service).map((a) => a.Addresses), [['10.0.0.5/24']]);
  assert.equal(allocator.taskAttachments(service)[0]!.Network.Spec.Name, 'ov');
  // (10.0.0.6 went to the third task just above.)
  assert.deepEqual(allocator.serviceVips(service), [{ NetworkID: 'n1', Addr: '10.0.0.7/24' }]);
  assert.deepEqual(allocator.serviceVips({ ...service, Spec: { ...service.Spec, EndpointSpec: { Mode: 'dnsrr' } } }), []);
});

test('an updated service keeps the VIPs of the networks it still joins, none in dnsrr', () => {
  const previous = [{ NetworkID: 'n1', Addr: '10.0.0.2/24' }, { NetworkID: 'n2', Addr: '10.0.1.2/24' }];
  const spec = (networks: string[], mode?: string) => ({ Spec: { TaskTemplate: { Networks: networks.map((Target) => ({ Target })) }, ...(mode ? { EndpointSpec: { Mode: mode } } : {}) } });
  assert.deepEqual(keptVips(spec(['n2', 'n3']), previous), [{ NetworkID: 'n2', Addr: '10.0.1.2/24' }]);
  assert.deepEqual(keptVips(spec(['n1'], 'dnsrr'), previous), []);
});

test('the tunnels go from and to each node\'s data path address, the advertise address where it has none', () => {
  const store = memoryStore({
    nodes: [{ ID: 'a', Status: { Addr: '192.168.1.1' }, DataPathAddr: '172.16.0.1' }, { ID: 'b', Status: { Addr: '192.168.1.2' }, DataPathAddr: '172.16.0.2' }, { ID: 'c', Status: { Addr: '192.168.1.3' } }],
    networks: [net],
    services: [],
    tasks: [task('t1', 'a', '10.0.0.3'), task('t2', 'b', '10.0.0.4'), task('t3', 'c', '10.0.0.5')],
  });
  const a = nodeNetworks(store, 'a');
  assert.equal(a.DataPathPort, 4789);
  assert.equal(a.LocalAddr, '172.16.0.1');
  assert.deepEqual(a.Networks[0]!.Peers.map((p) => p.node), ['172.16.0.2', '192.168.1.3']);
  const c = nodeNetworks(store, 'c');
  assert.equal(c.LocalAddr, '192.168.1.3');
  assert.deepEqual(c.Networks[0]!.Peers.map((p) => p.node), ['172.16.0.1', '172.16.0.2']);
});
