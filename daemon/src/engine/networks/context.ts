/**
 * The state the network verbs share (create.ts, connect.ts, plan.ts, ...): the store and its entries, the lock
 * that serialises allocation and store writes, the Host's network part, the event bus and the daemon's
 * options. One object, built by the façade (service.ts) and passed to every verb.
 */
import { NotFound, InvalidParameter } from '../../errors.js';
import type { EventBus } from '../events.js';
import { machineFacts } from '../machine.js';
import { ulaPrefix, type Subnet6 } from '../../util/ipv6.js';
import { NetworkStore, type NetworkEntry } from './store.js';
import type { StateStore } from '../../state/state.js';
import type { NetworkHost } from '../../host/host.js';
import type { NetworkPlugins } from './remote.js';
import type { SwarmAttacher } from './swarm.js';
import type { IPAMPool, NetworkRecord } from './types.js';

export const PREDEFINED_NETWORKS = ['bridge', 'host', 'none'] as const;
export type PredefinedName = (typeof PREDEFINED_NETWORKS)[number];

export const DEFAULT_MTU = 1500;

/**
 * The key of a container's EndpointsConfig that says its NetworkMode's network is not joined: the container
 * left it (network disconnect) and joins only the networks its EndpointsConfig names, loopback only when none.
 * No network can have this name (a name starts with a letter or digit).
 */
export const DETACHED_KEY = '.detached';

export interface NetworkServiceOptions {
  dataRoot: string;
  /** The daemon's state, where the network records are kept. */
  state: StateStore;
  /** Name of the default bridge on the host (`--bridge`). */
  bridgeName: string;
  /** `--bip`: the bridge's address and prefix, e.g. 10.20.0.1/24. */
  bridgeCidr?: string;
  /** Install NAT and forward rules (`--iptables`). */
  iptables: boolean;
  mtu?: number;
  /** What the engine's unique local IPv6 prefix is drawn from (default: the data root and the machine's id). */
  ipv6Seed?: string;
}

/** The IPv4 pool of a network (its first pool whose subnet is not IPv6). */
export function ipv4Pool(network: NetworkRecord): IPAMPool | undefined {
  return network.IPAM.Config.find((p) => !p.Subnet.includes(':'));
}

/** The IPv6 pool of a network with EnableIPv6. */
export function ipv6Pool(network: NetworkRecord): IPAMPool | undefined {
  return network.IPAM.Config.find((p) => p.Subnet.includes(':'));
}

export type EventPublisher = Pick<EventBus, 'publish'>;

/** Serialises the service's state changes (allocation, store writes). */
class Mutex {
  private tail: Promise<unknown> = Promise.resolve();
  run<T>(fn: () => Promise<T>): Promise<T> {
    const next = this.tail.then(fn, fn);
    this.tail = next.catch(() => undefined);
    return next;
  }
}

export class NetworkContext {
  readonly store: NetworkStore;
  readonly entries = new Map<string, NetworkEntry>();
  readonly lock = new Mutex();
  readonly mtu: number;
  /** The /48 the default IPv6 subnets of new networks come from. */
  readonly ulaPool: Subnet6;
  /** Network and IPAM drivers of plugins, once the daemon has them. */
  plugins: NetworkPlugins | undefined;
  /** The swarm's networks for standalone containers, once the daemon has its cluster part. */
  swarm: SwarmAttacher | undefined;

  constructor(
    readonly host: NetworkHost,
    readonly events: EventPublisher,
    readonly opts: NetworkServiceOptions,
  ) {
    this.store = new NetworkStore(opts.state);
    this.mtu = opts.mtu ?? DEFAULT_MTU;
    this.ulaPool = ulaPrefix(opts.ipv6Seed ?? `${opts.dataRoot}\n${machineFacts().machineId}`);
  }

  isPredefined(entry: NetworkEntry): boolean {
    return (PREDEFINED_NETWORKS as readonly string[]).includes(entry.network.Name);
  }

  /** The `network connect` or `disconnect` event of a container on this network. */
  publishEndpoint(action: 'connect' | 'disconnect', entry: NetworkEntry, containerId: string): void {
    this.events.publish('network', action, entry.network.Id, { container: containerId, name: entry.network.Name, type: entry.network.Driver });
  }

  /**
   * Writes a network's endpoints after a change. Those of host and none hold nothing but their container, so
   * they are kept in memory only (two writes fewer per container start and exit) and rebuilt at daemon
   * start from the running containers' records (recover).
   */
  async saveEndpoints(entry: NetworkEntry): Promise<void> {
    if (entry.network.Driver === 'bridge' || entry.network.Driver === 'overlay' || entry.remote) await this.store.save(entry);
  }

  mtuOf(entry: NetworkEntry): number {
    const mtu = Number(entry.network.Options['com.docker.network.driver.mtu']);
    return Number.isInteger(mtu) && mtu > 0 ? mtu : this.mtu;
  }

  byName(name: string): NetworkEntry | undefined {
    for (const entry of this.entries.values()) if (entry.network.Name === name) return entry;
    return undefined;
  }

  /** Finds a network by full id, then by name, then by a unique id prefix. */
  find(ref: string): NetworkEntry {
    const direct = this.entries.get(ref) ?? this.byName(ref);
    if (direct) return direct;
    if (/^[0-9a-f]+$/.test(ref)) {
      const matches = [...this.entries.values()].filter((e) => e.network.Id.startsWith(ref));
      if (matches.length === 1) return matches[0];
      if (matches.length > 1) throw new InvalidParameter(`network ${ref} is ambiguous (${matches.length} matches found based on ID prefix)`);
    }
    throw new NotFound(`network ${ref} not found`);
  }

  hasIPv6(entry: NetworkEntry): boolean {
    return entry.network.EnableIPv6 && ipv6Pool(entry.network) !== undefined;
  }
}
