import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Forbidden, InvalidParameter, NotFound } from '../../../errors.js';
import type { Obj } from '../types.js';
import { attachContainer, checkAttachRequest, detachContainer } from './attachable.js';
import { NetworkAllocator, nodeNetworks } from './attachments.js';
import { lookupService } from './dns.js';
import { memoryStore } from './memstore.testing.js';

const CONTAINER = 'a'.repeat(64);
const OTHER = 'b'.repeat(64);
const networks = [
  { ID: 'n1', Name: 'ov', Subnet: '10.0.0.0/24', Gateway: '10.0.0.1', VNI: 4096, MTU: 1450, Attachable: true },
  { ID: 'n2', Name: 'closed', Subnet: '10.0.1.0/24', Gateway: '10.0.1.1', VNI: 4097, MTU: 1450 },
  { ID: 'n3', Name: 'ingress', Subnet: '10.0.2.0/24', Gateway: '10.0.2.1', VNI: 4098, MTU: 1450, Ingress: true, Attachable: true, NodeAddrs: {} },
];

test('a container attaches to an attachable network: a free address, kept in the store; a restart replaces it; detach releases it', async () => {
  const objects: Record<string, Obj[]> = {
    networks: structuredClone(networks),
    nodes: [{ ID: 'a', Status: { Addr: '192.168.1.1' } }, { ID: 'b', Status: { Addr: '192.168.1.2' } }],
    tasks: [{ ID: 't1', ServiceID: 's1', NodeID: 'b', DesiredState: 'running', Status: { State: 'running' }, NetworksAttachments: [{ Network: { ID: 'n1' }, Addresses: ['10.0.0.2/24'] }] }],
    services: [{ ID: 's1', Spec: { Name: 'web', TaskTemplate: { Networks: [{ Target: 'n1' }] } } }],
  };
  const store = memoryStore(objects);
  const allocator = new NetworkAllocator(store);
  const first = await attachContainer(store, allocator, 'a', { Network: 'ov', ContainerID: CONTAINER, Names: ['client', 'c1'] });
  assert.equal(first.Address, '10.0.0.3/24');
  assert.deepEqual(first.Network, { ID: 'n1', Name: 'ov', Subnet: '10.0.0.0/24', Gateway: '10.0.0.1', VNI: 4096, MTU: 1450, Internal: false });
  // The node builds the network; the other node holds the container as a peer, and its tasks resolve its names.
  assert.deepEqual(nodeNetworks(store, 'a').Networks.map((n) => n.ID), ['n1']);
  const onB = nodeNetworks(store, 'b').Networks[0]!;
  assert.deepEqual(onB.Peers, [{ address: '10.0.0.3', mac: '02:42:0a:00:00:03', node: '192.168.1.1' }]);
  assert.deepEqual(lookupService(nodeNetworks(store, 'b'), ['n1'], 'C1.'), ['10.0.0.3']);
  assert.equal(lookupService(nodeNetworks(store, 'b'), ['n1'], 'tasks.client'), undefined);
  // The container started again: one attachment, a new one.
  const again = await attachContainer(store, allocator, 'a', { Network: 'n1', ContainerID: CONTAINER, Names: ['client'] });
  assert.equal(objects.attachments!.length, 1);
  assert.equal(objects.attachments![0]!.ID, again.ID);
  const other = await attachContainer(store, allocator, 'b', { Network: 'ov', ContainerID: OTHER, Names: [] });
  assert.ok(![first.Address, again.Address, '10.0.0.2/24'].includes(other.Address));
  // Only its own node releases it; a second release is no error.
  await assert.rejects(detachContainer(store, 'b', { ID: again.ID }), NotFound);
  await detachContainer(store, 'a', { ID: again.ID });
  await detachContainer(store, 'a', { ID: again.ID });
  assert.deepEqual(objects.attachments!.map((a) => a.ContainerID), [OTHER]);
  assert.deepEqual(nodeNetworks(store, 'a').Networks, []);
});

test('a network that is not attachable, the ingress network, an unknown one and bad requests are refused', async () => {
  const store = memoryStore({ networks: structuredClone(networks) });
  const allocator = new NetworkAllocator(store);
  await assert.rejects(attachContainer(store, allocator, 'a', { Network: 'closed', ContainerID: CONTAINER }),
    (err: Error) => err instanceof Forbidden && err.message === 'Could not attach to network closed: rpc error: code = PermissionDenied desc = network closed not manually attachable');
  await assert.rejects(attachContainer(store, allocator, 'a', { Network: 'ingress', ContainerID: CONTAINER }), Forbidden);
  await assert.rejects(attachContainer(store, allocator, 'a', { Network: 'nope', ContainerID: CONTAINER }), { message: 'network nope not found' });
  assert.throws(() => checkAttachRequest({ Network: 'ov', ContainerID: 'abc' }), InvalidParameter);
  assert.throws(() => checkAttachRequest({ Network: '', ContainerID: CONTAINER }), InvalidParameter);
  assert.throws(() => checkAttachRequest({ Network: 'ov', ContainerID: CONTAINER, Names: ['bad name'] }), InvalidParameter);
  await assert.rejects(detachContainer(store, 'a', {}), InvalidParameter);
});
