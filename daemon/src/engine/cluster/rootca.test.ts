import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { chainsTo, clusterTLSInfo, issuerInfo, splitPem } from './rootca.js';

/** Two roots, the second signed by the first, and a leaf of the second (openssl CLI, scratch folder). */
function makeRoots(): { r0: string; r1: string; cross: string; leaf: string } {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'berth-rootca-test-'));
  try {
    const f = (n: string) => path.join(dir, n);
    const ossl = (...args: string[]) => execFileSync('openssl', args, { stdio: ['ignore', 'pipe', 'pipe'] }).toString();
    const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes'];
    for (const [name, subj] of [['r0', '/CN=swarm-ca'], ['r1', '/OU=abc/CN=swarm-ca']]) {
      ossl('req', '-x509', ...ec, '-keyout', f(`${name}.key`), '-out', f(`${name}.crt`), '-subj', subj!, '-days', '1', '-addext', 'basicConstraints=critical,CA:TRUE');
    }
    writeFileSync(f('ca.cnf'), 'basicConstraints=critical,CA:TRUE\nsubjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid\n');
    const cross = ossl('x509', '-in', f('r1.crt'), '-CA', f('r0.crt'), '-CAkey', f('r0.key'), '-set_serial', '7', '-days', '1', '-clrext', '-extfile', f('ca.cnf'));
    ossl('req', ...ec, '-keyout', f('leaf.key'), '-out', f('leaf.csr'), '-subj', '/OU=swarm-worker/CN=n1');
    const leaf = ossl('x509', '-req', '-in', f('leaf.csr'), '-CA', f('r1.crt'), '-CAkey', f('r1.key'), '-set_serial', '8', '-days', '1');
    return { r0: readFileSync(f('r0.crt'), 'utf8'), r1: readFileSync(f('r1.crt'), 'utf8'), cross, leaf };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

test('a certificate of the new root leads to the old one through the cross-signed root, and to the new one directly', () => {
  const { r0, r1, cross, leaf } = makeRoots();
  assert.equal(splitPem(leaf + cross).length, 2);
  assert.equal(chainsTo(leaf + cross, r0), true);
  assert.equal(chainsTo(leaf + cross, r1), true);
  assert.equal(chainsTo(leaf, r1), true);
  assert.equal(chainsTo(leaf, r0), false);
  assert.equal(chainsTo(cross, r1), false);
  // During a rotation the swarm trusts the old root and signs with the new one: the CLI counts the nodes
  // whose issuer is the new one.
  const rotating = clusterTLSInfo({ TLSInfo: { TrustRoot: r0 }, RootCA: { Cert: r0 }, RootRotation: { Cert: r1 } });
  assert.equal(rotating.TrustRoot, r0);
  assert.equal(rotating.CertIssuerPublicKey, issuerInfo(r1).CertIssuerPublicKey);
  assert.notEqual(rotating.CertIssuerSubject, issuerInfo(r0).CertIssuerSubject);
  const done = clusterTLSInfo({ TLSInfo: { TrustRoot: r1 }, RootCA: { Cert: r1 } });
  assert.deepEqual(done, { TrustRoot: r1, ...issuerInfo(r1) });
});
