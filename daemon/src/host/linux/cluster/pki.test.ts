import assert from 'node:assert/strict';
import { createPrivateKey, X509Certificate } from 'node:crypto';
import { test } from 'node:test';
import { createKeyAndRequest, createRootCA, signNodeCertificate } from './pki.js';

test('a node certificate lasts the given expiry to the second, with the node\'s subject and names', async () => {
  const ca = await createRootCA();
  const { key, csr } = await createKeyAndRequest();
  const before = Math.floor(Date.now() / 1000) * 1000;
  const cert = await signNodeCertificate(ca, csr, { nodeId: 'node1', clusterId: 'cluster1', role: 'worker', ips: ['10.1.2.3'], expirySeconds: 3600 });
  const after = Date.now();
  const x = new X509Certificate(cert);
  const to = Date.parse(x.validTo);
  assert.ok(to >= before + 3600_000 && to <= after + 3600_000, `${x.validTo}`);
  // Valid from 5 minutes back, for clocks a little behind.
  assert.ok(Math.abs(Date.parse(x.validFrom) - (to - 3600_000 - 300_000)) <= 2000, `${x.validFrom}`);
  assert.equal(x.subject, 'O=cluster1\nOU=swarm-worker\nCN=node1');
  assert.equal(x.subjectAltName, 'DNS:swarm-worker, DNS:node1, IP Address:10.1.2.3');
  assert.ok(x.checkPrivateKey(createPrivateKey(key)));
  assert.ok(x.verify(new X509Certificate(ca.cert).publicKey));
  assert.equal(x.ca, false);
  // Without an expiry: 90 days.
  const days = (Date.parse(new X509Certificate(await signNodeCertificate(ca, csr, { nodeId: 'node1', clusterId: 'cluster1', role: 'manager', ips: [] })).validTo) - Date.now()) / 86_400_000;
  assert.ok(days > 89.99 && days <= 90, `${days}`);
  await assert.rejects(signNodeCertificate(ca, csr, { nodeId: 'node1', clusterId: 'cluster1', role: 'worker', ips: [], expirySeconds: 0 }), /invalid certificate expiry/);
  await assert.rejects(signNodeCertificate(ca, csr, { nodeId: 'node/1', clusterId: 'cluster1', role: 'worker', ips: [] }), /invalid node id/);
});
