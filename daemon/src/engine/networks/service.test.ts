import assert from 'node:assert/strict';
import { mkdtempSync, promises as fs, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import { EventBus, type EngineEvent } from '../events.js';
import { FsStateStore } from '../../state/fs.js';
import { Conflict, Forbidden, InvalidParameter, NotFound, NotImplemented } from '../../errors.js';
import { DETACHED_KEY, NetworkService, type NetworkServiceOptions } from './service.js';
import { containerConnector, type ContainerNetworkChange, type ContainerNetworkConfig } from './connect.js';
import type { AdoptSpec, BridgeSpec, DnsAnswers, NetworkHost, PortProto, PublishSpec, VethSpec } from '../../host/host.js';

/** A NetworkHost that keeps the host's state in memory. */
class FakeNetworkHost implements NetworkHost {
  subnetsInUse: string[] = ['192.0.2.0/24'];
  bridges = new Map<string, string | null>();
  ports = new Map<string, Set<string>>();
  nat = new Map<string, string>();
  veths: VethSpec[] = [];
  removed: string[] = [];
  failAttach = false;
  onEnsureBridge?: (spec: BridgeSpec) => void;

  async usedSubnets(except?: string) {
    return this.subnetsInUse.filter(() => except !== 'never');
  }
  async bridgeAddress(name: string) {
    return this.bridges.has(name) ? this.bridges.get(name) : undefined;
  }
  async ensureBridge(spec: BridgeSpec) {
    this.onEnsureBridge?.(spec);
    this.bridges.set(spec.name, `${spec.gateway}/${spec.prefixLen}`);
    if (!this.ports.has(spec.name)) this.ports.set(spec.name, new Set());
  }
  async removeBridge(name: string) {
    this.bridges.delete(name);
  }
  async enableForwarding() {}
  ipv6SubnetsInUse: string[] = [];
  ipv6Forwarding = false;
  async usedIPv6Subnets() {
    return [...this.ipv6SubnetsInUse];
  }
  async enableIPv6Forwarding() {
    this.ipv6Forwarding = true;
  }
  async ensureNat(spec: { bridge: string; subnet: string }) {
    this.nat.set(spec.bridge, spec.subnet);
  }
  async removeNat(bridge: string) {
    this.nat.delete(bridge);
  }
  /** Direct delivery by bridge: MAC -> host interface. */
  direct = new Map<string, Map<string, string>>();
  async attachVeth(spec: VethSpec) {
    if (this.failAttach) throw new Error('no such process');
    this.veths.push(spec);
    this.ports.get(spec.bridge)!.add(spec.hostInterface);
    if (spec.direct) {
      if (!this.direct.has(spec.bridge)) this.direct.set(spec.bridge, new Map());
      this.direct.get(spec.bridge)!.set(spec.macAddress, spec.hostInterface);
    }
  }
  adopted: AdoptSpec[] = [];
  async adoptInterface(spec: AdoptSpec) {
    this.adopted.push(spec);
  }
  async removeInterface(name: string) {
    this.removed.push(name);
    for (const set of this.ports.values()) set.delete(name);
  }
  async dropDirectDelivery(bridge: string, macAddress: string) {
    this.direct.get(bridge)?.delete(macAddress);
  }
  async bridgePorts(bridge: string) {
    return [...(this.ports.get(bridge) ?? [])];
  }
  /** Published port rules by container id. */
  published = new Map<string, PublishSpec>();
  /** Host ports some other program holds. */
  busyHostPorts = new Set<number>();
  dnsServed = new Map<string, { pid: number; answers: DnsAnswers }>();
  async ephemeralPortRange() {
    return { first: 40000, last: 40009 };
  }
  async hostPortFree(_proto: PortProto, _ip: string, port: number) {
    return !this.busyHostPorts.has(port);
  }
  async publishPorts(spec: PublishSpec) {
    this.published.set(spec.containerId, spec);
  }
  async unpublishPorts(spec: PublishSpec) {
    this.published.delete(spec.containerId);
  }
  async removeStalePortRules(_bridge: string, keep: ReadonlySet<string>) {
    for (const id of this.published.keys()) if (!keep.has(id)) this.published.delete(id);
  }
  async startDns(id: string, pid: number, answers: DnsAnswers) {
    this.dnsServed.set(id, { pid, answers });
  }
  stopDns(id: string) {
    this.dnsServed.delete(id);
  }
}

const roots: string[] = [];
after(() => roots.forEach((r) => rmSync(r, { recursive: true, force: true })));

async function setup(opts: Partial<NetworkServiceOptions> = {}, host = new FakeNetworkHost(), dataRoot?: string) {
  const root = dataRoot ?? mkdtempSync(path.join(os.tmpdir(), 'berth-net-'));
  if (!dataRoot) roots.push(root);
  const events = new EventBus();
  const seen: EngineEvent[] = [];
  events.subscribe((e) => seen.push(e));
  const service = new NetworkService(host, events, { dataRoot: root, state: new FsStateStore(root), bridgeName: 'btest0', iptables: true, ...opts });
  await service.init();
  return { service, host, root, seen };
}

test('init creates bridge, host and none once, with ids stable across restarts', async () => {
  const { service, host, root } = await setup();
  const names = service.list().map((n) => n.Name);
  assert.deepEqual(names, ['bridge', 'host', 'none']);
  const ids = service.list().map((n) => n.Id);
  const again = await setup({}, host, root);
  assert.deepEqual(again.service.list().map((n) => n.Id), ids);
  const bridge = service.inspect('bridge');
  assert.equal(bridge.Driver, 'bridge');
  assert.equal(service.inspect('none').Driver, 'null');
  assert.equal(service.inspect('host').Driver, 'host');
  assert.deepEqual(bridge.IPAM.Config, [{ Subnet: '172.17.0.0/16', Gateway: '172.17.0.1' }]);
  assert.equal(bridge.Options['com.docker.network.bridge.name'], 'btest0');
  assert.equal(host.nat.get('btest0'), '172.17.0.0/16');
});

test('the default subnet skips ranges the host routes', async () => {
  const host = new FakeNetworkHost();
  host.subnetsInUse = ['172.17.0.0/16', '172.18.3.0/24', '10.0.0.0/8'];
  const { service } = await setup({}, host);
  assert.equal(service.defaultBridge().subnet, '172.19.0.0/16');
  assert.equal(service.defaultBridge().gateway, '172.19.0.1');
});

test('when another engine takes the same free range at the same moment, the bridge moves to the next one', async () => {
  const host = new FakeNetworkHost();
  host.onEnsureBridge = (spec) => {
    if (spec.subnet === '172.17.0.0/16') host.subnetsInUse.push('172.17.0.0/16');
  };
  const { service } = await setup({}, host);
  assert.equal(service.defaultBridge().subnet, '172.18.0.0/16');
  assert.equal(host.bridges.get('btest0'), '172.18.0.1/16');
});

test('an existing bridge keeps its address; --bip wins; a bad --bip is refused', async () => {
  const host = new FakeNetworkHost();
  host.bridges.set('btest0', '10.44.0.1/24');
  assert.equal((await setup({}, host)).service.defaultBridge().subnet, '10.44.0.0/24');
  const bip = await setup({ bridgeCidr: '10.55.1.1/24' });
  assert.deepEqual(bip.service.defaultBridge(), { name: 'btest0', subnet: '10.55.1.0/24', gateway: '10.55.1.1' });
  await assert.rejects(setup({ bridgeCidr: '10.55.1.1' }), InvalidParameter);
  await assert.rejects(setup({ bridgeCidr: '10.55.1.255/24' }), /broadcast/);
});

test('--iptables=false installs no firewall rules', async () => {
  const { host } = await setup({ iptables: false });
  assert.equal(host.nat.size, 0);
});

test('plan validates NetworkMode and EndpointsConfig with clear messages', async () => {
  const { service } = await setup();
  assert.equal(service.plan(undefined, undefined).mode, 'bridge');
  assert.equal(service.plan('default', {}).mode, 'bridge');
  assert.equal(service.plan('host', null).mode, 'host');
  assert.equal(service.plan('none', { EndpointsConfig: { none: {} } }).mode, 'none');
  const bridgeId = service.inspect('bridge').Id;
  const byId = service.plan(bridgeId.slice(0, 12), undefined);
  assert.equal(byId.mode === 'bridge' && byId.networkName, 'bridge');
  assert.deepEqual(service.plan('container:web', undefined), { mode: 'container', container: 'web', hostGateway: '172.17.0.1' });

  assert.throws(() => service.plan('nosuchnet', undefined), (e: Error) => e instanceof NotFound && e.message === 'network nosuchnet not found');
  assert.throws(() => service.plan('container:', undefined), InvalidParameter);
  const deferred = service.plan('latenet', undefined, { deferUnknownNetwork: true });
  await assert.rejects(service.connect({ id: 'd'.repeat(64), name: 'd' }, deferred, 5), (e: Error) => e instanceof NotFound && e.message === 'network latenet not found');
  await service.create({ Name: 'latenet' });
  const late = await service.connect({ id: 'd'.repeat(64), name: 'd' }, deferred, 5);
  assert.equal(late.networks.latenet.NetworkID, service.inspect('latenet').Id);
  await service.disconnect('d'.repeat(64));
  assert.throws(
    () => service.plan('bridge', { EndpointsConfig: { bridge: { IPAMConfig: { IPv4Address: '172.17.0.300' } } } }),
    (e: Error) => e instanceof InvalidParameter && /EndpointsConfig\.bridge\.IPAMConfig\.IPv4Address/.test(e.message) && /172\.17\.0\.300/.test(e.message),
  );
  assert.throws(() => service.plan('bridge', { EndpointsConfig: { bridge: { IPAMConfig: { IPv4Address: '10.1.2.3' } } } }), /not in the subnet 172\.17\.0\.0\/16/);
  assert.throws(() => service.plan('bridge', { EndpointsConfig: { bridge: { IPAMConfig: { IPv4Address: '172.17.0.1' } } } }), /gateway/);
  assert.throws(() => service.plan('bridge', { EndpointsConfig: { bridge: { IPAMConfig: { IPv4Address: '172.17.255.255' } } } }), /broadcast/);
  assert.throws(() => service.plan('host', { EndpointsConfig: { host: { IPAMConfig: { IPv4Address: '172.17.0.9' } } } }), /static address cannot be given on network host/);
  assert.throws(() => service.plan('bridge', { EndpointsConfig: { bridge: { IPAMConfig: { IPv6Address: 'fd00::2' } } } }), /IPv6 is not enabled/);
  assert.throws(() => service.plan('bridge', { EndpointsConfig: { bridge: { Aliases: ['web'] } } }), /user-defined networks/);
  assert.throws(() => service.plan('bridge', { EndpointsConfig: { bridge: { MacAddress: 'zz' } } }), /EndpointsConfig\.bridge\.MacAddress/);
  assert.throws(() => service.plan('bridge', { EndpointsConfig: { other: {} } }), /network other not found/);
  assert.throws(() => service.plan('bridge', { EndpointsConfig: { host: { IPAMConfig: { IPv4Address: '1.2.3.4' } } } }), /a container on network bridge cannot also be connected to network host/);
  assert.throws(() => service.plan('none', { EndpointsConfig: { bridge: { Links: ['x'] } } }), /cannot also be connected/);
  assert.throws(() => service.plan('bridge', { EndpointsConfig: [] }), /EndpointsConfig must be an object/);
  assert.throws(() => service.plan('none', undefined, { macAddress: '02:42:ac:11:00:09' }), /MAC address cannot be set/);
  const ok = service.plan('bridge', { EndpointsConfig: { bridge: { IPAMConfig: { IPv4Address: '172.17.3.4' }, MacAddress: '02:42:AA:BB:CC:DD' } } });
  assert.deepEqual(ok.mode === 'bridge' && ok.endpoint, { ipv4Address: '172.17.3.4', macAddress: '02:42:aa:bb:cc:dd' });
});

test('connect allocates addresses in order with Docker MACs, events, and disconnect releases them', async () => {
  const { service, host, seen } = await setup();
  const plan = service.plan('bridge', undefined);
  const a = await service.connect({ id: 'a'.repeat(64), name: '/alpha' }, plan, 101);
  const b = await service.connect({ id: 'b'.repeat(64), name: '/beta' }, plan, 102);
  assert.equal(a.networks.bridge.IPAddress, '172.17.0.2');
  assert.equal(a.networks.bridge.MacAddress, '02:42:ac:11:00:02');
  assert.equal(a.networks.bridge.Gateway, '172.17.0.1');
  assert.equal(a.networks.bridge.IPPrefixLen, 16);
  assert.match(a.networks.bridge.EndpointID, /^[0-9a-f]{64}$/);
  assert.equal(a.hostsAddress, '172.17.0.2');
  assert.equal(a.sandboxKey, '/proc/101/ns/net');
  assert.equal(b.networks.bridge.IPAddress, '172.17.0.3');
  assert.equal(host.veths[0].pid, 101);
  assert.equal(host.veths[0].bridge, 'btest0');
  assert.equal(host.veths[0].containerInterface, 'eth0');
  assert.match(host.veths[0].hostInterface, /^veth[0-9a-f]{7}$/);

  const inspected = service.inspect('bridge');
  assert.deepEqual(inspected.Containers['a'.repeat(64)], {
    Name: 'alpha', EndpointID: a.networks.bridge.EndpointID, MacAddress: '02:42:ac:11:00:02', IPv4Address: '172.17.0.2/16', IPv6Address: '',
  });
  assert.deepEqual(inspected.Status!.IPAM.Subnets['172.17.0.0/16'], { IPsInUse: 5, DynamicIPsAvailable: 65531 });
  assert.deepEqual(service.list()[0].Containers, {});

  await service.disconnect('a'.repeat(64));
  await service.disconnect('a'.repeat(64));
  assert.deepEqual(service.containerNetworks('a'.repeat(64)), {});
  assert.ok(host.removed.includes(host.veths[0].hostInterface));
  const netEvents = seen.filter((e) => e.Type === 'network').map((e) => `${e.Action}:${e.Actor.Attributes.container.slice(0, 1)}:${e.Actor.Attributes.name}:${e.Actor.Attributes.type}`);
  assert.deepEqual(netEvents, ['connect:a:bridge:bridge', 'connect:b:bridge:bridge', 'disconnect:a:bridge:bridge']);
  assert.ok(seen.filter((e) => e.Type === 'network').every((e) => e.Actor.ID === inspected.Id));

  // The next dynamic address goes on from the last one rather than reusing a just-released address.
  const c = await service.connect({ id: 'c'.repeat(64), name: 'gamma' }, plan, 103);
  assert.equal(c.networks.bridge.IPAddress, '172.17.0.4');
});

test('a static address is used, and refused while another container holds it', async () => {
  const { service } = await setup();
  const plan = service.plan('bridge', { EndpointsConfig: { bridge: { IPAMConfig: { IPv4Address: '172.17.9.9' } } } });
  const a = await service.connect({ id: '1'.repeat(64), name: 'one' }, plan, 10);
  assert.equal(a.networks.bridge.IPAddress, '172.17.9.9');
  assert.equal(a.networks.bridge.MacAddress, '02:42:ac:11:09:09');
  assert.deepEqual(a.networks.bridge.IPAMConfig, { IPv4Address: '172.17.9.9' });
  await assert.rejects(service.connect({ id: '2'.repeat(64), name: 'two' }, plan, 11), Conflict);
});

test('allocations survive a restart: a live address is not handed out twice', async () => {
  const { service, host, root } = await setup();
  const plan = service.plan('bridge', undefined);
  await service.connect({ id: 'a'.repeat(64), name: 'a' }, plan, 1);
  const again = await setup({}, host, root);
  await again.service.recover(new Map([['a'.repeat(64), { name: '/a', networks: {} }]]));
  const b = await again.service.connect({ id: 'b'.repeat(64), name: 'b' }, again.service.plan('bridge', undefined), 2);
  assert.equal(b.networks.bridge.IPAddress, '172.17.0.3');
  assert.equal(again.service.containerNetworks('a'.repeat(64)).bridge.IPAddress, '172.17.0.2');
});

test('recover releases what dead containers held and removes ports no live container owns', async () => {
  const { service, host, seen } = await setup();
  const plan = service.plan('bridge', undefined);
  await service.connect({ id: 'a'.repeat(64), name: 'a' }, plan, 1);
  await service.connect({ id: 'b'.repeat(64), name: 'b' }, plan, 2);
  host.ports.get('btest0')!.add('vethstray');
  await service.recover(new Map([['b'.repeat(64), { name: '/b', networks: {} }]]));
  assert.deepEqual(Object.keys(service.inspect('bridge').Containers), ['b'.repeat(64)]);
  assert.deepEqual(await host.bridgePorts('btest0'), [host.veths[1].hostInterface]);
  assert.ok(host.removed.includes('vethstray'));
  assert.ok(seen.some((e) => e.Type === 'network' && e.Action === 'disconnect' && e.Actor.Attributes.container === 'a'.repeat(64)));
});

test('endpoints on none and host live in memory and come back at restart from the running containers', async () => {
  const { service, host, root } = await setup();
  const files = async () => Object.fromEntries(await Promise.all((await fs.readdir(path.join(root, 'network'))).map(async (f) => [f, await fs.readFile(path.join(root, 'network', f), 'utf8')])));
  const before = await files();
  const n = await service.connect({ id: 'n'.repeat(64), name: 'n' }, service.plan('none', undefined), 5);
  const h = await service.connect({ id: 'h'.repeat(64), name: 'h' }, service.plan('host', undefined), undefined);
  await service.connect({ id: 'd'.repeat(64), name: 'd' }, service.plan('none', undefined), 6);
  assert.deepEqual(await files(), before);
  assert.deepEqual(Object.keys(service.inspect('none').Containers).sort(), ['d'.repeat(64), 'n'.repeat(64)]);
  // After a restart, n and h still run; d ended while the daemon was down.
  const again = await setup({}, host, root);
  await again.service.recover(new Map([
    ['n'.repeat(64), { name: '/n', networks: n.networks }],
    ['h'.repeat(64), { name: '/h', networks: h.networks }],
  ]));
  const none = again.service.inspect('none').Containers as Record<string, { Name: string; EndpointID: string }>;
  assert.deepEqual(Object.keys(none), ['n'.repeat(64)]);
  assert.equal(none['n'.repeat(64)].Name, 'n');
  assert.equal(none['n'.repeat(64)].EndpointID, n.networks.none.EndpointID);
  assert.deepEqual(Object.keys(again.service.inspect('host').Containers), ['h'.repeat(64)]);
  await again.service.disconnect('n'.repeat(64));
  assert.deepEqual(again.service.inspect('none').Containers, {});
});

test('a failed attach releases its address', async () => {
  const { service, host } = await setup();
  host.failAttach = true;
  await assert.rejects(service.connect({ id: 'a'.repeat(64), name: 'a' }, service.plan('bridge', undefined), 1), /cannot connect container a to network bridge/);
  assert.deepEqual(service.inspect('bridge').Containers, {});
});

test('none has no address; host touches nothing; container mode has no networks', async () => {
  const { service, host } = await setup();
  const none = await service.connect({ id: 'n'.repeat(64), name: 'n' }, service.plan('none', undefined), 55);
  assert.equal(none.networks.none.IPAddress, '');
  assert.equal(none.hostsAddress, undefined);
  const h = await service.connect({ id: 'h'.repeat(64), name: 'h' }, service.plan('host', undefined), undefined);
  assert.equal(h.networks.host.NetworkID, service.inspect('host').Id);
  assert.equal(h.sandboxKey, '');
  assert.deepEqual(Object.keys(service.inspect('host').Containers), ['h'.repeat(64)]);
  assert.equal(host.veths.length, 0);
  assert.deepEqual((await service.connect({ id: 'c'.repeat(64), name: 'c' }, { mode: 'container', container: 'n' }, 9)).networks, {});
});

test('list filters and errors of remove and create', async () => {
  const { service } = await setup();
  const names = (f: Record<string, string[]>) => service.list(new Map(Object.entries(f))).map((n) => n.Name);
  assert.deepEqual(names({ driver: ['bridge'] }), ['bridge']);
  assert.deepEqual(names({ name: ['o'] }), ['host', 'none']);
  assert.deepEqual(names({ name: ['^none$'] }), ['none']);
  assert.deepEqual(names({ type: ['custom'] }), []);
  assert.deepEqual(names({ type: ['builtin'] }), ['bridge', 'host', 'none']);
  assert.deepEqual(names({ dangling: ['true'] }), []);
  assert.deepEqual(names({ dangling: ['false'] }), ['bridge', 'host', 'none']);
  assert.deepEqual(names({ scope: ['swarm'] }), []);
  assert.deepEqual(names({ label: ['a=b'] }), []);
  const id = service.inspect('host').Id;
  assert.deepEqual(names({ id: [id.slice(0, 6)] }), ['host']);
  assert.throws(() => names({ type: ['nope'] }), InvalidParameter);
  assert.throws(() => names({ dangling: ['maybe'] }), InvalidParameter);
  assert.throws(() => service.inspect('nope'), NotFound);
  assert.throws(() => service.inspect('bridge', { scope: 'swarm' }), NotFound);
  await assert.rejects(service.remove('bridge'), Forbidden);
  await assert.rejects(service.remove(id), /host is a pre-defined network/);
  await assert.rejects(service.remove('nope'), NotFound);
  await assert.rejects(service.create({ Name: 'none' }), Forbidden);
  await assert.rejects(service.create({}), InvalidParameter);
});

test('user-defined bridge networks: create, use, refuse removal while used, remove, events', async () => {
  const { service, host, seen, root } = await setup();
  const { Id } = await service.create({ Name: 'app', Labels: { tier: 'web' }, Options: { 'com.docker.network.driver.mtu': '1400' } });
  const net = service.inspect('app');
  assert.equal(net.Id, Id);
  assert.equal(net.Driver, 'bridge');
  assert.deepEqual(net.IPAM.Config, [{ Subnet: '172.18.0.0/16', Gateway: '172.18.0.1' }]);
  assert.deepEqual(net.Labels, { tier: 'web' });
  assert.equal(host.bridges.get(`br-${Id.slice(0, 12)}`), '172.18.0.1/16');
  assert.equal(host.nat.get(`br-${Id.slice(0, 12)}`), '172.18.0.0/16');
  await assert.rejects(service.create({ Name: 'app' }), Conflict);
  await assert.rejects(service.create({ Name: 'other', IPAM: { Config: [{ Subnet: '172.18.5.0/24' }] } }), (e: Error) => e instanceof Forbidden && /overlaps/.test(e.message));

  const plan = service.plan('app', { EndpointsConfig: { app: { Aliases: ['web'] } } });
  const a = await service.connect({ id: 'a'.repeat(64), name: 'a' }, plan, 7);
  assert.equal(a.networks.app.IPAddress, '172.18.0.2');
  assert.equal(a.networks.app.NetworkID, Id);
  assert.equal(host.veths[0].bridge, `br-${Id.slice(0, 12)}`);
  assert.equal(host.veths[0].mtu, 1400);
  await assert.rejects(service.remove('app'), (e: Error) => e instanceof Forbidden && /active endpoints/.test(e.message));
  assert.deepEqual(await service.prune(), []);
  await service.disconnect('a'.repeat(64));

  // Survives a restart: the bridge is brought up again.
  host.bridges.clear();
  const again = await setup({}, host, root);
  assert.equal(again.service.inspect('app').Id, Id);
  assert.equal(host.bridges.get(`br-${Id.slice(0, 12)}`), '172.18.0.1/16');

  await again.service.remove(Id.slice(0, 10));
  assert.throws(() => again.service.inspect('app'), NotFound);
  assert.ok(!host.bridges.has(`br-${Id.slice(0, 12)}`));
  assert.ok(!host.nat.has(`br-${Id.slice(0, 12)}`));
  assert.deepEqual(seen.filter((e) => e.Type === 'network' && ['create', 'destroy'].includes(e.Action)).map((e) => e.Action), ['create']);
  const third = await setup({}, host, root);
  assert.throws(() => third.service.inspect(Id), NotFound);
});

test('user-defined networks: pools, IP ranges, auxiliary addresses, internal and prune filters', async () => {
  const { service, host } = await setup();
  await service.create({
    Name: 'ranged',
    Internal: true,
    Options: { 'com.docker.network.bridge.name': 'brranged' },
    IPAM: { Config: [{ Subnet: '10.30.0.0/24', Gateway: '10.30.0.254', IPRange: '10.30.0.128/25', AuxiliaryAddresses: { router: '10.30.0.129' } }] },
  });
  assert.equal(host.bridges.get('brranged'), '10.30.0.254/24');
  const plan = service.plan('ranged', undefined);
  const first = await service.connect({ id: '1'.repeat(64), name: 'one' }, plan, 1);
  assert.equal(first.networks.ranged.IPAddress, '10.30.0.128');
  const second = await service.connect({ id: '2'.repeat(64), name: 'two' }, plan, 2);
  assert.equal(second.networks.ranged.IPAddress, '10.30.0.130');
  assert.equal(host.veths[0].gateway, undefined, 'no default route on an internal network');
  await service.disconnect('1'.repeat(64));
  await service.disconnect('2'.repeat(64));

  await service.create({ Name: 'keep', Labels: { keep: 'yes' } });
  await service.create({ Name: 'drop', Labels: { keep: 'no' } });
  assert.deepEqual(names(await service.prune(new Map([['label!', ['keep=yes']]]))), ['drop', 'ranged']);
  assert.deepEqual(await service.prune(new Map([['until', ['24h']]])), []);
  assert.deepEqual(await service.prune(new Map([['label', ['keep']]])), ['keep']);
  await assert.rejects(service.prune(new Map([['until', ['soon']]])), InvalidParameter);
  assert.deepEqual(service.list().map((n) => n.Name), ['bridge', 'host', 'none']);

  const bad = async (body: object, pattern: RegExp, cls: Function = InvalidParameter) =>
    assert.rejects(service.create(body), (e: Error) => e instanceof cls && pattern.test(e.message), JSON.stringify(body));
  await bad({ Name: 'x', IPAM: { Config: [{ Subnet: '10.40.0.1/24' }] } }, /host bits/);
  await bad({ Name: 'x', IPAM: { Config: [{ Subnet: '10.40.0.0/33' }] } }, /IPAM\.Config\[0\]\.Subnet/);
  await bad({ Name: 'x', IPAM: { Config: [{ Subnet: '10.40.0.0/24', Gateway: '10.41.0.1' }] } }, /Gateway 10\.41\.0\.1: it is not in the subnet/);
  await bad({ Name: 'x', IPAM: { Config: [{ Subnet: '10.40.0.0/24', IPRange: '10.40.1.0/25' }] } }, /IPRange/);
  await bad({ Name: 'bad/name' }, /invalid network name/);
  await bad({ Name: 'bad\nname' }, /invalid network name/);
  await bad({ Name: ' leading space' }, /invalid network name/);
  await bad({ Name: 'x', Driver: 'weird' }, /plugin "weird" not found/, NotFound);
  await bad({ Name: 'x', Driver: 'overlay' }, /overlay/, NotImplemented);
  await bad({ Name: 'x', Driver: 'host' }, /only one instance/, Forbidden);
  await bad({ Name: 'x', IPAM: { Config: [{ Subnet: 'fd00:40::/64' }] } }, /IPv6 has not been enabled for this network, but an IPv6 subnet has been provided/);
  const v6 = (config: object) => ({ Name: 'x', EnableIPv6: true, IPAM: { Config: [config] } });
  await bad(v6({ Subnet: 'fd00:40::1/64' }), /host bits set \(did you mean fd00:40::\/64\?\)/);
  await bad(v6({ Subnet: 'fd00:40::/127' }), /at most \/126/);
  await bad(v6({ Subnet: 'fd00:40:::/64' }), /CIDR notation/);
  await bad(v6({ Subnet: 'fd00:40::/64', Gateway: 'fd00:41::1' }), /Gateway fd00:41::1: it is not in the subnet fd00:40::\/64/);
  await bad(v6({ Subnet: 'fd00:40::/64', Gateway: '10.0.0.1' }), /10\.0\.0\.1 is an IPv4 address whereas it is associated to an IPv6 subnet/);
  await bad(v6({ Subnet: 'fd00:40::/64', Gateway: 'fd00:40::' }), /network address/);
  await bad(v6({ Subnet: 'fd00:40::/64', IPRange: 'fd00:41::/80' }), /IPRange fd00:41::\/80: it is not inside/);
  await bad(v6({ Subnet: 'fe80::/64' }), /link-local/);
  await bad(v6({ Subnet: '10.40.0.0/24', Gateway: 'fd00::1' }), /is an IPv6 address whereas it is associated to an IPv4 subnet/);
  await bad({ Name: 'x', EnableIPv6: true, IPAM: { Config: [{ Subnet: 'fd00:40::/64' }, { Subnet: 'fd00:41::/64' }] } }, /more than one IPv6 pool/, NotImplemented);
  await bad({ Name: 'x', EnableIPv6: 'yes' }, /EnableIPv6 must be a boolean/);
  await bad({ Name: 'x', Options: { 'com.docker.network.driver.mtu': 'big' } }, /mtu/);
  await bad({ Name: 'x', Options: { 'com.docker.network.bridge.name': 'a-name-that-is-too-long' } }, /bridge\.name/);
  await bad({ Name: 'x', Labels: { a: 1 } }, /Labels\.a must be a string/);
  await bad({ Name: 'x', Options: { 'com.docker.network.bridge.name': 'btest0' } }, /already used/, Conflict);
  host.bridges.set('brforeign', '10.99.0.1/24');
  await bad({ Name: 'x', Options: { 'com.docker.network.bridge.name': 'brforeign' } }, /already exists on the host/, Conflict);
});

test('IPv6 networks: the default /64 from the engine\'s ULA prefix, pools of both families, addresses, static ones, DNS, release', async () => {
  const { service, host } = await setup();
  host.ipv6SubnetsInUse = ['fd00::/64'];
  const auto = await service.create({ Name: 'auto6', EnableIPv6: true });
  const autoView = service.inspect(auto.Id);
  assert.equal(autoView.EnableIPv6, true);
  assert.equal(autoView.IPAM.Config.length, 2);
  const [p4, p6] = autoView.IPAM.Config;
  assert.ok(!p4.Subnet.includes(':'));
  assert.match(p6.Subnet, /^fd[0-9a-f]{2}:[0-9a-f]{1,4}:[0-9a-f]{1,4}::\/64$/);
  assert.equal(p6.Gateway, p6.Subnet.replace('::/64', '::1'));
  assert.ok(host.ipv6Forwarding, 'IPv6 forwarding on');
  // A second network takes the next /64; a client subnet overlapping one of ours is refused.
  const second = service.inspect((await service.create({ Name: 'auto6b', EnableIPv6: true })).Id).IPAM.Config[1];
  assert.notEqual(second.Subnet, p6.Subnet);
  await assert.rejects(service.create({ Name: 'clash', EnableIPv6: true, IPAM: { Config: [{ Subnet: p6.Subnet.replace('::/64', '::/80') }] } }), Forbidden);
  // A static IPv6 address needs a subnet the user gave.
  assert.throws(() => service.plan('auto6', { EndpointsConfig: { auto6: { IPAMConfig: { IPv6Address: p6.Subnet.replace('::/64', '::9') } } } }), /user configured subnets/);

  const { Id } = await service.create({
    Name: 'dual',
    EnableIPv6: true,
    IPAM: { Config: [{ Subnet: '10.60.0.0/24' }, { Subnet: 'fd00:60::/64', Gateway: 'fd00:60::1', IPRange: 'fd00:60::100/120' }] },
  });
  const dual = service.inspect(Id);
  assert.deepEqual(dual.IPAM.Config, [
    { Subnet: '10.60.0.0/24', Gateway: '10.60.0.1' },
    { Subnet: 'fd00:60::/64', Gateway: 'fd00:60::1', IPRange: 'fd00:60::100/120' },
  ]);
  assert.throws(() => service.plan('dual', { EndpointsConfig: { dual: { IPAMConfig: { IPv6Address: 'fd00:61::5' } } } }), /not in the subnet fd00:60::\/64/);
  assert.throws(() => service.plan('dual', { EndpointsConfig: { dual: { IPAMConfig: { IPv6Address: 'fd00:60::1' } } } }), /gateway/);
  assert.throws(() => service.plan('dual', { EndpointsConfig: { dual: { IPAMConfig: { IPv6Address: 'nope' } } } }), /invalid IPv6 address/);
  assert.throws(() => service.plan('bridge', { EndpointsConfig: { bridge: { IPAMConfig: { IPv6Address: 'fd00:60::5' } } } }), /IPv6 is not enabled on network bridge/);

  const a = await service.connect({ id: 'a'.repeat(64), name: 'a6' }, service.plan('dual', { EndpointsConfig: { dual: {} } }), 41);
  const b = await service.connect(
    { id: 'b'.repeat(64), name: 'b6' },
    service.plan('dual', { EndpointsConfig: { dual: { IPAMConfig: { IPv6Address: 'fd00:60:0:0::0:42' } } } }),
    42,
  );
  const ea = a.networks.dual;
  assert.equal(ea.GlobalIPv6Address, 'fd00:60::100', 'the first address of the IP range');
  assert.equal(ea.GlobalIPv6PrefixLen, 64);
  assert.equal(ea.IPv6Gateway, 'fd00:60::1');
  assert.equal(ea.IPAMConfig, null);
  assert.equal(b.networks.dual.GlobalIPv6Address, 'fd00:60::42');
  assert.deepEqual(b.networks.dual.IPAMConfig, { IPv6Address: 'fd00:60::42' });
  const vethA = host.veths.find((v) => v.pid === 41)!;
  assert.deepEqual(vethA.ipv6, { address: 'fd00:60::100', prefixLen: 64, gateway: 'fd00:60::1' });
  const view = service.inspect('dual');
  assert.equal(view.Containers['a'.repeat(64)].IPv6Address, 'fd00:60::100/64');
  assert.equal(view.Status!.IPAM.Subnets['fd00:60::/64'].IPsInUse, 4);
  // The same address cannot be taken twice.
  await assert.rejects(
    service.connect({ id: 'c'.repeat(64), name: 'c6' }, service.plan('dual', { EndpointsConfig: { dual: { IPAMConfig: { IPv6Address: 'fd00:60::42' } } } }), 43),
    Conflict,
  );
  // The embedded DNS answers both families.
  assert.deepEqual(host.dnsServed.get('a'.repeat(64))!.answers.lookup('b6'), [b.networks.dual.IPAddress, 'fd00:60::42']);
  // Released at disconnect: the next container gets the next address of the range, a freed static one is free again.
  await service.disconnect('b'.repeat(64));
  const c = await service.connect({ id: 'c'.repeat(64), name: 'c6' }, service.plan('dual', { EndpointsConfig: { dual: { IPAMConfig: { IPv6Address: 'fd00:60::42' } } } }), 43);
  assert.equal(c.networks.dual.GlobalIPv6Address, 'fd00:60::42');
  const d = await service.connect({ id: 'd'.repeat(64), name: 'd6' }, service.plan('dual', {}), 44);
  assert.equal(d.networks.dual.GlobalIPv6Address, 'fd00:60::101');
  // IPv4-only networks show no IPv6.
  const plain = await service.connect({ id: 'e'.repeat(64), name: 'e4' }, service.plan('bridge', {}), 45);
  assert.equal(plain.networks.bridge.GlobalIPv6Address, '');
  assert.equal(host.veths.find((v) => v.pid === 45)!.ipv6, undefined);

  // Published ports: on every address, also forwarded to the IPv6 address and shown on :: too; '::' alone
  // needs a network with IPv6.
  const bindings = { '80/tcp': [{ HostPort: '18080' }], '81/tcp': [{ HostIp: '::', HostPort: '18081' }], '82/tcp': [{ HostIp: '0:0::1', HostPort: '18082' }] };
  const published = await service.connect({ id: '2'.repeat(64), name: 'pub6' }, service.plan('dual', {}, { portBindings: bindings }), 47);
  assert.deepEqual(published.ports['80/tcp'], [{ HostIp: '0.0.0.0', HostPort: '18080' }, { HostIp: '::', HostPort: '18080' }]);
  assert.deepEqual(published.ports['81/tcp'], [{ HostIp: '::', HostPort: '18081' }]);
  assert.deepEqual(published.ports['82/tcp'], [{ HostIp: '::1', HostPort: '18082' }]);
  assert.equal(host.published.get('2'.repeat(64))!.address6, published.networks.dual.GlobalIPv6Address);
  assert.throws(() => service.plan('bridge', {}, { portBindings: { '81/tcp': [{ HostIp: '::', HostPort: '18083' }] } }), /HostIp :: publishes on IPv6 and network bridge has no IPv6/);
  assert.throws(() => service.plan('dual', {}, { portBindings: { '81/tcp': [{ HostIp: 'fd00::zz', HostPort: '1' }] } }), /expected an IPv4 or IPv6 address/);
  // '::' and '' take the same port; '::' and an IPv4 address do not.
  await assert.rejects(
    service.connect({ id: '3'.repeat(64), name: 'pub6b' }, service.plan('dual', {}, { portBindings: { '90/tcp': [{ HostIp: '::', HostPort: '18080' }] } }), 48),
    /Bind for \[::\]:18080 failed: port is already allocated/,
  );
  const v4only = await service.connect({ id: '3'.repeat(64), name: 'pub6b' }, service.plan('dual', {}, { portBindings: { '90/tcp': [{ HostIp: '127.0.0.1', HostPort: '18081' }] } }), 48);
  assert.deepEqual(v4only.ports['90/tcp'], [{ HostIp: '127.0.0.1', HostPort: '18081' }]);
  await service.disconnect('2'.repeat(64));
  assert.equal(host.published.has('2'.repeat(64)), false);

  // The IPv6 default route comes from the first network with IPv6, even when it is not the first network.
  await service.connect({ id: '1'.repeat(64), name: 'mixed' }, service.plan('bridge', { EndpointsConfig: { dual: {} } }), 46);
  const mixed = host.veths.filter((v) => v.pid === 46);
  assert.equal(mixed[0].gateway, '172.17.0.1');
  assert.equal(mixed[0].ipv6, undefined);
  assert.equal(mixed[1].gateway, undefined);
  assert.equal(mixed[1].ipv6?.gateway, 'fd00:60::1');
  // So does a running container without IPv6 that joins an IPv6 network; one that has IPv6 already does not.
  await service.connectRunning({ id: 'e'.repeat(64), name: 'e4' }, 'dual', {}, 45);
  assert.equal(host.veths.filter((v) => v.pid === 45).at(-1)!.ipv6?.gateway, 'fd00:60::1');
  await service.connectRunning({ id: 'e'.repeat(64), name: 'e4' }, 'auto6', {}, 45);
  const third = host.veths.filter((v) => v.pid === 45).at(-1)!;
  assert.equal(third.containerInterface, 'eth2');
  assert.ok(third.ipv6?.address);
  assert.equal(third.ipv6?.gateway, undefined);
});

test('several networks at create: eth0 with the default route, then eth1; a failure undoes them all', async () => {
  const { service, host, seen } = await setup();
  await service.create({ Name: 'front', IPAM: { Config: [{ Subnet: '10.50.0.0/24' }] } });
  await service.create({ Name: 'back', IPAM: { Config: [{ Subnet: '10.51.0.0/24' }] } });
  const plan = service.plan('front', { EndpointsConfig: { front: { Aliases: ['web'] }, back: { IPAMConfig: { IPv4Address: '10.51.0.9' } } } });
  assert.equal(plan.mode === 'bridge' && plan.extra?.[0].networkName, 'back');
  assert.deepEqual(Object.keys(service.plannedNetworks(plan)).sort(), ['back', 'front']);
  const att = await service.connect({ id: 'm'.repeat(64), name: 'multi' }, plan, 42);
  assert.equal(att.networks.front.IPAddress, '10.50.0.2');
  assert.equal(att.networks.back.IPAddress, '10.51.0.9');
  assert.equal(att.hostsAddress, '10.50.0.2');
  assert.deepEqual(host.veths.map((v) => [v.containerInterface, v.gateway]), [['eth0', '10.50.0.1'], ['eth1', undefined]]);
  assert.equal(seen.filter((e) => e.Action === 'connect').length, 2);
  await service.disconnect('m'.repeat(64));
  assert.equal(seen.filter((e) => e.Action === 'disconnect').length, 2);

  // The second join fails: the first is undone too.
  const attach = host.attachVeth.bind(host);
  host.attachVeth = async (spec) => {
    if (spec.containerInterface === 'eth1') throw new Error('boom');
    return attach(spec);
  };
  await assert.rejects(service.connect({ id: 'f'.repeat(64), name: 'fails' }, plan, 43), /cannot connect container fails to network back: boom/);
  assert.deepEqual(service.inspect('front').Containers, {});
  assert.deepEqual(service.inspect('back').Containers, {});
  assert.ok(host.removed.includes(host.veths.at(-1)!.hostInterface));
});

test('direct delivery between containers: asked for where icc is on, ended before an address is handed out again', async () => {
  const { service, host } = await setup();
  const plan = service.plan('bridge', undefined);
  await service.connect({ id: 'a'.repeat(64), name: 'a' }, plan, 1);
  await service.connect({ id: 'b'.repeat(64), name: 'b' }, plan, 2);
  assert.deepEqual([...host.direct.get('btest0')!.entries()], [
    ['02:42:ac:11:00:02', host.veths[0].hostInterface],
    ['02:42:ac:11:00:03', host.veths[1].hostInterface],
  ]);
  await service.disconnect('a'.repeat(64));
  assert.deepEqual([...host.direct.get('btest0')!.keys()], ['02:42:ac:11:00:03']);
  // A dead container's delivery ends when recovery releases its address.
  await service.recover(new Map());
  assert.equal(host.direct.get('btest0')!.size, 0);

  // icc off: the bridge (and its rules) carry every frame.
  await service.create({ Name: 'closed', Options: { 'com.docker.network.bridge.enable_icc': 'false' } });
  await service.connect({ id: 'c'.repeat(64), name: 'c' }, service.plan('closed', undefined), 3);
  assert.equal(host.veths.at(-1)!.direct, false);
  assert.ok([...host.direct.values()].every((byMac) => ![...byMac.values()].includes(host.veths.at(-1)!.hostInterface)));

  // Without firewall rules of the engine's own, nothing says the bridge's traffic may all pass.
  const bare = await setup({ iptables: false });
  await bare.service.connect({ id: 'd'.repeat(64), name: 'd' }, bare.service.plan('bridge', undefined), 4);
  assert.equal(bare.host.veths.at(-1)!.direct, false);
});

test('connect and disconnect a running container: eth1 without default route, events, errors', async () => {
  const { service, host, seen } = await setup();
  await service.create({ Name: 'extra', IPAM: { Config: [{ Subnet: '10.60.0.0/24' }] } });
  const id = 'r'.repeat(64);
  const recorded: Array<Record<string, unknown>> = [];
  const state = { running: true, networkMode: 'bridge', endpointsConfig: {} as Record<string, unknown> };
  const lookup = {
    get(ref: string) {
      if (ref !== 'runner' && ref !== id) throw new NotFound(`No such container: ${ref}`);
      return { Id: id, Name: '/runner' };
    },
    async configureNetworks(_id: string, change: (c: ContainerNetworkConfig) => Promise<ContainerNetworkChange | undefined>) {
      const next = await change({ Id: id, Name: '/runner', Running: state.running, Pid: state.running ? 77 : 0, NetworkMode: state.networkMode, EndpointsConfig: { ...state.endpointsConfig } });
      if (!next) return;
      state.networkMode = next.NetworkMode ?? state.networkMode;
      state.endpointsConfig = next.EndpointsConfig;
      recorded.push(next.Networks ?? state.endpointsConfig);
    },
  };
  const connector = containerConnector(service, lookup);
  await service.connect({ id, name: '/runner' }, service.plan('bridge', undefined), 77);
  await connector.connectContainer('extra', 'runner', { IPAMConfig: { IPv4Address: '10.60.0.7' } });
  assert.deepEqual(Object.keys(recorded.at(-1)!).sort(), ['bridge', 'extra']);
  const veth = host.veths.at(-1)!;
  assert.deepEqual([veth.containerInterface, veth.gateway, veth.address, veth.pid], ['eth1', undefined, '10.60.0.7', 77]);
  await assert.rejects(connector.connectContainer('extra', 'runner', {}), (e: Error) => e instanceof Forbidden && /already exists/.test(e.message));
  await assert.rejects(connector.connectContainer('host', 'runner', {}), Forbidden);
  await assert.rejects(connector.connectContainer('nonet', 'runner', {}), NotFound);
  await assert.rejects(connector.connectContainer('extra', 'ghost', {}), NotFound);
  await assert.rejects(connector.connectContainer('extra', 'runner', { IPAMConfig: { IPv4Address: '10.61.0.7' } }), /not in the subnet/);

  await connector.disconnectContainer('extra', 'runner', false);
  assert.deepEqual(Object.keys(recorded.at(-1)!), ['bridge']);
  assert.ok(host.removed.includes(veth.hostInterface));
  await assert.rejects(connector.disconnectContainer('extra', 'runner', false), NotFound);
  // Reconnecting takes the free name again.
  await connector.connectContainer('extra', 'runner', {});
  assert.equal(host.veths.at(-1)!.containerInterface, 'eth1');
  const actions = seen.filter((e) => e.Type === 'network' && e.Actor.Attributes.container === id).map((e) => `${e.Action}:${e.Actor.Attributes.name}`);
  assert.deepEqual(actions, ['connect:bridge', 'connect:extra', 'disconnect:extra', 'connect:extra']);

  assert.deepEqual(Object.keys(state.endpointsConfig), ['extra']);

  // Not running: only the configuration changes, checked as Docker checks it.
  state.running = false;
  const veths = host.veths.length;
  await connector.connectContainer('extra', 'runner', { IPAMConfig: { IPv4Address: '10.60.0.9' } });
  assert.deepEqual(Object.keys(state.endpointsConfig), ['extra'], 'already configured: left as it is');
  await assert.rejects(connector.connectContainer('host', 'runner', {}), (e: Error) => e instanceof InvalidParameter && /connected to host network/.test(e.message));
  await assert.rejects(connector.connectContainer('none', 'runner', {}), (e: Error) => e instanceof InvalidParameter && /private \(none\) mode/.test(e.message));
  await connector.disconnectContainer('extra', 'runner', false);
  assert.deepEqual(state.endpointsConfig, {});
  await assert.rejects(connector.disconnectContainer('extra', 'runner', false), (e: Error) => e instanceof NotFound && /not connected/.test(e.message));
  await assert.rejects(connector.connectContainer('extra', 'runner', { IPAMConfig: { IPv4Address: '10.61.0.7' } }), (e: Error) => e instanceof InvalidParameter && /EndpointConfig.IPAMConfig.IPv4Address: 10.61.0.7 is not in the subnet/.test(e.message));
  await connector.connectContainer('extra', 'runner', { Aliases: ['db'] });
  assert.deepEqual(state.endpointsConfig, { extra: { Aliases: ['db'] } });
  // Leaving the first network: the next one takes its place; the last one can be left too, as Docker: the
  // container keeps its NetworkMode and is planned with loopback only.
  await connector.disconnectContainer('bridge', 'runner', false);
  assert.equal(state.networkMode, 'extra');
  await connector.disconnectContainer('extra', 'runner', false);
  assert.equal(state.networkMode, 'extra');
  assert.deepEqual(state.endpointsConfig, { [DETACHED_KEY]: true });
  const detached = service.plan(state.networkMode, { EndpointsConfig: state.endpointsConfig });
  assert.equal(detached.mode === 'none' && detached.detached, true);
  assert.deepEqual(service.plannedNetworks(detached), {});
  const alone = await service.connect({ id: 'f'.repeat(64), name: 'alone' }, detached, 77);
  assert.deepEqual(alone.networks, {});
  assert.equal(alone.sandboxKey, '/proc/77/ns/net');
  await assert.rejects(connector.disconnectContainer('extra', 'runner', false), NotFound);
  // Joining another network: that one becomes its first; back on its NetworkMode's network, as before.
  await connector.connectContainer('bridge', 'runner', {});
  const onBridge = service.plan(state.networkMode, { EndpointsConfig: state.endpointsConfig });
  assert.equal(onBridge.mode === 'bridge' && onBridge.networkName, 'bridge');
  assert.equal(onBridge.mode === 'bridge' && onBridge.extra, undefined);
  await connector.connectContainer('extra', 'runner', {});
  assert.deepEqual(Object.keys(state.endpointsConfig).sort(), ['bridge', 'extra']);
  const back = service.plan(state.networkMode, { EndpointsConfig: state.endpointsConfig });
  assert.equal(back.mode === 'bridge' && back.networkName, 'extra');
  assert.equal(host.veths.length, veths, 'no interface made for a container that is not running');
  state.endpointsConfig = {};
  state.networkMode = 'host';
  await assert.rejects(connector.connectContainer('extra', 'runner', {}), (e: Error) => e instanceof InvalidParameter && /sharing network namespace/.test(e.message));
  state.networkMode = 'none';
  await assert.rejects(connector.connectContainer('extra', 'runner', {}), (e: Error) => e instanceof InvalidParameter && /private \(none\) mode/.test(e.message));
  state.networkMode = 'container:other';
  await assert.rejects(connector.connectContainer('extra', 'runner', {}), (e: Error) => e instanceof InvalidParameter && /sharing network namespace/.test(e.message));
});

function names(list: string[]): string[] {
  return [...list].sort();
}

test('published ports: explicit, ephemeral from the range, ranges, PublishAllPorts; a taken port is a clear conflict; released at disconnect', async () => {
  const { service, host } = await setup();
  const a = 'a'.repeat(64);
  const b = 'b'.repeat(64);
  const plan = service.plan('bridge', undefined, {
    portBindings: { '80/tcp': [{ HostIp: '', HostPort: '8080' }], '53/udp': [{ HostPort: '' }], '9000-9001/tcp': [{ HostIp: '127.0.0.1', HostPort: '19000-19001' }] },
    publishAllPorts: true,
    exposedPorts: ['80/tcp', '443/tcp'],
  });
  const attached = await service.connect({ id: a, name: '/alpha' }, plan, 101);
  assert.deepEqual(attached.ports['80/tcp'], [{ HostIp: '0.0.0.0', HostPort: '8080' }]);
  assert.deepEqual(attached.ports['9001/tcp'], [{ HostIp: '127.0.0.1', HostPort: '19001' }]);
  for (const key of ['53/udp', '443/tcp']) {
    const port = Number(attached.ports[key]![0].HostPort);
    assert.ok(port >= 40000 && port <= 40009, `${key} got ${port}`);
  }
  const rules = host.published.get(a)!;
  assert.equal(rules.address, attached.networks.bridge.IPAddress);
  assert.equal(rules.ports.length, 5);
  // The same host port for a second container: refused, naming the port, and nothing left behind.
  const clash = service.plan('bridge', undefined, { portBindings: { '81/tcp': [{ HostPort: '8080' }] } });
  await assert.rejects(service.connect({ id: b, name: '/beta' }, clash, 102), (e: Error) => e instanceof Conflict && e.message === 'Bind for 0.0.0.0:8080 failed: port is already allocated');
  assert.equal(service.containerNetworks(b).bridge, undefined);
  assert.equal(host.published.has(b), false);
  // A port another program holds is refused too.
  host.busyHostPorts.add(8181);
  await assert.rejects(service.connect({ id: b, name: '/beta' }, service.plan('bridge', undefined, { portBindings: { '81/tcp': [{ HostPort: '8181' }] } }), 102), /Bind for 0.0.0.0:8181 failed: port is already allocated/);
  await service.disconnect(a);
  assert.equal(host.published.has(a), false);
  // Released: the port can be taken again.
  const again = await service.connect({ id: b, name: '/beta' }, service.plan('bridge', undefined, { portBindings: { '81/tcp': [{ HostPort: '8080' }] } }), 102);
  assert.deepEqual(again.ports['81/tcp'], [{ HostIp: '0.0.0.0', HostPort: '8080' }]);
});

test('published ports: bad input is refused at plan time', async () => {
  const { service } = await setup();
  const bad: Array<[unknown, RegExp]> = [
    [{ '80/sctpx': [{ HostPort: '80' }] }, /unknown protocol "sctpx"/],
    [{ '70000/tcp': [{ HostPort: '80' }] }, /not a port number/],
    [{ '80/tcp': [{ HostPort: '99999' }] }, /not a port number/],
    [{ '80/tcp': [{ HostIp: 'nope', HostPort: '80' }] }, /HostIp "nope": expected an IPv4 or IPv6 address/],
    [{ '80-82/tcp': [{ HostPort: '90-91' }] }, /needs a host range of the same size/],
  ];
  for (const [portBindings, message] of bad) {
    assert.throws(() => service.plan('bridge', undefined, { portBindings }), (e: Error) => e instanceof InvalidParameter && message.test(e.message), JSON.stringify(portBindings));
  }
  assert.throws(() => service.plan('container:other', undefined, { portBindings: { '80/tcp': [{ HostPort: '80' }] } }), /conflicting options: port publishing and the container type network mode/);
  // Host networking publishes nothing (the container's sockets are the host's).
  assert.equal((service.plan('host', undefined, { portBindings: { '80/tcp': [{ HostPort: '80' }] } }) as { ports?: unknown }).ports, undefined);
});

test('embedded DNS answers: names, aliases and short ids of the networks the asker shares; others go upstream', async () => {
  const { service, host } = await setup();
  await service.create({ Name: 'front' });
  await service.create({ Name: 'back' });
  const [a, b, c] = ['a', 'b', 'c'].map((x) => x.repeat(64));
  const viaFront = (aliases?: string[]) => service.plan('front', { EndpointsConfig: { front: { Aliases: aliases } } }, {});
  await service.connect({ id: a, name: '/alpha' }, viaFront(['web', 'www']), 101);
  const bAttached = await service.connect({ id: b, name: '/beta' }, viaFront(), 102);
  await service.connect({ id: c, name: '/gamma' }, service.plan('back', undefined, { dns: ['10.9.9.9'] }), 103);
  assert.equal(service.plan('bridge', undefined, {}).embeddedDns, undefined);
  assert.equal(viaFront().embeddedDns, true);
  const asB = host.dnsServed.get(b)!.answers;
  assert.equal(host.dnsServed.get(b)!.pid, 102);
  const alphaAddress = service.containerNetworks(a).front.IPAddress;
  for (const name of ['alpha', 'ALPHA.', 'web', 'www', 'alpha.front', 'aaaaaaaaaaaa']) assert.deepEqual(asB.lookup(name), [alphaAddress], name);
  assert.deepEqual(asB.lookup('beta'), [bAttached.networks.front.IPAddress]);
  assert.equal(asB.lookup('gamma'), undefined, 'gamma is on another network');
  assert.equal(asB.lookup('example.org'), undefined);
  assert.deepEqual(host.dnsServed.get(c)!.answers.upstreams(), ['10.9.9.9']);
  assert.deepEqual(service.containerNetworks(a).front.Aliases, ['web', 'www']);
  assert.deepEqual(service.containerNetworks(a).front.DNSNames, ['alpha', 'web', 'www', 'aaaaaaaaaaaa']);
  assert.throws(() => service.plan('front', { EndpointsConfig: { front: { Aliases: ['bad name'] } } }), /invalid alias "bad name"/);
  await service.disconnect(a);
  assert.equal(host.dnsServed.has(a), false);
  assert.equal(asB.lookup('web'), undefined);
});
