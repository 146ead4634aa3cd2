/**
 * Published ports end to end: `docker run -p` and `-P` against a real berthd, fetched from the host on
 * 127.0.0.1 and on the host's own address; `docker port`, list and inspect; a taken port; UDP; a daemon
 * restart keeps the rules of running containers and drops those of containers that died meanwhile.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { randomInt } from 'node:crypto';
import dgram from 'node:dgram';
import { readFileSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import { describe, test } from 'node:test';
import { eventually, useEngine } from './harness.js';

/** GET http://host:port/hostname, the container's /etc/hostname served by busybox httpd. */
function fetchText(host: string, port: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = http.get({ host, port, path: '/hostname', agent: false, timeout: 5000 }, (res) => {
      let body = '';
      res.on('data', (c) => (body += c));
      res.on('end', () => resolve(body.trim()));
    });
    req.on('timeout', () => req.destroy(new Error('timed out')));
    req.on('error', reject);
  });
}

/** The host's first non-loopback IPv4 address. */
function hostAddress(): string | undefined {
  for (const addrs of Object.values(os.networkInterfaces())) {
    for (const a of addrs ?? []) if (a.family === 'IPv4' && !a.internal && !/^(172\.(1[6-9]|2\d|3[01])|10)\./.test(a.address)) return a.address;
  }
  for (const addrs of Object.values(os.networkInterfaces())) for (const a of addrs ?? []) if (a.family === 'IPv4' && !a.internal) return a.address;
  return undefined;
}

/** The rules carrying a container's port tag. */
function portRules(bridge: string, id: string): string[] {
  return spawnSync('iptables-save', [], { encoding: 'utf8' }).stdout.split('\n').filter((l) => l.includes(`berth:${bridge}:${id.slice(0, 12)}`));
}

/** A free port on the host, away from the ephemeral range. */
function freePort(): number {
  return randomInt(20000, 30000);
}

const HTTPD = ['busybox', 'httpd', '-f', '-p', '80', '-h', '/etc'];

describe('published ports', () => {
  const engine = useEngine();

  test('docker run -p answers on 127.0.0.1 and the host address, shows in port/ps/inspect, and is gone after stop', async () => {
    const port = freePort();
    const id = (await engine.dockerOk(['run', '-d', '--name', 'web', '-p', `${port}:80`, ...HTTPD])).trim();
    const short = id.slice(0, 12);
    assert.equal(await eventually(() => fetchText('127.0.0.1', port), 15_000), short);
    const address = hostAddress();
    if (address) assert.equal(await fetchText(address, port), short);
    assert.equal((await engine.dockerOk(['port', 'web'])).trim(), `80/tcp -> 0.0.0.0:${port}`);
    assert.equal((await engine.dockerOk(['port', 'web', '80'])).trim(), `0.0.0.0:${port}`);
    const listed = (await engine.request('GET', `/containers/json?filters=${encodeURIComponent(JSON.stringify({ id: [id] }))}`)).json()[0];
    assert.deepEqual(listed.Ports, [{ IP: '0.0.0.0', PrivatePort: 80, PublicPort: port, Type: 'tcp' }]);
    const inspect = (await engine.request('GET', `/containers/${id}/json`)).json();
    assert.deepEqual(inspect.NetworkSettings.Ports, { '80/tcp': [{ HostIp: '0.0.0.0', HostPort: String(port) }] });
    assert.deepEqual(inspect.HostConfig.PortBindings, { '80/tcp': [{ HostIp: '', HostPort: String(port) }] });
    assert.match((await engine.dockerOk(['ps'])), new RegExp(`0\\.0\\.0\\.0:${port}->80/tcp`));
    assert.ok(portRules(engine.bridge, id).length > 0);
    await engine.dockerOk(['stop', '-t', '1', 'web']);
    await assert.rejects(fetchText('127.0.0.1', port));
    assert.deepEqual(portRules(engine.bridge, id), []);
    const stopped = (await engine.request('GET', `/containers/${id}/json`)).json();
    assert.deepEqual(stopped.NetworkSettings.Ports, { '80/tcp': null });
    // Started again, it publishes again.
    await engine.dockerOk(['start', 'web']);
    assert.equal(await eventually(() => fetchText('127.0.0.1', port), 15_000), short);
    await engine.dockerOk(['rm', '-f', 'web']);
    assert.deepEqual(portRules(engine.bridge, id), []);
  });

  test('-P publishes every exposed port on an ephemeral port of the kernel range', async () => {
    const [first, last] = readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/).map(Number);
    const id = (await engine.dockerOk(['run', '-d', '-P', '--expose', '80', '--expose', '81/udp', ...HTTPD])).trim();
    const ports = (await engine.request('GET', `/containers/${id}/json`)).json().NetworkSettings.Ports;
    const tcp = Number(ports['80/tcp'][0].HostPort);
    const udp = Number(ports['81/udp'][0].HostPort);
    for (const p of [tcp, udp]) assert.ok(p >= first && p <= last, `${p} is in ${first}-${last}`);
    assert.equal(await eventually(() => fetchText('127.0.0.1', tcp), 15_000), id.slice(0, 12));
    const out = await engine.dockerOk(['port', id]);
    assert.match(out, new RegExp(`80/tcp -> 0\\.0\\.0\\.0:${tcp}`));
    assert.match(out, new RegExp(`81/udp -> 0\\.0\\.0\\.0:${udp}`));
    await engine.dockerOk(['rm', '-f', id]);
  });

  test('a host port taken by another container is a clear error at start, and the second container holds nothing', async () => {
    const port = freePort();
    const first = (await engine.dockerOk(['run', '-d', '-p', `${port}:80`, ...HTTPD])).trim();
    const r = await engine.docker(['run', '-d', '--name', 'second', '-p', `${port}:80`, ...HTTPD]);
    assert.equal(r.code, 125);
    assert.match(r.stderr, new RegExp(`Bind for 0\\.0\\.0\\.0:${port} failed: port is already allocated`));
    const second = (await engine.request('GET', '/containers/second/json')).json();
    assert.equal(second.State.Running, false);
    assert.deepEqual(portRules(engine.bridge, second.Id), []);
    // A port some program of the host listens on is refused too.
    const server = http.createServer();
    const busy = freePort();
    await new Promise<void>((resolve) => server.listen(busy, '0.0.0.0', resolve));
    try {
      const r2 = await engine.docker(['run', '-d', '-p', `${busy}:80`, ...HTTPD]);
      assert.equal(r2.code, 125);
      assert.match(r2.stderr, new RegExp(`Bind for 0\\.0\\.0\\.0:${busy} failed: port is already allocated`));
    } finally {
      server.close();
    }
    // Bad input answers 400 at create.
    const bad = await engine.request('POST', '/containers/create', { body: { Image: 'busybox', HostConfig: { PortBindings: { '80/sctpx': [{ HostPort: '80' }] } } } });
    assert.equal(bad.status, 400);
    assert.match(bad.json().message, /sctpx/);
    const notOurs = await engine.docker(['run', '-d', '-p', `192.0.2.254:${freePort()}:80`, ...HTTPD]);
    assert.equal(notOurs.code, 125);
    assert.match(notOurs.stderr, /192\.0\.2\.254 is not an address of this host/);
    const range = await engine.request('POST', '/containers/create', { body: { Image: 'busybox', HostConfig: { PortBindings: { '80/tcp': [{ HostPort: '70000' }] } } } });
    assert.equal(range.status, 400);
    await engine.dockerOk(['rm', '-f', first, 'second']);
  });

  test('UDP ports get their DNAT rule; a port on a user-defined network bound to 127.0.0.1 answers', async () => {
    // busybox has no UDP server: the rule is checked, not a datagram.
    const port = freePort();
    await engine.dockerOk(['network', 'create', 'pubnet']);
    const id = (await engine.dockerOk(['run', '-d', '--network', 'pubnet', '-p', `${port}:5000/udp`, 'busybox', 'sleep', '300'])).trim();
    const ip = (await engine.request('GET', `/containers/${id}/json`)).json().NetworkSettings.Networks.pubnet.IPAddress;
    const rules = spawnSync('iptables-save', ['-t', 'nat'], { encoding: 'utf8' }).stdout.split('\n').filter((l) => l.includes(`:${id.slice(0, 12)}`));
    assert.ok(rules.some((l) => l.includes('-p udp') && l.includes(`--dport ${port}`) && l.includes(`--to-destination ${ip}:5000`)), rules.join('\n'));
    assert.equal((await engine.dockerOk(['port', id])).trim(), `5000/udp -> 0.0.0.0:${port}`);
    const webPort = freePort();
    await engine.dockerOk(['run', '-d', '--name', 'netweb', '--network', 'pubnet', '-p', `127.0.0.1:${webPort}:80`, ...HTTPD]);
    assert.equal((await eventually(() => fetchText('127.0.0.1', webPort), 15_000)).length, 12);
    assert.equal((await engine.dockerOk(['port', 'netweb'])).trim(), `80/tcp -> 127.0.0.1:${webPort}`);
    await engine.dockerOk(['rm', '-f', id, 'netweb']);
    await engine.dockerOk(['network', 'rm', 'pubnet']);
  });

  test('a daemon restart keeps the ports of running containers and drops those of containers that died meanwhile', async () => {
    const keepPort = freePort();
    const deadPort = keepPort + 1;
    const keep = (await engine.dockerOk(['run', '-d', '-p', `${keepPort}:80`, ...HTTPD])).trim();
    const dies = (await engine.dockerOk(['run', '-d', '-p', `${deadPort}:80`, ...HTTPD])).trim();
    await eventually(() => fetchText('127.0.0.1', keepPort), 15_000);
    const diesPid = (await engine.request('GET', `/containers/${dies}/json`)).json().State.Pid as number;
    await engine.crash();
    process.kill(diesPid, 'SIGKILL');
    await engine.start();
    assert.equal(await eventually(() => fetchText('127.0.0.1', keepPort), 15_000), keep.slice(0, 12));
    await eventually(() => portRules(engine.bridge, dies).length === 0, 15_000);
    // The dead container's port is free again; the live one's is still held.
    const again = (await engine.dockerOk(['run', '-d', '-p', `${deadPort}:80`, ...HTTPD])).trim();
    assert.equal(await eventually(() => fetchText('127.0.0.1', deadPort), 15_000), again.slice(0, 12));
    const clash = await engine.docker(['run', '-d', '-p', `${keepPort}:80`, ...HTTPD]);
    assert.match(clash.stderr, /port is already allocated/);
    await engine.dockerOk(['rm', '-f', keep, dies, again]);
    for (const c of (await engine.request('GET', '/containers/json?all=1')).json()) await engine.request('DELETE', `/containers/${c.Id}?force=1`);
  });
});
