/**
 * The swarm's certificates, made with the `openssl` command line (Node has no X.509 writer): an EC P-256 root
 * CA, node keys with their requests, and node certificates signed by the CA with swarmkit's subject (CN the
 * node id, OU `swarm-manager` or `swarm-worker`, O the cluster id) and names (the role, the node id, and on
 * managers `swarm-ca`), plus the node's advertise IP (etcd checks a peer's IP against its certificate).
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { CertificateSubject } from '../../cluster.js';

/** Node certificates last 90 days, as swarmkit's default NodeCertExpiry; the root 20 years. */
const NODE_CERT_DAYS = 90;
const ROOT_CA_DAYS = 7300;

function openssl(args: string[], input?: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = execFile('openssl', args, { timeout: 30_000, env: { PATH: process.env.PATH ?? '/usr/bin:/bin' } }, (err, stdout, stderr) => {
      if (err) reject(new Error(`openssl ${args[0]} failed: ${stderr.trim() || err.message}`));
      else resolve(stdout);
    });
    if (input !== undefined) child.stdin!.end(input);
  });
}

/** Runs `fn` with a private scratch folder, removed afterwards. */
async function withScratch<T>(fn: (dir: string) => Promise<T>): Promise<T> {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'berth-pki-'));
  try {
    return await fn(dir);
  } finally {
    await fs.rm(dir, { recursive: true, force: true });
  }
}

function newKey(): Promise<string> {
  return openssl(['genpkey', '-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:P-256']);
}

export async function createRootCA(): Promise<{ cert: string; key: string }> {
  return withScratch(async (dir) => {
    const key = await newKey();
    const keyFile = path.join(dir, 'ca.key');
    await fs.writeFile(keyFile, key, { mode: 0o600 });
    const cert = await openssl([
      'req', '-x509', '-new', '-key', keyFile, '-subj', '/CN=swarm-ca', '-days', String(ROOT_CA_DAYS), '-sha256',
      '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign,digitalSignature',
    ]);
    return { cert, key };
  });
}

export async function createKeyAndRequest(): Promise<{ key: string; csr: string }> {
  return withScratch(async (dir) => {
    const key = await newKey();
    const keyFile = path.join(dir, 'node.key');
    await fs.writeFile(keyFile, key, { mode: 0o600 });
    const csr = await openssl(['req', '-new', '-key', keyFile, '-subj', '/CN=swarm-node']);
    return { key, csr };
  });
}

/** Subject fields may hold only what a swarm id holds (letters and digits). */
function checkId(what: string, value: string): void {
  if (!/^[a-z0-9]{1,64}$/i.test(value)) throw new Error(`invalid ${what} for a certificate: ${JSON.stringify(value)}`);
}

export async function signNodeCertificate(ca: { cert: string; key: string }, csr: string, subject: CertificateSubject): Promise<string> {
  checkId('node id', subject.nodeId);
  checkId('cluster id', subject.clusterId);
  const ou = subject.role === 'manager' ? 'swarm-manager' : 'swarm-worker';
  const names = [`DNS:${ou}`, `DNS:${subject.nodeId}`, ...(subject.role === 'manager' ? ['DNS:swarm-ca'] : [])];
  for (const ip of subject.ips) {
    if (!/^[0-9a-f.:]+$/i.test(ip)) throw new Error(`invalid IP address for a certificate: ${JSON.stringify(ip)}`);
    names.push(`IP:${ip}`);
  }
  return withScratch(async (dir) => {
    const files = { caCert: path.join(dir, 'ca.crt'), caKey: path.join(dir, 'ca.key'), csr: path.join(dir, 'node.csr'), ext: path.join(dir, 'ext.cnf') };
    await fs.writeFile(files.caCert, ca.cert);
    await fs.writeFile(files.caKey, ca.key, { mode: 0o600 });
    await fs.writeFile(files.csr, csr);
    await fs.writeFile(
      files.ext,
      `subjectAltName=${names.join(',')}\nextendedKeyUsage=serverAuth,clientAuth\nbasicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n`,
    );
    return openssl([
      'x509', '-req', '-in', files.csr, '-CA', files.caCert, '-CAkey', files.caKey, '-set_serial', `0x${randomBytes(12).toString('hex')}`,
      '-days', String(NODE_CERT_DAYS), '-sha256', '-extfile', files.ext, '-subj', `/O=${subject.clusterId}/OU=${ou}/CN=${subject.nodeId}`,
    ]);
  });
}
