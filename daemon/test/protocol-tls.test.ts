/**
 * The TCP listener: refused without TLS except on loopback; with --tlsverify, clients must present a
 * certificate signed by the configured CA. Certificates are made with openssl for each run.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, readFileSync, writeFileSync, copyFileSync, mkdirSync } from 'node:fs';
import https from 'node:https';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { BERTHD, runCommand, startEngine, type Engine } from './harness.js';
import { freePort, startTcpEngine } from './tcp-support.js';

function openssl(cwd: string, args: string[]): void {
  const r = spawnSync('openssl', args, { cwd, encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`openssl ${args.join(' ')} failed:\n${r.stderr}`);
}

/** A CA, a server certificate for 127.0.0.1 and a client certificate, all signed by that CA. */
function makeCerts(dir: string, prefix = ''): { ca: string; caKey: string; serverCert: string; serverKey: string; clientCert: string; clientKey: string } {
  const f = (name: string) => path.join(dir, `${prefix}${name}`);
  const key = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  openssl(dir, ['req', '-x509', ...key, '-keyout', f('ca-key.pem'), '-out', f('ca.pem'), '-days', '1', '-subj', '/CN=berth test CA']);
  for (const [who, ext] of [
    ['server', 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n'],
    ['client', 'extendedKeyUsage=clientAuth\n'],
  ]) {
    writeFileSync(f(`${who}.ext`), ext);
    openssl(dir, ['req', ...key, '-keyout', f(`${who}-key.pem`), '-out', f(`${who}.csr`), '-subj', `/CN=${who}`]);
    openssl(dir, ['x509', '-req', '-in', f(`${who}.csr`), '-CA', f('ca.pem'), '-CAkey', f('ca-key.pem'), '-CAcreateserial', '-out', f(`${who}-cert.pem`), '-days', '1', '-extfile', f(`${who}.ext`)]);
  }
  return {
    ca: f('ca.pem'),
    caKey: f('ca-key.pem'),
    serverCert: f('server-cert.pem'),
    serverKey: f('server-key.pem'),
    clientCert: f('client-cert.pem'),
    clientKey: f('client-key.pem'),
  };
}

function httpsGet(port: number, urlPath: string, tls: { ca?: Buffer; cert?: Buffer; key?: Buffer }): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = https.request({ host: '127.0.0.1', port, path: urlPath, method: 'GET', ...tls, agent: false, timeout: 10_000 }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error('timed out')));
    req.on('error', reject);
    req.end();
  });
}

describe('TCP listener without TLS', () => {
  const dirs: string[] = [];
  after(() => {
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  test('a non-loopback address without TLS is refused at start with a clear message', async () => {
    for (const host of ['0.0.0.0', '192.0.2.10', '[::]']) {
      const dir = mkdtempSync('/tmp/bt-tcp-');
      dirs.push(dir);
      const r = await runCommand(process.execPath, [
        BERTHD, '-H', `tcp://${host}:2375`, '--data-root', path.join(dir, 'data'), '--exec-root', path.join(dir, 'x'), '--pidfile', path.join(dir, 'pid'),
      ], { timeoutMs: 20_000 });
      assert.notEqual(r.code, 0, `started on ${host} without TLS`);
      assert.match(r.stderr, /refusing to serve the API on .* without TLS/);
      assert.match(r.stderr, /--tlsverify/);
    }
  });

  test('--tlsverify without a CA is refused at start', async () => {
    const dir = mkdtempSync('/tmp/bt-tcp-');
    dirs.push(dir);
    const r = await runCommand(process.execPath, [
      BERTHD, '-H', 'tcp://127.0.0.1:2375', '--tlsverify', '--tlscert', '/nonexistent/cert.pem', '--tlskey', '/nonexistent/key.pem',
      '--data-root', path.join(dir, 'data'), '--exec-root', path.join(dir, 'x'), '--pidfile', path.join(dir, 'pid'),
    ], { timeoutMs: 20_000 });
    assert.notEqual(r.code, 0);
    assert.match(r.stderr, /--tlsverify needs --tlscacert/);
  });

  test('loopback TCP without TLS is served', async (t) => {
    const { engine, port } = await startTcpEngine();
    t.after(() => engine.cleanup());
    const text = await new Promise<string>((resolve, reject) => {
      http.get({ host: '127.0.0.1', port, path: '/_ping', agent: false }, (res) => {
        let body = '';
        res.on('data', (c) => (body += c));
        res.on('end', () => resolve(body));
      }).on('error', reject);
    });
    assert.equal(text, 'OK');
  });
});

describe('TCP listener with --tlsverify', () => {
  let engine: Engine;
  let certDir: string;
  let port: number;
  let certs: ReturnType<typeof makeCerts>;
  let strangerCerts: ReturnType<typeof makeCerts>;

  before(async () => {
    const which = spawnSync('which', ['openssl']);
    assert.equal(which.status, 0, 'openssl is needed to make test certificates');
    certDir = mkdtempSync(path.join(os.tmpdir(), 'berth-tls-'));
    certs = makeCerts(certDir);
    strangerCerts = makeCerts(certDir, 'other-');
    port = await freePort();
    engine = await startEngine({
      args: ['-H', `tcp://127.0.0.1:${port}`, '--tlsverify', '--tlscacert', certs.ca, '--tlscert', certs.serverCert, '--tlskey', certs.serverKey],
    });
  });
  after(async () => {
    await engine?.cleanup();
    rmSync(certDir, { recursive: true, force: true });
  });

  test('a client with a certificate signed by the CA is served', async () => {
    const r = await httpsGet(port, '/v1.44/version', { ca: readFileSync(certs.ca), cert: readFileSync(certs.clientCert), key: readFileSync(certs.clientKey) });
    assert.equal(r.status, 200);
    assert.equal(JSON.parse(r.text).ApiVersion, '1.53');
  });

  test('a client without a certificate, or with one from another CA, is refused', async () => {
    await assert.rejects(httpsGet(port, '/_ping', { ca: readFileSync(certs.ca) }));
    await assert.rejects(httpsGet(port, '/_ping', { ca: readFileSync(certs.ca), cert: readFileSync(strangerCerts.clientCert), key: readFileSync(strangerCerts.clientKey) }));
  });

  test('plain HTTP on the TLS port is not served', async () => {
    const outcome = await new Promise<string>((resolve) => {
      http
        .get({ host: '127.0.0.1', port, path: '/_ping', agent: false, timeout: 5000 }, (res) => {
          let body = '';
          res.on('data', (c) => (body += c));
          res.on('end', () => resolve(`${res.statusCode} ${body}`));
        })
        .on('error', (err) => resolve(`error ${err.message}`))
        .on('timeout', function (this: http.ClientRequest) {
          this.destroy(new Error('timeout'));
        });
    });
    assert.notEqual(outcome, '200 OK');
  });

  test('the docker CLI talks to it with DOCKER_TLS_VERIFY', async () => {
    const clientDir = path.join(certDir, 'client');
    mkdirSync(clientDir);
    copyFileSync(certs.ca, path.join(clientDir, 'ca.pem'));
    copyFileSync(certs.clientCert, path.join(clientDir, 'cert.pem'));
    copyFileSync(certs.clientKey, path.join(clientDir, 'key.pem'));
    const r = await engine.docker(['version', '--format', '{{.Server.APIVersion}}'], {
      env: { DOCKER_HOST: `tcp://127.0.0.1:${port}`, DOCKER_TLS_VERIFY: '1', DOCKER_CERT_PATH: clientDir },
    });
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout.trim(), '1.53');
    const refused = await engine.docker(['version', '--format', '{{.Server.APIVersion}}'], {
      env: { DOCKER_HOST: `tcp://127.0.0.1:${port}`, DOCKER_TLS_VERIFY: '', DOCKER_CERT_PATH: '' },
    });
    assert.notEqual(refused.stdout.trim(), '1.53');
  });
});
