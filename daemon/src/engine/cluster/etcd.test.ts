import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import tls from 'node:tls';
import { test } from 'node:test';
import { etcdClient, renewClientCertificate } from './etcd.js';

/** A root and two certificates for one node, made with the openssl CLI in a scratch folder. */
function makeCerts(): { ca: string; first: { cert: string; key: string }; second: { cert: string; key: string }; server: { cert: string; key: string } } {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'berth-etcd-test-'));
  try {
    const f = (n: string) => path.join(dir, n);
    const ossl = (...args: string[]) => execFileSync('openssl', args, { stdio: ['ignore', 'pipe', 'pipe'] });
    ossl('req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', f('ca.key'), '-out', f('ca.crt'), '-subj', '/CN=swarm-ca', '-days', '1',
      '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign');
    writeFileSync(f('ext.cnf'), 'subjectAltName=DNS:swarm-manager,IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth\n');
    const leaf = (name: string) => {
      ossl('req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', f(`${name}.key`), '-out', f(`${name}.csr`), '-subj', `/OU=swarm-manager/CN=${name}`);
      ossl('x509', '-req', '-in', f(`${name}.csr`), '-CA', f('ca.crt'), '-CAkey', f('ca.key'), '-set_serial', String(Date.now() % 1e9) + name.length, '-days', '1', '-extfile', f('ext.cnf'), '-out', f(`${name}.crt`));
      return { cert: readFileSync(f(`${name}.crt`), 'utf8'), key: readFileSync(f(`${name}.key`), 'utf8') };
    };
    return { ca: readFileSync(f('ca.crt'), 'utf8'), first: leaf('first'), second: leaf('second0'), server: leaf('server00') };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

test('an etcd client\'s next connections present the renewed certificate', async () => {
  const { ca, first, second, server: serverCert } = makeCerts();
  const seen: string[] = [];
  // A TLS server in etcd's place: it notes the client's certificate, then drops the connection.
  const server = tls.createServer({ ...serverCert, ca, requestCert: true, rejectUnauthorized: true, ALPNProtocols: ['h2'] }, (socket) => {
    const peer = socket.getPeerX509Certificate();
    if (peer) seen.push(peer.serialNumber);
    socket.destroy();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  const client = await etcdClient([`https://127.0.0.1:${port}`], { ca, ...first });
  try {
    const call = () => client.get('k').string().catch(() => undefined);
    const serial = (pem: string) => new X509Certificate(pem).serialNumber;
    for (let i = 0; i < 50 && !seen.includes(serial(first.cert)); i++) await call();
    assert.ok(seen.includes(serial(first.cert)), `the first certificate was never presented: ${seen.join(',')}`);
    assert.equal(renewClientCertificate(client, { ca, ...second }), true);
    for (let i = 0; i < 100 && !seen.includes(serial(second.cert)); i++) {
      await call();
      await new Promise((r) => setTimeout(r, 100));
    }
    assert.ok(seen.includes(serial(second.cert)), `the renewed certificate was never presented: ${seen.join(',')}`);
  } finally {
    client.close();
    server.close();
  }
});
