/**
 * The /networks API and the default bridge against a real berthd: predefined networks, inspect, filters,
 * errors, the bridge on the host with its NAT rules, and stable ids across restarts.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { after, before, describe, test } from 'node:test';
import { startEngine, type Engine } from './harness.js';
import { expectConforms } from './contract/openapi.js';

function iptablesSave(): string {
  return spawnSync('iptables-save', [], { encoding: 'utf8' }).stdout;
}

function linkExists(name: string): boolean {
  return spawnSync('ip', ['link', 'show', 'dev', name]).status === 0;
}

describe('networks API', () => {
  let engine: Engine;
  before(async () => {
    engine = await startEngine({ args: ['--bip', '10.213.7.1/24'] });
  });
  after(() => engine?.cleanup());

  test('GET /networks lists bridge, host and none', async () => {
    const res = await engine.request('GET', '/v1.53/networks');
    assert.equal(res.status, 200);
    const list = res.json<Array<{ Name: string; Driver: string; Scope: string; Id: string; Containers: object }>>();
    assert.deepEqual(list.map((n) => [n.Name, n.Driver, n.Scope]).sort(), [
      ['bridge', 'bridge', 'local'],
      ['host', 'host', 'local'],
      ['none', 'null', 'local'],
    ]);
    for (const n of list) assert.match(n.Id, /^[0-9a-f]{64}$/);
    const slash = await engine.request('GET', '/v1.53/networks/');
    assert.equal(slash.json<unknown[]>().length, 3);
  });

  test('GET /networks/bridge shows the subnet, gateway and bridge options', async () => {
    const res = await engine.request('GET', '/v1.53/networks/bridge');
    assert.equal(res.status, 200);
    const n = res.json();
    assert.equal(n.Name, 'bridge');
    assert.deepEqual(n.IPAM, { Driver: 'default', Options: null, Config: [{ Subnet: '10.213.7.0/24', Gateway: '10.213.7.1' }] });
    assert.equal(n.Options['com.docker.network.bridge.name'], engine.bridge);
    assert.equal(n.Options['com.docker.network.bridge.default_bridge'], 'true');
    assert.deepEqual(n.Containers, {});
    assert.equal(n.EnableIPv6, false);
    assert.equal(n.Internal, false);
    assert.deepEqual(n.Status, { IPAM: { Subnets: { '10.213.7.0/24': { IPsInUse: 3, DynamicIPsAvailable: 253 } } } });
    // By id and by a unique id prefix.
    assert.equal((await engine.request('GET', `/v1.53/networks/${n.Id}`)).json().Name, 'bridge');
    assert.equal((await engine.request('GET', `/v1.53/networks/${n.Id.slice(0, 12)}`)).json().Name, 'bridge');
  });

  test('version shaping: Status from 1.52, EnableIPv4 from 1.48', async () => {
    const old = (await engine.request('GET', '/v1.41/networks/bridge')).json();
    assert.ok(!('Status' in old));
    assert.ok(!('EnableIPv4' in old));
    const mid = (await engine.request('GET', '/v1.48/networks/bridge')).json();
    assert.equal(mid.EnableIPv4, true);
    assert.ok(!('Status' in mid));
  });

  test('the bridge exists on the host with its address and NAT rules tagged with its name', () => {
    const addr = spawnSync('ip', ['-o', '-4', 'addr', 'show', 'dev', engine.bridge], { encoding: 'utf8' }).stdout;
    assert.match(addr, /inet 10\.213\.7\.1\/24/);
    const rules = iptablesSave().split('\n').filter((l) => l.includes(`berth:${engine.bridge}`));
    assert.ok(rules.some((l) => l.includes('-s 10.213.7.0/24') && l.includes('MASQUERADE')), rules.join('\n'));
    assert.ok(rules.some((l) => l.startsWith('-A FORWARD') && l.includes(`-i ${engine.bridge}`)));
    assert.ok(rules.some((l) => l.startsWith('-A FORWARD') && l.includes(`-o ${engine.bridge}`) && l.includes('RELATED,ESTABLISHED')));
    assert.equal(spawnSync('cat', ['/proc/sys/net/ipv4/ip_forward'], { encoding: 'utf8' }).stdout.trim(), '1');
  });

  test('responses conform to the published schemas of old and new versions', async () => {
    for (const version of ['1.25', '1.41', '1.44', '1.48', '1.52', '1.53']) {
      const list = await engine.request('GET', `/v${version}/networks`);
      await expectConforms(version, 'GET', '/networks', 200, list.json());
      for (const name of ['bridge', 'host', 'none']) {
        const one = await engine.request('GET', `/v${version}/networks/${name}`);
        await expectConforms(version, 'GET', '/networks/{id}', 200, one.json());
      }
      const missing = await engine.request('GET', `/v${version}/networks/nosuchnet`);
      await expectConforms(version, 'GET', '/networks/{id}', 404, missing.json());
      const del = await engine.request('DELETE', `/v${version}/networks/bridge`);
      assert.equal(del.status, 403);
      // 403 on DELETE is documented in the later schemas only.
      if (Number(version.split('.')[1]) >= 44) await expectConforms(version, 'DELETE', '/networks/{id}', 403, del.json());
      const prune = await engine.request('POST', `/v${version}/networks/prune`);
      await expectConforms(version, 'POST', '/networks/prune', 200, prune.json());
    }
  });

  test('filters', async () => {
    const names = async (filters: object) => {
      const res = await engine.request('GET', `/v1.53/networks?filters=${encodeURIComponent(JSON.stringify(filters))}`);
      assert.equal(res.status, 200, res.text);
      return res.json<Array<{ Name: string }>>().map((n) => n.Name).sort();
    };
    assert.deepEqual(await names({ driver: ['null'] }), ['none']);
    assert.deepEqual(await names({ name: { host: true } }), ['host']);
    assert.deepEqual(await names({ type: ['builtin'] }), ['bridge', 'host', 'none']);
    assert.deepEqual(await names({ type: ['custom'] }), []);
    assert.deepEqual(await names({ dangling: ['true'] }), []);
    assert.deepEqual(await names({ scope: ['local'] }), ['bridge', 'host', 'none']);
    const bad = await engine.request('GET', `/v1.53/networks?filters=${encodeURIComponent('{"colour":["red"]}')}`);
    assert.equal(bad.status, 400);
    assert.match(bad.json().message, /colour/);
    const badType = await engine.request('GET', `/v1.53/networks?filters=${encodeURIComponent('{"type":["weird"]}')}`);
    assert.equal(badType.status, 400);
    assert.match(badType.json().message, /type/);
  });

  test('errors: unknown network 404, predefined delete 403, create answers clearly', async () => {
    const missing = await engine.request('GET', '/v1.53/networks/nosuchnet');
    assert.equal(missing.status, 404);
    assert.equal(missing.json().message, 'network nosuchnet not found');
    for (const name of ['bridge', 'host', 'none']) {
      const del = await engine.request('DELETE', `/v1.53/networks/${name}`);
      assert.equal(del.status, 403);
      assert.match(del.json().message, new RegExp(`${name} is a pre-defined network and cannot be removed`));
    }
    assert.equal((await engine.request('DELETE', '/v1.53/networks/nosuchnet')).status, 404);
    const pre = await engine.request('POST', '/v1.53/networks/create', { body: { Name: 'host' } });
    assert.equal(pre.status, 403);
    const custom = await engine.request('POST', '/v1.53/networks/create', { body: { Name: 'mynet', Driver: 'overlay' } });
    // An overlay network belongs to a swarm: outside one, Docker's answer to a node that is not a manager.
    assert.equal(custom.status, 503);
    assert.match(custom.json().message, /not a swarm manager/);
    const plugin = await engine.request('POST', '/v1.53/networks/create', { body: { Name: 'mynet', Driver: 'nosuchdriver' } });
    assert.equal(plugin.status, 404);
    const badSubnet = await engine.request('POST', '/v1.53/networks/create', { body: { Name: 'mynet', IPAM: { Config: [{ Subnet: '10.1.2.0/99' }] } } });
    assert.equal(badSubnet.status, 400);
    assert.match(badSubnet.json().message, /IPAM\.Config\[0\]\.Subnet/);
    const noName = await engine.request('POST', '/v1.53/networks/create', { body: {} });
    assert.equal(noName.status, 400);
    const connectMissing = await engine.request('POST', '/v1.53/networks/nosuchnet/connect', { body: { Container: 'x' } });
    assert.equal(connectMissing.status, 404);
    const connectNoBody = await engine.request('POST', '/v1.53/networks/bridge/connect', { body: { EndpointConfig: {} } });
    assert.equal(connectNoBody.status, 400);
    assert.match(connectNoBody.json().message, /Container is required/);
    const disconnectBad = await engine.request('POST', '/v1.53/networks/bridge/disconnect', { body: { Container: 'x', Force: 'yes' } });
    assert.equal(disconnectBad.status, 400);
    const prune = await engine.request('POST', '/v1.53/networks/prune');
    assert.equal(prune.status, 200);
    assert.deepEqual(prune.json(), { NetworksDeleted: [] });
  });

  test('the docker CLI lists and inspects networks', async () => {
    const ls = await engine.dockerOk(['network', 'ls', '--format', '{{.Name}} {{.Driver}} {{.Scope}}']);
    assert.deepEqual(ls.trim().split('\n').sort(), ['bridge bridge local', 'host host local', 'none null local']);
    const subnet = await engine.dockerOk(['network', 'inspect', 'bridge', '--format', '{{(index .IPAM.Config 0).Subnet}}']);
    assert.equal(subnet.trim(), '10.213.7.0/24');
    const rm = await engine.docker(['network', 'rm', 'bridge']);
    assert.notEqual(rm.code, 0);
    assert.match(rm.stderr, /pre-defined network/);
  });

  test('ids and the bridge survive a restart without duplicating firewall rules', async () => {
    const before = (await engine.request('GET', '/v1.53/networks')).json<Array<{ Name: string; Id: string }>>();
    const rulesBefore = iptablesSave().split('\n').filter((l) => l.includes(`berth:${engine.bridge}`));
    await engine.restart();
    const afterList = (await engine.request('GET', '/v1.53/networks')).json<Array<{ Name: string; Id: string }>>();
    assert.deepEqual(
      afterList.map((n) => `${n.Name}=${n.Id}`).sort(),
      before.map((n) => `${n.Name}=${n.Id}`).sort(),
    );
    const rulesAfter = iptablesSave().split('\n').filter((l) => l.includes(`berth:${engine.bridge}`));
    assert.deepEqual(rulesAfter.sort(), rulesBefore.sort());
  });
});

describe('user-defined bridge networks', () => {
  let engine: Engine;
  before(async () => {
    engine = await startEngine({ args: ['--bip', '10.213.9.1/24'] });
  });
  after(() => engine?.cleanup());

  test('docker network create, inspect, ls, rm: a bridge with its rules comes and goes', async () => {
    const octet = 200 + Math.floor(Math.random() * 50);
    const subnet = `10.${octet}.77.0/24`;
    const id = (await engine.dockerOk(['network', 'create', '--subnet', subnet, '--label', 'purpose=test', 'appnet'])).trim();
    assert.match(id, /^[0-9a-f]{64}$/);
    const bridge = `br-${id.slice(0, 12)}`;
    try {
      const n = (await engine.request('GET', '/v1.53/networks/appnet')).json();
      assert.equal(n.Id, id);
      assert.equal(n.Driver, 'bridge');
      assert.deepEqual(n.IPAM.Config, [{ Subnet: subnet, Gateway: `10.${octet}.77.1` }]);
      assert.deepEqual(n.Labels, { purpose: 'test' });
      await expectConforms('1.53', 'GET', '/networks/{id}', 200, n);
      assert.match(spawnSync('ip', ['-o', '-4', 'addr', 'show', 'dev', bridge], { encoding: 'utf8' }).stdout, new RegExp(`inet 10\\.${octet}\\.77\\.1/24`));
      assert.ok(iptablesSave().includes(`berth:${bridge}`));
      const ls = await engine.dockerOk(['network', 'ls', '--filter', 'type=custom', '--format', '{{.Name}}']);
      assert.equal(ls.trim(), 'appnet');
      const dup = await engine.request('POST', '/v1.53/networks/create', { body: { Name: 'appnet' } });
      assert.equal(dup.status, 409);
      const overlap = await engine.request('POST', '/v1.53/networks/create', { body: { Name: 'other', IPAM: { Config: [{ Subnet: `10.${octet}.77.128/25` }] } } });
      assert.equal(overlap.status, 403);
      // Restarted, the network and its bridge are still there.
      await engine.restart();
      assert.equal((await engine.request('GET', `/v1.53/networks/${id}`)).json().Name, 'appnet');
      assert.ok(linkExists(bridge));
    } finally {
      await engine.dockerOk(['network', 'rm', 'appnet']);
    }
    assert.ok(!linkExists(bridge));
    assert.ok(!iptablesSave().includes(`berth:${bridge}`));
    assert.equal((await engine.request('GET', '/v1.53/networks/appnet')).status, 404);
  });

  test('dockerode: list, create, inspect and remove', async () => {
    const docker = engine.dockerode();
    const before = await docker.listNetworks();
    assert.deepEqual(before.map((n) => n.Name).sort(), ['bridge', 'host', 'none']);
    const created = await docker.createNetwork({ Name: 'odenet', Labels: { by: 'dockerode' }, IPAM: { Driver: 'default', Config: [{ Subnet: '10.197.3.0/24', Gateway: '10.197.3.254' }] } });
    try {
      const info = await created.inspect();
      assert.equal(info.Name, 'odenet');
      assert.deepEqual(info.IPAM?.Config, [{ Subnet: '10.197.3.0/24', Gateway: '10.197.3.254' }]);
      const filtered = await docker.listNetworks({ filters: { label: ['by=dockerode'] } });
      assert.deepEqual(filtered.map((n) => n.Name), ['odenet']);
      await assert.rejects(docker.getNetwork('bridge').remove(), (e: { statusCode?: number }) => e.statusCode === 403);
    } finally {
      await created.remove();
    }
    await assert.rejects(docker.getNetwork('odenet').inspect(), (e: { statusCode?: number }) => e.statusCode === 404);
  });

  test('docker network create without a subnet picks a free range; prune removes unused networks', async () => {
    const since = Math.floor(Date.now() / 1000) - 1;
    const id = (await engine.dockerOk(['network', 'create', 'auto1'])).trim();
    const n = (await engine.request('GET', `/v1.53/networks/${id}`)).json();
    assert.match(n.IPAM.Config[0].Subnet, /^(172\.(1[7-9]|2\d|3[01])\.0\.0\/16|192\.168\.\d+\.0\/20)$/);
    const out = await engine.dockerOk(['network', 'prune', '-f']);
    assert.match(out, /auto1/);
    assert.ok(!linkExists(`br-${id.slice(0, 12)}`));
    const events = await engine.request('GET', `/v1.53/events?since=${since}&until=${Math.ceil(Date.now() / 1000) + 1}&filters=${encodeURIComponent('{"type":["network"]}')}`);
    const actions = events.text.trim().split('\n').filter(Boolean).map((l) => JSON.parse(l)).filter((e) => e.Actor.ID === id).map((e) => e.Action);
    assert.deepEqual(actions, ['create', 'destroy']);
  });
});

describe('default bridge address choice and --iptables=false', () => {
  let engine: Engine;
  after(() => engine?.cleanup());

  test('without --bip the bridge gets a free private range; --iptables=false adds no rules', async () => {
    engine = await startEngine({ args: ['--iptables=false'] });
    const n = (await engine.request('GET', '/v1.53/networks/bridge')).json();
    const subnet: string = n.IPAM.Config[0].Subnet;
    assert.match(subnet, /^(172\.(1[7-9]|2\d|3[01])\.0\.0\/16|192\.168\.\d+\.0\/20)$/);
    assert.ok(linkExists(engine.bridge));
    assert.ok(!iptablesSave().includes(`berth:${engine.bridge}`));
  });
});
