/**
 * IPv6 on user-defined bridge networks, end to end with the docker CLI and dockerode against a real berthd:
 * network create with `--ipv6` (a user's IPv6 subnet beside an IPv4 one, or a /64 of the engine's unique
 * local prefix), Docker's checks of bad input (4xx, nothing half-created), containers' IPv6 addresses,
 * default routes and inspect fields, `--ip6` on run and network connect, traffic between containers over
 * IPv6 by name through the embedded DNS (AAAA), outbound traffic masqueraded by ip6tables (checked against a
 * namespace the test makes, which has no route back to the containers), internal networks and ICC off, and
 * nothing left behind (addresses, ip6tables rules, bridges) after a daemon crash, a restart and the
 * network's removal.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { randomBytes, randomInt } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { expectConforms } from './contract/openapi.js';
import { eventually, startEngine, type Engine } from './harness.js';

// Groups without a leading zero, so that the daemon's canonical forms read as the test writes them.
const hex = () => randomInt(0x1000, 0x10000).toString(16);
/** Random unique local prefixes of this run (a /48 each side), and IPv4 /24s. */
const ULA = `fd${randomBytes(1).toString('hex')}:${hex()}`;
const SUB6_A = `${ULA}:a::`;
const SUB6_B = `${ULA}:b::`;
const OUTSIDE6 = `fd${randomBytes(1).toString('hex')}:${hex()}:${hex()}::`;
const octet = randomInt(10, 250);
const third = randomInt(1, 200);
const SUB4_A = `10.${octet}.${third}`;
const SUB4_B = `10.${octet}.${third + 1}`;

function sh(cmd: string, args: string[]): { code: number; out: string } {
  const r = spawnSync(cmd, args, { encoding: 'utf8' });
  return { code: r.status ?? -1, out: `${r.stdout ?? ''}${r.stderr ?? ''}` };
}

/** The ip6tables rules (iptables-save form) that carry the tag of one of the bridges. */
function ip6Rules(bridges: string[]): string[] {
  return sh('ip6tables-save', []).out.split('\n').filter((l) => l.startsWith('-A ') && bridges.some((b) => l.includes(`berth:${b}`)));
}

/** Removes what a failed run may leave in ip6tables (the harness cleans iptables and links). */
function removeIp6Rules(bridges: string[]): void {
  for (const table of ['nat', 'filter']) {
    for (const rule of sh('ip6tables-save', ['-t', table]).out.split('\n')) {
      if (!rule.startsWith('-A ') || !bridges.some((b) => rule.includes(`berth:${b}`))) continue;
      const args = rule.slice(3).match(/"[^"]*"|\S+/g)!.map((a) => a.replace(/^"|"$/g, ''));
      spawnSync('ip6tables', ['-t', table, '-D', ...args]);
    }
  }
}

describe('IPv6 networks', () => {
  let engine: Engine;
  /** The bridges of the networks this file made (for the checks of leftovers and the cleanup). */
  const bridges = new Set<string>();
  const outsideNs = `b6out${hex()}`;
  const outsideLink = `b6o${hex()}`;

  const inspectNetwork = async (name: string) => {
    const res = await engine.request('GET', `/v1.53/networks/${name}`);
    assert.equal(res.status, 200, res.text);
    const net = res.json();
    bridges.add(`br-${net.Id.slice(0, 12)}`);
    return net;
  };
  const inspect = async (name: string, version = '1.53') => {
    const res = await engine.request('GET', `/v${version}/containers/${name}/json`);
    assert.equal(res.status, 200, res.text);
    return res.json();
  };

  before(async () => {
    engine = await startEngine();
    await engine.loadBusybox();
    await engine.dockerOk([
      'network', 'create', '--ipv6',
      '--subnet', `${SUB4_A}.0/24`, '--subnet', `${SUB6_A}/64`, '--gateway', `${SUB4_A}.1`, '--gateway', `${SUB6_A}1`,
      'six',
    ]);
    await inspectNetwork('six');
  });
  after(async () => {
    await engine?.cleanup();
    removeIp6Rules([...bridges]);
    spawnSync('ip', ['netns', 'del', outsideNs]);
    spawnSync('ip', ['link', 'del', outsideLink]);
  });

  test('network create --ipv6: both pools with their gateways, the bridge carries the IPv6 gateway, ip6tables rules', async () => {
    const net = await inspectNetwork('six');
    assert.equal(net.EnableIPv6, true);
    assert.equal(net.EnableIPv4, true);
    assert.deepEqual(net.IPAM.Config, [
      { Subnet: `${SUB4_A}.0/24`, Gateway: `${SUB4_A}.1` },
      { Subnet: `${SUB6_A}/64`, Gateway: `${SUB6_A}1` },
    ]);
    const bridge = `br-${net.Id.slice(0, 12)}`;
    const addr = sh('ip', ['-6', '-o', 'addr', 'show', 'dev', bridge]).out;
    assert.match(addr, new RegExp(`inet6 ${SUB6_A}1/64 scope global`), addr);
    const rules = ip6Rules([bridge]);
    assert.ok(rules.some((r) => r.includes(`-s ${SUB6_A}/64`) && r.includes('MASQUERADE')), rules.join('\n'));
    assert.ok(rules.some((r) => r.startsWith('-A FORWARD') && r.includes(`-i ${bridge}`)), rules.join('\n'));
    assert.equal(sh('cat', ['/proc/sys/net/ipv6/conf/all/forwarding']).out.trim(), '1');

    // Without a subnet: a /64 of unique local addresses (fd00::/8) that no other network or host route has.
    await engine.dockerOk(['network', 'create', '--ipv6', 'auto6']);
    const auto = await inspectNetwork('auto6');
    assert.equal(auto.IPAM.Config.length, 2);
    const v6 = auto.IPAM.Config[1];
    assert.match(v6.Subnet, /^fd[0-9a-f]{2}:[0-9a-f]{1,4}:[0-9a-f]{1,4}::\/64$/);
    assert.equal(v6.Gateway, v6.Subnet.replace('::/64', '::1'));
    const hostRoutes = sh('ip', ['-6', 'route', 'show']).out;
    assert.equal(hostRoutes.split('\n').filter((l) => l.startsWith(v6.Subnet + ' ')).length, 1, hostRoutes);

    // dockerode, with the IPv6 pool only: the IPv4 pool is the engine's choice.
    const docker = engine.dockerode();
    const created = await docker.createNetwork({ Name: 'viadockerode', EnableIPv6: true, IPAM: { Config: [{ Subnet: `${ULA}:d::/64` }] } });
    const info = (await created.inspect()) as any;
    bridges.add(`br-${info.Id.slice(0, 12)}`);
    assert.equal(info.EnableIPv6, true);
    assert.deepEqual(info.IPAM.Config.map((c: { Subnet: string }) => c.Subnet.includes(':')), [false, true]);
    assert.equal(info.IPAM.Config[1].Gateway, `${ULA}:d::1`);
    await created.remove();
    await engine.dockerOk(['network', 'rm', 'auto6']);

    // An IPv4-only network has no IPv6 address on its bridge and no ip6tables rules.
    await engine.dockerOk(['network', 'create', 'four']);
    const four = await inspectNetwork('four');
    assert.equal(four.EnableIPv6, false);
    assert.equal(four.IPAM.Config.length, 1);
    const fourBridge = `br-${four.Id.slice(0, 12)}`;
    assert.doesNotMatch(sh('ip', ['-6', '-o', 'addr', 'show', 'dev', fourBridge]).out, /scope global/);
    assert.deepEqual(ip6Rules([fourBridge]), []);
    await engine.dockerOk(['network', 'rm', 'four']);
  });

  test('bad IPv6 input is a 4xx with a clear message, and nothing is half-created', async () => {
    const before = (await engine.request('GET', '/v1.53/networks')).json().length;
    const links = sh('ip', ['-o', 'link']).out.split('\n').length;
    const cli = async (args: string[], pattern: RegExp) => {
      const r = await engine.docker(['network', 'create', ...args, 'broken']);
      assert.notEqual(r.code, 0, r.stdout);
      assert.match(r.stderr, pattern);
    };
    await cli(['--ipv6', '--subnet', `${ULA}:c::1/64`], /host bits set/);
    await cli(['--ipv6', '--subnet', `${ULA}:c::/127`], /at most \/126/);
    await cli(['--subnet', `${ULA}:c::/64`], /IPv6 has not been enabled for this network, but an IPv6 subnet has been provided/);
    // Overlapping another network's IPv6 subnet: Docker's 403.
    await cli(['--ipv6', '--subnet', `${SUB6_A}/80`], /Pool overlaps with other one on this address space/);
    const raw = async (body: object, status: number, pattern: RegExp) => {
      const res = await engine.request('POST', '/v1.53/networks/create', { body: { Name: 'broken', ...body } });
      assert.equal(res.status, status, res.text);
      assert.match(res.json().message, pattern);
    };
    await raw({ EnableIPv6: true, IPAM: { Config: [{ Subnet: `${ULA}:c::/64`, Gateway: `${ULA}:99::1` }] } }, 400, /Gateway .*: it is not in the subnet/);
    await raw({ EnableIPv6: true, IPAM: { Config: [{ Subnet: 'fd00:zz::/64' }] } }, 400, /expected CIDR notation/);
    await raw({ EnableIPv6: true, IPAM: { Config: [{ Subnet: `${ULA}:c::/64`, Gateway: '10.1.1.1' }] } }, 400, /IPv4 address whereas it is associated to an IPv6 subnet/);
    await raw({ EnableIPv6: true, IPAM: { Config: [{ Subnet: `${ULA}:c::/64`, IPRange: `${ULA}:d::/80` }] } }, 400, /IPRange .* is not inside the subnet/);
    await raw({ EnableIPv6: 'yes' }, 400, /EnableIPv6 must be a boolean/);
    assert.equal((await engine.request('GET', '/v1.53/networks')).json().length, before);
    assert.equal(sh('ip', ['-o', 'link']).out.split('\n').length, links);
  });

  test('containers get an IPv6 address and default route, shown by inspect; they reach each other by name over IPv6 (AAAA)', async () => {
    const id = (await engine.dockerOk(['run', '-d', '--name', 'srv6', '--network', 'six', 'busybox', 'sh', '-c', 'while true; do echo hello-v6 | nc -l -p 8080; done'])).trim();
    const c = await inspect('srv6');
    const ep = c.NetworkSettings.Networks.six;
    assert.match(ep.GlobalIPv6Address, new RegExp(`^${SUB6_A}[0-9a-f]+$`));
    assert.equal(ep.GlobalIPv6PrefixLen, 64);
    assert.equal(ep.IPv6Gateway, `${SUB6_A}1`);
    assert.match(ep.IPAddress, new RegExp(`^${SUB4_A.replace(/\./g, '\\.')}\\.\\d+$`));
    // The legacy top-level fields (before API 1.52) follow the container's first network.
    const legacy = await inspect('srv6', '1.43');
    assert.equal(legacy.NetworkSettings.GlobalIPv6Address, ep.GlobalIPv6Address);
    assert.equal(legacy.NetworkSettings.GlobalIPv6PrefixLen, 64);
    assert.equal(legacy.NetworkSettings.IPv6Gateway, `${SUB6_A}1`);
    const net = await inspectNetwork('six');
    assert.equal(net.Containers[id].IPv6Address, `${ep.GlobalIPv6Address}/64`);
    // Network inspect with an IPv6 endpoint conforms to the published schemas, old and new.
    for (const version of ['1.25', '1.41', '1.44', '1.48', '1.53']) {
      await expectConforms(version, 'GET', '/networks/{id}', 200, (await engine.request('GET', `/v${version}/networks/six`)).json());
    }

    const inside = await engine.dockerOk(['exec', 'srv6', 'sh', '-c', 'ip -6 -o addr show dev eth0; ip -6 route']);
    assert.match(inside, new RegExp(`inet6 ${ep.GlobalIPv6Address}/64 scope global`), inside);
    assert.match(inside, new RegExp(`default via ${SUB6_A}1 dev eth0`), inside);
    // /etc/hosts names the container at both of its addresses, as dockerd writes it.
    const hosts = await engine.dockerOk(['exec', 'srv6', 'cat', '/etc/hosts']);
    const hostname = c.Config.Hostname;
    assert.match(hosts, new RegExp(`^${ep.IPAddress.replace(/\./g, '\\.')}\t${hostname}$`, 'm'), hosts);
    assert.match(hosts, new RegExp(`^${ep.GlobalIPv6Address}\t${hostname}$`, 'm'), hosts);

    const client = await engine.docker([
      'run', '--rm', '--network', 'six', 'busybox', 'sh', '-c',
      `nslookup -type=aaaa srv6 127.0.0.11; ping -6 -c1 -W5 srv6 && echo ping-ok; nc ${ep.GlobalIPv6Address} 8080 </dev/null; ping -6 -c1 -W5 ${SUB6_A}1 >/dev/null && echo gw-ok`,
    ]);
    assert.equal(client.code, 0, client.stderr);
    assert.match(client.stdout, new RegExp(`Address: ${ep.GlobalIPv6Address}\\b`), client.stdout);
    assert.match(client.stdout, new RegExp(`PING srv6 \\(${ep.GlobalIPv6Address}\\)`), client.stdout);
    assert.match(client.stdout, /ping-ok/);
    assert.match(client.stdout, /hello-v6/);
    assert.match(client.stdout, /gw-ok/);
    await engine.dockerOk(['rm', '-f', 'srv6']);
  });

  test('--ip6 on run and network connect --ip6, with the checks of --ip; released at stop and disconnect', async () => {
    const wanted = `${SUB6_A}42`;
    await engine.dockerOk(['run', '-d', '--name', 'fixed6', '--network', 'six', '--ip6', wanted, 'busybox', 'sleep', '300']);
    const c = await inspect('fixed6');
    assert.equal(c.NetworkSettings.Networks.six.GlobalIPv6Address, wanted);
    assert.deepEqual(c.NetworkSettings.Networks.six.IPAMConfig, { IPv6Address: wanted });
    const out = await engine.dockerOk(['exec', 'fixed6', 'ip', '-6', '-o', 'addr', 'show', 'dev', 'eth0']);
    assert.match(out, new RegExp(`inet6 ${wanted}/64`), out);

    const taken = await engine.docker(['run', '--rm', '--network', 'six', '--ip6', wanted, 'busybox', 'true']);
    assert.notEqual(taken.code, 0);
    assert.match(taken.stderr, /already in use/);
    const outside = await engine.docker(['run', '--rm', '--network', 'six', '--ip6', `${SUB6_B}5`, 'busybox', 'true']);
    assert.notEqual(outside.code, 0);
    assert.match(outside.stderr, /is not in the subnet/);
    const bad = await engine.request('POST', '/v1.53/containers/create', {
      body: { Image: 'busybox', HostConfig: { NetworkMode: 'six' }, NetworkingConfig: { EndpointsConfig: { six: { IPAMConfig: { IPv6Address: 'fd00::zz' } } } } },
    });
    assert.equal(bad.status, 400, bad.text);
    assert.match(bad.json().message, /IPAMConfig\.IPv6Address: invalid IPv6 address/);
    const onBridge = await engine.docker(['run', '--rm', '--ip6', `${SUB6_A}43`, 'busybox', 'true']);
    assert.notEqual(onBridge.code, 0);
    assert.match(onBridge.stderr, /IPv6 is not enabled on network bridge/);
    await engine.dockerOk(['network', 'create', '--ipv6', 'auto6b']);
    const autoSubnet = (await inspectNetwork('auto6b')).IPAM.Config[1].Subnet as string;
    const noUserSubnet = await engine.docker(['run', '--rm', '--network', 'auto6b', '--ip6', autoSubnet.replace('::/64', '::9'), 'busybox', 'true']);
    assert.notEqual(noUserSubnet.code, 0);
    assert.match(noUserSubnet.stderr, /user configured subnets/);

    // Released at stop: the address is free for another container.
    await engine.dockerOk(['stop', '-t', '0', 'fixed6']);
    assert.deepEqual((await inspectNetwork('six')).Containers, {});
    await engine.dockerOk(['run', '--rm', '--network', 'six', '--ip6', wanted, 'busybox', 'true']);

    // network connect --ip6 of a running container: eth1 with its address, no second default route.
    await engine.dockerOk(['network', 'create', '--ipv6', '--subnet', `${SUB4_B}.0/24`, '--subnet', `${SUB6_B}/64`, 'sixb']);
    await inspectNetwork('sixb');
    await engine.dockerOk(['run', '-d', '--name', 'joiner', '--network', 'six', 'busybox', 'sleep', '300']);
    await engine.dockerOk(['network', 'connect', '--ip6', `${SUB6_B}77`, 'sixb', 'joiner']);
    const joined = await engine.dockerOk(['exec', 'joiner', 'sh', '-c', 'ip -6 -o addr show dev eth1; ip -6 route']);
    assert.match(joined, new RegExp(`inet6 ${SUB6_B}77/64`), joined);
    assert.match(joined, new RegExp(`default via ${SUB6_A}1 dev eth0`), joined);
    assert.doesNotMatch(joined, /default via .* dev eth1/, joined);
    assert.equal((await inspect('joiner')).NetworkSettings.Networks.sixb.GlobalIPv6Address, `${SUB6_B}77`);
    // A container without IPv6 takes its IPv6 default route from the IPv6 network it joins (its IPv4 one stays).
    await engine.dockerOk(['run', '-d', '--name', 'v4first', 'busybox', 'sleep', '300']);
    await engine.dockerOk(['network', 'connect', 'six', 'v4first']);
    const routes = await engine.dockerOk(['exec', 'v4first', 'sh', '-c', 'ip -6 route; ip -4 route']);
    assert.match(routes, new RegExp(`default via ${SUB6_A}1 dev eth1`), routes);
    assert.match(routes, /default via \S+ dev eth0/, routes);
    await engine.dockerOk(['rm', '-f', 'v4first']);
    const badConnect = await engine.docker(['network', 'connect', '--ip6', `${SUB6_A}9`, 'sixb', 'fixed6']);
    assert.notEqual(badConnect.code, 0);
    assert.match(badConnect.stderr, /is not in the subnet/);
    // A stopped container: the address is in its configuration, and taken at its start.
    await engine.dockerOk(['network', 'connect', '--ip6', `${SUB6_B}78`, 'sixb', 'fixed6']);
    assert.deepEqual((await inspect('fixed6')).NetworkSettings.Networks.sixb.IPAMConfig, { IPv6Address: `${SUB6_B}78` });
    await engine.dockerOk(['start', 'fixed6']);
    const second = await engine.dockerOk(['exec', 'fixed6', 'ip', '-6', '-o', 'addr', 'show', 'dev', 'eth1']);
    assert.match(second, new RegExp(`inet6 ${SUB6_B}78/64`), second);
    // Disconnect releases the address.
    await engine.dockerOk(['network', 'disconnect', 'sixb', 'joiner']);
    const ids = Object.values((await inspectNetwork('sixb')).Containers).map((e: any) => e.IPv6Address);
    assert.deepEqual(ids, [`${SUB6_B}78/64`]);
    await engine.dockerOk(['rm', '-f', 'fixed6', 'joiner']);
    await engine.dockerOk(['network', 'rm', 'auto6b']);
  });

  test('outbound IPv6 is masqueraded (the outside has no route back); internal networks have no way out; ICC off holds for IPv6', async () => {
    // An "outside" namespace on a link of the host, with no route to the containers' subnets.
    assert.equal(sh('ip', ['netns', 'add', outsideNs]).code, 0);
    for (const args of [
      ['link', 'add', outsideLink, 'type', 'veth', 'peer', 'name', 'b6peer', 'netns', outsideNs],
      ['addr', 'add', `${OUTSIDE6}1/64`, 'dev', outsideLink, 'nodad'],
      ['link', 'set', outsideLink, 'up'],
      ['-n', outsideNs, 'addr', 'add', `${OUTSIDE6}2/64`, 'dev', 'b6peer', 'nodad'],
      ['-n', outsideNs, 'link', 'set', 'b6peer', 'up'],
      ['-n', outsideNs, 'link', 'set', 'lo', 'up'],
    ]) {
      const r = sh('ip', args);
      assert.equal(r.code, 0, `ip ${args.join(' ')}: ${r.out}`);
    }
    const out = await engine.docker(['run', '--rm', '--network', 'six', 'busybox', 'sh', '-c', `ping -6 -c1 -W5 ${OUTSIDE6}2 >/dev/null && echo out-ok; true`]);
    assert.match(out.stdout, /out-ok/, out.stdout + out.stderr);

    await engine.dockerOk(['network', 'create', '--ipv6', '--internal', '--subnet', `${ULA}:e::/64`, 'inside6']);
    await inspectNetwork('inside6');
    const internal = await engine.docker(['run', '--rm', '--network', 'inside6', 'busybox', 'sh', '-c', `ip -6 route; ping -6 -c1 -W3 ${OUTSIDE6}2 >/dev/null && echo out-ok; true`]);
    assert.doesNotMatch(internal.stdout, /default via/, internal.stdout);
    assert.doesNotMatch(internal.stdout, /out-ok/, internal.stdout);

    await engine.dockerOk(['network', 'create', '--ipv6', '--subnet', `${ULA}:f::/64`, '-o', 'com.docker.network.bridge.enable_icc=false', 'noicc6']);
    await inspectNetwork('noicc6');
    await engine.dockerOk(['run', '-d', '--name', 'peer6', '--network', 'noicc6', 'busybox', 'sleep', '300']);
    const peer = (await inspect('peer6')).NetworkSettings.Networks.noicc6.GlobalIPv6Address;
    const icc = await engine.docker(['run', '--rm', '--network', 'noicc6', 'busybox', 'sh', '-c', `ping -6 -c1 -W3 ${ULA}:f::1 >/dev/null && echo gw-ok; ping -6 -c1 -W3 ${peer} >/dev/null && echo peer-ok; true`]);
    assert.match(icc.stdout, /gw-ok/, icc.stdout);
    assert.doesNotMatch(icc.stdout, /peer-ok/, icc.stdout);
    await engine.dockerOk(['rm', '-f', 'peer6']);
    await engine.dockerOk(['network', 'rm', 'inside6', 'noicc6']);
  });

  test('published ports reach a container with IPv6 on the host\'s IPv6 addresses too (ip6tables), shown on 0.0.0.0 and ::', async () => {
    const id = (await engine.dockerOk(['run', '-d', '--name', 'web6', '--network', 'six', '-p', '8080', '-p', '[::]::8081', 'busybox', 'sh', '-c',
      'while true; do echo web-v6 | nc -l -p 8080; done & while true; do echo only-v6 | nc -l -p 8081; done'])).trim();
    const ports = (await inspect('web6')).NetworkSettings.Ports;
    const [v4, v6] = ports['8080/tcp'];
    assert.equal(v4.HostIp, '0.0.0.0');
    assert.deepEqual(v6, { HostIp: '::', HostPort: v4.HostPort });
    assert.equal(ports['8081/tcp'].length, 1);
    assert.equal(ports['8081/tcp'][0].HostIp, '::');
    const cli = await engine.dockerOk(['port', 'web6', '8080']);
    assert.match(cli, new RegExp(`\\[::\\]:${v4.HostPort}`), cli);
    // From the host to one of its IPv6 addresses (the bridge's gateway): DNAT to the container's IPv6 address.
    const fetch = async (address: string, port: string): Promise<string> =>
      eventually(async () => {
        const r = sh('busybox', ['nc', '-w', '3', address, port]);
        return r.out.includes('web-v6') || r.out.includes('only-v6') ? r.out : '';
      }, 15_000);
    assert.match(await fetch(`${SUB6_A}1`, v4.HostPort), /web-v6/);
    assert.match(await fetch(`${SUB6_A}1`, ports['8081/tcp'][0].HostPort), /only-v6/);
    const rules = ip6Rules([`br-${(await inspectNetwork('six')).Id.slice(0, 12)}`]).filter((r) => r.includes(id.slice(0, 12)));
    assert.ok(rules.some((r) => r.includes('DNAT') && r.includes(`--dport ${v4.HostPort}`)), rules.join('\n'));
    // '::' on a network without IPv6 is refused with a clear message.
    const refused = await engine.docker(['run', '--rm', '-p', '[::]:18089:80', 'busybox', 'true']);
    assert.notEqual(refused.code, 0);
    assert.match(refused.stderr, /publishes on IPv6 and network bridge has no IPv6/);
    await engine.dockerOk(['rm', '-f', 'web6']);
    assert.deepEqual(ip6Rules([`br-${(await inspectNetwork('six')).Id.slice(0, 12)}`]).filter((r) => r.includes(id.slice(0, 12))), []);
  });

  test('a crash and a restart keep addresses and rules (once); removing the networks leaves no address, rule or route', async () => {
    await engine.dockerOk(['run', '-d', '--name', 'survivor', '--network', 'six', 'busybox', 'sleep', '300']);
    const address = (await inspect('survivor')).NetworkSettings.Networks.six.GlobalIPv6Address;
    const net = await inspectNetwork('six');
    const bridge = `br-${net.Id.slice(0, 12)}`;
    const rulesBefore = ip6Rules([bridge]).sort();
    await engine.crash();
    await engine.start();
    const after = await inspect('survivor');
    assert.equal(after.NetworkSettings.Networks.six.GlobalIPv6Address, address);
    assert.deepEqual(ip6Rules([bridge]).sort(), rulesBefore);
    const inside = await engine.dockerOk(['exec', 'survivor', 'ip', '-6', '-o', 'addr', 'show', 'dev', 'eth0']);
    assert.match(inside, new RegExp(`inet6 ${address}/64`), inside);
    // A new container does not take the survivor's address.
    const fresh = await engine.dockerOk(['run', '--rm', '--network', 'six', 'busybox', 'ip', '-6', '-o', 'addr', 'show', 'dev', 'eth0']);
    assert.doesNotMatch(fresh, new RegExp(`inet6 ${address}/`), fresh);
    await engine.restart();
    assert.deepEqual(ip6Rules([bridge]).sort(), rulesBefore);
    await engine.dockerOk(['rm', '-f', 'survivor']);

    for (const name of ['six', 'sixb']) {
      const r = await engine.docker(['network', 'rm', name]);
      assert.equal(r.code, 0, r.stderr);
    }
    await eventually(() => ip6Rules([...bridges]).length === 0, 10_000);
    assert.deepEqual(ip6Rules([...bridges]), []);
    const routes = sh('ip', ['-6', 'route', 'show']).out;
    assert.doesNotMatch(routes, new RegExp(`^${ULA}:`, 'm'), routes);
    const addrs = sh('ip', ['-6', '-o', 'addr', 'show']).out;
    assert.doesNotMatch(addrs, new RegExp(`inet6 ${ULA}:`), addrs);
    for (const b of bridges) assert.notEqual(sh('ip', ['link', 'show', b]).code, 0, `bridge ${b} is gone`);
  });
});
