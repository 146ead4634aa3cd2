/**
 * Swarm networks across three daemons, each in a network namespace of its own on a test bridge (the netns
 * harness of swarm-join.test.ts), with the real docker CLI: overlay networks made, listed, inspected and
 * removed; a global service whose task on one node reaches the tasks on the others through VXLAN on the
 * swarm's data path port; service discovery (VIP, dnsrr, tasks.<name>) and VIP balancing following the
 * tasks; standalone containers on attachable overlays (run, connect, disconnect, refusals); a daemon restart;
 * network inspect --verbose; an internal overlay; the routing mesh answering on a node without a task;
 * `docker stack deploy`; an encrypted overlay (ESP on the underlay, key rotation); and each node's sandboxes
 * removed once no task needs them.
 * One swarm (a manager and two workers) serves the whole file.
 */
import assert from 'node:assert/strict';
import { randomBytes, randomInt } from 'node:crypto';
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import http from 'node:http';
import { after, before, describe, test } from 'node:test';
import { Engine, eventually } from './harness.js';
import { overlayNamespaces, removeOverlayNamespaces } from './overlay-netns.js';

const tag = randomBytes(3).toString('hex');
const BRIDGE = `sob${tag}`;
const SUBNET = `10.${randomInt(200, 250)}.${randomInt(0, 250)}`;
/** A second network between the nodes, for the data path of node-1 and node-2 (`--data-path-addr`); node-3 has none. */
const DATA_BRIDGE = `sod${tag}`;
const DATA_SUBNET = `10.${randomInt(200, 250)}.${randomInt(251, 255)}`;
const nodes = [1, 2, 3].map((i) => ({ ns: `so${tag}${i}`, veth: `sov${tag}${i}`, dataVeth: `sow${tag}${i}`, ip: `${SUBNET}.${10 + i}`, dataIp: `${DATA_SUBNET}.${10 + i}`, name: `node-${i}` }));

function run(cmd: string, args: string[]): void {
  const r = spawnSync(cmd, args, { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')}: ${r.stderr}`);
}

function setUpNetwork(): void {
  run('ip', ['link', 'add', BRIDGE, 'type', 'bridge']);
  run('ip', ['addr', 'add', `${SUBNET}.1/24`, 'dev', BRIDGE]);
  run('ip', ['link', 'set', BRIDGE, 'up']);
  for (const n of nodes) {
    run('ip', ['netns', 'add', n.ns]);
    run('ip', ['link', 'add', n.veth, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', n.ns]);
    run('ip', ['link', 'set', n.veth, 'master', BRIDGE, 'up']);
    run('ip', ['-n', n.ns, 'addr', 'add', `${n.ip}/24`, 'dev', 'eth0']);
    run('ip', ['-n', n.ns, 'link', 'set', 'eth0', 'up']);
    run('ip', ['-n', n.ns, 'link', 'set', 'lo', 'up']);
  }
  run('ip', ['link', 'add', DATA_BRIDGE, 'type', 'bridge']);
  run('ip', ['link', 'set', DATA_BRIDGE, 'up']);
  for (const n of nodes) {
    run('ip', ['link', 'add', n.dataVeth, 'type', 'veth', 'peer', 'name', 'eth1', 'netns', n.ns]);
    run('ip', ['link', 'set', n.dataVeth, 'master', DATA_BRIDGE, 'up']);
    run('ip', ['-n', n.ns, 'addr', 'add', `${n.dataIp}/24`, 'dev', 'eth1']);
    run('ip', ['-n', n.ns, 'link', 'set', 'eth1', 'up']);
  }
}

/** `docker run` arguments of a busybox HTTP server answering `name`. */
const busyboxServer = (name: string) => ['busybox', 'sh', '-c', `mkdir -p /www && echo ${name} > /www/index.html && exec httpd -f -p 80 -h /www`];

/** The namespaces of overlay networks the daemon of `e` made. */
const overlayNamespacesOf = (e: Engine) => overlayNamespaces(e.execRoot);

/** The body of GET / on ip:port (one connection, 3 s at most). */
function httpGet(ip: string, port: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = http.get({ host: ip, port, path: '/', agent: false, timeout: 3000 }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', reject);
  });
}

function tearDownNetwork(): void {
  for (const e of engines) removeOverlayNamespaces(e.execRoot);
  for (const n of nodes) spawnSync('ip', ['netns', 'del', n.ns]);
  spawnSync('ip', ['link', 'del', BRIDGE]);
  spawnSync('ip', ['link', 'del', DATA_BRIDGE]);
}

function nodeEngine(i: number): Engine {
  const n = nodes[i]!;
  return new Engine({
    verbose: process.env.BERTH_TEST_VERBOSE === '1',
    // The keys of encrypted networks rotate every few seconds here (every 12 hours by default).
    env: { BERTH_NETWORK_KEY_ROTATION_MS: String(ROTATION_MS) },
    wrapper: ['nsenter', `--net=/run/netns/${n.ns}`, 'unshare', '--uts', '--', 'sh', '-c', `hostname ${n.name} && exec "$0" "$@"`],
  });
}

const engines: Engine[] = [];
const ROTATION_MS = 4000;

before(async () => {
  setUpNetwork();
  for (let i = 0; i < 3; i++) engines.push(nodeEngine(i));
  await Promise.all(engines.map(async (e) => {
    await e.start();
    await e.loadBusybox();
  }));
});

after(async () => {
  for (const e of engines) await e.cleanup().catch(() => undefined);
  tearDownNetwork();
});

interface Task {
  ID: string;
  NodeID: string;
  Status: { State: string; ContainerStatus?: { ContainerID?: string } };
  NetworksAttachments?: Array<{ Network: { ID: string }; Addresses: string[] }>;
}

describe('overlay networks across three nodes', () => {
  const engine = (i: number) => engines[i]!;
  const nodeIds: string[] = [];

  const running = async (service: string): Promise<Task[]> => {
    const r = await engine(0).request('GET', `/tasks?filters=${encodeURIComponent(JSON.stringify({ service: [service], 'desired-state': ['running'] }))}`);
    return r.json<Task[]>().filter((t) => t.Status.State === 'running');
  };

  test('a manager and two workers, node-1 and node-2 with a data path address of their own', async () => {
    for (const [field, value, message] of [['DataPathPort', 80, /DataPathPort 80: the data path port must be in the range 1024-49151/], ['DataPathAddr', '10.1.2.3', /data path address 10\.1\.2\.3 is not an address of this machine/]] as const) {
      const r = await engine(0).request('POST', '/swarm/init', { body: { ListenAddr: '0.0.0.0:2377', AdvertiseAddr: nodes[0]!.ip, [field]: value } });
      assert.equal(r.status, 400, r.text);
      assert.match(r.json().message, message);
    }
    await engine(0).dockerOk(['swarm', 'init', '--advertise-addr', nodes[0]!.ip, '--dispatcher-heartbeat', '1s', '--data-path-port', '7789', '--data-path-addr', nodes[0]!.dataIp]);
    const token = (await engine(0).dockerOk(['swarm', 'join-token', '-q', 'worker'])).trim();
    // node-2 names its interface on that network.
    await engine(1).dockerOk(['swarm', 'join', '--token', token, '--advertise-addr', nodes[1]!.ip, '--data-path-addr', 'eth1', `${nodes[0]!.ip}:2377`]);
    await engine(2).dockerOk(['swarm', 'join', '--token', token, '--advertise-addr', nodes[2]!.ip, `${nodes[0]!.ip}:2377`]);
    for (const i of [0, 1, 2]) nodeIds.push((await engine(i).request('GET', '/info')).json().Swarm.NodeID);
    await eventually(async () => {
      const list = (await engine(0).request('GET', '/nodes')).json<Array<{ Status: { State: string } }>>();
      return list.length === 3 && list.every((n) => n.Status.State === 'ready');
    }, 20_000, 200);
  });

  test('docker network create -d overlay: a swarm network from the default pool, listed and inspected', async () => {
    const id = (await engine(0).dockerOk(['network', 'create', '-d', 'overlay', '--attachable', '--label', 'team=blue', 'ov'])).trim();
    const n = (await engine(0).request('GET', `/networks/${id}`)).json();
    assert.equal(n.Name, 'ov');
    assert.equal(n.Driver, 'overlay');
    assert.equal(n.Scope, 'swarm');
    assert.equal(n.Attachable, true);
    assert.deepEqual(n.Labels, { team: 'blue' });
    assert.equal(n.IPAM.Config[0].Subnet, '10.0.0.0/24');
    assert.equal(n.IPAM.Config[0].Gateway, '10.0.0.1');
    assert.match(n.Options['com.docker.network.driver.overlay.vxlanid_list'], /^\d+$/);
    const second = (await engine(0).request('POST', '/networks/create', { body: { Name: 'ov2', Driver: 'overlay', IPAM: { Config: [{ Subnet: '10.99.0.0/24' }] } } }));
    assert.equal(second.status, 201, second.text);
    const ls = await engine(0).dockerOk(['network', 'ls', '--filter', 'driver=overlay', '--format', '{{.Name}} {{.Scope}}']);
    assert.deepEqual(ls.trim().split('\n').sort(), ['ov swarm', 'ov2 swarm']);
    assert.equal((await engine(0).request('GET', '/networks/ov2')).json().IPAM.Config[0].Gateway, '10.99.0.1');
    const dup = await engine(0).request('POST', '/networks/create', { body: { Name: 'ov', Driver: 'overlay' } });
    assert.equal(dup.status, 409);
    const fromWorker = await engine(1).request('POST', '/networks/create', { body: { Name: 'w', Driver: 'overlay' } });
    assert.equal(fromWorker.status, 403);
    assert.match(fromWorker.json().message, /manager node/);
    await engine(0).dockerOk(['network', 'rm', 'ov2']);
  });

  test('a task on one node reaches the tasks on the others through the overlay', async () => {
    await engine(0).dockerOk(['service', 'create', '--detach', '--name', 'pingers', '--mode', 'global', '--network', 'ov', '--stop-grace-period', '1s', 'busybox', 'sleep', '600']);
    const tasks = await eventually(async () => {
      const list = await running('pingers');
      return list.length === 3 ? list : undefined;
    }, 40_000, 250) as Task[];
    const networkId = (await engine(0).request('GET', '/networks/ov')).json().Id;
    const address = (t: Task) => t.NetworksAttachments!.find((a) => a.Network.ID === networkId)!.Addresses[0]!.split('/')[0]!;
    const byNode = (i: number) => tasks.find((t) => t.NodeID === nodeIds[i])!;
    const addresses = tasks.map(address);
    assert.equal(new Set(addresses).size, 3);
    for (const a of addresses) assert.match(a, /^10\.0\.0\.\d+$/);
    const service = (await engine(0).request('GET', '/services/pingers')).json();
    assert.equal(service.Endpoint.VirtualIPs.length, 1);
    assert.equal(service.Endpoint.VirtualIPs[0].NetworkID, networkId);
    assert.ok(!addresses.includes(service.Endpoint.VirtualIPs[0].Addr.split('/')[0]));
    // From the worker node-2's task to node-1's and node-3's tasks, and back from node-3.
    const from = (i: number) => ({ e: engine(i), container: byNode(i).Status.ContainerStatus!.ContainerID! });
    const ping = async (src: { e: Engine; container: string }, dst: string) =>
      src.e.docker(['exec', src.container, 'ping', '-c', '1', '-W', '3', dst]);
    for (const [src, dst] of [[1, 0], [1, 2], [2, 0]] as const) {
      const r = await eventually(async () => {
        const out = await ping(from(src), address(byNode(dst)));
        return out.code === 0 ? out : undefined;
      }, 10_000, 300).catch(() => undefined);
      assert.ok(r, `node-${src + 1}'s task did not reach node-${dst + 1}'s task at ${address(byNode(dst))}`);
      assert.match(r.stdout, /1 packets received/);
    }
    // Its interface on the overlay: the network's MTU and the address the task was given.
    const ifaces = await engine(1).dockerOk(['exec', from(1).container, 'ip', 'addr', 'show', 'eth1']);
    assert.match(ifaces, /mtu 1450/);
    assert.match(ifaces, new RegExp(`inet ${address(byNode(1)).replace(/\./g, '\\.')}/24`));
    for (const e of engines) assert.equal(overlayNamespacesOf(e).length, 1);
    // A worker lists and inspects the swarm networks its tasks use.
    assert.equal((await engine(1).dockerOk(['network', 'ls', '--filter', 'driver=overlay', '--format', '{{.Name}} {{.Scope}}'])).trim(), 'ov swarm');
    assert.equal((await engine(1).request('GET', '/networks/ov')).json().Id, networkId);
    // VXLAN on the swarm's data path port, from the node's data path address (node-3: its advertise address),
    // and to the other nodes' (their tasks' forwarding entries).
    const esc = (ip: string) => ip.replace(/\./g, '\\.');
    const sandbox = (i: number) => overlayNamespacesOf(engine(i))[0]!;
    const vxlan = spawnSync('ip', ['-n', sandbox(1), '-d', 'link', 'show', 'vxlan0'], { encoding: 'utf8' }).stdout;
    assert.match(vxlan, new RegExp(`vxlan id \\d+ local ${esc(nodes[1]!.dataIp)} .*dstport 7789`));
    assert.match(spawnSync('ip', ['-n', sandbox(2), '-d', 'link', 'show', 'vxlan0'], { encoding: 'utf8' }).stdout, new RegExp(`local ${esc(nodes[2]!.ip)} `));
    const fdb = (i: number) => spawnSync('bridge', ['-n', sandbox(i), 'fdb', 'show', 'dev', 'vxlan0'], { encoding: 'utf8' }).stdout;
    const macOf = (t: Task) => '02:42:' + address(t).split('.').map((x) => Number(x).toString(16).padStart(2, '0')).join(':');
    assert.match(fdb(2), new RegExp(`${macOf(byNode(0))} dst ${esc(nodes[0]!.dataIp)} `));
    assert.match(fdb(2), new RegExp(`${macOf(byNode(1))} dst ${esc(nodes[1]!.dataIp)} `));
    assert.match(fdb(0), new RegExp(`${macOf(byNode(2))} dst ${esc(nodes[2]!.ip)} `));
    // The tunnel between node-2 and node-1 runs over the data network: node-1's eth1 gets the packets.
    const dataPackets = () => Number(JSON.parse(spawnSync('ip', ['-n', nodes[0]!.ns, '-s', '-j', 'link', 'show', 'eth1'], { encoding: 'utf8' }).stdout)[0].stats64.rx.packets);
    const before = dataPackets();
    assert.match((await ping(from(1), address(byNode(0)))).stdout, /1 packets received/);
    assert.ok(dataPackets() >= before + 1, 'no packet reached node-1 over its data path interface');
    const inUse = await engine(0).request('DELETE', '/networks/ov');
    assert.equal(inUse.status, 409);
  });

  test('service discovery: the name answers the VIP (spread over the tasks) or, in dnsrr, the tasks; tasks.<name> the tasks; a stopped task leaves at once', async () => {
    const web = ['service', 'create', '--detach', '--network', 'ov', '--stop-grace-period', '1s', 'busybox', 'sh', '-c', 'mkdir -p /www && hostname > /www/index.html && exec httpd -f -p 80 -h /www'];
    await engine(0).dockerOk([...web.slice(0, 2), '--name', 'web', '--replicas', '2', ...web.slice(2)]);
    await engine(0).dockerOk([...web.slice(0, 2), '--name', 'rr', '--endpoint-mode', 'dnsrr', '--replicas', '2', ...web.slice(2)]);
    const networkId = (await engine(0).request('GET', '/networks/ov')).json().Id;
    const addressesOf = (list: Task[]) => list.map((t) => t.NetworksAttachments!.find((a) => a.Network.ID === networkId)!.Addresses[0]!.split('/')[0]!).sort();
    const webTasks = await eventually(async () => ((await running('web')).length === 2 ? running('web') : undefined), 40_000, 250) as Task[];
    const rrTasks = await eventually(async () => ((await running('rr')).length === 2 ? running('rr') : undefined), 40_000, 250) as Task[];
    const vip = (await engine(0).request('GET', '/services/web')).json().Endpoint.VirtualIPs[0].Addr.split('/')[0];
    assert.equal((await engine(0).request('GET', '/services/rr')).json().Endpoint.VirtualIPs, undefined);
    // The client: the pingers task on node-3.
    const [client] = (await running('pingers')).filter((t) => t.NodeID === nodeIds[2]);
    const exec = (args: string[]) => engine(2).docker(['exec', client!.Status.ContainerStatus!.ContainerID!, ...args]);
    const resolved = async (name: string) => {
      const r = await exec(['nslookup', '-type=a', name]);
      return [...r.stdout.matchAll(/Address:\s*(10\.0\.0\.\d+)/g)].map((m) => m[1]!).sort();
    };
    await eventually(async () => JSON.stringify(await resolved('web')) === JSON.stringify([vip]), 10_000, 300);
    assert.deepEqual(await resolved('tasks.web'), addressesOf(webTasks));
    assert.deepEqual(await resolved('rr'), addressesOf(rrTasks));
    assert.deepEqual(await resolved('tasks.rr'), addressesOf(rrTasks));
    // Through the VIP, connections go to both tasks (busybox's static wget crashes here: nc speaks HTTP).
    const get = async (address: string) => {
      const r = await exec(['sh', '-c', `printf 'GET / HTTP/1.0\\r\\n\\r\\n' | nc -w 3 ${address} 80`]);
      return { code: r.code, body: r.stdout.split(/\r?\n\r?\n/)[1]?.trim() ?? '', stderr: r.stderr };
    };
    const hostnames = new Set<string>();
    await eventually(async () => {
      const r = await get(vip);
      if (r.code === 0 && r.body) hostnames.add(r.body);
      return hostnames.size === 2;
    }, 20_000, 50);
    // One task stopped: it leaves the VIP's set and the answers within about a second.
    await engine(0).dockerOk(['service', 'scale', '--detach', 'web=1']);
    const left = await eventually(async () => ((await running('web')).length === 1 ? running('web') : undefined), 20_000, 100) as Task[];
    const stoppedAt = Date.now();
    await eventually(async () => JSON.stringify(await resolved('tasks.web')) === JSON.stringify(addressesOf(left)), 5_000, 100);
    assert.ok(Date.now() - stoppedAt < 2_000, `tasks.web still listed the stopped task after ${Date.now() - stoppedAt} ms`);
    const seen = new Set<string>();
    for (let i = 0; i < 8; i++) {
      const r = await get(vip);
      assert.equal(r.code, 0, r.stderr);
      seen.add(r.body);
    }
    assert.equal(seen.size, 1);
    await engine(0).dockerOk(['service', 'rm', 'rr']);
  });

  test('a standalone container on an attachable overlay: reaches services by name, VIP and tasks.<name>; tasks reach it by name; its address released at rm', async () => {
    const networkId = (await engine(0).request('GET', '/networks/ov')).json().Id;
    // On the worker node-3: docker run --network, with an alias.
    const id = (await engine(2).dockerOk(['run', '-d', '--name', 'standalone', '--network', 'ov', '--network-alias', 'lone', '-p', '8070:80', ...busyboxServer('standalone')])).trim();
    const settings = (await engine(2).request('GET', `/containers/${id}/json`)).json().NetworkSettings.Networks.ov;
    assert.equal(settings.NetworkID, networkId);
    const address: string = settings.IPAddress;
    assert.match(address, /^10\.0\.0\.\d+$/);
    assert.equal(settings.IPPrefixLen, 24);
    // Its way out is the default bridge (as Docker's docker_gwbridge, not one of its networks): the default
    // route and its published ports.
    assert.deepEqual(Object.keys((await engine(2).request('GET', `/containers/${id}/json`)).json().NetworkSettings.Networks), ['ov']);
    assert.match(await engine(2).dockerOk(['exec', id, 'ip', 'route']), /^default via \S+ dev eth1/m);
    assert.equal((await engine(2).docker(['exec', id, 'ping', '-c', '1', '-W', '3', `${SUBNET}.1`])).code, 0);
    assert.equal((await eventually(async () => httpGet(nodes[2]!.ip, 8070).catch(() => undefined), 10_000, 200))?.trim(), 'standalone');
    const exec = (args: string[]) => engine(2).docker(['exec', id, ...args]);
    const resolved = async (run: (args: string[]) => Promise<{ stdout: string }>, name: string) =>
      [...(await run(['nslookup', '-type=a', name])).stdout.matchAll(/Address:\s*(10\.0\.0\.\d+)/g)].map((m) => m[1]!).sort();
    const vip = (await engine(0).request('GET', '/services/web')).json().Endpoint.VirtualIPs[0].Addr.split('/')[0];
    const webTasks = await running('web');
    const webAddresses = webTasks.map((t) => t.NetworksAttachments!.find((a) => a.Network.ID === networkId)!.Addresses[0]!.split('/')[0]!).sort();
    await eventually(async () => JSON.stringify(await resolved(exec, 'web')) === JSON.stringify([vip]), 10_000, 200);
    assert.deepEqual(await resolved(exec, 'tasks.web'), webAddresses);
    // Through the VIP to the web task (on another node or this one), and to a task by its address.
    const body = await eventually(async () => {
      const r = await exec(['sh', '-c', `printf 'GET / HTTP/1.0\\r\\n\\r\\n' | nc -w 3 ${vip} 80`]);
      return r.code === 0 ? r.stdout.split(/\r?\n\r?\n/)[1]?.trim() : undefined;
    }, 10_000, 200);
    assert.equal(body, webTasks[0]!.Status.ContainerStatus!.ContainerID!.slice(0, 12));
    // A task on another node (node-1's pingers) finds it by name and alias, and reaches it.
    const [pinger] = (await running('pingers')).filter((t) => t.NodeID === nodeIds[0]);
    const fromTask = (args: string[]) => engine(0).docker(['exec', pinger!.Status.ContainerStatus!.ContainerID!, ...args]);
    await eventually(async () => JSON.stringify(await resolved(fromTask, 'standalone')) === JSON.stringify([address]), 10_000, 200);
    assert.deepEqual(await resolved(fromTask, 'lone'), [address]);
    const reply = await eventually(async () => {
      const r = await fromTask(['sh', '-c', `printf 'GET / HTTP/1.0\\r\\n\\r\\n' | nc -w 3 standalone 80`]);
      return r.code === 0 ? r.stdout.split(/\r?\n\r?\n/)[1]?.trim() : undefined;
    }, 10_000, 200);
    assert.equal(reply, 'standalone');
    // Its endpoint is every other node's peer while it lives (the attachment in the store), and none after rm.
    const peersOn = (i: number) => spawnSync('ip', ['-n', overlayNamespacesOf(engine(i))[0]!, '-4', 'neigh', 'show', 'dev', 'vxlan0'], { encoding: 'utf8' }).stdout;
    assert.match(peersOn(1), new RegExp(`^${address.replace(/\./g, '\\.')} `, 'm'));
    const temporary = (await engine(2).dockerOk(['run', '-d', '--network', 'ov', 'busybox', 'sleep', '600'])).trim();
    const temporaryAddress: string = (await engine(2).request('GET', `/containers/${temporary}/json`)).json().NetworkSettings.Networks.ov.IPAddress;
    assert.notEqual(temporaryAddress, address);
    await eventually(() => new RegExp(`^${temporaryAddress.replace(/\./g, '\\.')} `, 'm').test(peersOn(0)), 10_000, 100);
    await engine(2).dockerOk(['rm', '-f', temporary]);
    await eventually(() => !new RegExp(`^${temporaryAddress.replace(/\./g, '\\.')} `, 'm').test(peersOn(0)) && !new RegExp(`^${temporaryAddress.replace(/\./g, '\\.')} `, 'm').test(peersOn(1)), 10_000, 100);
    assert.match(peersOn(0), new RegExp(`^${address.replace(/\./g, '\\.')} `, 'm'));
    // Started again: on the overlay again, found by the tasks.
    await engine(2).dockerOk(['restart', '-t', '1', 'standalone']);
    const renewed: string = (await engine(2).request('GET', `/containers/${id}/json`)).json().NetworkSettings.Networks.ov.IPAddress;
    assert.match(renewed, /^10\.0\.0\.\d+$/);
    await eventually(async () => (await fromTask(['sh', '-c', `printf 'GET / HTTP/1.0\\r\\n\\r\\n' | nc -w 3 standalone 80`])).stdout.includes('standalone'), 10_000, 200);
  });

  test('network connect and disconnect of a running container on an attachable overlay; network ls and inspect on the worker', async () => {
    await engine(0).dockerOk(['network', 'create', '-d', 'overlay', '--attachable', '--subnet', '10.98.0.0/24', 'att']);
    // No task uses it: the worker node-2 has neither the network nor its sandbox until a container joins it.
    assert.equal((await engine(1).request('GET', '/networks/att')).status, 404);
    const id = (await engine(1).dockerOk(['run', '-d', '--name', 'joiner', 'busybox', 'sleep', '600'])).trim();
    const other = (await engine(0).dockerOk(['run', '-d', '--name', 'peer', '--network', 'att', ...busyboxServer('peer')])).trim();
    const peerAddress: string = (await engine(0).request('GET', `/containers/${other}/json`)).json().NetworkSettings.Networks.att.IPAddress;
    await engine(1).dockerOk(['network', 'connect', '--alias', 'j', 'att', 'joiner']);
    const networks = (await engine(1).request('GET', `/containers/${id}/json`)).json().NetworkSettings.Networks;
    assert.deepEqual(Object.keys(networks).sort(), ['att', 'bridge']);
    const address: string = networks.att.IPAddress;
    assert.match(address, /^10\.98\.0\.\d+$/);
    assert.match(await engine(1).dockerOk(['exec', id, 'ip', 'addr', 'show', 'eth1']), new RegExp(`inet ${address.replace(/\./g, '\\.')}/24`));
    assert.equal((await engine(1).dockerOk(['network', 'ls', '--filter', 'name=att', '--format', '{{.Name}} {{.Driver}} {{.Scope}}'])).trim(), 'att overlay swarm');
    assert.equal((await engine(1).request('GET', '/networks/att')).json().Attachable, true);
    const inspected = (await engine(1).request('GET', '/networks/att')).json();
    assert.deepEqual(Object.keys(inspected.Containers), [id]);
    assert.equal(inspected.Containers[id].IPv4Address, `${address}/24`);
    // Across the nodes, by name both ways (the peer on the manager node-1).
    await eventually(async () => (await engine(1).docker(['exec', id, 'ping', '-c', '1', '-W', '2', 'peer'])).code === 0, 10_000, 200);
    assert.match((await engine(1).dockerOk(['exec', id, 'nslookup', '-type=a', 'peer'])), new RegExp(`Address:\\s*${peerAddress.replace(/\./g, '\\.')}`));
    await eventually(async () => (await engine(0).docker(['exec', other, 'ping', '-c', '1', '-W', '2', 'j'])).code === 0, 10_000, 200);
    // The peers of the network: the nodes of its containers.
    assert.deepEqual((await engine(0).request('GET', '/networks/att?verbose=true')).json().Peers.map((p: { Name: string }) => p.Name).sort(), ['node-1', 'node-2']);
    // A stopped container connected joins at its start.
    const later = (await engine(1).dockerOk(['create', '--name', 'later', 'busybox', 'sleep', '600'])).trim();
    await engine(1).dockerOk(['network', 'connect', 'att', 'later']);
    await engine(1).dockerOk(['start', 'later']);
    assert.match((await engine(1).request('GET', `/containers/${later}/json`)).json().NetworkSettings.Networks.att.IPAddress, /^10\.98\.0\.\d+$/);
    await eventually(async () => (await engine(1).docker(['exec', later, 'ping', '-c', '1', '-W', '2', 'peer'])).code === 0, 10_000, 200);
    await engine(1).dockerOk(['rm', '-f', later]);
    // Connected twice: refused as Docker refuses it.
    const twice = await engine(1).request('POST', '/networks/att/connect', { body: { Container: id } });
    assert.equal(twice.status, 403, twice.text);
    await engine(1).dockerOk(['network', 'disconnect', 'att', 'joiner']);
    assert.notEqual((await engine(1).docker(['exec', id, 'ip', 'addr', 'show', 'eth1'])).code, 0);
    assert.deepEqual(Object.keys((await engine(1).request('GET', `/containers/${id}/json`)).json().NetworkSettings.Networks), ['bridge']);
    // The worker drops the network and its sandbox with its last container there.
    await eventually(async () => (await engine(1).request('GET', '/networks/att')).status === 404, 10_000, 100);
    await eventually(async () => (await engine(0).docker(['exec', other, 'ping', '-c', '1', '-W', '1', address])).code !== 0, 10_000, 200);
    // In use by an attached container: not removed.
    assert.equal((await engine(0).request('DELETE', '/networks/att')).status, 409);
    // Off its only swarm network, a container loses the way out it had through the default bridge.
    assert.match(await engine(0).dockerOk(['exec', other, 'ip', 'route']), /^default via/m);
    await engine(0).dockerOk(['network', 'disconnect', 'att', 'peer']);
    assert.doesNotMatch(await engine(0).dockerOk(['exec', other, 'ip', 'route']), /default/);
    assert.deepEqual((await engine(0).request('GET', `/containers/${other}/json`)).json().NetworkSettings.Networks, {});
    await engine(1).dockerOk(['rm', '-f', id]);
    await engine(0).dockerOk(['rm', '-f', other]);
    await eventually(async () => (await engine(0).request('DELETE', '/networks/att')).status === 204, 10_000, 200);
  });

  test('a network that is not attachable, a static address, ports on an internal overlay and an unknown network are refused with clear errors', async () => {
    await engine(0).dockerOk(['network', 'create', '-d', 'overlay', 'closed']);
    const run = await engine(1).docker(['run', '-d', '--name', 'refused', '--network', 'closed', 'busybox', 'sleep', '600']);
    assert.notEqual(run.code, 0);
    assert.match(run.stderr, /Could not attach to network closed: rpc error: code = PermissionDenied desc = network closed not manually attachable/);
    const start = await engine(1).request('POST', '/containers/refused/start');
    assert.equal(start.status, 403, `start: ${start.status} ${start.text}`);
    assert.match(start.json().message, /network closed not manually attachable/);
    assert.equal((await engine(1).request('GET', '/containers/refused/json')).json().State.Status, 'created');
    const id = (await engine(1).dockerOk(['run', '-d', 'busybox', 'sleep', '600'])).trim();
    const connect = await engine(1).request('POST', '/networks/closed/connect', { body: { Container: id } });
    assert.equal(connect.status, 403);
    assert.match(connect.json().message, /not manually attachable/);
    const fixed = await engine(1).docker(['run', '-d', '--network', 'ov', '--ip', '10.0.0.200', 'busybox', 'sleep', '600']);
    assert.notEqual(fixed.code, 0);
    assert.match(fixed.stderr, /a static address cannot be given on network ov/);
    // An internal attachable overlay: no way out, no published ports.
    await engine(0).dockerOk(['network', 'create', '-d', 'overlay', '--attachable', '--internal', 'inner']);
    const ports = await engine(1).docker(['run', '-d', '--network', 'inner', '-p', '8000:80', 'busybox', 'sleep', '600']);
    assert.notEqual(ports.code, 0);
    assert.match(ports.stderr, /ports cannot be published on network inner: it is an internal network/);
    const sealed = (await engine(1).dockerOk(['run', '-d', '--network', 'inner', 'busybox', 'sleep', '600'])).trim();
    const routes = await engine(1).dockerOk(['exec', sealed, 'ip', 'route']);
    assert.doesNotMatch(routes, /default/);
    assert.match(routes, /dev eth0/);
    await engine(1).dockerOk(['rm', '-f', sealed]);
    // A container with a network policy: its policy does not reach swarm networks.
    const policy = JSON.stringify({ defaultAction: 'deny', rules: [] });
    const sandboxed = await engine(1).docker(['run', '-d', '--label', `berth.network-policy=${policy}`, '--network', 'ov', 'busybox', 'sleep', '600']);
    assert.notEqual(sandboxed.code, 0);
    assert.match(sandboxed.stderr, /a container with a network policy cannot join the swarm network ov/);
    const onBridge = (await engine(1).dockerOk(['run', '-d', '--label', `berth.network-policy=${policy}`, 'busybox', 'sleep', '600'])).trim();
    const joining = await engine(1).request('POST', '/networks/ov/connect', { body: { Container: onBridge } });
    assert.equal(joining.status, 400);
    assert.match(joining.json().message, /network policy cannot join the swarm network ov/);
    await engine(1).dockerOk(['rm', '-f', onBridge]);
    const unknown = await engine(1).docker(['run', '-d', '--network', 'nowhere', 'busybox', 'sleep', '600']);
    assert.notEqual(unknown.code, 0);
    assert.match(unknown.stderr, /network nowhere not found/);
    await engine(1).dockerOk(['rm', '-f', 'refused', id]);
    await engine(1).docker(['container', 'prune', '-f']);
    await engine(0).dockerOk(['network', 'rm', 'closed']);
    await eventually(async () => (await engine(0).request('DELETE', '/networks/inner')).status === 204, 10_000, 200);
  });

  test('after a daemon restart, its tasks keep their names and their overlay', async () => {
    await engine(2).restart();
    const [client] = (await running('pingers')).filter((t) => t.NodeID === nodeIds[2]);
    const [server] = (await running('pingers')).filter((t) => t.NodeID === nodeIds[0]);
    const exec = (args: string[]) => engine(2).docker(['exec', client!.Status.ContainerStatus!.ContainerID!, ...args]);
    const vip = (await engine(0).request('GET', '/services/web')).json().Endpoint.VirtualIPs[0].Addr.split('/')[0];
    await eventually(async () => new RegExp(`Address:\\s*${vip.replace(/\./g, '\\.')}`).test((await exec(['nslookup', '-type=a', 'web'])).stdout), 20_000, 300);
    const networkId = (await engine(0).request('GET', '/networks/ov')).json().Id;
    const target = server!.NetworksAttachments!.find((a) => a.Network.ID === networkId)!.Addresses[0]!.split('/')[0]!;
    assert.equal((await exec(['ping', '-c', '1', '-W', '3', target])).code, 0);
    // The standalone container ran on through the restart: still on the overlay, resolving and resolved.
    const standalone = (args: string[]) => engine(2).docker(['exec', 'standalone', ...args]);
    await eventually(async () => new RegExp(`Address:\\s*${vip.replace(/\./g, '\\.')}`).test((await standalone(['nslookup', '-type=a', 'web'])).stdout), 20_000, 300);
    assert.equal((await standalone(['ping', '-c', '1', '-W', '3', target])).code, 0);
    const address = (await engine(2).request('GET', '/containers/standalone/json')).json().NetworkSettings.Networks.ov.IPAddress;
    const serverExec = (args: string[]) => engine(0).docker(['exec', server!.Status.ContainerStatus!.ContainerID!, ...args]);
    assert.equal((await serverExec(['ping', '-c', '1', '-W', '3', 'standalone'])).code, 0);
    assert.match((await serverExec(['nslookup', '-type=a', 'standalone'])).stdout, new RegExp(`Address:\\s*${address.replace(/\./g, '\\.')}`));
    await engine(2).dockerOk(['rm', '-f', 'standalone']);
  });

  test('network inspect --verbose shows the peers and services; a task only on an internal overlay has no way out', async () => {
    const v = (await engine(0).request('GET', '/networks/ov?verbose=true')).json();
    assert.deepEqual(v.Peers.map((p: { Name: string }) => p.Name).sort(), ['node-1', 'node-2', 'node-3']);
    assert.equal(v.Services.web.Tasks.length, 1);
    assert.equal(v.Services.pingers.Tasks.length, 3);
    // Each task's "Host IP" is its node's tunnel address; the peers are the nodes' advertise addresses.
    assert.deepEqual(v.Services.pingers.Tasks.map((t: { Info: Record<string, string> }) => t.Info['Host IP']).sort(), [nodes[0]!.dataIp, nodes[1]!.dataIp, nodes[2]!.ip].sort());
    assert.deepEqual(v.Peers.map((p: { IP: string }) => p.IP).sort(), nodes.map((n) => n.ip).sort());
    assert.equal((await engine(0).request('GET', '/networks/ov')).json().Services, undefined);
    await engine(0).dockerOk(['network', 'create', '-d', 'overlay', '--internal', 'sealed']);
    await engine(0).dockerOk(['service', 'create', '--detach', '--name', 'inside', '--network', 'sealed', '--stop-grace-period', '1s', 'busybox', 'sleep', '600']);
    const [t] = await eventually(async () => ((await running('inside')).length === 1 ? running('inside') : undefined), 40_000, 250) as Task[];
    const e = engines[nodeIds.indexOf(t!.NodeID)]!;
    const routes = await e.dockerOk(['exec', t!.Status.ContainerStatus!.ContainerID!, 'ip', 'route']);
    assert.doesNotMatch(routes, /default/);
    assert.match(routes, /10\.0\.\d+\.0\/24 dev eth1/);
    await engine(0).dockerOk(['service', 'rm', 'inside', 'web']);
    await eventually(async () => (await engine(0).request('DELETE', '/networks/sealed')).status === 204, 10_000, 200);
  });

  test('the routing mesh: a port published in ingress mode answers on every node, one without a task too, spread over the tasks', async () => {
    await engine(0).dockerOk(['service', 'create', '--detach', '--name', 'mesh', '--replicas', '2', '--constraint', 'node.hostname!=node-3', '--replicas-max-per-node', '1',
      '-p', '8080:80', '--stop-grace-period', '1s', 'busybox', 'sh', '-c', 'mkdir -p /www && hostname > /www/index.html && exec httpd -f -p 80 -h /www']);
    const tasks = await eventually(async () => ((await running('mesh')).length === 2 ? running('mesh') : undefined), 40_000, 250) as Task[];
    assert.ok(!tasks.some((t) => t.NodeID === nodeIds[2]));
    const service = (await engine(0).request('GET', '/services/mesh')).json();
    assert.deepEqual(service.Endpoint.Ports, [{ Protocol: 'tcp', TargetPort: 80, PublishedPort: 8080, PublishMode: 'ingress' }]);
    const ingress = (await engine(0).request('GET', '/networks/ingress')).json();
    assert.equal(ingress.Ingress, true);
    const containers = new Set(tasks.map((t) => t.Status.ContainerStatus!.ContainerID!.slice(0, 12)));
    for (const node of [nodes[2]!, nodes[0]!]) {
      const seen = new Set<string>();
      await eventually(async () => {
        const body = await httpGet(node.ip, 8080).catch(() => undefined);
        if (body) seen.add(body.trim());
        return seen.size === 2;
      }, 20_000, 50).catch(() => undefined);
      assert.deepEqual([...seen].sort(), [...containers].sort(), `answers through ${node.name}`);
    }
    const inUse = await engine(0).request('DELETE', '/networks/ingress');
    assert.equal(inUse.status, 409);
    assert.match(inUse.json().message, /ingress network cannot be removed because service \w+ depends on it/);
    await engine(0).dockerOk(['service', 'rm', 'mesh']);
    await eventually(async () => (await httpGet(nodes[2]!.ip, 8080).then(() => false, () => true)), 20_000, 200);
    // The ingress network can be made again, with a subnet of one's own; there is only one.
    // (The CLI asks for a confirmation before it removes the ingress network.)
    assert.equal((await engine(0).request('DELETE', '/networks/ingress')).status, 204);
    await engine(0).dockerOk(['network', 'create', '-d', 'overlay', '--ingress', '--subnet', '10.250.0.0/24', 'mesh-net']);
    assert.equal((await engine(0).request('GET', '/networks/mesh-net')).json().Ingress, true);
    const second = await engine(0).docker(['network', 'create', '-d', 'overlay', '--ingress', 'another']);
    assert.notEqual(second.code, 0);
    assert.match(second.stderr, /ingress network already exists/);
  });

  test('docker stack deploy: replicas, two networks, a secret, a config and a published port; stack services, ps and rm', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'berth-stack-'));
    try {
      writeFileSync(path.join(dir, 'secret.txt'), 's3cret');
      writeFileSync(path.join(dir, 'config.txt'), 'conf');
      writeFileSync(path.join(dir, 'stack.yml'), [
        'version: "3.8"',
        'services:',
        '  web:',
        '    image: busybox',
        '    command: ["sh", "-c", "mkdir -p /www && cat /run/secrets/token /conf.txt > /www/index.html && exec httpd -f -p 80 -h /www"]',
        '    deploy: { replicas: 2 }',
        '    ports: ["8090:80"]',
        '    networks: [front, back]',
        '    secrets: [token]',
        '    configs: [{ source: conf, target: /conf.txt }]',
        '    stop_grace_period: 1s',
        '  api:',
        '    image: busybox',
        '    command: ["sleep", "600"]',
        '    networks: [back]',
        '    stop_grace_period: 1s',
        'networks:',
        '  front: {}',
        '  back: {}',
        'secrets:',
        '  token: { file: ./secret.txt }',
        'configs:',
        '  conf: { file: ./config.txt }',
        '',
      ].join('\n'));
      await engine(0).dockerOk(['stack', 'deploy', '--detach=true', '-c', path.join(dir, 'stack.yml'), 'shop']);
      const nets = await engine(0).dockerOk(['network', 'ls', '--filter', 'label=com.docker.stack.namespace=shop', '--format', '{{.Name}} {{.Driver}} {{.Scope}}']);
      assert.deepEqual(nets.trim().split('\n').sort(), ['shop_back overlay swarm', 'shop_front overlay swarm']);
      await eventually(async () => (await running('shop_web')).length === 2 && (await running('shop_api')).length === 1, 40_000, 250);
      assert.match(await engine(0).dockerOk(['stack', 'services', 'shop']), /shop_web\s+replicated\s+2\/2\s+busybox:latest\s+\*:8090->80\/tcp/);
      assert.equal((await engine(0).dockerOk(['stack', 'ps', 'shop', '--filter', 'desired-state=running', '--format', '{{.Name}}'])).trim().split('\n').length, 3);
      // The api task finds web by name on their shared network, and reaches it through its VIP.
      const [api] = await running('shop_api');
      const onNode = engines[nodeIds.indexOf(api!.NodeID)]!;
      const lookup = await onNode.dockerOk(['exec', api!.Status.ContainerStatus!.ContainerID!, 'nslookup', '-type=a', 'web']);
      assert.match(lookup, /Address:\s*10\.0\.\d+\.\d+/);
      // The mesh follows the tasks on every node within moments of their start.
      const body = await eventually(async () => (await httpGet(nodes[2]!.ip, 8090).catch(() => undefined))?.trim(), 10_000, 100);
      assert.equal(body, 's3cretconf');
      // Through the ingress network made again.
      const [web] = await running('shop_web');
      assert.ok(web!.NetworksAttachments!.some((a) => a.Addresses[0]!.startsWith('10.250.0.')));
      await engine(0).dockerOk(['stack', 'rm', 'shop']);
      await eventually(async () => (await engine(0).dockerOk(['network', 'ls', '--filter', 'label=com.docker.stack.namespace=shop', '-q'])).trim() === '', 20_000, 250);
      assert.equal((await engine(0).dockerOk(['service', 'ls', '-q'])).trim().split('\n').filter(Boolean).length, 1);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('an encrypted overlay: tasks on two nodes talk through ESP on the underlay (no VXLAN in clear), across key rotations; nothing left after', async () => {
    await engine(0).dockerOk(['network', 'create', '-d', 'overlay', '--opt', 'encrypted', 'vault']);
    const network = (await engine(0).request('GET', '/networks/vault')).json();
    assert.equal(network.Options.encrypted, '');
    const vni = Number(network.Options['com.docker.network.driver.overlay.vxlanid_list']);
    await engine(0).dockerOk(['service', 'create', '--detach', '--name', 'vaulted', '--replicas', '2', '--replicas-max-per-node', '1', '--constraint', 'node.hostname!=node-3',
      '--network', 'vault', '--stop-grace-period', '1s', 'busybox', 'sleep', '600']);
    const tasks = await eventually(async () => ((await running('vaulted')).length === 2 ? running('vaulted') : undefined), 40_000, 250) as Task[];
    const on = (i: number) => tasks.find((t) => t.NodeID === nodeIds[i])!;
    const address = (t: Task) => t.NetworksAttachments!.find((a) => a.Network.ID === network.Id)!.Addresses[0]!.split('/')[0]!;
    const exec = (args: string[]) => engine(1).docker(['exec', on(1).Status.ContainerStatus!.ContainerID!, ...args], { timeoutMs: 60_000 });
    assert.match(await engine(1).dockerOk(['exec', on(1).Status.ContainerStatus!.ContainerID!, 'ip', 'link', 'show', 'eth1']), /mtu 1400/);
    await eventually(async () => (await exec(['ping', '-c', '1', '-W', '2', address(on(0))])).code === 0, 15_000, 300);
    // The underlay between node-2 and node-1 (their data path addresses, on eth1), seen from node-2: ESP in
    // UDP, and no VXLAN of this network.
    const capture = spawn('ip', ['netns', 'exec', nodes[1]!.ns, 'tcpdump', '-n', '-l', '-i', 'eth1', `udp port 4500 or (udp port 7789 and (udp[12:4] >> 8) = ${vni})`], { stdio: ['ignore', 'pipe', 'ignore'] });
    let seen = '';
    capture.stdout.on('data', (c: Buffer) => (seen += c.toString()));
    try {
      await new Promise((r) => setTimeout(r, 1000));
      // Pings across at least two rotations of the keys, none lost; then one as large as the MTU allows.
      const pings = await exec(['ping', '-c', String((3 * ROTATION_MS) / 250), '-i', '0.25', '-W', '2', address(on(0))]);
      assert.match(pings.stdout, / 0% packet loss/, pings.stdout);
      const large = await exec(['ping', '-c', '2', '-s', '1372', '-W', '2', address(on(0))]);
      assert.equal(large.code, 0, large.stdout);
      await new Promise((r) => setTimeout(r, 500));
    } finally {
      capture.kill('SIGINT');
      await new Promise((r) => capture.once('exit', r));
    }
    const esp = [...seen.matchAll(/ (\S+)\.4500 > (\S+)\.4500: UDP-encap: ESP\(spi=(0x[0-9a-f]+)/g)];
    assert.ok(esp.length >= 2 * (3 * ROTATION_MS) / 250, seen);
    assert.doesNotMatch(seen, /\.7789[ :]/, 'VXLAN of the encrypted network in clear on the underlay');
    // Each direction between the two nodes has its own SPIs, which change as the primary key does.
    const spis = (src: string, dst: string) => new Set(esp.filter((m) => m[1] === src && m[2] === dst).map((m) => m[3]));
    const there = spis(nodes[1]!.dataIp, nodes[0]!.dataIp);
    const back = spis(nodes[0]!.dataIp, nodes[1]!.dataIp);
    assert.ok(there.size >= 2 && back.size >= 2, `SPIs ${[...there]} / ${[...back]}`);
    assert.ok(![...there].some((s) => back.has(s)));
    // A daemon that stops takes its encryption down, and the network's peers with it (nothing goes in clear);
    // back, it encrypts again.
    const vaultNs = overlayNamespacesOf(engine(1)).find((ns) => spawnSync('ip', ['-n', ns, '-d', 'link', 'show', 'vxlan0'], { encoding: 'utf8' }).stdout.includes(`vxlan id ${vni} `))!;
    assert.ok(vaultNs);
    await engine(1).stop();
    assert.notEqual(spawnSync('ip', ['netns', 'exec', nodes[1]!.ns, 'nft', 'list', 'table', 'ip', 'berth_esp']).status, 0);
    assert.equal(spawnSync('bridge', ['-n', vaultNs, 'fdb', 'show', 'dev', 'vxlan0'], { encoding: 'utf8' }).stdout.split('\n').filter((l) => / dst /.test(l)).length, 0);
    await engine(1).start();
    await eventually(async () => (await exec(['ping', '-c', '1', '-W', '2', address(on(0))])).code === 0, 20_000, 300);
    // Removed with the network: no table, socket or xfrm state left on any node.
    await engine(0).dockerOk(['service', 'rm', 'vaulted']);
    await eventually(async () => (await engine(0).request('DELETE', '/networks/vault')).status === 204, 20_000, 250);
    for (const n of nodes) {
      await eventually(() => spawnSync('ip', ['netns', 'exec', n.ns, 'nft', 'list', 'table', 'ip', 'berth_esp']).status !== 0, 10_000, 200);
      assert.doesNotMatch(spawnSync('ip', ['netns', 'exec', n.ns, 'ss', '-uln'], { encoding: 'utf8' }).stdout, /:4500\b/);
      for (const what of ['state', 'policy']) assert.equal(spawnSync('ip', ['-n', n.ns, 'xfrm', what], { encoding: 'utf8' }).stdout.trim(), '');
    }
  });

  test('a node whose tasks are gone removes the network\'s sandbox; the network can then be removed', async () => {
    await engine(0).dockerOk(['service', 'rm', 'pingers']);
    await eventually(() => engines.every((e) => overlayNamespacesOf(e).length === 0), 20_000, 250);
    await engine(0).dockerOk(['network', 'rm', 'ov']);
    assert.equal((await engine(0).request('GET', '/networks/ov')).status, 404);
  });

  test('a node that leaves the swarm first disconnects its containers from the swarm\'s networks', async () => {
    await engine(0).dockerOk(['network', 'create', '-d', 'overlay', '--attachable', 'parting']);
    const id = (await engine(1).dockerOk(['run', '-d', '--network', 'parting', 'busybox', 'sleep', '600'])).trim();
    assert.ok((await engine(1).request('GET', `/containers/${id}/json`)).json().NetworkSettings.Networks.parting);
    await engine(1).dockerOk(['swarm', 'leave']);
    const left = (await engine(1).request('GET', `/containers/${id}/json`)).json();
    assert.equal(left.State.Running, true);
    assert.deepEqual(left.NetworkSettings.Networks, {});
    assert.doesNotMatch(await engine(1).dockerOk(['exec', id, 'ip', 'addr']), /eth\d/);
    assert.deepEqual(overlayNamespacesOf(engine(1)), []);
    // Its address was given back: the network goes.
    await eventually(async () => (await engine(0).request('DELETE', '/networks/parting')).status === 204, 10_000, 200);
    await engine(1).dockerOk(['rm', '-f', id]);
  });
});
