import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { LinuxClusterHost } from './index.js';

const pem = (what: string) => `-----BEGIN ${what}-----\n${Buffer.from(what + Math.random()).toString('base64')}\n-----END ${what}-----\n`;

test('a node\'s key and certificate are replaced as a pair, also when the daemon stopped halfway', async () => {
  const root = mkdtempSync(path.join(os.tmpdir(), 'berth-cluster-host-'));
  try {
    const host = new LinuxClusterHost(path.join(root, 'data'), path.join(root, 'exec'));
    const first = { ca: pem('CERTIFICATE'), cert: pem('CERTIFICATE'), key: pem('PRIVATE KEY') };
    await host.saveCertificates(first);
    assert.deepEqual(await host.loadCertificates(), { ...first, caKey: undefined, dataKey: undefined });
    // A renewal that stopped after the pair was written and the key replaced, before the certificate.
    const next = { cert: pem('CERTIFICATE'), key: pem('PRIVATE KEY') };
    const pair = path.join(root, 'data', 'swarm', 'certificates', 'swarm-node.next');
    await fs.writeFile(pair, JSON.stringify(next));
    await fs.writeFile(host.certificateFiles().key, next.key);
    const loaded = await host.loadCertificates();
    assert.equal(loaded?.cert, next.cert);
    assert.equal(loaded?.key, next.key);
    assert.equal(existsSync(pair), false);
    // A pair file that cannot be read is left aside.
    await fs.writeFile(pair, '{"cert":');
    assert.equal((await host.loadCertificates())?.cert, next.cert);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});
