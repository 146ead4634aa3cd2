/**
 * Containers on the predefined networks, end to end with the docker CLI against a real berthd: addresses
 * on the default bridge, container to container, NAT toward a namespace the test sets up, `none`, `host`,
 * events, bad input, recovery after a crash, and nothing left behind after many runs.
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomBytes, randomInt } from 'node:crypto';
import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { eventually, startEngine, type Engine } from './harness.js';

const octet = randomInt(200, 250);
const third = randomInt(1, 250);
const SUBNET = `10.${octet}.${third}.0/24`;
const GATEWAY = `10.${octet}.${third}.1`;
const inSubnet = (ip: string) => ip.startsWith(`10.${octet}.${third}.`);

function links(): string[] {
  return spawnSync('ip', ['-o', 'link'], { encoding: 'utf8' }).stdout.split('\n').map((l) => l.split(':')[1]?.trim().split('@')[0]).filter((n): n is string => !!n);
}

/** Our rules (without packet counters), to compare before and after. */
function ourRules(bridge: string): string[] {
  return spawnSync('iptables-save', [], { encoding: 'utf8' }).stdout.split('\n').filter((l) => l.includes(bridge)).sort();
}

function bridgePorts(bridge: string): string[] {
  try {
    return readdirSync(`/sys/class/net/${bridge}/brif`);
  } catch {
    return [];
  }
}

/** Endpoints recorded in the network store (the allocator's state). */
function storedEndpoints(engine: Engine): number {
  const dir = path.join(engine.dataRoot, 'network');
  let n = 0;
  for (const f of readdirSync(dir)) {
    if (!f.endsWith('.json')) continue;
    n += Object.keys(JSON.parse(readFileSync(path.join(dir, f), 'utf8')).endpoints ?? {}).length;
  }
  return n;
}

describe('containers on the predefined networks', () => {
  let engine: Engine;
  let served = false;
  const sleepers: ChildProcess[] = [];

  before(async () => {
    engine = await startEngine({ args: ['--bip', `${GATEWAY}/24`] });
    const probe = await engine.request('POST', '/v1.53/containers/create', { body: {} });
    served = !(probe.status === 404 && /page not found/.test(probe.text));
    if (served) await engine.loadBusybox();
  });
  after(async () => {
    for (const s of sleepers) s.kill('SIGKILL');
    await engine?.cleanup();
  });

  const it = (name: string, fn: (t: { diagnostic(msg: string): void }) => Promise<void>) =>
    test(name, async (t) => {
      if (!served) return t.skip('the engine does not serve containers yet');
      await fn(t);
    });

  it('a container on the default bridge gets an address in the subnet and reaches the gateway', async () => {
    const out = await engine.dockerOk(['run', '--rm', 'busybox', 'sh', '-c', `ip -o -4 addr show dev eth0; ip route; ip -o link show dev eth0; ping -c 1 -W 3 ${GATEWAY} >/dev/null && echo PING-OK`]);
    const m = /inet (\d+\.\d+\.\d+\.\d+)\/24/.exec(out);
    assert.ok(m && inSubnet(m[1]), out);
    const mac = '02:42:' + m![1].split('.').map((b) => Number(b).toString(16).padStart(2, '0')).join(':');
    assert.ok(out.includes(`link/ether ${mac}`), out);
    assert.match(out, new RegExp(`default via ${GATEWAY.replace(/\./g, '\\.')} dev eth0`));
    assert.match(out, /PING-OK/);
  });

  it('/etc/hosts maps the container hostname to its bridge address', async () => {
    const out = await engine.dockerOk(['run', '--rm', 'busybox', 'sh', '-c', 'echo "HOST $(hostname)"; ip -o -4 addr show dev eth0; cat /etc/hosts']);
    const hostname = /^HOST (\S+)/m.exec(out)![1];
    const ip = /inet (\d+\.\d+\.\d+\.\d+)\//.exec(out)![1];
    assert.match(out, new RegExp(`^${ip.replace(/\./g, '\\.')}\\s+${hostname}\\b`, 'm'), out);
  });

  it('inspect shows the endpoint; the network lists the container; events say connect and disconnect', async () => {
    const since = Math.floor(Date.now() / 1000) - 1;
    const id = (await engine.dockerOk(['run', '-d', '--name', 'netinspect', 'busybox', 'sleep', '300'])).trim();
    try {
      const c = (await engine.request('GET', `/v1.53/containers/${id}/json`)).json();
      const ep = c.NetworkSettings.Networks.bridge;
      const net = (await engine.request('GET', '/v1.53/networks/bridge')).json();
      assert.ok(inSubnet(ep.IPAddress), JSON.stringify(ep));
      assert.equal(ep.Gateway, GATEWAY);
      assert.equal(ep.IPPrefixLen, 24);
      assert.equal(ep.NetworkID, net.Id);
      assert.match(ep.EndpointID, /^[0-9a-f]{64}$/);
      assert.deepEqual(net.Containers[id], { Name: 'netinspect', EndpointID: ep.EndpointID, MacAddress: ep.MacAddress, IPv4Address: `${ep.IPAddress}/24`, IPv6Address: '' });
      const ip = await engine.dockerOk(['inspect', '-f', '{{.NetworkSettings.Networks.bridge.IPAddress}}', 'netinspect']);
      assert.equal(ip.trim(), ep.IPAddress);
    } finally {
      await engine.dockerOk(['rm', '-f', id]);
    }
    const until = Math.ceil(Date.now() / 1000) + 1;
    const events = await engine.request('GET', `/v1.53/events?since=${since}&until=${until}&filters=${encodeURIComponent(JSON.stringify({ type: ['network'] }))}`, { timeoutMs: 10_000 });
    const lines = events.text.trim().split('\n').filter(Boolean).map((l) => JSON.parse(l));
    const mine = lines.filter((e) => e.Actor.Attributes.container === id);
    assert.deepEqual(mine.map((e) => e.Action), ['connect', 'disconnect']);
    assert.deepEqual(mine[0].Actor.Attributes, { container: id, name: 'bridge', type: 'bridge' });
    assert.equal(mine[0].Type, 'network');
  });

  it('two containers on the default bridge reach each other by address', async () => {
    const id = (await engine.dockerOk(['run', '-d', 'busybox', 'sleep', '300'])).trim();
    try {
      const ip = (await engine.dockerOk(['inspect', '-f', '{{.NetworkSettings.Networks.bridge.IPAddress}}', id])).trim();
      const out = await engine.dockerOk(['run', '--rm', 'busybox', 'ping', '-c', '1', '-W', '3', ip]);
      assert.match(out, /1 packets received/);
    } finally {
      await engine.dockerOk(['rm', '-f', id]);
    }
  });

  it('outbound NAT: a container reaches a namespace with no route back to the bridge subnet', async () => {
    const outside = spawn('unshare', ['--net', 'sleep', '300'], { stdio: 'ignore' });
    sleepers.push(outside);
    await eventually(() => {
      const ns = spawnSync('readlink', [`/proc/${outside.pid}/ns/net`], { encoding: 'utf8' }).stdout.trim();
      return ns !== '' && ns !== spawnSync('readlink', ['/proc/self/ns/net'], { encoding: 'utf8' }).stdout.trim();
    });
    const hostSide = `vo${randomBytes(4).toString('hex')}`;
    const net = `10.${octet}.${(third + 1) % 250}`;
    try {
      assert.equal(spawnSync('ip', ['link', 'add', hostSide, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', String(outside.pid)]).status, 0);
      spawnSync('ip', ['addr', 'add', `${net}.1/30`, 'dev', hostSide]);
      spawnSync('ip', ['link', 'set', hostSide, 'up']);
      const ns = ['nsenter', '-t', String(outside.pid), '-n'];
      spawnSync(ns[0], [...ns.slice(1), 'ip', 'addr', 'add', `${net}.2/30`, 'dev', 'eth0']);
      spawnSync(ns[0], [...ns.slice(1), 'ip', 'link', 'set', 'eth0', 'up']);
      // The outside namespace has no route to the bridge subnet: only masquerading lets the reply back.
      assert.doesNotMatch(spawnSync(ns[0], [...ns.slice(1), 'ip', 'route'], { encoding: 'utf8' }).stdout, /default|10\.\d+\.\d+\.0\/24/);
      const out = await engine.dockerOk(['run', '--rm', 'busybox', 'sh', '-c', `ping -c 1 -W 3 ${net}.2 >/dev/null && echo PING-OK`]);
      assert.match(out, /PING-OK/);
    } finally {
      spawnSync('ip', ['link', 'del', hostSide]);
      outside.kill('SIGKILL');
    }
  });

  it('--network none has only loopback', async () => {
    const out = await engine.dockerOk(['run', '--rm', '--network', 'none', 'busybox', 'ip', '-o', 'link']);
    const names = out.trim().split('\n').map((l) => l.split(':')[1].trim());
    assert.deepEqual(names, ['lo']);
    assert.match(out, /lo: <LOOPBACK,UP/);
    const insp = (await engine.request('GET', '/v1.53/networks/none')).json();
    assert.deepEqual(insp.Containers, {});
  });

  it('--network host sees the host interfaces', async () => {
    const out = await engine.dockerOk(['run', '--rm', '--network', 'host', 'busybox', 'ip', '-o', 'link']);
    assert.ok(out.includes(`${engine.bridge}:`), out);
    assert.ok(links().every((l) => out.includes(`${l}:`) || !/^(lo|eth0)$/.test(l)));
  });

  it('a static address inside the subnet is used', async () => {
    const ip = `10.${octet}.${third}.200`;
    const out = await engine.dockerOk(['run', '--rm', '--ip', ip, 'busybox', 'ip', '-o', '-4', 'addr', 'show', 'dev', 'eth0']);
    assert.ok(out.includes(`inet ${ip}/24`), out);
  });

  it('bad input: unknown network and malformed or outside static addresses are 4xx with clear messages', async () => {
    // --pull never: on any 404 from create the CLI would otherwise try to pull the image first.
    const r = await engine.docker(['run', '--rm', '--pull', 'never', '--network', 'nosuchnet', 'busybox', 'true']);
    assert.notEqual(r.code, 0);
    assert.match(r.stderr, /network nosuchnet not found/);
    const create = (ip: string) =>
      engine.request('POST', '/v1.53/containers/create', {
        body: { Image: 'busybox', Cmd: ['true'], HostConfig: { NetworkMode: 'bridge' }, NetworkingConfig: { EndpointsConfig: { bridge: { IPAMConfig: { IPv4Address: ip } } } } },
      });
    const bad = await create('10.1.2.300');
    assert.equal(bad.status, 400);
    assert.match(bad.json().message, /IPAMConfig\.IPv4Address/);
    assert.match(bad.json().message, /10\.1\.2\.300/);
    const outside = await create('10.1.2.3');
    assert.equal(outside.status, 400);
    assert.match(outside.json().message, new RegExp(`not in the subnet ${SUBNET.replace(/\./g, '\\.')}`));
    // As Docker: create accepts an unknown network, start answers 404.
    const unknown = await engine.request('POST', '/v1.53/containers/create', { body: { Image: 'busybox', Cmd: ['true'], HostConfig: { NetworkMode: 'nosuchnet' } } });
    assert.equal(unknown.status, 201);
    const start = await engine.request('POST', `/v1.53/containers/${unknown.json().Id}/start`);
    assert.equal(start.status, 404);
    assert.equal(start.json().message, 'network nosuchnet not found');
    await engine.request('DELETE', `/v1.53/containers/${unknown.json().Id}`);
  });

  it('a container that died while the daemon was down has its address and veth released at start', async () => {
    const id = (await engine.dockerOk(['run', '-d', 'busybox', 'sleep', '300'])).trim();
    const pid = Number((await engine.dockerOk(['inspect', '-f', '{{.State.Pid}}', id])).trim());
    assert.equal(bridgePorts(engine.bridge).length, 1);
    await engine.crash();
    process.kill(pid, 'SIGKILL');
    await engine.start();
    const net = (await engine.request('GET', '/v1.53/networks/bridge')).json();
    assert.deepEqual(net.Containers, {});
    await eventually(() => bridgePorts(engine.bridge).length === 0);
    await engine.dockerOk(['rm', '-f', id]);
  });

  it('containers on none and host are listed on those networks again after a daemon crash; a dead one is not', async () => {
    const none = (await engine.dockerOk(['run', '-d', '--network', 'none', 'busybox', 'sleep', '300'])).trim();
    const host = (await engine.dockerOk(['run', '-d', '--network', 'host', 'busybox', 'sleep', '300'])).trim();
    const dead = (await engine.dockerOk(['run', '-d', '--network', 'none', 'busybox', 'sleep', '300'])).trim();
    try {
      const endpoint = (await engine.dockerOk(['inspect', '-f', '{{.NetworkSettings.Networks.none.EndpointID}}', none])).trim();
      const deadPid = Number((await engine.dockerOk(['inspect', '-f', '{{.State.Pid}}', dead])).trim());
      await engine.crash();
      process.kill(deadPid, 'SIGKILL');
      await engine.start();
      const noneNet = (await engine.request('GET', '/v1.53/networks/none')).json();
      assert.deepEqual(Object.keys(noneNet.Containers), [none]);
      assert.equal(noneNet.Containers[none].EndpointID, endpoint);
      assert.deepEqual(Object.keys((await engine.request('GET', '/v1.53/networks/host')).json().Containers), [host]);
      await engine.dockerOk(['stop', '-t', '0', none]);
      assert.deepEqual((await engine.request('GET', '/v1.53/networks/none')).json().Containers, {});
    } finally {
      await engine.dockerOk(['rm', '-f', none, host, dead]);
    }
  });

  it('a live container keeps its endpoint across a daemon restart', async () => {
    const id = (await engine.dockerOk(['run', '-d', 'busybox', 'sleep', '300'])).trim();
    try {
      const ip = (await engine.dockerOk(['inspect', '-f', '{{.NetworkSettings.Networks.bridge.IPAddress}}', id])).trim();
      await engine.restart();
      const net = (await engine.request('GET', '/v1.53/networks/bridge')).json();
      assert.equal(net.Containers[id]?.IPv4Address, `${ip}/24`);
      assert.equal(bridgePorts(engine.bridge).length, 1);
      // A new container does not get the live one's address.
      const other = await engine.dockerOk(['run', '--rm', 'busybox', 'ip', '-o', '-4', 'addr', 'show', 'dev', 'eth0']);
      assert.ok(!other.includes(`inet ${ip}/`), other);
    } finally {
      await engine.dockerOk(['rm', '-f', id]);
    }
  });

  it('a user-defined network: addresses from its subnet, neighbours reach each other, removal refused while in use', async () => {
    const sub = `10.${octet}.${(third + 2) % 250}`;
    const netId = (await engine.dockerOk(['network', 'create', '--subnet', `${sub}.0/24`, 'appnet'])).trim();
    const bridge = `br-${netId.slice(0, 12)}`;
    let web = '';
    try {
      web = (await engine.dockerOk(['run', '-d', '--network', 'appnet', '--ip', `${sub}.50`, 'busybox', 'sleep', '300'])).trim();
      assert.equal(readdirSync(`/sys/class/net/${bridge}/brif`).length, 1);
      const out = await engine.dockerOk(['run', '--rm', '--network', 'appnet', 'busybox', 'sh', '-c', `ip -o -4 addr show dev eth0; ping -c 1 -W 3 ${sub}.1 >/dev/null && echo GW-OK; ping -c 1 -W 3 ${sub}.50 >/dev/null && echo WEB-OK`]);
      assert.match(out, new RegExp(`inet ${sub.replace(/\./g, '\\.')}\\.\\d+/24`));
      assert.match(out, /GW-OK/);
      assert.match(out, /WEB-OK/);
      const inUse = await engine.docker(['network', 'rm', 'appnet']);
      assert.notEqual(inUse.code, 0);
      assert.match(inUse.stderr, /active endpoints/);
    } finally {
      if (web) await engine.dockerOk(['rm', '-f', web]);
      await engine.dockerOk(['network', 'rm', 'appnet']);
    }
    assert.ok(!links().includes(bridge));
  });

  it('a container joins several networks at create: eth0 with the default route, eth1 on the second', async () => {
    const n1 = `10.${octet}.${(third + 5) % 250}`;
    const n2 = `10.${octet}.${(third + 6) % 250}`;
    await engine.dockerOk(['network', 'create', '--subnet', `${n1}.0/24`, 'front']);
    await engine.dockerOk(['network', 'create', '--subnet', `${n2}.0/24`, 'back']);
    try {
      const out = await engine.dockerOk(['run', '--rm', '--network', 'front', '--network', 'back', 'busybox', 'sh', '-c', 'ip -o -4 addr; ip route']);
      assert.match(out, new RegExp(`eth0\\s+inet ${n1.replace(/\./g, '\\.')}\\.\\d+/24`), out);
      assert.match(out, new RegExp(`eth1\\s+inet ${n2.replace(/\./g, '\\.')}\\.\\d+/24`), out);
      assert.match(out, new RegExp(`default via ${n1.replace(/\./g, '\\.')}\\.1 dev eth0`));
      assert.equal((out.match(/default via/g) ?? []).length, 1);
    } finally {
      await engine.dockerOk(['network', 'rm', 'front', 'back']);
    }
  });

  it('networks are isolated from each other and from the default bridge', async () => {
    const sub = `10.${octet}.${(third + 3) % 250}`;
    await engine.dockerOk(['network', 'create', '--subnet', `${sub}.0/24`, 'isolated']);
    let target = '';
    try {
      target = (await engine.dockerOk(['run', '-d', '--network', 'isolated', 'busybox', 'sleep', '300'])).trim();
      const ip = (await engine.dockerOk(['inspect', '-f', '{{.NetworkSettings.Networks.isolated.IPAddress}}', target])).trim();
      assert.ok(ip.startsWith(`${sub}.`), ip);
      const same = await engine.dockerOk(['run', '--rm', '--network', 'isolated', 'busybox', 'sh', '-c', `ping -c 1 -W 2 ${ip} >/dev/null && echo REACHED || echo BLOCKED`]);
      assert.match(same, /REACHED/);
      const fromDefault = await engine.dockerOk(['run', '--rm', 'busybox', 'sh', '-c', `ping -c 1 -W 2 ${ip} >/dev/null && echo REACHED || echo BLOCKED`]);
      assert.match(fromDefault, /BLOCKED/);
    } finally {
      if (target) await engine.dockerOk(['rm', '-f', target]);
      await engine.dockerOk(['network', 'rm', 'isolated']);
    }
  });

  it('20 runs leave no veth, rule or address allocation behind', async () => {
    const linksBefore = links().filter((l) => l.startsWith('veth'));
    const rulesBefore = ourRules(engine.bridge);
    for (let i = 0; i < 20; i++) await engine.dockerOk(['run', '--rm', 'busybox', 'true']);
    for (let i = 0; i < 3; i++) {
      const id = (await engine.dockerOk(['run', '-d', 'busybox', 'sleep', '300'])).trim();
      await engine.dockerOk(['rm', '-f', id]);
    }
    await eventually(() => bridgePorts(engine.bridge).length === 0);
    // The host ends are removed without the engine waiting for it (or die with the namespace): eventually gone.
    await eventually(() => links().filter((l) => l.startsWith('veth') && !linksBefore.includes(l)).length === 0, 10_000).catch(() => undefined);
    assert.deepEqual(links().filter((l) => l.startsWith('veth') && !linksBefore.includes(l)), []);
    assert.deepEqual(ourRules(engine.bridge), rulesBefore);
    assert.equal(storedEndpoints(engine), 0);
    const net = (await engine.request('GET', '/v1.53/networks/bridge')).json();
    assert.deepEqual(net.Containers, {});
    assert.equal(net.Status.IPAM.Subnets[SUBNET].IPsInUse, 3);
  });
});
