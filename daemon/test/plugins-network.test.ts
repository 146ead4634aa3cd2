/**
 * Network and IPAM driver plugins: a managed plugin built from C source in this repository
 * (fixtures/plugin/netplugin.c: a bridge per network, a veth pair per endpoint, addresses in order from its
 * pool), made with `docker plugin create` and enabled, then `docker network create -d fixnet --ipam-driver
 * fixnet`: the engine calls the IPAM and network driver methods, moves the interface the plugin names in
 * its Join answer into the container (with its gateway and static route), and a container on the network
 * reaches another; containers connect and disconnect while running, or before their start; a port published
 * by a container of the network answers on the host's loopback (forwarded to the endpoint's address, which
 * the host reaches through the plugin's bridge). The plugin cannot be disabled while a network uses it;
 * network rm deletes the network and releases its pool.
 */
import assert from 'node:assert/strict';
import { existsSync, readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { expectConforms } from './contract/openapi.js';
import { eventually, removeBridge, startEngine, type Engine } from './harness.js';
import { pluginContext } from './plugin-support.js';
import { freePort } from './tcp-support.js';

let engine: Engine;
let context: string;
const networkIds: string[] = [];

const CONFIG = {
  Description: 'a network and IPAM driver for the tests',
  Documentation: '',
  Interface: { Types: ['docker.networkdriver/1.0', 'docker.ipamdriver/1.0'], Socket: 'fixnet.sock' },
  Entrypoint: ['/netplugin'],
  Network: { Type: 'host' },
  Linux: { Capabilities: ['CAP_NET_ADMIN'], AllowAllDevices: false, Devices: null },
  Env: [],
};

before(async () => {
  context = pluginContext('netplugin.c', 'netplugin', CONFIG);
  engine = await startEngine();
  await engine.loadBusybox();
  await engine.dockerOk(['plugin', 'create', 'fixnet', context], { timeoutMs: 60_000 });
  await engine.dockerOk(['plugin', 'enable', 'fixnet'], { timeoutMs: 60_000 });
});

after(async () => {
  await engine?.cleanup();
  for (const id of networkIds) removeBridge(`fn${id.slice(0, 12)}`);
  if (context) rmSync(context, { recursive: true, force: true });
});

async function pluginDir(): Promise<string> {
  const id = JSON.parse(await engine.dockerOk(['plugin', 'inspect', 'fixnet']))[0].Id;
  return path.join(engine.dataRoot, 'plugins', id, 'rootfs');
}

async function methods(): Promise<string[]> {
  return readFileSync(path.join(await pluginDir(), 'data', 'calls.log'), 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((line) => line.slice(0, line.indexOf(' ')));
}

describe('network and IPAM driver plugins', () => {
  test('network create with the plugin as network and IPAM driver', async () => {
    const id = (await engine.dockerOk(['network', 'create', '-d', 'fixnet', '--ipam-driver', 'fixnet', '--subnet', '10.231.7.0/24', 'pnet'])).trim();
    networkIds.push(id);
    const n = JSON.parse(await engine.dockerOk(['network', 'inspect', 'pnet']))[0];
    assert.equal(n.Driver, 'fixnet:latest');
    assert.equal(n.IPAM.Driver, 'fixnet:latest');
    assert.deepEqual(n.IPAM.Config, [{ Subnet: '10.231.7.0/24', Gateway: '10.231.7.1' }]);
    for (const version of ['1.41', '1.53']) await expectConforms(version, 'get', '/networks/{id}', 200, (await engine.request('GET', `/v${version}/networks/pnet`)).json());
    assert.ok(existsSync(`/sys/class/net/fn${id.slice(0, 12)}`), "the plugin's bridge");
    assert.deepEqual(await methods(), ['IpamDriver.GetDefaultAddressSpaces', 'IpamDriver.RequestPool', 'IpamDriver.RequestAddress', 'NetworkDriver.CreateNetwork']);
    const missing = await engine.docker(['network', 'create', '-d', 'nosuch', 'pnone']);
    assert.notEqual(missing.code, 0);
    assert.match(missing.stderr, /plugin "nosuch" not found/);
  });

  test('a container on the plugin network reaches another; its interface, gateway and routes are the plugin\'s', async () => {
    await engine.dockerOk(['run', '-d', '--name', 'pa', '--network', 'pnet', 'busybox', 'sleep', '300']);
    const a = JSON.parse(await engine.dockerOk(['inspect', 'pa']))[0].NetworkSettings.Networks.pnet;
    assert.equal(a.IPAddress, '10.231.7.2');
    assert.equal(a.IPPrefixLen, 24);
    const out = await engine.dockerOk(['run', '--rm', '--network', 'pnet', 'busybox', 'sh', '-c', 'ip -4 addr show eth0; ip route; ping -c 1 -W 5 10.231.7.2 && ping -c 1 -W 5 pa'], { timeoutMs: 60_000 });
    assert.match(out, /inet 10\.231\.7\.3\/24/);
    assert.match(out, /default via 10\.231\.7\.1 dev eth0/);
    assert.match(out, /10\.232\.0\.0\/16 via 10\.231\.7\.1 dev eth0/);
    assert.match(out, /PING pa \(10\.231\.7\.2\)/);
    assert.equal(out.match(/1 packets received/g)?.length, 2, out);
    const calls = await methods();
    const run = calls.slice(calls.indexOf('NetworkDriver.CreateNetwork') + 1);
    assert.deepEqual(run, [
      'IpamDriver.RequestAddress', 'NetworkDriver.CreateEndpoint', 'NetworkDriver.Join',
      'IpamDriver.RequestAddress', 'NetworkDriver.CreateEndpoint', 'NetworkDriver.Join',
      'NetworkDriver.Leave', 'NetworkDriver.DeleteEndpoint', 'IpamDriver.ReleaseAddress',
    ]);
  });

  test('network connect and disconnect of a running container, and of a created one before its start', async () => {
    await engine.dockerOk(['run', '-d', '--name', 'pb', 'busybox', 'sleep', '300']);
    await engine.dockerOk(['network', 'connect', 'pnet', 'pb']);
    const b = JSON.parse(await engine.dockerOk(['inspect', 'pb']))[0].NetworkSettings.Networks;
    assert.deepEqual(Object.keys(b).sort(), ['bridge', 'pnet']);
    assert.equal(b.pnet.IPAddress, '10.231.7.4');
    const inB = await engine.dockerOk(['exec', 'pb', 'sh', '-c', 'ip -4 addr show eth1; ping -c 1 -W 5 10.231.7.2'], { timeoutMs: 30_000 });
    assert.match(inB, /inet 10\.231\.7\.4\/24/);
    assert.match(inB, /1 packets received/);
    const before = (await methods()).length;
    await engine.dockerOk(['network', 'disconnect', 'pnet', 'pb']);
    assert.deepEqual((await methods()).slice(before), ['NetworkDriver.Leave', 'NetworkDriver.DeleteEndpoint', 'IpamDriver.ReleaseAddress']);
    const gone = await engine.docker(['exec', 'pb', 'ip', 'link', 'show', 'eth1']);
    assert.notEqual(gone.code, 0, 'eth1 left with the endpoint');
    await engine.dockerOk(['rm', '-f', 'pb']);

    await engine.dockerOk(['create', '--name', 'pc', 'busybox', 'sh', '-c', 'ip -4 addr show eth1 && ping -c 1 -W 5 10.231.7.2']);
    await engine.dockerOk(['network', 'connect', 'pnet', 'pc']);
    const out = await engine.dockerOk(['start', '-a', 'pc'], { timeoutMs: 30_000 });
    assert.match(out, /inet 10\.231\.7\.\d+\/24/);
    assert.match(out, /1 packets received/);
    await engine.dockerOk(['rm', 'pc']);
  });

  test('a daemon restart brings the plugin back before it restarts a container on its network', async () => {
    await engine.dockerOk(['run', '-d', '--name', 'pr', '--restart', 'always', '--network', 'pnet', 'busybox', 'sleep', '1000']);
    const pid = JSON.parse(await engine.dockerOk(['inspect', 'pr']))[0].State.Pid as number;
    await engine.stop();
    process.kill(pid, 'SIGKILL');
    await eventually(() => !existsSync(`/proc/${pid}`));
    await engine.start();
    const state = await eventually(async () => {
      const s = JSON.parse(await engine.dockerOk(['inspect', 'pr']))[0].State;
      return s.Running && s.Pid !== pid ? s : undefined;
    }, 30_000);
    assert.ok(state.Pid > 0);
    // The container that ran across the restart kept its interface; the restarted one joined again.
    const out = await engine.dockerOk(['exec', 'pr', 'ping', '-c', '1', '-W', '5', '10.231.7.2'], { timeoutMs: 30_000 });
    assert.match(out, /1 packets received/);
    await engine.dockerOk(['rm', '-f', 'pr']);
  });

  test('the plugin is not disabled while a network uses it; network rm deletes the network and its pool', async () => {
    const disable = await engine.docker(['plugin', 'disable', 'fixnet']);
    assert.notEqual(disable.code, 0);
    assert.match(disable.stderr, /plugin fixnet:latest is in use/);
    await engine.dockerOk(['rm', '-f', 'pa']);
    await engine.dockerOk(['network', 'rm', 'pnet']);
    const calls = await methods();
    assert.deepEqual(calls.slice(-6), ['NetworkDriver.Leave', 'NetworkDriver.DeleteEndpoint', 'IpamDriver.ReleaseAddress', 'NetworkDriver.DeleteNetwork', 'IpamDriver.ReleaseAddress', 'IpamDriver.ReleasePool']);
    assert.equal(existsSync(`/sys/class/net/fn${networkIds[0].slice(0, 12)}`), false, 'the bridge is gone');
  });

  test('-p on a plugin network answers on the host\'s loopback, at the endpoint\'s address, across a daemon restart; gone with the container', async () => {
    const id = (await engine.dockerOk(['network', 'create', '-d', 'fixnet', '--subnet', '10.231.11.0/24', 'pnet3'])).trim();
    networkIds.push(id);
    const hostPort = await freePort();
    const web = (await engine.dockerOk(['run', '-d', '--network', 'pnet3', '-p', `127.0.0.1:${hostPort}:80`, 'busybox', 'sh', '-c', 'mkdir /www && echo from the plugin network > /www/index.html && exec httpd -f -p 80 -h /www'])).trim();
    try {
      const [inspected] = JSON.parse(await engine.dockerOk(['inspect', web]));
      assert.equal(inspected.NetworkSettings.Networks.pnet3.IPAddress, '10.231.11.2');
      assert.deepEqual(inspected.NetworkSettings.Ports['80/tcp'], [{ HostIp: '127.0.0.1', HostPort: String(hostPort) }]);
      assert.equal((await engine.dockerOk(['port', web, '80/tcp'])).trim(), `127.0.0.1:${hostPort}`);
      const body = await eventually(async () => {
        const res = await fetch(`http://127.0.0.1:${hostPort}/`).catch(() => undefined);
        return res?.ok ? res.text() : undefined;
      }, 15_000);
      assert.equal(body, 'from the plugin network\n');
      // A daemon restart keeps the rules of a container that still runs (only those of gone ones are removed).
      await engine.stop();
      await engine.start();
      assert.equal(await (await fetch(`http://127.0.0.1:${hostPort}/`)).text(), 'from the plugin network\n');
    } finally {
      // Its rules go with it (also when a check above failed).
      await engine.dockerOk(['rm', '-f', web]);
    }
    await assert.rejects(fetch(`http://127.0.0.1:${hostPort}/`, { signal: AbortSignal.timeout(3000) }));
    await engine.dockerOk(['network', 'rm', 'pnet3']);
  });

  test('with the engine as IPAM driver', async () => {
    const id = (await engine.dockerOk(['network', 'create', '-d', 'fixnet', '--subnet', '10.231.9.0/24', 'pnet2'])).trim();
    networkIds.push(id);
    const n = JSON.parse(await engine.dockerOk(['network', 'inspect', 'pnet2']))[0];
    assert.equal(n.IPAM.Driver, 'default');
    const out = await engine.dockerOk(['run', '--rm', '--network', 'pnet2', 'busybox', 'ip', '-4', 'addr', 'show', 'eth0']);
    assert.match(out, /inet 10\.231\.9\.2\/24/);
    await engine.dockerOk(['network', 'rm', 'pnet2']);
    await engine.dockerOk(['plugin', 'disable', 'fixnet']);
    await engine.dockerOk(['plugin', 'rm', 'fixnet']);
  });
});
