import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { CONTAINER_CREATE, CONTAINER_UPDATE, decodeAs, EXEC_CREATE, NETWORK_CONNECT, NETWORK_CREATE } from './bodies.js';
import { parseJsonBody } from './http.js';

describe('request bodies decoded as Go decodes them', () => {
  test('keys match their field ignoring case, and come out under the canonical name', () => {
    const body = decodeAs(
      { image: 'busybox', CMD: ['true'], hostconfig: { memory: 8388608, CPURealtimePeriod: 1000, restartpolicy: { name: 'always' } } },
      CONTAINER_CREATE,
    );
    assert.deepEqual(body, { Image: 'busybox', Cmd: ['true'], HostConfig: { Memory: 8388608, CpuRealtimePeriod: 1000, RestartPolicy: { Name: 'always' } } });
    assert.deepEqual(decodeAs({ detachKeys: 'ctrl-x', cmd: ['sh'] }, EXEC_CREATE), { DetachKeys: 'ctrl-x', Cmd: ['sh'] });
  });

  test('an exact match is preferred, and a later key for the same field wins', () => {
    assert.deepEqual(decodeAs({ Image: 'a', image: 'b' }, CONTAINER_CREATE), { Image: 'b' });
    assert.deepEqual(decodeAs({ image: 'b', Image: 'a' }, CONTAINER_CREATE), { Image: 'a' });
  });

  test('unknown keys are dropped at every level, null is the same as absent', () => {
    const body = decodeAs(
      { Image: 'busybox', Bogus: 1, Healthcheck: null, HostConfig: { Memory: null, Nope: true, LogConfig: { Type: 'none', Extra: 1 } } },
      CONTAINER_CREATE,
    );
    assert.deepEqual(body, { Image: 'busybox', HostConfig: { LogConfig: { Type: 'none' } } });
    assert.deepEqual(decodeAs({ memory: 1, whatever: 2, restartPolicy: { name: 'no', x: 1 } }, CONTAINER_UPDATE), { Memory: 1, RestartPolicy: { Name: 'no' } });
  });

  test('maps whose keys are data keep them; their struct values are decoded', () => {
    const body = decodeAs(
      {
        Labels: { 'Com.Example': 'x', image: 'y' },
        ExposedPorts: { '80/tcp': { junk: 1 } },
        HostConfig: { Sysctls: { 'net.ipv4.ip_forward': '1' }, portbindings: { '80/tcp': [{ hostport: '8080', hostip: '', other: 1 }] } },
        NetworkingConfig: { endpointsconfig: { MyNet: { aliases: ['a'], ipamconfig: { ipv4address: '10.0.0.2' }, DriverOpts: { Key: 'v' } } } },
      },
      CONTAINER_CREATE,
    );
    assert.deepEqual(body, {
      Labels: { 'Com.Example': 'x', image: 'y' },
      ExposedPorts: { '80/tcp': {} },
      HostConfig: { Sysctls: { 'net.ipv4.ip_forward': '1' }, PortBindings: { '80/tcp': [{ HostPort: '8080', HostIp: '' }] } },
      NetworkingConfig: { EndpointsConfig: { MyNet: { Aliases: ['a'], IPAMConfig: { IPv4Address: '10.0.0.2' }, DriverOpts: { Key: 'v' } } } },
    });
    const connect = decodeAs({ container: 'c', endpointconfig: { Links: ['x:y'], Bogus: 1 } }, NETWORK_CONNECT);
    assert.deepEqual(connect, { Container: 'c', EndpointConfig: { Links: ['x:y'] } });
    const network = decodeAs({ name: 'n', ipam: { config: [{ subnet: '10.9.0.0/24', auxiliaryaddresses: { Host1: '10.9.0.5' } }] }, options: { A: 'b' } }, NETWORK_CREATE);
    assert.deepEqual(network, { Name: 'n', IPAM: { Config: [{ Subnet: '10.9.0.0/24', AuxiliaryAddresses: { Host1: '10.9.0.5' } }] }, Options: { A: 'b' } });
  });

  test('a __proto__ key of a data map stays data', () => {
    const body = decodeAs(JSON.parse('{"Labels":{"__proto__":"x"},"ExposedPorts":{"__proto__":{}}}'), CONTAINER_CREATE) as Record<string, Record<string, unknown>>;
    assert.equal(Object.getPrototypeOf(body.ExposedPorts), Object.prototype);
    assert.deepEqual(Object.keys(body.ExposedPorts), ['__proto__']);
    assert.equal(Object.getOwnPropertyDescriptor(body.Labels, '__proto__')?.value, 'x');
  });

  test('values of the wrong kind are left for the validators', () => {
    assert.deepEqual(decodeAs({ hostconfig: 'x', mounts: 1 }, CONTAINER_CREATE), { HostConfig: 'x' });
    assert.deepEqual(decodeAs({ HostConfig: { Mounts: [null, 'y', { type: 'bind' }] } }, CONTAINER_CREATE), { HostConfig: { Mounts: [null, 'y', { Type: 'bind' }] } });
    assert.equal(decodeAs('text', CONTAINER_CREATE), 'text');
    assert.deepEqual(decodeAs([1], CONTAINER_CREATE), [1]);
  });

  test('parseJsonBody refuses bodies nested too deep, before anything walks them', () => {
    const deep = '{"a":'.repeat(5000) + '1' + '}'.repeat(5000);
    assert.throws(() => parseJsonBody(deep, CONTAINER_CREATE), { name: 'InvalidParameter', message: /nested deeper than 100 levels/ });
    assert.throws(() => parseJsonBody('['.repeat(101) + ']'.repeat(101)), { name: 'InvalidParameter' });
    // Brackets inside strings do not count.
    assert.deepEqual(parseJsonBody(JSON.stringify({ Image: '['.repeat(500) + '\\"{' }), CONTAINER_CREATE), { Image: '['.repeat(500) + '\\"{' });
    assert.equal(parseJsonBody('  '), undefined);
    assert.throws(() => parseJsonBody('{'), { name: 'InvalidParameter', message: /invalid JSON/ });
  });
});
