/**
 * Network modes and options end to end: `--network container:<id>`, ICC off, internal networks, and the
 * bad input of network create and static addresses (4xx with a clear message, nothing half-created).
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { randomInt } from 'node:crypto';
import { readdirSync } from 'node:fs';
import os from 'node:os';
import { describe, test } from 'node:test';
import { useEngine } from './harness.js';

const octet = randomInt(100, 200);

function hostAddress(): string | undefined {
  for (const addrs of Object.values(os.networkInterfaces())) for (const a of addrs ?? []) if (a.family === 'IPv4' && !a.internal) return a.address;
  return undefined;
}

describe('network modes and options', () => {
  const engine = useEngine();

  test('--network container:<id> shares the namespace: same interfaces and address, localhost reaches the other', async () => {
    const first = (await engine.dockerOk(['run', '-d', '--name', 'owner', 'busybox', 'sh', '-c', 'echo from-owner | nc -l -p 7000; sleep 300'])).trim();
    const ownerAddr = await engine.dockerOk(['exec', first, 'ip', '-o', '-4', 'addr', 'show', 'dev', 'eth0']);
    const joined = await engine.docker(['run', '--rm', '--network', `container:${first}`, 'busybox', 'sh', '-c', 'ip -o -4 addr show dev eth0; nc 127.0.0.1 7000 </dev/null']);
    assert.equal(joined.code, 0, joined.stderr);
    const address = /inet (\S+)/.exec(ownerAddr)![1];
    assert.match(joined.stdout, new RegExp(`inet ${address.replace(/\./g, '\\.')}`));
    assert.match(joined.stdout, /from-owner/);
    const inspect = (await engine.request('GET', '/containers/owner/json')).json();
    assert.equal(inspect.State.Running, true);
    // Joining a container of a user-defined network: its embedded DNS server answers in the shared namespace.
    await engine.dockerOk(['network', 'create', 'sharednet']);
    await engine.dockerOk(['run', '-d', '--name', 'named', '--network', 'sharednet', 'busybox', 'sleep', '300']);
    await engine.dockerOk(['run', '-d', '--name', 'dnsowner', '--network', 'sharednet', 'busybox', 'sleep', '300']);
    const viaOwner = await engine.docker(['run', '--rm', '--network', 'container:dnsowner', 'busybox', 'sh', '-c', 'cat /etc/resolv.conf; ping -c1 -W5 named >/dev/null && echo named-ok']);
    assert.match(viaOwner.stdout, /^nameserver 127\.0\.0\.11$/m);
    assert.match(viaOwner.stdout, /named-ok/);
    await engine.dockerOk(['rm', '-f', 'named', 'dnsowner']);
    await engine.dockerOk(['network', 'rm', 'sharednet']);
    // Publishing ports in container mode is refused, as Docker refuses it.
    const ports = await engine.docker(['run', '--rm', '--network', 'container:owner', '-p', '8080:80', 'busybox', 'true']);
    assert.notEqual(ports.code, 0);
    assert.match(ports.stderr, /conflicting options: port publishing and the container type network mode/);
    await engine.dockerOk(['rm', '-f', 'owner']);
  });

  test('enable_icc=false: containers of the network do not reach each other, but reach the gateway', async () => {
    await engine.dockerOk(['network', 'create', '-o', 'com.docker.network.bridge.enable_icc=false', 'noicc']);
    await engine.dockerOk(['network', 'create', 'withicc']);
    for (const net of ['noicc', 'withicc']) await engine.dockerOk(['run', '-d', '--name', `peer-${net}`, '--network', net, 'busybox', 'sleep', '300']);
    const peer = (net: string) => engine.dockerOk(['inspect', '-f', `{{.NetworkSettings.Networks.${net}.IPAddress}}`, `peer-${net}`]).then((s) => s.trim());
    const gateway = (await engine.request('GET', '/networks/noicc')).json().IPAM.Config[0].Gateway;
    const blocked = await engine.docker(['run', '--rm', '--network', 'noicc', 'busybox', 'sh', '-c', `ping -c1 -W2 ${gateway} >/dev/null && echo gw-ok; ping -c1 -W2 ${await peer('noicc')} >/dev/null && echo peer-ok; true`]);
    assert.match(blocked.stdout, /gw-ok/);
    assert.doesNotMatch(blocked.stdout, /peer-ok/);
    const open = await engine.docker(['run', '--rm', '--network', 'withicc', 'busybox', 'sh', '-c', `ping -c1 -W2 ${await peer('withicc')} >/dev/null && echo peer-ok; true`]);
    assert.match(open.stdout, /peer-ok/);
    await engine.dockerOk(['rm', '-f', 'peer-noicc', 'peer-withicc']);
    await engine.dockerOk(['network', 'rm', 'noicc', 'withicc']);
  });

  test('an internal network has no way out: no default route, the host address unreachable; neighbours reach each other', async () => {
    await engine.dockerOk(['network', 'create', '--internal', 'inner']);
    await engine.dockerOk(['run', '-d', '--name', 'inner-peer', '--network', 'inner', 'busybox', 'sleep', '300']);
    const host = hostAddress();
    const r = await engine.docker(['run', '--rm', '--network', 'inner', 'busybox', 'sh', '-c',
      `ip route; ping -c1 -W2 inner-peer >/dev/null && echo peer-ok; ${host ? `ping -c1 -W2 ${host} >/dev/null && echo host-ok;` : ''} true`]);
    assert.doesNotMatch(r.stdout, /^default/m);
    assert.match(r.stdout, /peer-ok/);
    assert.doesNotMatch(r.stdout, /host-ok/);
    await engine.dockerOk(['rm', '-f', 'inner-peer']);
    await engine.dockerOk(['network', 'rm', 'inner']);
  });

  test('bad input: overlapping subnets, gateway outside, bad names, taken static address: 4xx, nothing half-created', async () => {
    const subnet = `10.${octet}.7.0/24`;
    assert.equal((await engine.request('POST', '/networks/create', { body: { Name: 'first', IPAM: { Config: [{ Subnet: subnet }] } } })).status, 201);
    const overlap = await engine.request('POST', '/networks/create', { body: { Name: 'second', IPAM: { Config: [{ Subnet: `10.${octet}.0.0/16` }] } } });
    assert.equal(overlap.status, 403);
    assert.match(overlap.json().message, /overlaps/);
    const outside = await engine.request('POST', '/networks/create', { body: { Name: 'third', IPAM: { Config: [{ Subnet: `10.${octet}.8.0/24`, Gateway: `10.${octet}.9.1` }] } } });
    assert.equal(outside.status, 400);
    assert.match(outside.json().message, /Gateway .* is not in the subnet/);
    // Spaces are fine (as with Docker); a control character or a slash is not.
    for (const name of ['bad\nname', '-dash', 'x/y', '']) {
      const r = await engine.request('POST', '/networks/create', { body: { Name: name } });
      assert.equal(r.status, 400, name);
      assert.ok(r.json().message.length > 0);
    }
    const aliasBad = await engine.request('POST', '/containers/create', { body: { Image: 'busybox', HostConfig: { NetworkMode: 'first' }, NetworkingConfig: { EndpointsConfig: { first: { Aliases: ['bad alias'] } } } } });
    assert.equal(aliasBad.status, 400);
    const names = (await engine.request('GET', '/networks')).json().map((n: { Name: string }) => n.Name).sort();
    assert.deepEqual(names, ['bridge', 'first', 'host', 'none']);
    // A static address another container holds: the second start fails naming it, and holds nothing.
    const ip = `10.${octet}.7.50`;
    await engine.dockerOk(['run', '-d', '--name', 'holder', '--network', 'first', '--ip', ip, 'busybox', 'sleep', '300']);
    const taken = await engine.docker(['run', '-d', '--name', 'taker', '--network', 'first', '--ip', ip, 'busybox', 'sleep', '300']);
    assert.notEqual(taken.code, 0);
    assert.match(taken.stderr, new RegExp(`address ${ip.replace(/\./g, '\\.')} is already in use`));
    const network = (await engine.request('GET', '/networks/first')).json();
    assert.deepEqual(Object.values(network.Containers).map((c: any) => c.Name), ['holder']);
    await engine.dockerOk(['rm', '-f', 'holder', 'taker']);
    await engine.dockerOk(['network', 'rm', 'first']);
    assert.equal(readdirSync('/sys/class/net').includes(`br-${network.Id.slice(0, 12)}`), false);
    assert.equal(spawnSync('iptables-save', [], { encoding: 'utf8' }).stdout.includes(network.Options?.['com.docker.network.bridge.name'] ?? `br-${network.Id.slice(0, 12)}`), false);
  });
});
