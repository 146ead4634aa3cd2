/**
 * Endpoint settings as the client gave them, through dockerode against a real berthd: Links, DriverOpts,
 * MacAddress (shown before the start), IPAMConfig.LinkLocalIPs (added to the interface), Aliases null when
 * none were given (and the short id among them before API 1.45), IPAM.Options null when unset, a network
 * name with spaces; container and network inspect conform to the schema of each version asked.
 */
import assert from 'node:assert/strict';
import { randomInt } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { startEngine, type Engine } from '../harness.js';
import { expectConforms } from './openapi.js';

const NET = 'spaced net';
const SUBNET = `10.${randomInt(200, 250)}.${randomInt(1, 250)}`;
const VERSIONS = ['1.41', '1.44', '1.45', '1.53'];

describe('endpoint settings keep what the client gave', () => {
  let engine: Engine;

  before(async () => {
    engine = await startEngine();
    await engine.loadBusybox();
  });
  after(async () => {
    await engine?.cleanup();
  });

  const inspect = async (ref: string, version: string) => {
    const res = await engine.request('GET', `/v${version}/containers/${ref}/json`);
    assert.equal(res.status, 200, res.text);
    const body = res.json();
    await expectConforms(version, 'GET', '/containers/{id}/json', 200, body);
    return body;
  };

  test('a network with spaces in its name; IPAM.Options null when unset', async () => {
    const docker = engine.dockerode();
    const created = await docker.createNetwork({ Name: NET, IPAM: { Config: [{ Subnet: `${SUBNET}.0/24` }] } });
    for (const v of VERSIONS) {
      const res = await engine.request('GET', `/v${v}/networks/${encodeURIComponent(NET)}`);
      assert.equal(res.status, 200, res.text);
      const body = res.json();
      await expectConforms(v, 'GET', '/networks/{id}', 200, body);
      assert.equal(body.Id, created.id);
      assert.equal(body.Name, NET);
      assert.equal(body.IPAM.Options, null);
      const list = (await engine.request('GET', `/v${v}/networks`)).json();
      await expectConforms(v, 'GET', '/networks', 200, list);
    }
    assert.equal((await engine.request('GET', '/networks/bridge')).json().IPAM.Options, null);
    // Options given are kept.
    await docker.createNetwork({ Name: 'with options', IPAM: { Options: { 'com.example.k': 'v' } } });
    assert.deepEqual((await engine.request('GET', `/networks/${encodeURIComponent('with options')}`)).json().IPAM.Options, { 'com.example.k': 'v' });
  });

  test('Links, DriverOpts, MacAddress and LinkLocalIPs are shown before and after the start; the addresses are on the interface', async () => {
    const docker = engine.dockerode();
    const mac = '02:42:0a:0b:0c:0d';
    const container = await docker.createContainer({
      name: 'ep',
      Image: 'busybox',
      Cmd: ['sleep', '300'],
      HostConfig: { NetworkMode: NET },
      NetworkingConfig: {
        EndpointsConfig: {
          [NET]: {
            Links: ['peer:pal'],
            DriverOpts: { 'com.example.opt': 'value' },
            MacAddress: mac,
            IPAMConfig: { LinkLocalIPs: ['169.254.7.7', 'fe80::7'] },
          },
        },
      },
    } as any);
    const expectGiven = (ep: any) => {
      assert.deepEqual(ep.Links, ['peer:pal']);
      assert.deepEqual(ep.DriverOpts, { 'com.example.opt': 'value' });
      assert.equal(ep.MacAddress, mac);
      assert.deepEqual(ep.IPAMConfig.LinkLocalIPs, ['169.254.7.7', 'fe80::7']);
    };
    for (const v of VERSIONS) {
      const ep = (await inspect('ep', v)).NetworkSettings.Networks[NET];
      expectGiven(ep);
      assert.equal(ep.Aliases, null, v);
      assert.equal(ep.IPAddress, '');
    }
    const viaDockerode = await container.inspect();
    expectGiven(viaDockerode.NetworkSettings.Networks[NET]);

    await container.start();
    const id = container.id;
    for (const v of VERSIONS) {
      const ep = (await inspect('ep', v)).NetworkSettings.Networks[NET];
      expectGiven(ep);
      assert.match(ep.IPAddress, new RegExp(`^${SUBNET.replace(/\./g, '\\.')}\\.`));
      // Before 1.45 the short id is listed among the aliases; from 1.45 on only what the client gave.
      if (v < '1.45') assert.deepEqual(ep.Aliases, [id.slice(0, 12)], v);
      else assert.equal(ep.Aliases, null, v);
    }
    const list = (await engine.request('GET', '/v1.44/containers/json')).json();
    await expectConforms('1.44', 'GET', '/containers/json', 200, list);

    const exec = await container.exec({ Cmd: ['ip', 'addr', 'show', 'eth0'], AttachStdout: true, AttachStderr: true });
    const stream = await exec.start({ hijack: true, stdin: false });
    const chunks: Buffer[] = [];
    stream.on('data', (c: Buffer) => chunks.push(c));
    await new Promise((resolve) => stream.on('end', resolve));
    const out = Buffer.concat(chunks).toString('latin1');
    assert.match(out, /inet 169\.254\.7\.7\/16 /);
    assert.match(out, /inet6 fe80::7\/64 /);
    assert.match(out, new RegExp(`link/ether ${mac}`));
    await container.remove({ force: true });
  });

  test('before API 1.44 the MAC address comes from Config.MacAddress only', async () => {
    const create = async (version: string, name: string, body: object) => {
      const res = await engine.request('POST', `/v${version}/containers/create?name=${name}`, { body: { Image: 'busybox', HostConfig: { NetworkMode: NET }, ...body } });
      assert.equal(res.status, 201, res.text);
      return (await inspect(name, '1.53')).NetworkSettings.Networks[NET].MacAddress;
    };
    const endpointMac = { NetworkingConfig: { EndpointsConfig: { [NET]: { MacAddress: '02:42:00:00:00:01' } } } };
    assert.equal(await create('1.43', 'old-endpoint-mac', endpointMac), '');
    assert.equal(await create('1.44', 'new-endpoint-mac', endpointMac), '02:42:00:00:00:01');
    assert.equal(await create('1.43', 'old-config-mac', { MacAddress: '02:42:00:00:00:02', ...endpointMac }), '02:42:00:00:00:02');
    for (const name of ['old-endpoint-mac', 'new-endpoint-mac', 'old-config-mac']) await engine.request('DELETE', `/containers/${name}`);
  });

  test('aliases given are kept; bad endpoint settings answer 400 naming the field', async () => {
    const docker = engine.dockerode();
    const aliased = await docker.createContainer({
      name: 'aliased', Image: 'busybox', Cmd: ['sleep', '300'], HostConfig: { NetworkMode: NET },
      NetworkingConfig: { EndpointsConfig: { [NET]: { Aliases: ['first'] } } },
    } as any);
    await aliased.start();
    assert.deepEqual((await inspect('aliased', '1.53')).NetworkSettings.Networks[NET].Aliases, ['first']);
    assert.deepEqual((await inspect('aliased', '1.44')).NetworkSettings.Networks[NET].Aliases, ['first', aliased.id.slice(0, 12)]);
    assert.equal((await inspect('aliased', '1.53')).NetworkSettings.Networks[NET].Links, null);
    await aliased.remove({ force: true });

    const bad = async (endpoint: object, pattern: RegExp) => {
      const res = await engine.request('POST', '/containers/create', {
        body: { Image: 'busybox', HostConfig: { NetworkMode: NET }, NetworkingConfig: { EndpointsConfig: { [NET]: endpoint } } },
      });
      assert.equal(res.status, 400, res.text);
      assert.match(res.json().message, pattern);
    };
    await bad({ IPAMConfig: { LinkLocalIPs: ['0.0.0.0'] } }, /LinkLocalIPs: invalid link-local IP address: 0\.0\.0\.0/);
    await bad({ IPAMConfig: { LinkLocalIPs: ['nope'] } }, /LinkLocalIPs: invalid link-local IP address: nope/);
    await bad({ Links: ['a:b:c'] }, /Links: bad format for links/);
    await bad({ DriverOpts: { k: 1 } }, /DriverOpts must be an object of strings/);
  });
});
