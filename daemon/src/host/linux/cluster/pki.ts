/**
 * The swarm's certificates, made with the `openssl` command line (Node has no X.509 writer): an EC P-256 root
 * CA, node keys with their requests, and node certificates signed by the CA with swarmkit's subject (CN the
 * node id, OU `swarm-manager` or `swarm-worker`, O the cluster id) and names (the role, the node id, and on
 * managers `swarm-ca`), plus the node's advertise IP (etcd checks a peer's IP against its certificate), for
 * an exact validity; and a rotation's new root signed by the current one.
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { CertificateSubject } from '../../cluster.js';

/**
 * Node certificates last the swarm's NodeCertExpiry (90 days unless given) from now, valid from 5 minutes back
 * (for the clocks of other nodes a little behind); the root 20 years.
 */
const NODE_CERT_SECONDS = 90 * 24 * 3600;
const CERT_BACKDATE_SECONDS = 300;
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

/**
 * A new root CA. The first root of a swarm is `CN=swarm-ca`; a root made by a rotation gets an OU of its own
 * (`tag`), so that no two roots of a swarm share a subject (certificate chains are then found by name alone).
 */
export async function createRootCA(tag?: string): Promise<{ cert: string; key: string }> {
  if (tag !== undefined && !/^[a-z0-9]{1,64}$/i.test(tag)) throw new Error(`invalid root CA tag ${JSON.stringify(tag)}`);
  return withScratch(async (dir) => {
    const key = await newKey();
    const keyFile = path.join(dir, 'ca.key');
    await fs.writeFile(keyFile, key, { mode: 0o600 });
    const cert = await openssl([
      'req', '-x509', '-new', '-key', keyFile, '-subj', tag ? `/OU=${tag}/CN=swarm-ca` : '/CN=swarm-ca', '-days', String(ROOT_CA_DAYS), '-sha256',
      '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign,digitalSignature',
    ]);
    return { cert, key };
  });
}

/**
 * The new root of a rotation signed by the current one (same subject and key as the new root, issued by the
 * current): a node that trusts the current root checks certificates of the new one through it.
 */
export async function crossSignRootCA(current: { cert: string; key: string }, newRoot: string): Promise<string> {
  return withScratch(async (dir) => {
    const f = (name: string) => path.join(dir, name);
    await fs.writeFile(f('ca.crt'), current.cert);
    await fs.writeFile(f('ca.key'), current.key, { mode: 0o600 });
    await fs.writeFile(f('new.crt'), newRoot);
    await fs.writeFile(f('ext.cnf'), 'basicConstraints=critical,CA:TRUE\nkeyUsage=critical,keyCertSign,cRLSign,digitalSignature\nsubjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid\n');
    return openssl([
      'x509', '-in', f('new.crt'), '-CA', f('ca.crt'), '-CAkey', f('ca.key'), '-set_serial', `0x${randomBytes(12).toString('hex')}`,
      '-days', String(ROOT_CA_DAYS), '-sha256', '-clrext', '-extfile', f('ext.cnf'),
    ]);
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

/** A time as `openssl ca` takes it for -startdate/-enddate (GeneralizedTime, to the second, UTC). */
function asn1Time(ms: number): string {
  return new Date(ms).toISOString().replace(/[-:T]/g, '').replace(/\.\d{3}Z$/, 'Z');
}

/**
 * Signs a node's request with `openssl ca` and a minimal CA configuration of its own (unlike `x509 -days`, it
 * takes exact start and end times), in a scratch folder: the policy keeps only the subject given, the
 * request's extensions are dropped for ours.
 */
export async function signNodeCertificate(ca: { cert: string; key: string }, csr: string, subject: CertificateSubject): Promise<string> {
  checkId('node id', subject.nodeId);
  checkId('cluster id', subject.clusterId);
  const seconds = subject.expirySeconds ?? NODE_CERT_SECONDS;
  if (!Number.isInteger(seconds) || seconds < 1) throw new Error(`invalid certificate expiry: ${seconds} s`);
  const ou = subject.role === 'manager' ? 'swarm-manager' : 'swarm-worker';
  const names = [`DNS:${ou}`, `DNS:${subject.nodeId}`, ...(subject.role === 'manager' ? ['DNS:swarm-ca'] : [])];
  for (const ip of subject.ips) {
    if (!/^[0-9a-f.:]+$/i.test(ip)) throw new Error(`invalid IP address for a certificate: ${JSON.stringify(ip)}`);
    names.push(`IP:${ip}`);
  }
  return withScratch(async (dir) => {
    const f = (name: string) => path.join(dir, name);
    await fs.writeFile(f('ca.crt'), ca.cert);
    await fs.writeFile(f('ca.key'), ca.key, { mode: 0o600 });
    await fs.writeFile(f('node.csr'), csr);
    await fs.writeFile(f('index.txt'), '');
    await fs.writeFile(f('serial'), `${randomBytes(12).toString('hex')}\n`);
    await fs.writeFile(
      f('ca.cnf'),
      [
        '[ca]', 'default_ca = swarm',
        '[swarm]', `database = ${f('index.txt')}`, `new_certs_dir = ${dir}`, `serial = ${f('serial')}`,
        'default_md = sha256', 'policy = subject', 'unique_subject = no', 'email_in_dn = no', 'copy_extensions = none',
        '[subject]', 'organizationName = supplied', 'organizationalUnitName = supplied', 'commonName = supplied',
        '',
      ].join('\n'),
    );
    await fs.writeFile(
      f('ext.cnf'),
      `subjectAltName=${names.join(',')}\nextendedKeyUsage=serverAuth,clientAuth\nbasicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nauthorityKeyIdentifier=keyid\n`,
    );
    const now = Date.now();
    await openssl([
      'ca', '-batch', '-notext', '-config', f('ca.cnf'), '-in', f('node.csr'), '-cert', f('ca.crt'), '-keyfile', f('ca.key'),
      '-startdate', asn1Time(now - CERT_BACKDATE_SECONDS * 1000), '-enddate', asn1Time(now + seconds * 1000),
      '-extfile', f('ext.cnf'), '-subj', `/O=${subject.clusterId}/OU=${ou}/CN=${subject.nodeId}`, '-out', f('node.crt'),
    ]);
    return fs.readFile(f('node.crt'), 'utf8');
  });
}
