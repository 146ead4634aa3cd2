/**
 * `docker network connect` and `disconnect` of containers that are not running, end to end with the docker
 * CLI against a real berthd: the configuration takes the network (aliases, static address), inspect shows
 * it without an address, the container joins at its start as eth1 and is reached by its alias; disconnect
 * takes the network out of the configuration (the last one too: the container then runs with loopback only);
 * Docker's refusals answer 4xx; a daemon restart keeps the
 * configuration; a network connected while running is joined again after a restart of the container.
 */
import assert from 'node:assert/strict';
import { randomInt } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { startEngine, type Engine } from './harness.js';

const octet = randomInt(200, 250);
const third = randomInt(1, 240);
const SUB_A = `10.${octet}.${third}`;
const SUB_B = `10.${octet}.${third + 1}`;

describe('network connect and disconnect of containers that are not running', () => {
  let engine: Engine;

  before(async () => {
    engine = await startEngine();
    await engine.loadBusybox();
    await engine.dockerOk(['network', 'create', '--subnet', `${SUB_A}.0/24`, 'conn-a']);
    await engine.dockerOk(['network', 'create', '--subnet', `${SUB_B}.0/24`, 'conn-b']);
  });
  after(async () => {
    await engine?.cleanup();
  });

  const inspect = async (name: string) => {
    const res = await engine.request('GET', `/v1.53/containers/${name}/json`);
    assert.equal(res.status, 200, res.text);
    return res.json();
  };
  /** The network events of the container from `sinceMs` on (the API's `since` counts whole seconds). */
  const networkEvents = async (sinceMs: number, container: string): Promise<string[]> => {
    const since = Math.floor(sinceMs / 1000);
    const until = Math.ceil(Date.now() / 1000) + 1;
    const res = await engine.request('GET', `/v1.53/events?since=${since}&until=${until}&filters=${encodeURIComponent(JSON.stringify({ type: ['network'] }))}`, { timeoutMs: 15_000 });
    return res.text.trim().split('\n').filter(Boolean).map((l) => JSON.parse(l))
      .filter((e) => e.Actor.Attributes.container === container && BigInt(e.timeNano) >= BigInt(sinceMs) * 1_000_000n)
      .map((e) => `${e.Action}:${e.Actor.Attributes.name}`);
  };

  test('a created container takes the network with its alias and address at start, as eth1, reached by the alias', async () => {
    const since = Date.now();
    const id = (await engine.dockerOk(['create', '--name', 'target', 'busybox', 'sleep', '300'])).trim();
    await engine.dockerOk(['network', 'connect', '--alias', 'db', '--ip', `${SUB_A}.50`, 'conn-a', 'target']);

    // Before start: the network is in the configuration, without an address; the network has no endpoint.
    const created = await inspect('target');
    assert.deepEqual(Object.keys(created.NetworkSettings.Networks), ['bridge', 'conn-a']);
    const planned = created.NetworkSettings.Networks['conn-a'];
    assert.equal(planned.IPAddress, '');
    assert.equal(planned.EndpointID, '');
    assert.deepEqual(planned.IPAMConfig, { IPv4Address: `${SUB_A}.50` });
    assert.deepEqual(planned.Aliases, ['db']);
    const net = (await engine.request('GET', '/v1.53/networks/conn-a')).json();
    assert.equal(planned.NetworkID, net.Id);
    assert.deepEqual(net.Containers, {});
    assert.equal(created.HostConfig.NetworkMode, 'bridge');

    await engine.dockerOk(['start', 'target']);
    const out = await engine.dockerOk(['exec', 'target', 'sh', '-c', 'ip -o -4 addr; ip route']);
    assert.match(out, new RegExp(`eth1\\s+inet ${SUB_A.replace(/\./g, '\\.')}\\.50/24`), out);
    assert.match(out, /default via \S+ dev eth0/, out);
    assert.equal((out.match(/default via/g) ?? []).length, 1, out);
    const running = await inspect('target');
    assert.equal(running.NetworkSettings.Networks['conn-a'].IPAddress, `${SUB_A}.50`);
    assert.ok(running.NetworkSettings.Networks.bridge.IPAddress, 'the first network keeps its address');

    const reach = await engine.docker(['run', '--rm', '--network', 'conn-a', 'busybox', 'sh', '-c', 'ping -c1 -W5 db && ping -c1 -W5 target'], { timeoutMs: 60_000 });
    assert.equal(reach.code, 0, reach.stderr + reach.stdout);
    assert.match(reach.stdout, new RegExp(`from ${SUB_A.replace(/\./g, '\\.')}\\.50`));

    // As Docker: `connect` comes when the container joins, at its start.
    assert.deepEqual((await networkEvents(since, id)).filter((e) => e.endsWith(':conn-a')), ['connect:conn-a']);
    await engine.dockerOk(['rm', '-f', 'target']);
  });

  test('disconnecting a stopped container removes the network from its configuration: no interface at the next start', async () => {
    const id = (await engine.dockerOk(['run', '-d', '--name', 'leaver', '--network', 'conn-a', 'busybox', 'sleep', '300'])).trim();
    await engine.dockerOk(['network', 'connect', 'conn-b', 'leaver']);
    await engine.dockerOk(['stop', '-t', '0', 'leaver']);
    const since = Date.now();
    await engine.dockerOk(['network', 'disconnect', 'conn-b', 'leaver']);
    assert.deepEqual(Object.keys((await inspect('leaver')).NetworkSettings.Networks), ['conn-a']);
    assert.deepEqual(await networkEvents(since, id), ['disconnect:conn-b']);
    await engine.dockerOk(['start', 'leaver']);
    const out = await engine.dockerOk(['exec', 'leaver', 'sh', '-c', 'ip -o link']);
    assert.match(out, /\beth0[@:]/, out);
    assert.doesNotMatch(out, /\beth1[@:]/, out);

    // Leaving the first network hands eth0 to the next one.
    await engine.dockerOk(['network', 'connect', 'conn-b', 'leaver']);
    await engine.dockerOk(['stop', '-t', '0', 'leaver']);
    await engine.dockerOk(['network', 'disconnect', 'conn-a', 'leaver']);
    const moved = await inspect('leaver');
    assert.deepEqual(Object.keys(moved.NetworkSettings.Networks), ['conn-b']);
    await engine.dockerOk(['start', 'leaver']);
    const after = await engine.dockerOk(['exec', 'leaver', 'sh', '-c', 'ip -o -4 addr; ip route']);
    assert.match(after, new RegExp(`eth0\\s+inet ${SUB_B.replace(/\./g, '\\.')}\\.\\d+/24`), after);
    assert.match(after, new RegExp(`default via ${SUB_B.replace(/\./g, '\\.')}\\.1 dev eth0`), after);
    assert.doesNotMatch(after, /\beth1\b/, after);
    await engine.dockerOk(['rm', '-f', 'leaver']);
  });

  test('a stopped container may leave its last network, as Docker: it starts with loopback only and keeps its NetworkMode', async () => {
    const id = (await engine.dockerOk(['run', '-d', '--name', 'alone', '--network', 'conn-a', 'busybox', 'sleep', '300'])).trim();
    await engine.dockerOk(['stop', '-t', '0', 'alone']);
    const since = Date.now();
    await engine.dockerOk(['network', 'disconnect', 'conn-a', 'alone']);
    assert.deepEqual(await networkEvents(since, id), ['disconnect:conn-a']);
    const stopped = await inspect('alone');
    assert.deepEqual(stopped.NetworkSettings.Networks, {});
    assert.equal(stopped.HostConfig.NetworkMode, 'conn-a');
    await engine.dockerOk(['start', 'alone']);
    const links = await engine.dockerOk(['exec', 'alone', 'sh', '-c', 'ip -o link; ip -o -4 addr']);
    assert.match(links, /^1: lo:/m, links);
    assert.doesNotMatch(links, /eth\d/, links);
    const running = await inspect('alone');
    assert.deepEqual(running.NetworkSettings.Networks, {});
    assert.equal(running.HostConfig.NetworkMode, 'conn-a');
    assert.deepEqual((await engine.request('GET', '/v1.53/networks/conn-a')).json().Containers, {});
    // Joining a network again (here while it runs) gives it eth0 with the default route, kept across a restart.
    await engine.dockerOk(['network', 'connect', 'conn-b', 'alone']);
    await engine.dockerOk(['restart', '-t', '0', 'alone']);
    const rejoined = await engine.dockerOk(['exec', 'alone', 'sh', '-c', 'ip -o -4 addr; ip route']);
    assert.match(rejoined, new RegExp(`eth0\\s+inet ${SUB_B.replace(/\./g, '\\.')}\\.\\d+/24`), rejoined);
    assert.match(rejoined, new RegExp(`default via ${SUB_B.replace(/\./g, '\\.')}\\.1 dev eth0`), rejoined);
    assert.deepEqual(Object.keys((await inspect('alone')).NetworkSettings.Networks), ['conn-b']);
    // A running container leaves its last network at once, and restarts without one.
    await engine.dockerOk(['network', 'disconnect', 'conn-b', 'alone']);
    assert.deepEqual((await inspect('alone')).NetworkSettings.Networks, {});
    assert.doesNotMatch(await engine.dockerOk(['exec', 'alone', 'ip', '-o', 'link']), /eth\d/);
    await engine.dockerOk(['restart', '-t', '0', 'alone']);
    const restarted = await engine.dockerOk(['exec', 'alone', 'ip', '-o', 'link']);
    assert.doesNotMatch(restarted, /eth\d/, restarted);
    assert.deepEqual((await inspect('alone')).NetworkSettings.Networks, {});
    await engine.dockerOk(['rm', '-f', 'alone']);
  });

  test('a network connected while running is joined again after a restart of the container', async () => {
    await engine.dockerOk(['run', '-d', '--name', 'rejoin', 'busybox', 'sleep', '300']);
    await engine.dockerOk(['network', 'connect', '--alias', 'again', 'conn-b', 'rejoin']);
    await engine.dockerOk(['restart', '-t', '0', 'rejoin']);
    const out = await engine.dockerOk(['exec', 'rejoin', 'sh', '-c', 'ip -o -4 addr']);
    assert.match(out, new RegExp(`eth1\\s+inet ${SUB_B.replace(/\./g, '\\.')}\\.\\d+/24`), out);
    assert.deepEqual((await inspect('rejoin')).NetworkSettings.Networks['conn-b'].Aliases, ['again']);
    await engine.dockerOk(['rm', '-f', 'rejoin']);
  });

  test("Docker's refusals answer 4xx with a clear message and the daemon keeps serving", async () => {
    await engine.dockerOk(['create', '--name', 'idle', 'busybox', 'true']);
    await engine.dockerOk(['create', '--name', 'lonely', '--network', 'none', 'busybox', 'true']);
    await engine.dockerOk(['create', '--name', 'hosted', '--network', 'host', 'busybox', 'true']);
    const connect = (network: string, container: string, endpoint?: unknown) =>
      engine.request('POST', `/v1.53/networks/${network}/connect`, { body: { Container: container, EndpointConfig: endpoint } });
    const expect = async (res: Promise<{ status: number; text: string; json(): any }>, status: number, message: RegExp) => {
      const r = await res;
      assert.equal(r.status, status, r.text);
      assert.match(r.json().message, message);
    };
    await expect(connect('no-such-net', 'idle'), 404, /network no-such-net not found/);
    await expect(connect('conn-a', 'no-such-container'), 404, /no-such-container/);
    await expect(connect('conn-a', 'idle', { IPAMConfig: { IPv4Address: `${SUB_B}.9` } }), 400, new RegExp(`${SUB_B.replace(/\./g, '\\.')}\\.9 is not in the subnet ${SUB_A.replace(/\./g, '\\.')}\\.0/24`));
    await expect(connect('conn-a', 'idle', { IPAMConfig: { IPv4Address: 'nonsense' } }), 400, /invalid IPv4 address/);
    await expect(connect('host', 'idle'), 400, /cannot be disconnected from host network or connected to host network/);
    await expect(connect('none', 'idle'), 400, /private \(none\) mode/);
    await expect(connect('conn-a', 'lonely'), 400, /private \(none\) mode/);
    await expect(connect('conn-a', 'hosted'), 400, /sharing network namespace with another container or host/);
    await expect(connect('bridge', 'idle', { Aliases: ['x'] }), 400, /network-scoped aliases/);
    await expect(engine.request('POST', '/v1.53/networks/conn-b/disconnect', { body: { Container: 'idle' } }), 404, /is not connected to the network conn-b/);
    // The CLI says so too.
    const cli = await engine.docker(['network', 'connect', '--ip', `${SUB_B}.9`, 'conn-a', 'idle']);
    assert.notEqual(cli.code, 0);
    assert.match(cli.stderr, /is not in the subnet/);
    // As Docker: a network the stopped container is already configured with is left as it is.
    const again = await connect('bridge', 'idle');
    assert.equal(again.status, 200, again.text);
    assert.deepEqual(Object.keys((await inspect('idle')).NetworkSettings.Networks), ['bridge']);
    for (const name of ['idle', 'lonely', 'hosted']) {
      assert.deepEqual(Object.keys((await inspect(name)).NetworkSettings.Networks).length, 1, name);
    }
    assert.equal((await engine.request('GET', '/_ping')).status, 200);
    await engine.dockerOk(['rm', 'idle', 'lonely', 'hosted']);
  });

  test('a daemon restart keeps the configuration: the container joins at its start', async () => {
    await engine.dockerOk(['create', '--name', 'keeper', 'busybox', 'sleep', '300']);
    await engine.dockerOk(['network', 'connect', '--alias', 'kept', '--ip', `${SUB_B}.77`, 'conn-b', 'keeper']);
    await engine.restart();
    const ep = (await inspect('keeper')).NetworkSettings.Networks['conn-b'];
    assert.deepEqual(ep.Aliases, ['kept']);
    assert.deepEqual(ep.IPAMConfig, { IPv4Address: `${SUB_B}.77` });
    await engine.dockerOk(['start', 'keeper']);
    const reach = await engine.docker(['run', '--rm', '--network', 'conn-b', 'busybox', 'ping', '-c1', '-W5', 'kept'], { timeoutMs: 60_000 });
    assert.equal(reach.code, 0, reach.stderr + reach.stdout);
    assert.match(reach.stdout, new RegExp(`from ${SUB_B.replace(/\./g, '\\.')}\\.77`));
    await engine.dockerOk(['rm', '-f', 'keeper']);
  });
});
