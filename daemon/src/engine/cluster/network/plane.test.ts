import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { OverlayEncryption, OverlayHost, OverlayPeer } from '../../../host/overlay.js';
import { OverlayPlane, type NodeNetworks } from './plane.js';

/** An OverlayHost that records what it is asked, in order. */
function recordingHost(): { host: OverlayHost; calls: string[] } {
  const calls: string[] = [];
  const host: OverlayHost = {
    ensureOverlay: async (spec) => void calls.push(`ensure ${spec.networkId}${spec.encrypted ? ' encrypted' : ''}`),
    setOverlayPeers: async (id: string, peers: OverlayPeer[]) => void calls.push(`peers ${id} ${peers.map((p) => p.address).join(',')}`),
    attachOverlay: async () => undefined,
    detachOverlay: async () => undefined,
    balanceVips: async () => undefined,
    setIngress: async () => undefined,
    setOverlayEncryption: async (spec: OverlayEncryption | undefined) =>
      void calls.push(spec ? `encrypt primary ${spec.primary} keys ${spec.keys.map((k) => k.tag).join(',')} vnis ${spec.networks.map((n) => n.vni).join(',')}` : 'encrypt none'),
    removeOverlay: async (id: string) => void calls.push(`remove ${id}`),
    overlays: async () => [],
  };
  return { host, calls };
}

const network = (id: string, vni: number, encrypted: boolean) => ({
  ID: id, Name: id, VNI: vni, Subnet: '10.0.9.0/24', Gateway: '10.0.9.1', MTU: 1400, Internal: false,
  ...(encrypted ? { Encrypted: true } : {}),
  Peers: [{ address: '10.0.9.3', mac: '02:42:0a:00:09:03', node: '192.168.1.3' }], Services: [],
});

const want = (keys?: number[]): NodeNetworks => ({
  DataPathPort: 4789,
  LocalAddr: '192.168.1.2',
  Networks: [network('plain', 4097, false), network('vault', 4098, true)],
  ...(keys ? { Keys: keys.map((Tag) => ({ Tag, Key: Buffer.alloc(20, Tag).toString('base64') })), PrimaryKey: keys[keys.length - 2] ?? keys[0] } : {}),
});

test('an encrypted network gets its peers only once its traffic is encrypted, and loses them before the encryption goes', async () => {
  const { host, calls } = recordingHost();
  const plane = new OverlayPlane(host);
  await plane.reconcile(want());
  assert.deepEqual(calls, ['encrypt none', 'ensure plain', 'peers plain 10.0.9.3', 'ensure vault encrypted', 'peers vault ']);
  calls.length = 0;
  await plane.reconcile(want([1, 2]));
  assert.deepEqual(calls, ['encrypt primary 1 keys 1,2 vnis 4098', 'peers vault 10.0.9.3']);
  calls.length = 0;
  // A rotation: the keys change, the peers stay.
  await plane.reconcile(want([1, 2, 3]));
  assert.deepEqual(calls, ['encrypt primary 2 keys 1,2,3 vnis 4098']);
  calls.length = 0;
  await plane.reconcile(want([1, 2, 3]));
  assert.deepEqual(calls, []);
  // The keys gone: peers first, then the encryption.
  await plane.reconcile(want());
  assert.deepEqual(calls, ['peers vault ', 'encrypt none']);
  calls.length = 0;
  // The daemon stops: the same order.
  await plane.reconcile(want([4, 5]));
  calls.length = 0;
  await plane.stopEncryption();
  assert.deepEqual(calls, ['peers vault ', 'encrypt none']);
});

test('encryption that cannot be set up leaves the encrypted network without peers, and the others as they are', async () => {
  const { host, calls } = recordingHost();
  let fail = true;
  const setOverlayEncryption = host.setOverlayEncryption;
  host.setOverlayEncryption = async (spec) => {
    if (spec && fail) throw new Error('bind EADDRINUSE 192.168.1.2:4500');
    return setOverlayEncryption(spec);
  };
  const plane = new OverlayPlane(host);
  await plane.reconcile(want([1, 2]));
  assert.deepEqual(calls, ['ensure plain', 'peers plain 10.0.9.3', 'ensure vault encrypted', 'peers vault ']);
  calls.length = 0;
  fail = false;
  await plane.reconcile(want([1, 2]));
  assert.deepEqual(calls, ['encrypt primary 1 keys 1,2 vnis 4098', 'peers vault 10.0.9.3']);
});

test('the ingress network\'s bridge takes the MAC the other nodes hold for the node\'s endpoint; other bridges keep their own', async () => {
  const specs: Array<{ networkId: string; bridgeMac?: string; localAddr: string }> = [];
  const { host } = recordingHost();
  const plane = new OverlayPlane({ ...host, ensureOverlay: async (spec) => void specs.push(spec) });
  await plane.reconcile({
    DataPathPort: 4789,
    LocalAddr: '172.16.0.2',
    Networks: [network('plain', 4097, false), { ...network('ingress', 4096, false), Subnet: '10.0.0.0/24', Gateway: '10.0.0.7' }],
    Ingress: { NetworkID: 'ingress', Address: '10.0.0.7', PrefixLen: 24, Ports: [] },
  });
  assert.deepEqual(specs.map((s) => [s.networkId, s.bridgeMac, s.localAddr]), [['plain', undefined, '172.16.0.2'], ['ingress', '02:42:0a:00:00:07', '172.16.0.2']]);
});
