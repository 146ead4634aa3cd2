/**
 * Links (`--link`) end to end with the docker CLI against a real berthd, as Docker has them: on the default
 * bridge the linked container's variables (ALIAS_NAME, ALIAS_ENV_*, ALIAS_PORT_*) in the process and its
 * execs, its /etc/hosts line (kept up to date when it starts again), `docker rm --link`, and the refusals;
 * on a user-defined network the alias resolves through the embedded DNS for the linking container only
 * (at run and at `network connect`); a container started on the default bridge and connected to a user
 * network moves its resolv.conf to the embedded DNS server and resolves that network's names. Unknown names
 * go to an upstream the test runs on 127.0.0.1, which answers NXDOMAIN: nothing leaves the machine.
 */
import assert from 'node:assert/strict';
import dgram from 'node:dgram';
import { after, before, describe, test } from 'node:test';
import { buildAnswer, parseQuery, RCODE_NXDOMAIN } from '../src/host/linux/network/dns/message.js';
import { startEngine, type Engine } from './harness.js';

async function startNxdomainUpstream(): Promise<{ port: number; close(): void }> {
  const socket = dgram.createSocket('udp4');
  socket.on('message', (msg, rinfo) => {
    const q = parseQuery(msg);
    if (q) socket.send(buildAnswer(msg, q, [], RCODE_NXDOMAIN), rinfo.port, rinfo.address);
  });
  await new Promise<void>((resolve) => socket.bind(0, '127.0.0.1', resolve));
  return { port: socket.address().port, close: () => socket.close() };
}

describe('links', () => {
  let engine: Engine;
  let upstream: Awaited<ReturnType<typeof startNxdomainUpstream>>;
  const previous = process.env.BERTH_DNS_UPSTREAM;

  before(async () => {
    upstream = await startNxdomainUpstream();
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

  const inspect = async (name: string, version = '1.53') => {
    const res = await engine.request('GET', `/v${version}/containers/${name}/json`);
    assert.equal(res.status, 200, res.text);
    return res.json();
  };
  const bridgeAddress = async (name: string): Promise<string> => (await inspect(name)).NetworkSettings.Networks.bridge.IPAddress;
  const lines = (text: string) => text.split('\n').filter(Boolean);

  test('default bridge: the link gives the variables and the hosts line, to the process and to exec', async () => {
    const db = (await engine.dockerOk(['run', '-d', '--name', 'db', '-e', 'SECRET=s3', '-e', 'HOME=/nope', '--expose', '5432', '--expose', '5433', '--expose', '53/udp', 'busybox', 'sleep', '300'])).trim();
    const ip = await bridgeAddress('db');
    await engine.dockerOk(['run', '-d', '--name', 'web', '--link', 'db:my-db', '-e', 'MY_DB_ENV_SECRET=mine', 'busybox', 'sleep', '300']);
    const expected = [
      'MY_DB_NAME=/web/my-db',
      `MY_DB_PORT=tcp://${ip}:5432`,
      `MY_DB_PORT_5432_TCP=tcp://${ip}:5432`,
      `MY_DB_PORT_5432_TCP_ADDR=${ip}`,
      'MY_DB_PORT_5432_TCP_PORT=5432',
      'MY_DB_PORT_5432_TCP_PROTO=tcp',
      `MY_DB_PORT_5432_TCP_START=tcp://${ip}:5432`,
      'MY_DB_PORT_5432_TCP_PORT_START=5432',
      `MY_DB_PORT_5432_TCP_END=tcp://${ip}:5433`,
      'MY_DB_PORT_5432_TCP_PORT_END=5433',
      `MY_DB_PORT_5433_TCP=tcp://${ip}:5433`,
      `MY_DB_PORT_53_UDP=udp://${ip}:53`,
      `MY_DB_PORT_53_UDP_PROTO=udp`,
      // The container's own variable wins over the link's.
      'MY_DB_ENV_SECRET=mine',
    ];
    const processEnv = lines(await engine.dockerOk(['exec', 'web', 'sh', '-c', 'tr "\\0" "\\n" < /proc/1/environ']));
    const execEnv = lines(await engine.dockerOk(['exec', 'web', 'env']));
    for (const env of [processEnv, execEnv]) {
      for (const e of expected) assert.ok(env.includes(e), `${e} missing from:\n${env.join('\n')}`);
      // HOME and PATH of the linked container are left out.
      assert.ok(!env.some((e) => e.startsWith('MY_DB_ENV_HOME=') || e.startsWith('MY_DB_ENV_PATH=')), env.join('\n'));
    }
    const hosts = await engine.dockerOk(['exec', 'web', 'cat', '/etc/hosts']);
    assert.match(hosts, new RegExp(`^${ip.replace(/\./g, '\\.')}\\tmy-db ${db.slice(0, 12)} db$`, 'm'));
    assert.equal((await engine.dockerOk(['exec', 'web', 'sh', '-c', 'ping -c1 -W5 my-db >/dev/null && echo reached'])).trim(), 'reached');
    // As Docker shows it.
    assert.deepEqual((await inspect('web')).HostConfig.Links, ['/db:/web/my-db']);
  });

  test('default bridge: the parent sees the new address of a linked container that starts again', async () => {
    await engine.dockerOk(['run', '-d', '--name', 'moving', 'busybox', 'sleep', '300']);
    await engine.dockerOk(['run', '-d', '--name', 'holder', 'busybox', 'sleep', '300']);
    await engine.dockerOk(['run', '-d', '--name', 'follower', '--link', 'moving:mv', 'busybox', 'sleep', '300']);
    const before = await bridgeAddress('moving');
    // Its address goes to another container while it is stopped: it comes back with a new one.
    await engine.dockerOk(['stop', '-t', '0', 'moving']);
    await engine.dockerOk(['run', '-d', '--name', 'taker', 'busybox', 'sleep', '300']);
    await engine.dockerOk(['start', 'moving']);
    const after = await bridgeAddress('moving');
    assert.notEqual(after, before);
    const hosts = await engine.dockerOk(['exec', 'follower', 'cat', '/etc/hosts']);
    assert.match(hosts, new RegExp(`^${after.replace(/\./g, '\\.')}\\tmv `, 'm'));
    assert.doesNotMatch(hosts, new RegExp(`^${before.replace(/\./g, '\\.')}\\tmv `, 'm'));
    await engine.dockerOk(['rm', '-f', 'moving', 'holder', 'follower', 'taker']);
  });

  test('docker rm --link removes the link; refusals answer 4xx', async () => {
    await engine.dockerOk(['run', '-d', '--name', 'child', 'busybox', 'sleep', '300']);
    await engine.dockerOk(['run', '-d', '--name', 'parent', '--link', 'child:kid', '--link', 'child:other', 'busybox', 'sleep', '300']);
    assert.match(await engine.dockerOk(['exec', 'parent', 'cat', '/etc/hosts']), /\tkid /);
    await engine.dockerOk(['rm', '--link', 'parent/kid']);
    assert.deepEqual((await inspect('parent')).HostConfig.Links, ['/child:/parent/other']);
    const hosts = await engine.dockerOk(['exec', 'parent', 'cat', '/etc/hosts']);
    assert.doesNotMatch(hosts, /\tkid /);
    assert.match(hosts, /\tother /);
    // The link container itself stays.
    assert.equal((await inspect('child')).State.Running, true);
    // A restart does not bring it back.
    await engine.dockerOk(['restart', '-t', '0', 'parent']);
    assert.doesNotMatch(await engine.dockerOk(['exec', 'parent', 'cat', '/etc/hosts']), /\tkid /);

    const gone = await engine.request('DELETE', '/containers/parent/kid?link=1');
    assert.equal(gone.status, 404, gone.text);
    assert.match(gone.json().message, /No such container: parent\/kid/);
    const missing = await engine.request('DELETE', '/containers/nosuch?link=1');
    assert.equal(missing.status, 404, missing.text);
    const own = await engine.request('DELETE', '/containers/child?link=1');
    assert.equal(own.status, 409, own.text);
    assert.match(own.json().message, /cannot remove the default link name/);

    // At create: a link to a container that does not exist is the client's mistake (400, not a 404 that
    // would make the CLI pull); links do not go with host networking.
    const nosuch = await engine.request('POST', '/containers/create', { body: { Image: 'busybox', HostConfig: { Links: ['nosuch:x'] } } });
    assert.equal(nosuch.status, 400, nosuch.text);
    assert.match(nosuch.json().message, /could not get container for nosuch/);
    const host = await engine.request('POST', '/containers/create', { body: { Image: 'busybox', HostConfig: { NetworkMode: 'host', Links: ['child:x'] } } });
    assert.equal(host.status, 400, host.text);
    assert.match(host.json().message, /host type networking can't be used with links/);
    const bad = await engine.request('POST', '/containers/create', { body: { Image: 'busybox', HostConfig: { Links: ['a:b:c'] } } });
    assert.equal(bad.status, 400, bad.text);
    // A linked container that is not running stops the start.
    await engine.dockerOk(['stop', '-t', '0', 'child']);
    const start = await engine.docker(['restart', '-t', '0', 'parent']);
    assert.notEqual(start.code, 0);
    assert.match(start.stderr, /Cannot link to a non running container: \/child AS \/parent\/other/);
    await engine.dockerOk(['rm', '-f', 'parent', 'child']);
  });

  test('default bridge: links follow a rename; a removed linked container stops the start with a 409', async () => {
    await engine.dockerOk(['run', '-d', '--name', 'old-child', 'busybox', 'sleep', '300']);
    await engine.dockerOk(['run', '-d', '--name', 'old-parent', '--link', 'old-child:c', 'busybox', 'sleep', '300']);
    await engine.dockerOk(['rename', 'old-child', 'new-child']);
    await engine.dockerOk(['rename', 'old-parent', 'new-parent']);
    assert.deepEqual((await inspect('new-parent')).HostConfig.Links, ['/new-child:/new-parent/c']);
    await engine.dockerOk(['restart', '-t', '0', 'new-parent']);
    assert.match(await engine.dockerOk(['exec', 'new-parent', 'sh', '-c', 'echo $C_NAME; cat /etc/hosts']), /^\/new-parent\/c$[^]*\tc [0-9a-f]{12} new-child$/m);
    await engine.dockerOk(['stop', '-t', '0', 'new-parent']);
    await engine.dockerOk(['rm', '-f', 'new-child']);
    const start = await engine.request('POST', '/containers/new-parent/start');
    assert.equal(start.status, 409, start.text);
    assert.match(start.json().message, /Cannot link to a non running container: \/new-child AS \/new-parent\/c/);
    await engine.dockerOk(['rm', '-f', 'new-parent']);
  });

  test('user-defined network: the alias resolves through the embedded DNS for the linking container only', async () => {
    await engine.dockerOk(['network', 'create', 'linknet']);
    await engine.dockerOk(['run', '-d', '--name', 'svc', '--network', 'linknet', 'busybox', 'sleep', '300']);
    const ip = (await inspect('svc')).NetworkSettings.Networks.linknet.IPAddress;
    const linked = await engine.docker(['run', '--rm', '--network', 'linknet', '--link', 'svc:backend', 'busybox', 'nslookup', 'backend']);
    assert.equal(linked.code, 0, linked.stderr + linked.stdout);
    assert.match(linked.stdout, new RegExp(`Address: ${ip.replace(/\./g, '\\.')}$`, 'm'));
    // Another container of the network does not know the alias.
    const other = await engine.docker(['run', '--rm', '--network', 'linknet', 'busybox', 'nslookup', 'backend']);
    assert.notEqual(other.code, 0, other.stdout);
    // The endpoint keeps the link; HostConfig.Links stays empty, as Docker shows it on user-defined networks.
    await engine.dockerOk(['create', '--name', 'linker', '--network', 'linknet', '--link', 'svc:backend', 'busybox', 'sleep', '300']);
    const created = await inspect('linker');
    assert.deepEqual(created.NetworkSettings.Networks.linknet.Links, ['svc:backend']);
    assert.deepEqual(created.HostConfig.Links, []);
    await engine.dockerOk(['rm', '-f', 'linker']);
  });

  test('network connect: a container of the default bridge moves to the embedded DNS and resolves the network, and its links', async () => {
    await engine.dockerOk(['network', 'create', 'later net']);
    await engine.dockerOk(['run', '-d', '--name', 'far', '--network', 'later net', 'busybox', 'sleep', '300']);
    const farIp = (await inspect('far')).NetworkSettings.Networks['later net'].IPAddress;
    await engine.dockerOk(['run', '-d', '--name', 'mover', '--dns', '127.0.0.1', 'busybox', 'sleep', '300']);
    assert.doesNotMatch(await engine.dockerOk(['exec', 'mover', 'cat', '/etc/resolv.conf']), /127\.0\.0\.11/);
    await engine.dockerOk(['network', 'connect', '--link', 'far:distant', 'later net', 'mover']);
    const resolv = await engine.dockerOk(['exec', 'mover', 'cat', '/etc/resolv.conf']);
    assert.match(resolv, /^nameserver 127\.0\.0\.11$/m);
    assert.doesNotMatch(resolv, /^nameserver (?!127\.0\.0\.11)/m);
    // The container's own --dns stays its upstream.
    assert.match(resolv, /ExtServers: \[127\.0\.0\.1\]/);
    for (const name of ['far', 'distant']) {
      const r = await engine.docker(['exec', 'mover', 'nslookup', name]);
      assert.equal(r.code, 0, r.stderr + r.stdout);
      assert.match(r.stdout, new RegExp(`Address: ${farIp.replace(/\./g, '\\.')}$`, 'm'), name);
    }
    assert.deepEqual((await inspect('mover')).NetworkSettings.Networks['later net'].Links, ['far:distant']);
    // Another one joins and leaves again: it keeps its resolver, whose names go upstream (the test's, which
    // knows none).
    await engine.dockerOk(['run', '-d', '--name', 'visitor', 'busybox', 'sleep', '300']);
    await engine.dockerOk(['network', 'connect', 'later net', 'visitor']);
    await engine.dockerOk(['network', 'disconnect', 'later net', 'visitor']);
    // Both keep their embedded DNS server across a daemon restart.
    await engine.restart();
    const again = await engine.docker(['exec', 'mover', 'nslookup', 'distant']);
    assert.equal(again.code, 0, again.stderr + again.stdout);
    assert.match(again.stdout, new RegExp(`Address: ${farIp.replace(/\./g, '\\.')}$`, 'm'));
    assert.match(await engine.dockerOk(['exec', 'visitor', 'cat', '/etc/resolv.conf']), /^nameserver 127\.0\.0\.11$/m);
    const upstream = await engine.docker(['exec', 'visitor', 'nslookup', 'far']);
    assert.match(upstream.stdout + upstream.stderr, /NXDOMAIN/);
    await engine.dockerOk(['rm', '-f', 'mover', 'visitor', 'far']);
  });
});
