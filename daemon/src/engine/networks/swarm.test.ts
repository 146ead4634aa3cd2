import assert from 'node:assert/strict';
import { test } from 'node:test';
import { InvalidParameter, NotFound } from '../../errors.js';
import type { NetworkContext } from './context.js';
import { planNetworks } from './plan.js';
import { placeholder, type SwarmAttacher } from './swarm.js';
import type { NetworkEntry } from './store.js';

/** The parts of the network context planning reads: the default bridge only, and a swarm part when given. */
function contextWith(swarm?: Partial<SwarmAttacher>, extra: NetworkEntry[] = []): NetworkContext {
  const bridge = placeholder('bridge');
  Object.assign(bridge.network, { Id: 'b'.repeat(64), Driver: 'bridge', Scope: 'local', IPAM: { Driver: 'default', Options: null, Config: [{ Subnet: '172.17.0.0/16', Gateway: '172.17.0.1' }] } });
  const entries = new Map([bridge, ...extra].map((e) => [e.network.Id, e]));
  return {
    entries,
    swarm,
    byName: (name: string) => [...entries.values()].find((e) => e.network.Name === name),
    find: (ref: string) => {
      const e = entries.get(ref) ?? [...entries.values()].find((x) => x.network.Name === ref);
      if (!e) throw new NotFound(`network ${ref} not found`);
      return e;
    },
    isPredefined: (e: NetworkEntry) => e.network.Name === 'bridge',
    hasIPv6: () => false,
  } as unknown as NetworkContext;
}

test('a network unknown here is planned as a swarm network on a swarm node only, its endpoint checked', () => {
  assert.throws(() => planNetworks(contextWith(), 'ov', undefined), (e: Error) => e instanceof NotFound && e.message === 'network ov not found');
  const swarm = contextWith({ active: () => true });
  const plan = planNetworks(swarm, 'ov', { EndpointsConfig: { ov: { Aliases: ['web'] } } }, { portBindings: { '80/tcp': [{ HostPort: '8080' }] } });
  assert.equal(plan.mode, 'bridge');
  assert.ok(plan.mode === 'bridge' && plan.networkId === '' && plan.networkName === 'ov');
  assert.deepEqual(plan.mode === 'bridge' && plan.endpoint, { aliases: ['web'] });
  assert.equal(plan.embeddedDns, true);
  assert.equal(plan.ports?.length, 1);
  // A second swarm network beside it, and a static address refused as on any network that is not a bridge.
  const two = planNetworks(swarm, 'ov', { EndpointsConfig: { other: {} } });
  assert.deepEqual(two.mode === 'bridge' && two.extra?.map((e) => e.networkName), ['other']);
  assert.throws(() => planNetworks(swarm, 'ov', { EndpointsConfig: { ov: { IPAMConfig: { IPv4Address: '10.0.0.9' } } } }),
    (e: Error) => e instanceof InvalidParameter && /a static address cannot be given on network ov/.test(e.message));
  // A sandbox's policy does not reach swarm networks: refused.
  assert.throws(() => planNetworks(swarm, 'ov', undefined, { sandbox: true }), (e: Error) => e instanceof InvalidParameter && /network policy cannot join the swarm network ov/.test(e.message));
  // Not in a swarm any more: unknown again.
  assert.throws(() => planNetworks(contextWith({ active: () => false }), 'ov', undefined), NotFound);
});

test('ports are refused on an internal swarm network this node knows', () => {
  const inner = placeholder('inner');
  Object.assign(inner.network, { Id: 'x'.repeat(25), Internal: true });
  const ctx = contextWith({ active: () => true }, [inner]);
  assert.throws(() => planNetworks(ctx, 'inner', undefined, { portBindings: { '80/tcp': [{ HostPort: '8080' }] } }),
    (e: Error) => e instanceof InvalidParameter && e.message === 'ports cannot be published on network inner: it is an internal network');
  assert.equal(planNetworks(ctx, 'inner', undefined).mode, 'bridge');
});
