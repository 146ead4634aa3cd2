/**
 * Name resolution in containers, end to end with the docker CLI against a real berthd: the embedded DNS
 * server on user-defined networks (names, aliases, short ids, not across networks, forwarding to an
 * upstream the test runs on 127.0.0.1, UDP and TCP, after a daemon restart and crash), and the files of
 * the default bridge (resolv.conf with --dns options, --add-host and host-gateway, --link, hostname).
 * No DNS query leaves the machine: the engine's upstream is the test's server.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import dgram from 'node:dgram';
import { after, before, describe, test } from 'node:test';
import { buildAnswer, parseQuery, RCODE_NXDOMAIN } from '../src/host/linux/network/dns/message.js';
import { eventually, startEngine, type Engine } from './harness.js';

/** A small upstream DNS server on 127.0.0.1: outside.test is 10.1.2.3, everything else NXDOMAIN. */
async function startUpstream(): Promise<{ port: number; queries: string[]; close(): void }> {
  const socket = dgram.createSocket('udp4');
  const queries: string[] = [];
  socket.on('message', (msg, rinfo) => {
    const q = parseQuery(msg);
    if (!q) return;
    queries.push(q.name);
    const answer = q.name === 'outside.test' && q.type === 1 ? buildAnswer(msg, q, ['10.1.2.3']) : buildAnswer(msg, q, [], q.name === 'outside.test' ? 0 : RCODE_NXDOMAIN);
    socket.send(answer, rinfo.port, rinfo.address);
  });
  await new Promise<void>((resolve) => socket.bind(0, '127.0.0.1', resolve));
  return { port: socket.address().port, queries, close: () => socket.close() };
}

describe('embedded DNS and name resolution', () => {
  let engine: Engine;
  let upstream: Awaited<ReturnType<typeof startUpstream>>;
  const previous = process.env.BERTH_DNS_UPSTREAM;

  before(async () => {
    upstream = await startUpstream();
    process.env.BERTH_DNS_UPSTREAM = `127.0.0.1:${upstream.port}`;
    engine = await startEngine();
    await engine.loadBusybox();
  });
  after(async () => {
    await engine?.cleanup();
    upstream?.close();
    if (previous === undefined) delete process.env.BERTH_DNS_UPSTREAM;
    else process.env.BERTH_DNS_UPSTREAM = previous;
  });

  const run = (args: string[]) => engine.docker(['run', '--rm', ...args], { timeoutMs: 60_000 });

  test('containers on a user network reach each other by name, alias and short id; not across networks', async () => {
    await engine.dockerOk(['network', 'create', 'front']);
    await engine.dockerOk(['network', 'create', 'back']);
    const web = (await engine.dockerOk(['run', '-d', '--name', 'web', '--network', 'front', '--network-alias', 'www', 'busybox', 'httpd', '-f', '-p', '80', '-h', '/etc'])).trim();
    await engine.dockerOk(['run', '-d', '--name', 'other', '--network', 'back', 'busybox', 'sleep', '300']);
    const resolv = await run(['--network', 'front', 'busybox', 'cat', '/etc/resolv.conf']);
    assert.match(resolv.stdout, /^nameserver 127\.0\.0\.11$/m);
    assert.match(resolv.stdout, /^options ndots:0$/m);
    assert.doesNotMatch(resolv.stdout, /^nameserver (?!127\.0\.0\.11)/m);
    const reach = await run(['--network', 'front', 'busybox', 'sh', '-c',
      `ping -c1 -W5 web && ping -c1 -W5 www && ping -c1 -W5 ${web.slice(0, 12)} && wget -q -O - http://www/hostname && (printf 'GET /hostname HTTP/1.0\\r\\n\\r\\n'; sleep 1) | nc web 80 && echo done`]);
    assert.equal(reach.code, 0, reach.stderr + reach.stdout);
    assert.match(reach.stdout, new RegExp(`^${web.slice(0, 12)}$`, 'm'));
    assert.match(reach.stdout, /HTTP\/1\.[01] 200 OK/);
    // `other` lives on another network: its name is not the engine's answer there (the upstream says NXDOMAIN).
    const across = await run(['--network', 'front', 'busybox', 'nslookup', 'other', '127.0.0.11']);
    assert.notEqual(across.code, 0, across.stdout);
    assert.ok(upstream.queries.includes('other'), 'the unknown name went to the upstream');
    const fromBack = await run(['--network', 'back', 'busybox', 'nslookup', 'web']);
    // A renamed container answers to its new name.
    await engine.dockerOk(['rename', 'other', 'renamed']);
    const renamed = await run(['--network', 'back', 'busybox', 'sh', '-c', 'ping -c1 -W5 renamed >/dev/null && echo renamed-ok']);
    assert.match(renamed.stdout, /renamed-ok/);
    // And inspect says so.
    const renamedEp = (await engine.request('GET', '/containers/renamed/json')).json().NetworkSettings.Networks.back;
    assert.equal(renamedEp.DNSNames[0], 'renamed');
    // inspect shows the alias and the DNS names.
    const ep = (await engine.request('GET', '/containers/web/json')).json().NetworkSettings.Networks.front;
    assert.ok(!fromBack.stdout.includes(ep.IPAddress), fromBack.stdout);
    assert.deepEqual(ep.Aliases, ['www']);
    assert.deepEqual(ep.DNSNames, ['web', 'www', web.slice(0, 12)]);
  });

  test('other names are forwarded to the upstream resolver (UDP from the container, TCP through the namespace)', async () => {
    const r = await run(['--network', 'front', 'busybox', 'nslookup', 'outside.test']);
    assert.equal(r.code, 0, r.stderr + r.stdout);
    assert.match(r.stdout, /Address: 10\.1\.2\.3/);
    // TCP on 127.0.0.11:53 inside the container's namespace: a query for an engine name, framed by length.
    const pid = (await engine.request('GET', '/containers/web/json')).json().State.Pid;
    const script = `
      const net = require('net');
      const q = Buffer.from('abcd01000001000000000000037765620000010001', 'hex');
      const len = Buffer.alloc(2); len.writeUInt16BE(q.length);
      const s = net.connect(53, '127.0.0.11', () => s.write(Buffer.concat([len, q])));
      s.on('data', (d) => { const a = d.subarray(2); console.log(a.subarray(a.length - 4).join('.')); s.destroy(); });
      s.on('error', (e) => { console.error(e.message); process.exit(1); });`;
    const tcp = spawnSync('nsenter', ['-t', String(pid), '-n', process.execPath, '-e', script], { encoding: 'utf8', timeout: 20_000 });
    const address = (await engine.request('GET', '/containers/web/json')).json().NetworkSettings.Networks.front.IPAddress;
    assert.equal(tcp.stdout.trim(), address, tcp.stderr);
  });

  test('network connect gives a second interface and resolution on the new network', async () => {
    await engine.dockerOk(['network', 'connect', '--alias', 'db', 'back', 'web']);
    const ifaces = await engine.dockerOk(['exec', 'web', 'ip', '-o', '-4', 'addr']);
    assert.match(ifaces, /eth0/);
    assert.match(ifaces, /eth1/);
    const r = await run(['--network', 'back', 'busybox', 'sh', '-c', 'ping -c1 -W5 db && ping -c1 -W5 web']);
    assert.equal(r.code, 0, r.stderr + r.stdout);
    await engine.dockerOk(['network', 'disconnect', 'back', 'web']);
    assert.doesNotMatch(await engine.dockerOk(['exec', 'web', 'ip', '-o', '-4', 'addr']), /eth1/);
  });

  test('the embedded DNS answers again after a daemon restart and after a crash', async () => {
    const client = (await engine.dockerOk(['run', '-d', '--name', 'client', '--network', 'front', 'busybox', 'sleep', '300'])).trim();
    for (const stop of [() => engine.stop(), () => engine.crash()]) {
      await stop();
      await engine.start();
      const r = await eventually(async () => {
        const out = await engine.docker(['exec', client, 'nslookup', 'www']);
        return out.code === 0 ? out : undefined;
      }, 20_000, 300);
      assert.match(r!.stdout, /Name:\s+www/);
    }
    await engine.dockerOk(['rm', '-f', client]);
  });

  test('default bridge: host resolvers and --dns/--dns-search/--dns-option in resolv.conf; no embedded server', async () => {
    const plain = await run(['busybox', 'cat', '/etc/resolv.conf']);
    assert.doesNotMatch(plain.stdout, /127\.0\.0\.11/);
    assert.doesNotMatch(plain.stdout, /^nameserver 127\./m);
    const custom = await run(['--dns', '10.0.0.53', '--dns', '10.0.0.54', '--dns-search', 'example.test', '--dns-option', 'ndots:2', 'busybox', 'cat', '/etc/resolv.conf']);
    assert.equal(custom.stdout, 'nameserver 10.0.0.53\nnameserver 10.0.0.54\nsearch example.test\noptions ndots:2\n');
    // On a user network --dns names the embedded server's upstreams; resolv.conf keeps 127.0.0.11.
    const onNet = await run(['--network', 'front', '--dns', '10.0.0.53', 'busybox', 'cat', '/etc/resolv.conf']);
    assert.match(onNet.stdout, /^nameserver 127\.0\.0\.11$/m);
    assert.match(onNet.stdout, /ExtServers: \[10\.0\.0\.53\]/);
  });

  test('--add-host (with host-gateway), --hostname and --domainname, --link', async () => {
    const gateway = (await engine.request('GET', '/networks/bridge')).json().IPAM.Config[0].Gateway;
    const hosts = await run(['--add-host', 'x.test:1.2.3.4', '--add-host', 'gw.test:host-gateway', '-h', 'myhost', '--domainname', 'example.test', 'busybox', 'sh', '-c', 'cat /etc/hosts; hostname; ping -c1 -W5 gw.test >/dev/null && echo gw-ok']);
    assert.equal(hosts.code, 0, hosts.stderr);
    assert.match(hosts.stdout, /^1\.2\.3\.4\tx\.test$/m);
    assert.match(hosts.stdout, new RegExp(`^${gateway.replace(/\./g, '\\.')}\\tgw\\.test$`, 'm'));
    assert.match(hosts.stdout, /^\d+\.\d+\.\d+\.\d+\tmyhost\.example\.test myhost$/m);
    assert.match(hosts.stdout, /^myhost$/m);
    assert.match(hosts.stdout, /^gw-ok$/m);
    const target = (await engine.dockerOk(['run', '-d', '--name', 'linked', 'busybox', 'sleep', '300'])).trim();
    const address = (await engine.request('GET', `/containers/${target}/json`)).json().NetworkSettings.Networks.bridge.IPAddress;
    const linked = await run(['--link', 'linked:buddy', 'busybox', 'sh', '-c', 'cat /etc/hosts; ping -c1 -W5 buddy >/dev/null && echo link-ok']);
    assert.equal(linked.code, 0, linked.stderr);
    assert.match(linked.stdout, new RegExp(`^${address.replace(/\./g, '\\.')}\\tbuddy ${target.slice(0, 12)} linked$`, 'm'));
    assert.match(linked.stdout, /^link-ok$/m);
    const missing = await run(['--link', 'nosuch:buddy', 'busybox', 'true']);
    assert.notEqual(missing.code, 0);
    await engine.dockerOk(['rm', '-f', 'linked']);
  });
});
