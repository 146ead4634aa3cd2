/**
 * Sandboxes end to end: containers given an egress network policy through the `berth.network-policy` label
 * (docker run --label) or the sandbox service, against a real berthd and real servers. The servers run in
 * network namespaces the test makes (busybox httpd), reached through veths routed by the host; names come
 * from the test's own DNS server, the embedded DNS server's upstream (BERTH_DNS_UPSTREAM). Nothing leaves
 * the machine.
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import dgram from 'node:dgram';
import { mkdirSync, readFileSync, writeFileSync, existsSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { Ajv } from 'ajv';
import { buildAnswer, parseQuery, RCODE_NXDOMAIN } from '../src/host/linux/network/dns/message.js';
import { LinuxSandboxHost } from '../src/host/linux/network/sandbox.js';
import { SandboxService } from '../src/engine/sandbox/service.js';
import type { ContainerRecord } from '../src/engine/containers/model.js';
import { BERTHD, eventually, runCommand, startEngine, tmpdir, type Engine } from './harness.js';

const tag = Math.random().toString(16).slice(2, 6);
// A /16 of 10/8 the host is unlikely to use; the three servers live in 10.N.1.0/24, 10.N.2.0/24, 10.N.3.0/24.
const N = 100 + Math.floor(Math.random() * 150);
const net = (i: number, host: number) => `10.${N}.${i}.${host}`;

function sh(cmd: string): string {
  const r = spawnSync('sh', ['-c', cmd], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`${cmd}: ${r.stderr}`);
  return r.stdout;
}

/** A namespace with one veth to the host (10.N.i.1 on the host, 10.N.i.2 inside) and an httpd saying `name`. */
function startServer(i: number, name: string, root: string): { ns: string; hostIf: string; httpd: ChildProcess; ticker: ChildProcess } {
  const ns = `sbx${tag}${i}`;
  const hostIf = `sbh${tag}${i}`;
  sh(`ip netns add ${ns}`);
  sh(`ip link add ${hostIf} type veth peer name eth0 netns ${ns}`);
  sh(`ip addr add ${net(i, 1)}/24 dev ${hostIf} && ip link set ${hostIf} up`);
  sh(`ip -n ${ns} addr add ${net(i, 2)}/24 dev eth0 && ip -n ${ns} link set eth0 up && ip -n ${ns} link set lo up`);
  sh(`ip -n ${ns} route add default via ${net(i, 1)}`);
  const dir = path.join(root, name);
  mkdirSync(dir, { recursive: true });
  writeFileSync(path.join(dir, 'index.html'), `${name}\n`);
  const httpd = spawn('ip', ['netns', 'exec', ns, 'busybox', 'httpd', '-f', '-p', '80', '-h', dir], { stdio: 'ignore' });
  // Port 81: a line a second for as long as the client stays.
  const ticker = spawn('ip', ['netns', 'exec', ns, 'busybox', 'nc', '-ll', '-p', '81', '-e', 'busybox', 'sh', '-c', 'while echo tick; do sleep 1; done'], { stdio: 'ignore' });
  return { ns, hostIf, httpd, ticker };
}

/** The test's DNS server: names of `zone` from a table (A records, TTL given), everything else NXDOMAIN. */
async function startResolver(address: string, port: number, zone: Map<string, { address: string; ttl: number }>) {
  const socket = dgram.createSocket('udp4');
  socket.on('message', (msg, rinfo) => {
    const q = parseQuery(msg);
    if (!q) return;
    const entry = zone.get(q.name);
    const answer = entry && q.type === 1 ? buildAnswer(msg, q, [entry.address], 0, entry.ttl) : buildAnswer(msg, q, [], entry ? 0 : RCODE_NXDOMAIN);
    socket.send(answer, rinfo.port, rinfo.address);
  });
  await new Promise<void>((resolve) => socket.bind(port, address, resolve));
  return { port: socket.address().port, close: () => socket.close() };
}

describe('sandboxes: egress network policies enforced in the kernel', () => {
  let engine: Engine;
  const root = tmpdir();
  const servers: Array<ReturnType<typeof startServer>> = [];
  const zone = new Map<string, { address: string; ttl: number }>();
  const resolvers: Array<{ close(): void }> = [];
  const previous = process.env.BERTH_DNS_UPSTREAM;
  const containers: string[] = [];

  before(async () => {
    servers.push(startServer(1, 'server-a', root), startServer(2, 'server-b', root), startServer(3, 'server-c', root));
    zone.set('a.sbx.test', { address: net(1, 2), ttl: 600 });
    zone.set('c.sbx.test', { address: net(3, 2), ttl: 600 });
    zone.set('www.wild.test', { address: net(2, 2), ttl: 600 });
    const upstream = await startResolver('127.0.0.1', 0, zone);
    // Another resolver, on the host's address toward server C: reachable only where the policy lets it.
    const other = await startResolver(net(3, 1), 53, zone);
    resolvers.push(upstream, other);
    process.env.BERTH_DNS_UPSTREAM = `127.0.0.1:${upstream.port}`;
    engine = await startEngine();
    await engine.loadBusybox();
    await engine.dockerOk(['network', 'create', `sbxnet${tag}`]);
  });

  after(async () => {
    for (const id of containers) await engine?.docker(['rm', '-f', id]).catch(() => undefined);
    for (const id of containers) spawnSync('nft', ['delete', 'table', 'netdev', `berth_sbx_${id.slice(0, 12)}`]);
    await engine?.cleanup();
    for (const r of resolvers) r.close();
    for (const s of servers) {
      for (const child of [s.httpd, s.ticker]) if (child.pid) process.kill(child.pid, 'SIGKILL');
      spawnSync('ip', ['link', 'del', s.hostIf]);
      spawnSync('ip', ['netns', 'del', s.ns]);
    }
    spawnSync('rm', ['-rf', root]);
    if (previous === undefined) delete process.env.BERTH_DNS_UPSTREAM;
    else process.env.BERTH_DNS_UPSTREAM = previous;
  });

  const run = async (args: string[]) => {
    const id = (await engine.dockerOk(['run', '-d', '--network', `sbxnet${tag}`, ...args, 'busybox', 'sleep', '600'])).trim();
    containers.push(id);
    return id;
  };
  /** Runs a command in the container; answers its output, its exit code and how long it took (ms). */
  const exec = async (id: string, script: string) => {
    const start = Date.now();
    const r = await engine.docker(['exec', id, 'sh', '-c', script]);
    return { ...r, ms: Date.now() - start };
  };
  const fetch = (id: string, target: string) => exec(id, `timeout 8 wget -q -O - http://${target}/`);
  /** The page of a server the container reaches. */
  const page = async (id: string, target: string) => {
    const r = await fetch(id, target);
    assert.equal(r.code, 0, `${target}: ${r.stderr}`);
    return r.stdout.trim();
  };
  /** A connection refused by the policy: fails, says so, and well before the 8 s timeout. */
  const assertRefused = (r: Awaited<ReturnType<typeof exec>>, what: string) => {
    assert.notEqual(r.code, 0, `${what} should be refused: ${r.stdout}`);
    assert.match(r.stderr, /refused|unreachable|prohibited/i, `${what}: ${r.stderr}`);
    assert.ok(r.ms < 4000, `${what} was refused after ${r.ms} ms (a timeout, not a refusal)`);
  };

  /** The sandbox service on the engine's data root, with the real kernel (as the daemon's API will call it). */
  const service = (interfaces: () => string[]) =>
    new SandboxService(
      {
        find: (ref) => {
          const file = path.join(engine.dataRoot, 'containers', ref, 'container.json');
          return existsSync(file) ? (JSON.parse(readFileSync(file, 'utf8')) as ContainerRecord) : undefined;
        },
        dir: (id) => path.join(engine.dataRoot, 'containers', id),
        all: () => [],
      },
      { hostInterfaces: () => interfaces() },
      new LinuxSandboxHost(),
    );
  /** The host end of the container's eth0. */
  const hostInterface = async (id: string): Promise<string> => {
    const index = (await exec(id, 'cat /sys/class/net/eth0/iflink')).stdout.trim();
    const name = readdirSync('/sys/class/net').find((n) => readFileSync(`/sys/class/net/${n}/ifindex`, 'utf8').trim() === index);
    assert.ok(name, `no host interface with index ${index}`);
    return name;
  };

  const policy = {
    defaultAction: 'deny',
    rules: [
      { action: 'allow', domain: 'a.sbx.test', protocol: 'tcp', ports: [80, 81] },
      { action: 'allow', cidr: `10.${N}.2.0/24` },
    ],
  };

  test('a bad policy label, or one on a container that could remove it, is refused at create with its reason', async () => {
    const bad = await engine.docker(['create', '--label', 'berth.network-policy={"defaultAction":"deny","rules":[{"action":"allow","cidr":"10.0.0.0/40"}]}', 'busybox']);
    assert.notEqual(bad.code, 0);
    assert.match(bad.stderr, /invalid network policy: rules\[0\]\.cidr is not/);
    const notJson = await engine.docker(['create', '--label', 'berth.network-policy=deny', 'busybox']);
    assert.match(notJson.stderr, /invalid network policy: the label berth.network-policy is not JSON/);
    const admin = await engine.docker(['create', '--cap-add', 'NET_ADMIN', '--label', `berth.network-policy=${JSON.stringify(policy)}`, 'busybox']);
    assert.match(admin.stderr, /NET_ADMIN cannot have a network policy/);
    const privileged = await engine.request('POST', '/containers/create', { body: { Image: 'busybox', Labels: { 'berth.network-policy': JSON.stringify(policy) }, HostConfig: { Privileged: true } } });
    assert.equal(privileged.status, 400);
    assert.match(privileged.json().message, /privileged/);
  });

  test('the label policy lets the container reach exactly what it allows, and refuses the rest at once', async () => {
    const open = await run([]);
    const sbx = await run(['--label', `berth.network-policy=${JSON.stringify(policy)}`]);
    // Without a policy, everything is reachable: the refusals below are the policy's.
    assert.equal((await page(open, net(3, 2))), 'server-c');
    assert.equal((await exec(open, `ping -c1 -W3 ${net(3, 2)}`)).code, 0);
    assert.equal((await exec(open, `nslookup c.sbx.test ${net(3, 1)}`)).code, 0);

    // The domain's address before the container resolved the name: not allowed.
    assertRefused(await fetch(sbx, net(1, 2)), 'server A by address before resolution');
    assert.equal((await page(sbx, 'a.sbx.test')), 'server-a');
    assert.equal((await page(sbx, net(2, 2))), 'server-b');
    assert.equal((await exec(sbx, `ping -c1 -W3 ${net(2, 2)}`)).code, 0, 'the CIDR rule allows any protocol');
    // Refused: a name resolved (DNS itself is allowed) to an address no rule allows, the address itself, a raw
    // socket (ping), a port the domain rule does not name, and another resolver than the embedded one.
    assertRefused(await fetch(sbx, 'c.sbx.test'), 'server C by name');
    assertRefused(await fetch(sbx, net(3, 2)), 'server C by address');
    assertRefused(await fetch(sbx, `a.sbx.test:8080`), 'server A on another port');
    const ping = await exec(sbx, `ping -c1 -W3 ${net(3, 2)}`);
    assert.notEqual(ping.code, 0, ping.stdout);
    const resolver = await exec(sbx, `nslookup c.sbx.test ${net(3, 1)}`);
    assert.notEqual(resolver.code, 0, resolver.stdout);
  });

  test('a connection a domain rule let through outlives the answer\'s TTL; a new one after it is refused', async () => {
    const sbx = await run(['--label', `berth.network-policy=${JSON.stringify(policy)}`]);
    zone.set('a.sbx.test', { address: net(1, 2), ttl: 2 });
    try {
      // Six seconds of ticks over one connection opened right after the answer (TTL 2 s).
      const stream = await exec(sbx, 'timeout 6 nc a.sbx.test 81 | wc -l');
      assert.ok(Number(stream.stdout.trim()) >= 5, `the connection ended early: ${stream.stdout} ${stream.stderr}`);
      assertRefused(await fetch(sbx, net(1, 2)), 'server A by address once the TTL is over');
      assert.equal(await page(sbx, 'a.sbx.test'), 'server-a');
    } finally {
      zone.set('a.sbx.test', { address: net(1, 2), ttl: 600 });
    }
  });

  test('a new generation takes effect on the running container; the effective view follows the names', async () => {
    const sbx = await run(['--label', `berth.network-policy=${JSON.stringify(policy)}`]);
    const veth = await hostInterface(sbx);
    const sandboxes = service(() => [veth]);
    const first = await sandboxes.view(sbx);
    assert.equal(first.generation, 1);
    assert.deepEqual(first.exact, policy);
    assert.deepEqual(first.effective.rules, [{ action: 'allow', protocol: 'any', cidr: `10.${N}.2.0/24` }]);

    // The name resolved: its address is in the effective view, with its expiry.
    zone.set('a.sbx.test', { address: net(1, 2), ttl: 3 });
    assert.equal((await exec(sbx, 'nslookup a.sbx.test')).code, 0);
    const resolved = await sandboxes.view(sbx);
    const domainRules = (v: typeof resolved) => v.effective.rules.filter((r) => r.domain);
    assert.deepEqual(domainRules(resolved).map((r) => [r.domain, r.cidr, r.protocol, r.ports]), [['a.sbx.test', `${net(1, 2)}/32`, 'tcp', [80, 81]]]);
    assert.ok(Date.parse(domainRules(resolved)[0].expiresAt!) > Date.now());
    // The name moves to another address: once the old answer's TTL is over, the view (and the kernel) has the new one only.
    zone.set('a.sbx.test', { address: net(2, 7), ttl: 600 });
    await new Promise((r) => setTimeout(r, 4000));
    assert.equal((await exec(sbx, 'nslookup a.sbx.test')).code, 0);
    const moved = await sandboxes.view(sbx);
    assert.deepEqual(domainRules(moved).map((r) => r.cidr), [`${net(2, 7)}/32`]);
    zone.set('a.sbx.test', { address: net(1, 2), ttl: 600 });

    // Generation 2: server C's network only.
    const next = { defaultAction: 'deny', rules: [{ action: 'allow', cidr: `10.${N}.3.0/24` }] };
    const installed = await sandboxes.install(sbx, next);
    assert.equal(installed.generation, 2);
    assert.deepEqual(installed.exact, next);
    assert.equal((await page(sbx, net(3, 2))), 'server-c');
    assertRefused(await fetch(sbx, net(2, 2)), 'server B under generation 2');
    assert.equal((await sandboxes.view(sbx)).generation, 2);
    await assert.rejects(sandboxes.install(sbx, { defaultAction: 'deny', rules: [{ action: 'allow' }] }), /rules\[0\] needs exactly one of cidr and domain/);
    await assert.rejects(sandboxes.view('f'.repeat(64)), /No such container/);
  });

  test('on the default bridge, a sandbox resolves through the embedded DNS server and its domain rules take the answers', async () => {
    const onBridge = async (args: string[]) => {
      const id = (await engine.dockerOk(['run', '-d', ...args, 'busybox', 'sleep', '600'])).trim();
      containers.push(id);
      return id;
    };
    const open = await onBridge([]);
    const sbx = await onBridge(['--label', `berth.network-policy=${JSON.stringify(policy)}`]);
    // As with Docker, a container of the default bridge without a policy keeps the host's resolvers.
    assert.doesNotMatch((await exec(open, 'cat /etc/resolv.conf')).stdout, /127\.0\.0\.11/);
    assert.match((await exec(sbx, 'cat /etc/resolv.conf')).stdout, /^nameserver 127\.0\.0\.11$/m);
    assertRefused(await fetch(sbx, net(1, 2)), 'server A by address before resolution');
    assert.equal(await page(sbx, 'a.sbx.test'), 'server-a');
    assert.equal(await page(sbx, net(2, 2)), 'server-b');
    assertRefused(await fetch(sbx, 'c.sbx.test'), 'server C by name');
    const veth = await hostInterface(sbx);
    const view = await service(() => [veth]).view(sbx);
    assert.deepEqual(view.effective.rules.filter((r) => r.domain).map((r) => [r.domain, r.cidr]), [['a.sbx.test', `${net(1, 2)}/32`]]);
    // A container in the sandbox's namespace resolves through the same server.
    const joined = await engine.docker(['run', '--rm', '--network', `container:${sbx}`, 'busybox', 'sh', '-c', 'cat /etc/resolv.conf && nslookup a.sbx.test']);
    assert.equal(joined.code, 0, joined.stderr);
    assert.match(joined.stdout, /^nameserver 127\.0\.0\.11$/m);
    // The names of the default bridge stay unanswered (Docker's default bridge has no names).
    const other = (await engine.dockerOk(['inspect', '-f', '{{.Name}}', open])).trim().replace(/^\//, '');
    assert.notEqual((await exec(sbx, `nslookup ${other}`)).code, 0);
    // A policy given by PUT to a running container of the default bridge: the embedded DNS server serves it
    // from then on, and its resolv.conf names it.
    const run = async (args: string[]) => {
      const r = await runCommand(process.execPath, [BERTHD, ...args, '--data-root', engine.dataRoot], { timeoutMs: 30_000 });
      assert.equal(r.code, 0, r.stderr);
      return r.stdout.trim();
    };
    await run(['user', 'add', `bridge${tag}`]);
    const token = await run(['token', 'create', `bridge${tag}`, '--permission', 'networkPoliciesWrite']);
    const later = await onBridge([]);
    const put = await engine.request('PUT', `/v1/sandboxes/${later}/network-policies`, { headers: { Authorization: `Bearer ${token}` }, body: policy });
    assert.equal(put.status, 200, put.text);
    assert.match((await exec(later, 'cat /etc/resolv.conf')).stdout, /^nameserver 127\.0\.0\.11$/m);
    assert.equal(await page(later, 'a.sbx.test'), 'server-a');
    assertRefused(await fetch(later, 'c.sbx.test'), 'server C by name, after the PUT');
    // After a daemon restart the embedded DNS server serves both again.
    await engine.stop();
    await engine.start();
    for (const id of [sbx, later]) {
      assert.equal((await exec(id, 'nslookup a.sbx.test')).code, 0);
      assert.equal(await page(id, 'a.sbx.test'), 'server-a');
    }
  });

  test('what the policy allows to a container of the sandbox\'s network is handed to its veth; the table follows who is there', async () => {
    const subnet = (await engine.dockerOk(['network', 'inspect', '-f', '{{(index .IPAM.Config 0).Subnet}}', `sbxnet${tag}`])).trim();
    const peer = await run([]);
    const sbx = await run(['--label', `berth.network-policy=${JSON.stringify({ defaultAction: 'deny', rules: [{ action: 'allow', cidr: subnet, protocol: 'tcp', ports: [80] }] })}`]);
    const table = `berth_sbx_${sbx.slice(0, 12)}`;
    const peers = () => {
      const listed = JSON.parse(spawnSync('nft', ['-j', 'list', 'map', 'netdev', table, 'peers'], { encoding: 'utf8' }).stdout) as { nftables: Array<{ map?: { elem?: Array<[string, string]> } }> };
      return new Map(listed.nftables.flatMap((x) => x.map?.elem ?? []).map(([mac, dev]) => [mac.toLowerCase(), dev]));
    };
    const macOf = async (id: string) => (await engine.dockerOk(['inspect', '-f', `{{.NetworkSettings.Networks.sbxnet${tag}.MacAddress}}`, id])).trim().toLowerCase();
    const ipOf = async (id: string) => (await engine.dockerOk(['inspect', '-f', `{{.NetworkSettings.Networks.sbxnet${tag}.IPAddress}}`, id])).trim();
    assert.equal(peers().get(await macOf(peer)), await hostInterface(peer));
    assert.ok(!peers().has(await macOf(sbx)), 'the sandbox is no peer of its own');
    // A container that comes later is added, and goes when it goes.
    const web = (await engine.dockerOk(['run', '-d', '--network', `sbxnet${tag}`, 'busybox', 'httpd', '-f', '-p', '80', '-h', '/etc'])).trim();
    containers.push(web);
    const webMac = await macOf(web);
    await eventually(() => peers().has(webMac) || undefined);
    assert.equal((await exec(sbx, `timeout 8 wget -q -O - http://${await ipOf(web)}/hostname`)).code, 0);
    // The policy still decides first: another port of the same peer is refused, and so is ICMP.
    assertRefused(await exec(sbx, `timeout 8 wget -q -O - http://${await ipOf(web)}:81/`), 'a port the policy does not allow');
    assert.notEqual((await exec(sbx, `ping -c1 -W2 ${await ipOf(web)}`)).code, 0);
    await engine.dockerOk(['rm', '-f', web]);
    await eventually(() => !peers().has(webMac) || undefined);
  });

  test('a network connected to the running sandbox is held to its policy too', async () => {
    await engine.dockerOk(['network', 'create', `sbxtwo${tag}`]);
    const web = (await engine.dockerOk(['run', '-d', '--network', `sbxtwo${tag}`, 'busybox', 'httpd', '-f', '-p', '80', '-h', '/etc'])).trim();
    containers.push(web);
    const webIp = (await engine.dockerOk(['inspect', '-f', `{{.NetworkSettings.Networks.sbxtwo${tag}.IPAddress}}`, web])).trim();
    const sbx = await run(['--label', `berth.network-policy=${JSON.stringify(policy)}`]);
    await engine.dockerOk(['network', 'connect', `sbxtwo${tag}`, sbx]);
    const table = `berth_sbx_${sbx.slice(0, 12)}`;
    await eventually(() => (spawnSync('nft', ['list', 'table', 'netdev', table], { encoding: 'utf8' }).stdout.match(/jump rules/g) ?? []).length === 2 || undefined);
    // The server is on the new interface's own subnet: reached through eth1, refused there (and served to a
    // container of that network without a policy).
    const get = `timeout 8 wget -q -O - http://${webIp}/hostname`;
    const open = (await engine.dockerOk(['run', '-d', '--network', `sbxtwo${tag}`, 'busybox', 'sleep', '600'])).trim();
    containers.push(open);
    assert.equal((await exec(open, get)).code, 0);
    assertRefused(await exec(sbx, get), 'a server on the connected network');
  });

  test('GET and PUT /v1/sandboxes/{id}/network-policies answer the views and install a new generation', async () => {
    const berthd = async (args: string[]) => {
      const r = await runCommand(process.execPath, [BERTHD, ...args, '--data-root', engine.dataRoot], { timeoutMs: 30_000 });
      assert.equal(r.code, 0, r.stderr);
      return r.stdout.trim();
    };
    await berthd(['user', 'add', `sbx${tag}`]);
    const token = await berthd(['token', 'create', `sbx${tag}`, '--permission', 'networkPoliciesRead', '--permission', 'networkPoliciesWrite']);
    const headers = { Authorization: `Bearer ${token}` };
    const sbx = await run(['--label', `berth.network-policy=${JSON.stringify(policy)}`]);
    const url = `/v1/sandboxes/${sbx}/network-policies`;
    const read = await engine.request('GET', url, { headers });
    assert.equal(read.status, 200, read.text);
    assert.equal(read.json().generation, 1);
    assert.deepEqual(read.json().exact, policy);
    const next = { defaultAction: 'deny', rules: [{ action: 'allow', cidr: `10.${N}.3.0/24` }] };
    const put = await engine.request('PUT', url, { headers, body: next });
    assert.equal(put.status, 200, put.text);
    assert.equal(put.json().generation, 2);
    assert.deepEqual(put.json().effective, { defaultAction: 'deny', rules: [{ action: 'allow', protocol: 'any', cidr: `10.${N}.3.0/24` }] });
    assert.equal(await page(sbx, net(3, 2)), 'server-c');
    assertRefused(await fetch(sbx, net(2, 2)), 'server B after the PUT');
    const bad = await engine.request('PUT', url, { headers, body: { defaultAction: 'deny', rules: [{ action: 'allow', cidr: 'nowhere' }] } });
    assert.equal(bad.status, 400, bad.text);
    assert.match(bad.json().message, /rules\[0\]\.cidr is not/);
    const plain = await run([]);
    assert.equal((await engine.request('GET', `/v1/sandboxes/${plain}/network-policies`, { headers })).status, 404);
  });

  test('the sandbox routes on the real daemon: 401, 403, 404 notFound, 400 invalidArgument and the view\'s shape', async () => {
    const berthd = async (args: string[]) => {
      const r = await runCommand(process.execPath, [BERTHD, ...args, '--data-root', engine.dataRoot], { timeoutMs: 30_000 });
      assert.equal(r.code, 0, r.stderr);
      return r.stdout.trim();
    };
    await berthd(['user', 'add', `shape${tag}`]);
    const read = await berthd(['token', 'create', `shape${tag}`, '--permission', 'networkPoliciesRead']);
    const write = await berthd(['token', 'create', `shape${tag}`, '--permission', 'networkPoliciesWrite']);
    const engineWrite = await berthd(['token', 'create', `shape${tag}`, '--permission', 'engineWrite']);
    const as = (token: string) => ({ Authorization: `Bearer ${token}` });
    const name = `shaped${tag}`;
    const sbx = await run(['--name', name, '--label', `berth.network-policy=${JSON.stringify(policy)}`]);
    assert.equal((await page(sbx, 'a.sbx.test')), 'server-a');
    const error = (r: { status: number; json(): any }, status: number, code: string, message?: RegExp) => {
      assert.equal(r.status, status);
      const body = r.json();
      assert.deepEqual(Object.keys(body).sort(), ['code', 'details', 'message']);
      assert.equal(body.code, code);
      assert.ok(Array.isArray(body.details) && typeof body.message === 'string' && body.message.length > 0);
      if (message) assert.match(body.message, message);
    };
    const url = (ref: string) => `/v1/sandboxes/${ref}/network-policies`;
    error(await engine.request('GET', url(sbx)), 401, 'unauthenticated', /bearer token/);
    error(await engine.request('GET', url(sbx), { headers: as(`${read.slice(0, -2)}xx`) }), 401, 'unauthenticated');
    error(await engine.request('GET', url(sbx), { headers: as(engineWrite) }), 403, 'permissionDenied', /networkPoliciesRead/);
    error(await engine.request('PUT', url(sbx), { headers: as(read), body: policy }), 403, 'permissionDenied', /networkPoliciesWrite/);
    error(await engine.request('GET', url('nosuchsandbox'), { headers: as(read) }), 404, 'notFound', /nosuchsandbox/);
    error(await engine.request('PUT', url('nosuchsandbox'), { headers: as(write), body: policy }), 404, 'notFound', /nosuchsandbox/);
    error(await engine.request('PUT', url(sbx), { headers: as(write), body: { defaultAction: 'maybe' } }), 400, 'invalidArgument', /defaultAction/);
    error(await engine.request('PUT', url(sbx), { headers: as(write), body: '[1]' }), 400, 'invalidArgument');
    error(await engine.request('DELETE', url(sbx), { headers: as(write) }), 404, 'notFound');

    // The view, by id, name and id prefix: one shape (every field typed; nothing else).
    const ajv = new Ajv({ strict: false });
    const rule = {
      type: 'object',
      required: ['action', 'protocol', 'cidr'],
      properties: {
        action: { enum: ['allow', 'deny'] },
        protocol: { enum: ['tcp', 'udp', 'any'] },
        ports: { type: 'array', items: { type: ['integer', 'string'] } },
        cidr: { type: 'string' },
        domain: { type: 'string' },
        expiresAt: { type: 'string', pattern: '^\\d{4}-\\d\\d-\\d\\dT' },
      },
      additionalProperties: false,
    };
    const validView = ajv.compile({
      type: 'object',
      required: ['sandbox', 'generation', 'installedAt', 'exact', 'effective'],
      properties: {
        sandbox: { type: 'string', pattern: '^[0-9a-f]{64}$' },
        generation: { type: 'integer', minimum: 1 },
        installedAt: { type: 'string', pattern: '^\\d{4}-\\d\\d-\\d\\dT' },
        exact: { type: 'object' },
        effective: { type: 'object', required: ['defaultAction', 'rules'], properties: { defaultAction: { enum: ['allow', 'deny'] }, rules: { type: 'array', items: rule } }, additionalProperties: false },
      },
      additionalProperties: false,
    });
    for (const ref of [sbx, name, sbx.slice(0, 10)]) {
      const r = await engine.request('GET', url(ref), { headers: as(read) });
      assert.equal(r.status, 200, r.text);
      assert.equal(r.headers['content-type'], 'application/json');
      const view = r.json();
      assert.ok(validView(view), JSON.stringify(validView.errors));
      assert.equal(view.sandbox, sbx);
      assert.deepEqual(view.effective.rules.map((x: { domain?: string; cidr: string }) => x.domain ?? x.cidr), ['a.sbx.test', `10.${N}.2.0/24`]);
    }
    const put = await engine.request('PUT', url(name), { headers: as(write), body: policy });
    assert.equal(put.status, 200, put.text);
    assert.ok(validView(put.json()), JSON.stringify(validView.errors));
    assert.equal(put.json().generation, 2);
  });

  test('a new generation meets connections already open: one it no longer allows is reset, one it allows goes on', async () => {
    const sbx = await run(['--label', `berth.network-policy=${JSON.stringify(policy)}`]);
    const veth = await hostInterface(sbx);
    const sandboxes = service(() => [veth]);
    // Two live streams of a line a second: to server B (the CIDR rule) and to server A (the domain rule).
    await engine.dockerOk(['exec', '-d', sbx, 'sh', '-c', `nc ${net(2, 2)} 81 > /tmp/b 2>/tmp/b.err`]);
    await engine.dockerOk(['exec', '-d', sbx, 'sh', '-c', 'nc a.sbx.test 81 > /tmp/a 2>/tmp/a.err']);
    const lines = async (file: string) => Number((await exec(sbx, `wc -l < ${file}`)).stdout.trim());
    await eventually(async () => ((await lines('/tmp/b')) >= 2 && (await lines('/tmp/a')) >= 2) || undefined);
    // Generation 2 keeps the domain rule and drops server B's network.
    await sandboxes.install(sbx, { defaultAction: 'deny', rules: [policy.rules[0]] });
    await new Promise((r) => setTimeout(r, 1500));
    const [b1, a1] = [await lines('/tmp/b'), await lines('/tmp/a')];
    await new Promise((r) => setTimeout(r, 3000));
    assert.ok((await lines('/tmp/b')) <= b1 + 1, 'the stream to server B went on under generation 2');
    assert.ok((await lines('/tmp/a')) >= a1 + 2, 'the stream to server A stopped under generation 2');
    assert.equal((await exec(sbx, 'pidof nc | wc -w')).stdout.trim(), '1', 'the refused stream\'s nc has ended');
  });

  test('the policy survives a daemon restart and a container restart, and is gone with the container', async () => {
    const sbx = await run(['--label', `berth.network-policy=${JSON.stringify(policy)}`]);
    const veth = await hostInterface(sbx);
    await service(() => [veth]).install(sbx, { defaultAction: 'deny', rules: [{ action: 'allow', cidr: `10.${N}.3.0/24` }] });
    const table = `berth_sbx_${sbx.slice(0, 12)}`;
    // The kernel's table taken away while the daemon is down: the daemon puts generation 2 back at its start.
    await engine.stop();
    sh(`nft delete table netdev ${table}`);
    await engine.start();
    assertRefused(await fetch(sbx, net(2, 2)), 'server B after the daemon restart');
    assert.equal((await page(sbx, net(3, 2))), 'server-c');
    // A container restart gives it a new veth, and the policy with it.
    await engine.dockerOk(['restart', '-t', '0', sbx]);
    assertRefused(await fetch(sbx, net(2, 2)), 'server B after the container restart');
    assert.equal((await page(sbx, net(3, 2))), 'server-c');
    assert.equal(spawnSync('nft', ['list', 'table', 'netdev', table]).status, 0);
    await engine.dockerOk(['rm', '-f', sbx]);
    assert.notEqual(spawnSync('nft', ['list', 'table', 'netdev', table]).status, 0, 'the table is gone with the container');
    assert.ok(!existsSync(path.join(engine.dataRoot, 'containers', sbx)));
  });
});
