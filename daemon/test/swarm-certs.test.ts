/**
 * Node certificates of a swarm across daemons in their own network namespaces (two managers, one worker):
 * `swarm update --cert-expiry` under an hour is refused; the expiry set is the one of the certificates issued
 * from then on; `swarm ca --rotate` makes a new root and has every node get a certificate from it (a new
 * serial, the new expiry), put in use by the dispatcher, the etcd members and the worker while the services'
 * tasks keep running, and sealed on the managers' disks under autolock; then the swarm and the nodes trust the
 * new root and the join tokens name it. Nodes restarted with their new certificates come back; a second
 * rotation chains back to the first root, which an etcd member started before it still trusts.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { Engine, eventually } from './harness.js';
import { NetnsCluster } from './netns.js';

const cluster = new NetnsCluster(3);
const nodes = cluster.nodes;
const engines: Engine[] = [];

before(async () => {
  cluster.setUp();
  for (let i = 0; i < 3; i++) engines.push(cluster.engine(i, { verbose: process.env.BERTH_TEST_VERBOSE === '1' }));
  await Promise.all(engines.map((e) => e.start()));
  await Promise.all([engines[0]!.loadBusybox(), engines[1]!.loadBusybox()]);
});

after(async () => {
  for (const e of engines) await e.cleanup().catch(() => undefined);
  cluster.tearDown();
});

const certFile = (e: Engine) => path.join(e.dataRoot, 'swarm', 'certificates', 'swarm-node.crt');
const keyFile = (e: Engine) => path.join(e.dataRoot, 'swarm', 'certificates', 'swarm-node.key');
const diskCert = (e: Engine) => new X509Certificate(readFileSync(certFile(e), 'utf8'));

/** The serial of the certificate a TLS server in the test's namespaces serves at ip:port. */
function servedSerial(ip: string, port: number): string {
  const r = spawnSync('sh', ['-c', `openssl s_client -connect ${ip}:${port} </dev/null 2>/dev/null | openssl x509 -noout -serial`], { encoding: 'utf8', timeout: 10_000 });
  return r.stdout.trim().replace(/^serial=/, '').toUpperCase();
}

describe('swarm node certificates', () => {
  const [m1, w1, m2] = [0, 1, 2].map((i) => new Proxy({} as Engine, { get: (_, k) => Reflect.get(engines[i]!, k, engines[i]).bind?.(engines[i]) ?? Reflect.get(engines[i]!, k, engines[i]) }));
  const ids: string[] = [];

  test('a swarm of two managers and a worker, whose certificates last 90 days', async () => {
    await m1!.dockerOk(['swarm', 'init', '--advertise-addr', nodes[0]!.ip, '--dispatcher-heartbeat', '1s']);
    const workerToken = (await m1!.dockerOk(['swarm', 'join-token', '-q', 'worker'])).trim();
    const managerToken = (await m1!.dockerOk(['swarm', 'join-token', '-q', 'manager'])).trim();
    await w1!.dockerOk(['swarm', 'join', '--token', workerToken, '--advertise-addr', nodes[1]!.ip, `${nodes[0]!.ip}:2377`]);
    await m2!.dockerOk(['swarm', 'join', '--token', managerToken, '--advertise-addr', nodes[2]!.ip, `${nodes[0]!.ip}:2377`], { timeoutMs: 60_000 });
    for (const e of [m1!, w1!, m2!]) ids.push((await e.request('GET', '/info')).json().Swarm.NodeID);
    await eventually(async () => (await m1!.request('GET', '/nodes')).json<Array<{ Status: { State: string } }>>().every((n) => n.Status.State === 'ready'), 20_000, 200);
    for (const [i, e] of [m1!, w1!, m2!].entries()) {
      const x = diskCert(e);
      const days = (Date.parse(x.validTo) - Date.now()) / 86_400_000;
      assert.ok(days > 89.9 && days < 90.1, `node-${i + 1}'s certificate lasts ${days} days`);
      assert.match(x.subject, new RegExp(`OU=swarm-${i === 1 ? 'worker' : 'manager'}\\nCN=${ids[i]}`));
    }
    // node inspect and GET /swarm show the same root: its PEM, and its subject and key as DER.
    const swarm = (await m1!.request('GET', '/swarm')).json();
    const node = (await m1!.request('GET', `/nodes/${ids[1]}`)).json();
    assert.deepEqual(node.Description.TLSInfo, swarm.TLSInfo);
    assert.equal(swarm.TLSInfo.TrustRoot, readFileSync(path.join(w1!.dataRoot, 'swarm', 'certificates', 'swarm-root-ca.crt'), 'utf8'));
    assert.equal(Buffer.from(swarm.TLSInfo.CertIssuerPublicKey, 'base64').length, 91);
    assert.equal(swarm.RootRotationInProgress, false);
  });

  test('an expiry under an hour is a 400 naming the minimum', async () => {
    const cli = await m1!.docker(['swarm', 'update', '--cert-expiry', '30m']);
    assert.notEqual(cli.code, 0);
    assert.match(cli.stderr, /minimum certificate expiry time is: 1h0m0s/);
    const swarm = (await m1!.request('GET', '/swarm')).json();
    const r = await m1!.request('POST', `/swarm/update?version=${swarm.Version.Index}`, { body: { ...swarm.Spec, CAConfig: { NodeCertExpiry: 59 * 60e9 } } });
    assert.equal(r.status, 400);
    assert.match(r.json().message, /minimum certificate expiry time is: 1h0m0s/);
    assert.equal((await m1!.request('GET', '/swarm')).json().Spec.CAConfig.NodeCertExpiry, 90 * 24 * 3600e9);
  });

  test('swarm ca --rotate: a new root, and every node a new certificate from it with the new expiry, while tasks run on', async () => {
    await m1!.dockerOk(['service', 'create', '--detach', '--name', 'steady', '--replicas', '2', '--constraint', 'node.hostname!=node-3', '--stop-grace-period', '1s', 'busybox', 'sleep', '600']);
    const running = async () => {
      const list = (await m1!.request('GET', `/tasks?filters=${encodeURIComponent(JSON.stringify({ service: ['steady'], 'desired-state': ['running'] }))}`)).json<Array<{ ID: string; NodeID: string; Status: { State: string } }>>();
      return list.filter((t) => t.Status.State === 'running');
    };
    // node-3 has no busybox: its tasks run on node-1 and the worker.
    const before = await eventually(async () => {
      const l = await running();
      return l.length === 2 ? l : undefined;
    }, 30_000, 200) as Array<{ ID: string; NodeID: string }>;
    assert.deepEqual(before.map((t) => t.NodeID).sort(), [ids[0], ids[1]].sort());
    await m1!.dockerOk(['swarm', 'update', '--autolock', '--cert-expiry', '1h']);
    const old = [m1!, w1!, m2!].map((e) => diskCert(e).serialNumber);
    // The expiry is the one of the certificates issued from now on: none was renewed for it.
    assert.deepEqual([m1!, w1!, m2!].map((e) => diskCert(e).serialNumber), old);
    const oldSwarm = (await m1!.request('GET', '/swarm')).json();
    // The CLI waits until every node has a certificate from the new root and the swarm trusts it.
    const rotateAt = Date.now();
    const out = await m1!.dockerOk(['swarm', 'ca', '--rotate'], { timeoutMs: 60_000 });
    console.log(`root rotation over 3 nodes: ${Date.now() - rotateAt} ms from swarm ca --rotate to the CLI's return`);
    const swarm = (await m1!.request('GET', '/swarm')).json();
    assert.notEqual(swarm.TLSInfo.TrustRoot, oldSwarm.TLSInfo.TrustRoot);
    assert.ok(out.trim().endsWith(swarm.TLSInfo.TrustRoot.trim()), out);
    assert.notEqual(swarm.TLSInfo.CertIssuerPublicKey, oldSwarm.TLSInfo.CertIssuerPublicKey);
    assert.equal(swarm.RootRotationInProgress, false);
    // The join tokens name the new root.
    assert.notEqual(swarm.JoinTokens.Worker.split('-')[2], oldSwarm.JoinTokens.Worker.split('-')[2]);
    const root = new X509Certificate(swarm.TLSInfo.TrustRoot);
    const renewed = await eventually(() => {
      const now = [m1!, w1!, m2!].map((e) => diskCert(e));
      return now.every((x, i) => x.serialNumber !== old[i]) ? now : undefined;
    }, 30_000, 200) as X509Certificate[];
    for (const [i, x] of renewed.entries()) {
      const hours = (Date.parse(x.validTo) - Date.now()) / 3_600_000;
      assert.ok(hours > 0.95 && hours <= 1, `node-${i + 1}'s new certificate lasts ${hours} hours`);
      assert.match(x.subject, new RegExp(`CN=${ids[i]}$`));
      assert.ok(x.checkIssued(root) && x.verify(root.publicKey), `node-${i + 1}'s new certificate is not from the new root`);
      const node = (await m1!.request('GET', `/nodes/${ids[i]}`)).json();
      assert.deepEqual(node.Description.TLSInfo, swarm.TLSInfo);
    }
    // Every node trusts the new root from now on (on disk too).
    await eventually(() => [m1!, w1!, m2!].every((e) => readFileSync(path.join(e.dataRoot, 'swarm', 'certificates', 'swarm-root-ca.crt'), 'utf8') === swarm.TLSInfo.TrustRoot), 20_000, 200);
    // Under autolock the managers' new keys are sealed on disk; the worker's is its own.
    assert.match(readFileSync(keyFile(m1!), 'utf8'), /^berth-locked:/);
    assert.match(readFileSync(keyFile(m2!), 'utf8'), /^berth-locked:/);
    assert.match(readFileSync(keyFile(w1!), 'utf8'), /BEGIN PRIVATE KEY/);
    // The dispatchers and the etcd members (client and peer ports) serve the new certificates.
    for (const [i, e] of [[0, m1!], [2, m2!]] as const) {
      const serial = diskCert(e).serialNumber;
      for (const port of [2377, 2379, 2380]) assert.equal(servedSerial(nodes[i]!.ip, port), serial, `node-${i + 1}:${port}`);
    }
    // The tasks ran on, and the cluster goes on: both managers answer and write, the worker reports.
    assert.deepEqual((await running()).map((t) => t.ID).sort(), before.map((t) => t.ID).sort());
    await m2!.dockerOk(['service', 'create', '--detach', '--name', 'after', '--constraint', 'node.role==worker', '--stop-grace-period', '1s', 'busybox', 'sleep', '600']);
    await eventually(async () => {
      const l = (await m1!.request('GET', `/tasks?filters=${encodeURIComponent(JSON.stringify({ service: ['after'] }))}`)).json<Array<{ NodeID: string; Status: { State: string } }>>();
      return l.some((t) => t.NodeID === ids[1] && t.Status.State === 'running');
    }, 30_000, 200);
  });

  test('restarted with their renewed certificates, a worker and a manager (unlocked with its key) come back', async () => {
    const serials = [w1!, m2!].map((e) => diskCert(e).serialNumber);
    const unlockKey = (await m1!.dockerOk(['swarm', 'unlock-key', '-q'])).trim();
    await w1!.restart();
    await eventually(async () => (await w1!.request('GET', '/info')).json().Swarm.LocalNodeState === 'active', 20_000, 200);
    await eventually(async () => (await m1!.request('GET', `/nodes/${ids[1]}`)).json().Status.State === 'ready', 20_000, 200);
    // The manager's renewed key is sealed under the unlock key; its etcd member starts with the new pair.
    await m2!.restart();
    assert.equal((await m2!.request('GET', '/info')).json().Swarm.LocalNodeState, 'locked');
    await m2!.dockerOk(['swarm', 'unlock'], { input: `${unlockKey}\n` });
    await eventually(async () => {
      const r = await m2!.docker(['node', 'ls']);
      return r.code === 0 && /node-3\s+Ready\s+Active\s+Reachable/.test(r.stdout);
    }, 30_000, 300);
    assert.equal(servedSerial(nodes[2]!.ip, 2380), serials[1]);
    await m2!.dockerOk(['service', 'scale', '--detach', 'after=2']);
    assert.deepEqual([w1!, m2!].map((e) => diskCert(e).serialNumber), serials);
  });

  test('after the rotation a token of the old root is refused, and the new token joins', async () => {
    const oldToken = `SWMTKN-1-${'0'.repeat(50)}-${'0'.repeat(25)}`;
    const token = (await m1!.dockerOk(['swarm', 'join-token', '-q', 'worker'])).trim();
    await w1!.dockerOk(['swarm', 'leave', '--force']);
    const refused = await w1!.docker(['swarm', 'join', '--token', oldToken, `${nodes[0]!.ip}:2377`]);
    assert.match(refused.stderr, /remote CA does not match fingerprint/);
    await w1!.dockerOk(['swarm', 'join', '--token', token, '--advertise-addr', nodes[1]!.ip, `${nodes[2]!.ip}:2377`]);
    const root = new X509Certificate((await m1!.request('GET', '/swarm')).json().TLSInfo.TrustRoot);
    assert.ok(diskCert(w1!).checkIssued(root));
    const id = (await w1!.request('GET', '/info')).json().Swarm.NodeID;
    await eventually(async () => (await m1!.request('GET', `/nodes/${id}`)).json().Status.State === 'ready', 20_000, 200);
  });

  test('a second rotation: certificates carry the chain back to the first root, which node-1\'s etcd member still trusts', async () => {
    const before = (await m1!.request('GET', '/swarm')).json().TLSInfo.TrustRoot;
    // The worker's node of before it left is down: the rotation goes on without it (the CLI, which counts
    // every node, would wait for it to be removed: detached).
    await m2!.dockerOk(['swarm', 'ca', '--rotate', '--detach']);
    const swarm = await eventually(async () => {
      const sw = (await m1!.request('GET', '/swarm')).json();
      return sw.TLSInfo.TrustRoot !== before && !sw.RootRotationInProgress ? sw : undefined;
    }, 20_000, 200);
    assert.notEqual(swarm.TLSInfo.TrustRoot, before);
    const root = new X509Certificate(swarm.TLSInfo.TrustRoot);
    await eventually(() => [m1!, w1!, m2!].every((e) => diskCert(e).checkIssued(root)), 20_000, 200);
    // The leaf, the new root signed by the last, and the last signed by the first.
    const chain = readFileSync(certFile(m1!), 'utf8').match(/BEGIN CERTIFICATE/g) ?? [];
    assert.equal(chain.length, 3);
    // node-1's member (started with the first root) and node-3's (with the second) take each other's new pair.
    for (const [i, e] of [[0, m1!], [2, m2!]] as const) assert.equal(servedSerial(nodes[i]!.ip, 2380), diskCert(e).serialNumber);
    // node-1 starts again: its member now trusts the third root, node-3's the second; they handshake anew.
    const unlockKey = (await m1!.dockerOk(['swarm', 'unlock-key', '-q'])).trim();
    await m1!.restart();
    await m1!.dockerOk(['swarm', 'unlock'], { input: `${unlockKey}\n` });
    await eventually(async () => {
      const r = await m1!.docker(['node', 'ls']);
      return r.code === 0 && /node-1\s+Ready\s+Active\s+(Leader|Reachable)/.test(r.stdout) && /node-3\s+Ready\s+Active\s+(Leader|Reachable)/.test(r.stdout);
    }, 30_000, 300);
    await m1!.dockerOk(['service', 'create', '--detach', '--name', 'second', '--constraint', 'node.role==worker', '--stop-grace-period', '1s', 'busybox', 'sleep', '600']);
    await eventually(async () => {
      const l = (await m2!.request('GET', `/tasks?filters=${encodeURIComponent(JSON.stringify({ service: ['second'] }))}`)).json<Array<{ Status: { State: string } }>>();
      return l.some((t) => t.Status.State === 'running');
    }, 30_000, 200);
  });
});
