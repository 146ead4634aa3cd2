/**
 * The network service: the predefined networks (bridge, host, none) and user-defined bridge networks,
 * their store and address allocation, their Linux bridges and firewall rules, and the per-container
 * connect/disconnect the container engine calls.
 */
import { Conflict, errorMessage, Forbidden, InvalidParameter, NotFound } from '../../errors.js';
import type { EventBus } from '../events.js';
import { newId } from '../../util/ids.js';
import { nowNano, parseTimestamp, rfc3339Nano } from '../../util/json.js';
import { matchLabels, matchNotLabels } from '../filters.js';
import { log } from '../../util/log.js';
import {
  contains,
  defaultBridgeCandidates,
  formatIPv4,
  formatSubnet,
  macFromIPv4,
  overlaps,
  parseCIDR,
  parseIPv4,
  parseMac,
  subnetSize,
  type Subnet,
} from './ipv4.js';
import { contains6, formatIPv6, formatSubnet6, overlaps6, parseCIDR6, parseIPv6, poolSubnets, subnetSize6, ulaPrefix, type Subnet6 } from '../../util/ipv6.js';
import { IPV4, IPV6, pickAddress } from './addresses.js';
import { parseCreateRequest, type NetworkCreateSpec } from './create.js';
import { allocatePorts, isIPv6HostIp, parsePortRequests, portMap } from './ports.js';
import { readFileSync } from 'node:fs';
import { NetworkStore, type NetworkEntry } from './store.js';
import { compileLinear } from '../regexp.js';
import type { ContainerNetworkAttachment, ContainerNetworking, PlanExtras, PlanOptions, EndpointRecord, LiveContainer, EndpointRequest, EndpointSettings, NetworkPlan, NetworkRecord, IPAMPool } from './types.js';
import type { DnsAnswers, PortMapping, NetworkHost } from '../../host/host.js';

export const PREDEFINED_NETWORKS = ['bridge', 'host', 'none'] as const;
type PredefinedName = (typeof PREDEFINED_NETWORKS)[number];
const DRIVER_OF: Record<PredefinedName, string> = { bridge: 'bridge', host: 'host', none: 'null' };

export const DEFAULT_MTU = 1500;

/**
 * The key of a container's EndpointsConfig that says its NetworkMode's network is not joined: the container
 * left it (network disconnect) and joins only the networks its EndpointsConfig names, loopback only when none.
 * No network can have this name (a name starts with a letter or digit).
 */
export const DETACHED_KEY = '.detached';

export interface NetworkServiceOptions {
  dataRoot: string;
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

function machineId(): string {
  try {
    return readFileSync('/etc/machine-id', 'utf8').trim();
  } catch {
    return '';
  }
}

/** A network in the API's shape with its containers (and allocation status). */
export interface NetworkView extends NetworkRecord {
  Containers: Record<string, { Name: string; EndpointID: string; MacAddress: string; IPv4Address: string; IPv6Address: string }>;
  Status?: { IPAM: { Subnets: Record<string, { IPsInUse: number; DynamicIPsAvailable: number }> } };
}

type EventPublisher = Pick<EventBus, 'publish'>;

/** Serialises the service's state changes (allocation, store writes). */
class Mutex {
  private tail: Promise<unknown> = Promise.resolve();
  run<T>(fn: () => Promise<T>): Promise<T> {
    const next = this.tail.then(fn, fn);
    this.tail = next.catch(() => undefined);
    return next;
  }
}

/**
 * The `id` and `name` filters: each value matches itself, or as a Go regular expression somewhere in the
 * text; an absent filter matches everything.
 */
function patternFilter(values: string[] | undefined, what: string): (text: string) => boolean {
  if (!values?.length) return () => true;
  const patterns = values.map((v) => ({ exact: v, re: compileLinear(v, `filter '${what}'`) }));
  return (text) => patterns.some((p) => p.exact === text || p.re.test(text));
}

function randomInterfaceName(): string {
  return `veth${newId().slice(0, 7)}`;
}

export class NetworkService implements ContainerNetworking {
  private readonly store: NetworkStore;
  private readonly entries = new Map<string, NetworkEntry>();
  private readonly lock = new Mutex();
  private readonly mtu: number;
  /** The /48 the default IPv6 subnets of new networks come from. */
  private readonly ulaPool: Subnet6;

  constructor(
    private readonly host: NetworkHost,
    private readonly events: EventPublisher,
    private readonly opts: NetworkServiceOptions,
  ) {
    this.store = new NetworkStore(opts.dataRoot);
    this.mtu = opts.mtu ?? DEFAULT_MTU;
    this.ulaPool = ulaPrefix(opts.ipv6Seed ?? `${opts.dataRoot}\n${machineId()}`);
  }

  // ---------------------------------------------------------------- daemon start

  /** Loads the store, creates the predefined networks once (stable ids), and builds the default bridge. */
  async init(): Promise<void> {
    for (const entry of await this.store.load()) this.entries.set(entry.network.Id, entry);
    for (const name of PREDEFINED_NETWORKS) {
      if (this.byName(name)) continue;
      const entry: NetworkEntry = { network: this.newPredefined(name), endpoints: new Map() };
      this.entries.set(entry.network.Id, entry);
      await this.store.save(entry);
    }
    await this.setUpDefaultBridge();
    for (const entry of this.entries.values()) {
      if (entry.network.Driver !== 'bridge' || this.isPredefined(entry)) continue;
      // One network that cannot come up (its range now taken by the host, say) does not stop the engine.
      await this.setUpBridge(entry).catch((err) => {
        log.error('cannot bring up the bridge of a network', { network: entry.network.Name, bridge: entry.bridge, error: errorMessage(err) });
      });
    }
  }

  private isPredefined(entry: NetworkEntry): boolean {
    return (PREDEFINED_NETWORKS as readonly string[]).includes(entry.network.Name);
  }

  /** The `network connect` or `disconnect` event of a container on this network. */
  private publishEndpoint(action: 'connect' | 'disconnect', entry: NetworkEntry, containerId: string): void {
    this.events.publish('network', action, entry.network.Id, { container: containerId, name: entry.network.Name, type: entry.network.Driver });
  }

  /**
   * Writes a network's endpoints after a change. Those of host and none hold nothing but their container, so
   * they are kept in memory only (two writes fewer per container start and exit) and rebuilt at daemon
   * start from the running containers' records (recover).
   */
  private async saveEndpoints(entry: NetworkEntry): Promise<void> {
    if (entry.network.Driver === 'bridge') await this.store.save(entry);
  }

  /** Brings up the bridge of a user-defined network and installs its rules (idempotent). */
  private async setUpBridge(entry: NetworkEntry): Promise<void> {
    const pool = ipv4Pool(entry.network)!;
    const parsed = parseCIDR(pool.Subnet)!;
    const pool6 = entry.network.EnableIPv6 ? ipv6Pool(entry.network) : undefined;
    await this.host.ensureBridge({
      name: entry.bridge!,
      gateway: pool.Gateway!,
      prefixLen: parsed.subnet.prefix,
      subnet: pool.Subnet,
      mtu: this.mtuOf(entry),
      ...(pool6 ? { ipv6: { gateway: pool6.Gateway!, prefixLen: parseCIDR6(pool6.Subnet)!.subnet.prefix, subnet: pool6.Subnet } } : {}),
    });
    // As dockerd: IPv6 forwarding is turned on (for the whole host) when a network needs it.
    if (pool6) await this.host.enableIPv6Forwarding();
    if (this.opts.iptables) {
      await this.host.ensureNat({
        bridge: entry.bridge!,
        subnet: pool.Subnet,
        ...(pool6 ? { subnet6: pool6.Subnet } : {}),
        masquerade: entry.network.Options['com.docker.network.bridge.enable_ip_masquerade'] !== 'false',
        internal: entry.network.Internal,
        isolateFrom: this.isolationOf(entry),
        icc: entry.network.Options['com.docker.network.bridge.enable_icc'] !== 'false',
      });
    }
  }

  /**
   * The bridges a network's containers must not reach, as Docker isolates networks from each other:
   * every `br-` bridge (user-defined networks of any engine) and this engine's other bridges.
   */
  private isolationOf(entry: NetworkEntry): string[] {
    const others = [...this.entries.values()]
      .filter((e) => e !== entry && e.bridge && !e.bridge.startsWith('br-'))
      .map((e) => e.bridge!);
    return ['br-+', ...others];
  }

  private mtuOf(entry: NetworkEntry): number {
    const mtu = Number(entry.network.Options['com.docker.network.driver.mtu']);
    return Number.isInteger(mtu) && mtu > 0 ? mtu : this.mtu;
  }

  private newPredefined(name: PredefinedName): NetworkRecord {
    return {
      Name: name,
      Id: newId(),
      Created: rfc3339Nano(nowNano()),
      Scope: 'local',
      Driver: DRIVER_OF[name],
      EnableIPv4: true,
      EnableIPv6: false,
      IPAM: { Driver: 'default', Options: {}, Config: [] },
      Internal: false,
      Attachable: false,
      Ingress: false,
      ConfigFrom: { Network: '' },
      ConfigOnly: false,
      Options: {},
      Labels: {},
    };
  }

  /** Picks the bridge's subnet, brings the bridge up and installs its rules. */
  private async setUpDefaultBridge(): Promise<void> {
    const entry = this.byName('bridge')!;
    const name = this.opts.bridgeName;
    let gateway: number;
    let subnet: Subnet;
    for (let attempt = 1; ; attempt++) {
      const choice = await this.chooseBridgeAddress(entry);
      ({ gateway, subnet } = choice);
      await this.host.ensureBridge({ name, gateway: formatIPv4(gateway), prefixLen: subnet.prefix, subnet: formatSubnet(subnet), mtu: this.mtu });
      if (!choice.picked) break;
      // Another engine starting at the same moment may have picked the same free range: check again now
      // that ours is in place, and let the later one move on after a random pause.
      const clash = (await this.host.usedSubnets(name)).some((s) => {
        const other = parseCIDR(s)?.subnet;
        return other !== undefined && overlaps(other, subnet);
      });
      if (!clash) break;
      if (attempt >= 5) throw new Conflict(`the address range ${formatSubnet(subnet)} of bridge ${name} is also used by another interface; set one with --bip`);
      log.warn('another interface took the same address range; choosing again', { bridge: name, subnet: formatSubnet(subnet) });
      await this.host.removeBridge(name);
      await new Promise((resolve) => setTimeout(resolve, 20 + Math.random() * 200));
    }
    await this.host.enableForwarding();
    entry.bridge = name;
    if (this.opts.iptables) await this.host.ensureNat({ bridge: name, subnet: formatSubnet(subnet), isolateFrom: this.isolationOf(entry) });

    entry.network.IPAM.Config = [{ Subnet: formatSubnet(subnet), Gateway: formatIPv4(gateway) }];
    entry.network.Options = {
      'com.docker.network.bridge.default_bridge': 'true',
      'com.docker.network.bridge.enable_icc': 'true',
      'com.docker.network.bridge.enable_ip_masquerade': 'true',
      'com.docker.network.bridge.host_binding_ipv4': '0.0.0.0',
      'com.docker.network.bridge.name': name,
      'com.docker.network.driver.mtu': String(this.mtu),
    };
    await this.store.save(entry);
    log.info('default bridge ready', { bridge: name, subnet: formatSubnet(subnet), gateway: formatIPv4(gateway) });
  }

  /** The bridge's address: from --bip, from the existing bridge, or `picked` among the free ranges. */
  private async chooseBridgeAddress(entry: NetworkEntry): Promise<{ gateway: number; subnet: Subnet; picked?: boolean }> {
    const name = this.opts.bridgeName;
    if (this.opts.bridgeCidr) {
      const parsed = parseCIDR(this.opts.bridgeCidr);
      if (!parsed || parsed.subnet.prefix > 30 || parsed.subnet.prefix < 8) {
        throw new InvalidParameter(`invalid --bip ${JSON.stringify(this.opts.bridgeCidr)}: expected an address and prefix such as 172.20.0.1/16 (prefix 8 to 30)`);
      }
      const { address, subnet } = parsed;
      const broadcast = subnet.base + subnetSize(subnet) - 1;
      const gateway = address === subnet.base ? subnet.base + 1 : address;
      if (gateway === broadcast) throw new InvalidParameter(`invalid --bip ${this.opts.bridgeCidr}: the broadcast address cannot be the bridge's address`);
      return { gateway, subnet };
    }
    // A bridge that already has an address (ours, from an earlier run) keeps it.
    const existing = await this.host.bridgeAddress(name);
    if (existing) {
      const parsed = parseCIDR(existing)!;
      return { gateway: parsed.address, subnet: parsed.subnet };
    }
    const used = (await this.host.usedSubnets(name)).map((s) => parseCIDR(s)?.subnet).filter((s): s is Subnet => s !== undefined);
    const free = (s: Subnet) => !used.some((u) => overlaps(u, s));
    const previous = entry.network.IPAM.Config[0];
    if (previous?.Subnet && previous.Gateway) {
      const subnet = parseCIDR(previous.Subnet)?.subnet;
      const gateway = parseIPv4(previous.Gateway);
      if (subnet && gateway !== undefined && free(subnet)) return { gateway, subnet, picked: true };
    }
    const subnet = defaultBridgeCandidates().find(free);
    if (!subnet) throw new Conflict('no free address range for the default bridge: every candidate overlaps a route of the host; set one with --bip');
    return { gateway: subnet.base + 1, subnet, picked: true };
  }

  // ---------------------------------------------------------------- lookups for the API

  private byName(name: string): NetworkEntry | undefined {
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

  private view(entry: NetworkEntry, withContainers: boolean): NetworkView {
    const network = structuredClone(entry.network) as NetworkView;
    network.Containers = {};
    // As Docker: null when no options were given.
    if (!network.IPAM.Options || Object.keys(network.IPAM.Options).length === 0) network.IPAM.Options = null;
    if (withContainers) {
      for (const ep of entry.endpoints.values()) {
        network.Containers[ep.containerId] = {
          Name: ep.containerName,
          EndpointID: ep.endpointId,
          MacAddress: ep.macAddress,
          IPv4Address: ep.ipv4 ? `${ep.ipv4}/${ep.prefixLen}` : '',
          IPv6Address: ep.ipv6 ? `${ep.ipv6}/${ep.prefixLen6}` : '',
        };
      }
      const subnets: Record<string, { IPsInUse: number; DynamicIPsAvailable: number }> = {};
      for (const pool of entry.network.IPAM.Config) {
        const subnet6 = parseCIDR6(pool.Subnet)?.subnet;
        if (subnet6) {
          // The network address (subnet-router anycast) and the gateway are reserved.
          const inUse = 2 + [...entry.endpoints.values()].filter((ep) => ep.ipv6).length;
          const available = subnetSize6(subnet6) - BigInt(inUse);
          subnets[pool.Subnet] = { IPsInUse: inUse, DynamicIPsAvailable: Number(available > BigInt(Number.MAX_SAFE_INTEGER) ? BigInt(Number.MAX_SAFE_INTEGER) : available) };
          continue;
        }
        const subnet = parseCIDR(pool.Subnet)?.subnet;
        if (!subnet) continue;
        // Network address, gateway and broadcast are reserved.
        const inUse = 3 + [...entry.endpoints.values()].filter((ep) => ep.ipv4).length;
        subnets[pool.Subnet] = { IPsInUse: inUse, DynamicIPsAvailable: Math.max(0, subnetSize(subnet) - inUse) };
      }
      network.Status = { IPAM: { Subnets: subnets } };
    }
    return network;
  }

  inspect(ref: string, opts: { scope?: string } = {}): NetworkView {
    const entry = this.find(ref);
    if (opts.scope && opts.scope !== entry.network.Scope) throw new NotFound(`network ${ref} not found`);
    return this.view(entry, true);
  }

  /** Lists networks; `filters` are validated by the api layer's key list (driver, id, label, name, type, scope, dangling). */
  list(filters: ReadonlyMap<string, string[]> = new Map()): NetworkView[] {
    const type = filters.get('type') ?? [];
    for (const t of type) if (t !== 'custom' && t !== 'builtin') throw new InvalidParameter(`invalid filter: 'type'='${t}'`);
    let dangling: boolean | undefined;
    const danglingValues = filters.get('dangling') ?? [];
    for (const v of danglingValues) {
      if (v === 'true' || v === '1') dangling = true;
      else if (v === 'false' || v === '0') dangling = false;
      else throw new InvalidParameter(`invalid filter 'dangling=${v}': expected true, false, 1 or 0`);
    }
    const idMatches = patternFilter(filters.get('id'), 'id');
    const nameMatches = patternFilter(filters.get('name'), 'name');
    const out: NetworkView[] = [];
    for (const entry of this.entries.values()) {
      const n = entry.network;
      const builtin = (PREDEFINED_NETWORKS as readonly string[]).includes(n.Name);
      const driver = filters.get('driver');
      if (driver?.length && !driver.includes(n.Driver)) continue;
      if (!idMatches(n.Id) || !nameMatches(n.Name)) continue;
      const scope = filters.get('scope');
      if (scope?.length && !scope.includes(n.Scope)) continue;
      if (type.length && !type.includes(builtin ? 'builtin' : 'custom')) continue;
      const labels = filters.get('label');
      if (labels?.length) {
        const ok = labels.every((l) => {
          const eq = l.indexOf('=');
          if (eq < 0) return l in n.Labels;
          return n.Labels[l.slice(0, eq)] === l.slice(eq + 1);
        });
        if (!ok) continue;
      }
      if (dangling === true && (builtin || entry.endpoints.size > 0)) continue;
      if (dangling === false && !(builtin || entry.endpoints.size > 0)) continue;
      out.push(this.view(entry, false));
    }
    return out.sort((a, b) => a.Name.localeCompare(b.Name));
  }

  async remove(ref: string): Promise<void> {
    return this.lock.run(async () => {
      const entry = this.find(ref);
      if (this.isPredefined(entry)) throw new Forbidden(`${entry.network.Name} is a pre-defined network and cannot be removed`);
      if (entry.endpoints.size > 0) {
        throw new Forbidden(`error while removing network: network ${entry.network.Name} id ${entry.network.Id} has active endpoints`);
      }
      await this.destroy(entry);
    });
  }

  private async destroy(entry: NetworkEntry): Promise<void> {
    if (entry.bridge) {
      await this.host.removeNat(entry.bridge);
      await this.host.removeBridge(entry.bridge);
    }
    await this.store.remove(entry.network.Id);
    this.entries.delete(entry.network.Id);
    this.events.publish('network', 'destroy', entry.network.Id, { name: entry.network.Name, type: entry.network.Driver });
  }

  /** Creates a user-defined bridge network: its record, its Linux bridge and its firewall rules. */
  async create(body: unknown): Promise<{ Id: string; Warning: string }> {
    const spec = parseCreateRequest(body);
    return this.lock.run(async () => {
      if (this.byName(spec.name)) throw new Conflict(`network with name ${spec.name} already exists`);
      const id = newId();
      const bridge = spec.bridgeName ?? `br-${id.slice(0, 12)}`;
      for (const other of this.entries.values()) {
        if (other.bridge === bridge) throw new Conflict(`the bridge ${bridge} is already used by network ${other.network.Name}`);
      }
      // A new network never takes over an interface that is already there (another engine's bridge).
      if ((await this.host.bridgeAddress(bridge)) !== undefined) throw new Conflict(`the bridge ${bridge} already exists on the host`);
      const pool = await this.choosePool(spec);
      const pool6 = spec.enableIPv6 ? await this.choosePool6(spec) : undefined;
      const network: NetworkRecord = {
        Name: spec.name,
        Id: id,
        Created: rfc3339Nano(nowNano()),
        Scope: 'local',
        Driver: 'bridge',
        EnableIPv4: true,
        EnableIPv6: spec.enableIPv6,
        IPAM: { Driver: 'default', Options: spec.ipamOptions, Config: pool6 ? [pool, pool6] : [pool] },
        Internal: spec.internal,
        Attachable: spec.attachable,
        Ingress: false,
        ConfigFrom: { Network: '' },
        ConfigOnly: false,
        Options: spec.options,
        Labels: spec.labels,
      };
      const entry: NetworkEntry = { network, endpoints: new Map(), bridge };
      if (pool6 && !spec.pool6) entry.engineSubnet6 = true;
      try {
        await this.setUpBridge(entry);
        await this.store.save(entry);
      } catch (err) {
        await this.host.removeNat(bridge).catch(() => undefined);
        await this.host.removeBridge(bridge).catch(() => undefined);
        throw err;
      }
      this.entries.set(id, entry);
      this.events.publish('network', 'create', id, { name: spec.name, type: 'bridge' });
      return { Id: id, Warning: '' };
    });
  }

  /** The pool a new network gets: the client's (if it overlaps no other network), or a free range. */
  private async choosePool(spec: NetworkCreateSpec): Promise<NetworkRecord['IPAM']['Config'][number]> {
    const ours = [...this.entries.values()]
      .map((e) => ({ name: e.network.Name, pool: ipv4Pool(e.network) }))
      .map((o) => ({ name: o.name, subnet: o.pool ? parseCIDR(o.pool.Subnet)?.subnet : undefined }))
      .filter((o): o is { name: string; subnet: Subnet } => o.subnet !== undefined);
    if (spec.pool) {
      const clash = ours.find((o) => overlaps(o.subnet, spec.pool!.subnet));
      if (clash) throw new Forbidden(`invalid pool request: Pool overlaps with other one on this address space (network ${clash.name} has ${formatSubnet(clash.subnet)})`);
      const pool: NetworkRecord['IPAM']['Config'][number] = { Subnet: formatSubnet(spec.pool.subnet), Gateway: formatIPv4(spec.pool.gateway) };
      if (spec.pool.ipRange) pool.IPRange = formatSubnet(spec.pool.ipRange);
      if (Object.keys(spec.pool.auxiliary).length > 0) pool.AuxiliaryAddresses = spec.pool.auxiliary;
      return pool;
    }
    const used = [
      ...(await this.host.usedSubnets()).map((s) => parseCIDR(s)?.subnet).filter((s): s is Subnet => s !== undefined),
      ...ours.map((o) => o.subnet),
    ];
    const subnet = defaultBridgeCandidates().find((c) => !used.some((u) => overlaps(u, c)));
    if (!subnet) throw new Forbidden('all predefined address pools have been fully subnetted: give the network a subnet (IPAM.Config)');
    return { Subnet: formatSubnet(subnet), Gateway: formatIPv4(subnet.base + 1) };
  }

  /**
   * The IPv6 pool of a new network: the client's (if it overlaps no other network's), or the first /64 of the
   * engine's unique local /48 that no network and no route or address of the host uses.
   */
  private async choosePool6(spec: NetworkCreateSpec): Promise<IPAMPool> {
    const ours = [...this.entries.values()]
      .map((e) => ({ name: e.network.Name, pool: ipv6Pool(e.network) }))
      .map((o) => ({ name: o.name, subnet: o.pool ? parseCIDR6(o.pool.Subnet)?.subnet : undefined }))
      .filter((o): o is { name: string; subnet: Subnet6 } => o.subnet !== undefined);
    if (spec.pool6) {
      const clash = ours.find((o) => overlaps6(o.subnet, spec.pool6!.subnet));
      if (clash) throw new Forbidden(`invalid pool request: Pool overlaps with other one on this address space (network ${clash.name} has ${formatSubnet6(clash.subnet)})`);
      const pool: IPAMPool = { Subnet: formatSubnet6(spec.pool6.subnet), Gateway: formatIPv6(spec.pool6.gateway) };
      if (spec.pool6.ipRange) pool.IPRange = formatSubnet6(spec.pool6.ipRange);
      if (Object.keys(spec.pool6.auxiliary).length > 0) pool.AuxiliaryAddresses = spec.pool6.auxiliary;
      return pool;
    }
    const used = [
      ...(await this.host.usedIPv6Subnets()).map((s) => parseCIDR6(s)?.subnet).filter((s): s is Subnet6 => s !== undefined),
      ...ours.map((o) => o.subnet),
    ];
    for (const candidate of poolSubnets(this.ulaPool)) {
      if (!used.some((u) => overlaps6(u, candidate))) return { Subnet: formatSubnet6(candidate), Gateway: formatIPv6(candidate.base + 1n) };
    }
    throw new Forbidden(`all the IPv6 subnets of ${formatSubnet6(this.ulaPool)} are in use: give the network an IPv6 subnet (IPAM.Config)`);
  }

  /** Removes the user-defined networks no container uses (filters: until, label, label!). */
  async prune(filters: ReadonlyMap<string, string[]> = new Map()): Promise<string[]> {
    let untilNano: bigint | undefined;
    for (const u of filters.get('until') ?? []) {
      const t = parseTimestamp(u) ?? parseDuration(u);
      if (t === undefined) throw new InvalidParameter(`invalid filter 'until=${u}': expected a timestamp or a duration such as 24h`);
      untilNano = t;
    }
    return this.lock.run(async () => {
      const removed: string[] = [];
      for (const entry of [...this.entries.values()]) {
        const n = entry.network;
        if (this.isPredefined(entry) || entry.endpoints.size > 0) continue;
        if (untilNano !== undefined && BigInt(Date.parse(n.Created)) * 1_000_000n >= untilNano) continue;
        if (!matchLabels(filters.get('label'), n.Labels) || !matchNotLabels(filters.get('label!'), n.Labels)) continue;
        await this.destroy(entry);
        removed.push(n.Name);
      }
      return removed;
    });
  }

  // ---------------------------------------------------------------- containers

  plan(networkMode: string | undefined, networkingConfig: unknown, opts: PlanOptions = {}): NetworkPlan {
    const mode = networkMode === undefined || networkMode === '' || networkMode === 'default' ? 'bridge' : networkMode;
    const ports = parsePortRequests(opts.portBindings, opts.publishAllPorts === true, opts.exposedPorts ?? []);
    const bridgeNetwork = this.byName('bridge')?.network;
    const extras: PlanExtras = { hostGateway: bridgeNetwork ? ipv4Pool(bridgeNetwork)?.Gateway : undefined };
    if (opts.dns && opts.dns.length > 0) extras.dnsServers = [...opts.dns];
    if (mode.startsWith('container:')) {
      if (ports.length > 0) throw new InvalidParameter('conflicting options: port publishing and the container type network mode');
      const ref = mode.slice('container:'.length);
      if (ref === '') throw new InvalidParameter('invalid HostConfig.NetworkMode "container:": expected container:<name|id>');
      const endpoints = this.endpointsConfig(networkingConfig);
      for (const [key, value] of Object.entries(endpoints)) {
        if (key !== mode && !isEmptyObject(value)) {
          throw new InvalidParameter(`conflicting options: a container in network mode ${mode} cannot be given NetworkingConfig.EndpointsConfig.${key}`);
        }
      }
      if (opts.macAddress) throw new InvalidParameter(`conflicting options: MacAddress cannot be set with network mode ${mode}`);
      // In the namespace of a container on a user-defined network, the embedded DNS server listens too.
      const name = ref.replace(/^\//, '');
      const ownerOnUserNetwork = [...this.entries.values()].some(
        (e) => !this.isPredefined(e) && [...e.endpoints.values()].some((ep) => ep.dns && (ep.containerName === name || ep.containerId.startsWith(name))),
      );
      if (ownerOnUserNetwork) extras.embeddedDns = true;
      return { ...extras, mode: 'container', container: ref };
    }
    let entry: NetworkEntry;
    const configured = this.endpointsConfig(networkingConfig);
    if (configured[DETACHED_KEY] === true) {
      // The NetworkMode's network was left: the first network of the EndpointsConfig is the first one now.
      const rest = Object.entries(configured).filter(([key]) => key !== DETACHED_KEY);
      if (rest.length === 0) return { ...extras, mode: 'none', networkId: '', networkName: '', endpoint: {}, detached: true };
      const [[first]] = rest;
      return this.plan(first, { EndpointsConfig: Object.fromEntries(rest) }, opts);
    }
    try {
      entry = this.find(mode);
    } catch (err) {
      if (err instanceof NotFound) {
        // Docker creates the container and fails its start instead: a 404 from create makes the docker
        // CLI try to pull the image, hiding the real error. The engine chooses with deferUnknownNetwork.
        if (opts.deferUnknownNetwork) return { ...extras, mode: 'bridge', networkId: '', networkName: mode, endpoint: {} };
        throw new NotFound(`network ${mode} not found`, { cause: err });
      }
      throw err;
    }
    const name = entry.network.Name;
    const kind: 'bridge' | 'host' | 'none' = entry.network.Driver === 'host' ? 'host' : entry.network.Driver === 'null' ? 'none' : 'bridge';
    const endpoint: EndpointRequest = {};
    if (opts.macAddress) endpoint.macAddress = parseMac(opts.macAddress, 'Config.MacAddress');
    const extra: Array<{ networkId: string; networkName: string; endpoint: EndpointRequest }> = [];

    for (const [key, raw] of Object.entries(configured)) {
      const field = `NetworkingConfig.EndpointsConfig.${key}`;
      let target: NetworkEntry;
      if (key === mode || (key === 'default' && entry.network.Name === 'bridge')) target = entry;
      else {
        try {
          target = this.find(key);
        } catch (err) {
          if (err instanceof NotFound) throw new NotFound(`network ${key} not found`, { cause: err });
          throw err;
        }
      }
      if (target === entry) {
        Object.assign(endpoint, this.parseEndpoint(entry, raw, field));
        continue;
      }
      // A second network: only bridge networks combine, and each is joined once.
      if (kind !== 'bridge' || target.network.Driver !== 'bridge') {
        if (isEmptyObject(raw)) continue;
        throw new InvalidParameter(`${field}: a container on network ${name} cannot also be connected to network ${target.network.Name}`);
      }
      if (extra.some((e) => e.networkId === target.network.Id)) continue;
      extra.push({ networkId: target.network.Id, networkName: target.network.Name, endpoint: this.parseEndpoint(target, raw, field) });
    }
    if (kind !== 'bridge' && endpoint.macAddress) {
      throw new InvalidParameter(`conflicting options: a MAC address cannot be set with network mode ${name}`);
    }
    const plan: NetworkPlan = { ...extras, mode: kind, networkId: entry.network.Id, networkName: name, endpoint };
    if (extra.length > 0) plan.extra = extra;
    // Ports are published on the bridge networks only; with host networking the container's own sockets are the host's.
    if (kind === 'bridge' && ports.length > 0) {
      // An IPv6 host address forwards to the container's IPv6 address: its first network must have IPv6.
      const v6Binding = ports.find((p) => isIPv6HostIp(p.hostIp));
      if (v6Binding && !this.hasIPv6(entry)) {
        throw new InvalidParameter(
          `invalid HostConfig.PortBindings ${v6Binding.containerPort}/${v6Binding.proto}: HostIp ${v6Binding.hostIp} publishes on IPv6 and network ${name} has no IPv6 (create it with --ipv6)`,
        );
      }
      plan.ports = ports;
    }
    if (kind === 'bridge' && [entry, ...extra.map((e) => this.entries.get(e.networkId)!)].some((e) => !this.isPredefined(e))) plan.embeddedDns = true;
    return plan;
  }

  /** Validates one EndpointsConfig entry for the network it names. */
  private parseEndpoint(entry: NetworkEntry, raw: unknown, field: string): EndpointRequest {
    const endpoint: EndpointRequest = {};
    if (raw === null || raw === undefined) return endpoint;
    if (typeof raw !== 'object' || Array.isArray(raw)) throw new InvalidParameter(`${field} must be an object`);
    const name = entry.network.Name;
    const settings = raw as Record<string, unknown>;
    const ipam = settings.IPAMConfig;
    if (ipam !== null && ipam !== undefined) {
      if (typeof ipam !== 'object' || Array.isArray(ipam)) throw new InvalidParameter(`${field}.IPAMConfig must be an object`);
      const { IPv4Address, IPv6Address, LinkLocalIPs } = ipam as Record<string, unknown>;
      if (IPv4Address !== undefined && IPv4Address !== '') {
        endpoint.ipv4Address = this.validateStaticIPv4(entry, IPv4Address, `${field}.IPAMConfig.IPv4Address`);
      }
      if (IPv6Address !== undefined && IPv6Address !== '') {
        endpoint.ipv6Address = this.validateStaticIPv6(entry, IPv6Address, `${field}.IPAMConfig.IPv6Address`);
      }
      if (LinkLocalIPs !== undefined && LinkLocalIPs !== null) {
        if (!Array.isArray(LinkLocalIPs)) throw new InvalidParameter(`${field}.IPAMConfig.LinkLocalIPs must be a list of addresses`);
        const addresses: string[] = [];
        for (const a of LinkLocalIPs) {
          // As Docker: any address but the unspecified ones (it is added to the interface with a /16 or /64).
          const v4 = typeof a === 'string' ? parseIPv4(a) : undefined;
          const v6 = typeof a === 'string' && v4 === undefined ? parseIPv6(a) : undefined;
          if ((v4 === undefined && v6 === undefined) || v4 === 0 || v6 === 0n) {
            throw new InvalidParameter(`${field}.IPAMConfig.LinkLocalIPs: invalid link-local IP address: ${typeof a === 'string' ? a : JSON.stringify(a)}`);
          }
          addresses.push(v4 !== undefined ? formatIPv4(v4) : formatIPv6(v6!));
        }
        if (addresses.length > 0) endpoint.linkLocalIPs = addresses;
      }
    }
    const links = settings.Links;
    if (links !== undefined && links !== null) {
      if (!Array.isArray(links) || links.some((l) => typeof l !== 'string')) throw new InvalidParameter(`${field}.Links must be a list of strings`);
      for (const l of links as string[]) {
        const parts = l.split(':');
        if (l === '' || parts.length > 2 || parts.some((p) => p === '')) throw new InvalidParameter(`${field}.Links: bad format for links: ${JSON.stringify(l)}`);
      }
      if (links.length > 0) endpoint.links = [...(links as string[])];
    }
    const driverOpts = settings.DriverOpts;
    if (driverOpts !== undefined && driverOpts !== null) {
      if (typeof driverOpts !== 'object' || Array.isArray(driverOpts) || Object.values(driverOpts).some((v) => typeof v !== 'string')) {
        throw new InvalidParameter(`${field}.DriverOpts must be an object of strings`);
      }
      if (Object.keys(driverOpts).length > 0) endpoint.driverOpts = { ...(driverOpts as Record<string, string>) };
    }
    const aliases = settings.Aliases;
    if (Array.isArray(aliases) && aliases.length > 0 && this.isPredefined(entry)) {
      throw new InvalidParameter(`${field}.Aliases: network-scoped aliases are supported only for containers in user-defined networks`);
    }
    if (aliases !== undefined && aliases !== null) {
      if (!Array.isArray(aliases) || aliases.some((a) => typeof a !== 'string')) throw new InvalidParameter(`${field}.Aliases must be a list of strings`);
      for (const a of aliases as string[]) {
        if (!/^[A-Za-z0-9_]([A-Za-z0-9_.-]{0,251}[A-Za-z0-9_])?$/.test(a)) throw new InvalidParameter(`${field}.Aliases: invalid alias ${JSON.stringify(a)}: expected a DNS name`);
      }
      if (aliases.length > 0) endpoint.aliases = [...new Set(aliases as string[])];
    }
    const mac = settings.MacAddress;
    if (mac !== undefined && mac !== '') {
      if (typeof mac !== 'string') throw new InvalidParameter(`${field}.MacAddress must be a string`);
      endpoint.macAddress = parseMac(mac, `${field}.MacAddress`);
    }
    return endpoint;
  }

  private endpointsConfig(networkingConfig: unknown): Record<string, unknown> {
    if (networkingConfig === null || networkingConfig === undefined) return {};
    if (typeof networkingConfig !== 'object' || Array.isArray(networkingConfig)) throw new InvalidParameter('NetworkingConfig must be an object');
    const endpoints = (networkingConfig as { EndpointsConfig?: unknown }).EndpointsConfig;
    if (endpoints === null || endpoints === undefined) return {};
    if (typeof endpoints !== 'object' || Array.isArray(endpoints)) throw new InvalidParameter('NetworkingConfig.EndpointsConfig must be an object of network names to endpoint settings');
    return endpoints as Record<string, unknown>;
  }

  private validateStaticIPv4(entry: NetworkEntry, value: unknown, field: string): string {
    const name = entry.network.Name;
    if (typeof value !== 'string') throw new InvalidParameter(`${field} must be a string`);
    const address = parseIPv4(value);
    if (address === undefined) throw new InvalidParameter(`${field}: invalid IPv4 address ${JSON.stringify(value)}`);
    if (entry.network.Driver !== 'bridge') throw new InvalidParameter(`${field}: a static address cannot be given on network ${name}`);
    const pool = ipv4Pool(entry.network);
    const subnet = pool ? parseCIDR(pool.Subnet)?.subnet : undefined;
    if (!pool || !subnet || !contains(subnet, address)) {
      throw new InvalidParameter(`${field}: ${value} is not in the subnet ${pool?.Subnet ?? '(none)'} of network ${name}`);
    }
    const broadcast = subnet.base + subnetSize(subnet) - 1;
    if (address === subnet.base || address === broadcast) throw new InvalidParameter(`${field}: ${value} is the network or broadcast address of ${pool.Subnet}`);
    if (pool.Gateway && address === parseIPv4(pool.Gateway)) throw new InvalidParameter(`${field}: ${value} is the gateway of network ${name}`);
    return value;
  }

  private validateStaticIPv6(entry: NetworkEntry, value: unknown, field: string): string {
    const name = entry.network.Name;
    if (typeof value !== 'string') throw new InvalidParameter(`${field} must be a string`);
    const address = parseIPv6(value);
    if (address === undefined) throw new InvalidParameter(`${field}: invalid IPv6 address ${JSON.stringify(value)}`);
    const pool = entry.network.EnableIPv6 ? ipv6Pool(entry.network) : undefined;
    if (entry.network.Driver !== 'bridge' || !pool) throw new InvalidParameter(`${field}: IPv6 is not enabled on network ${name}`);
    if (entry.engineSubnet6) {
      throw new InvalidParameter(`${field}: user specified IP address is supported only when connecting to networks with user configured subnets (network ${name} has no IPv6 subnet of the user's)`);
    }
    const subnet = parseCIDR6(pool.Subnet)!.subnet;
    if (!contains6(subnet, address)) throw new InvalidParameter(`${field}: ${value} is not in the subnet ${pool.Subnet} of network ${name}`);
    if (address === subnet.base) throw new InvalidParameter(`${field}: ${value} is the network address of ${pool.Subnet}`);
    if (pool.Gateway && address === parseIPv6(pool.Gateway)) throw new InvalidParameter(`${field}: ${value} is the gateway of network ${name}`);
    return formatIPv6(address);
  }

  plannedNetworks(plan: NetworkPlan): Record<string, EndpointSettings> {
    if (plan.mode === 'container' || plan.detached) return {};
    const out: Record<string, EndpointSettings> = { [plan.networkName]: this.endpointSettings(plan.networkId, undefined, plan.endpoint) };
    for (const e of plan.extra ?? []) out[e.networkName] = this.endpointSettings(e.networkId, undefined, e.endpoint);
    return out;
  }

  private endpointSettings(networkId: string, ep: EndpointRecord | undefined, request?: EndpointRequest): EndpointSettings {
    const entry = this.entries.get(networkId);
    const gateway = ep?.ipv4 && entry ? (ipv4Pool(entry.network)?.Gateway ?? '') : '';
    const gateway6 = ep?.ipv6 && entry ? (ipv6Pool(entry.network)?.Gateway ?? '') : '';
    const staticIPv4 = ep ? (ep.staticIPv4 ? ep.ipv4 : undefined) : request?.ipv4Address;
    const staticIPv6 = ep ? (ep.staticIPv6 ? ep.ipv6 : undefined) : request?.ipv6Address;
    const linkLocalIPs = ep ? ep.linkLocalIPs : request?.linkLocalIPs;
    const ipamConfig: EndpointSettings['IPAMConfig'] = staticIPv4 || staticIPv6 || linkLocalIPs ? {} : null;
    if (staticIPv4) ipamConfig!.IPv4Address = staticIPv4;
    if (staticIPv6) ipamConfig!.IPv6Address = staticIPv6;
    if (linkLocalIPs) ipamConfig!.LinkLocalIPs = [...linkLocalIPs];
    const aliases = ep ? ep.aliases : request?.aliases;
    const links = ep ? ep.links : request?.links;
    const driverOpts = ep ? ep.driverOpts : request?.driverOpts;
    const userDefined = entry !== undefined && !this.isPredefined(entry);
    // What the client gave is shown as given (null when it gave nothing), before the start too.
    return {
      IPAMConfig: ipamConfig,
      Links: links && links.length > 0 ? [...links] : null,
      Aliases: aliases && aliases.length > 0 ? [...aliases] : null,
      MacAddress: ep ? ep.macAddress : (request?.macAddress ?? ''),
      DriverOpts: driverOpts ? { ...driverOpts } : null,
      GwPriority: 0,
      NetworkID: networkId,
      EndpointID: ep?.endpointId ?? '',
      Gateway: gateway,
      IPAddress: ep?.ipv4 ?? '',
      IPPrefixLen: ep?.ipv4 ? ep.prefixLen : 0,
      IPv6Gateway: gateway6,
      GlobalIPv6Address: ep?.ipv6 ?? '',
      GlobalIPv6PrefixLen: ep?.ipv6 ? (ep.prefixLen6 ?? 0) : 0,
      DNSNames: ep && userDefined ? [ep.containerName, ...(ep.aliases ?? []), ep.containerId.slice(0, 12)] : null,
    };
  }

  renamed(containerId: string, newName: string): Promise<void> {
    return this.lock.run(async () => {
      for (const entry of this.entries.values()) {
        const ep = entry.endpoints.get(containerId);
        if (!ep) continue;
        ep.containerName = newName.replace(/^\//, '');
        await this.saveEndpoints(entry);
      }
    });
  }

  containerNetworks(containerId: string): Record<string, EndpointSettings> {
    const out: Record<string, EndpointSettings> = {};
    for (const entry of this.entries.values()) {
      const ep = entry.endpoints.get(containerId);
      if (ep) out[entry.network.Name] = this.endpointSettings(entry.network.Id, ep);
    }
    return out;
  }

  private allocate(entry: NetworkEntry, containerId: string, requested: string | undefined): { address: number; subnet: Subnet; gateway: number } {
    const pool = ipv4Pool(entry.network);
    const subnet = pool ? parseCIDR(pool.Subnet)?.subnet : undefined;
    const gateway = pool?.Gateway ? parseIPv4(pool.Gateway) : undefined;
    if (!pool || !subnet || gateway === undefined) throw new Conflict(`network ${entry.network.Name} has no IPv4 subnet`);
    const taken = this.otherAddresses(entry, containerId, (ep) => ep.ipv4);
    const address = pickAddress(IPV4, pool, BigInt(gateway), entry.network.Name, taken, requested, entry.lastAllocated);
    return { address: Number(address), subnet, gateway };
  }

  /** The addresses of one family held by the network's endpoints other than the container's. */
  private otherAddresses(entry: NetworkEntry, containerId: string, address: (ep: EndpointRecord) => string | undefined): string[] {
    const out: string[] = [];
    for (const ep of entry.endpoints.values()) {
      const a = address(ep);
      if (a && ep.containerId !== containerId) out.push(a);
    }
    return out;
  }

  private hasIPv6(entry: NetworkEntry): boolean {
    return entry.network.EnableIPv6 && ipv6Pool(entry.network) !== undefined;
  }

  /** An IPv6 address for the container on a network with EnableIPv6 (the requested one, or the next free one). */
  private allocate6(entry: NetworkEntry, containerId: string, requested: string | undefined): { address: bigint; subnet: Subnet6; gateway: bigint } {
    const pool = ipv6Pool(entry.network);
    const subnet = pool ? parseCIDR6(pool.Subnet)?.subnet : undefined;
    const gateway = pool?.Gateway ? parseIPv6(pool.Gateway) : undefined;
    if (!pool || !subnet || gateway === undefined) throw new Conflict(`network ${entry.network.Name} has no IPv6 subnet`);
    const taken = this.otherAddresses(entry, containerId, (ep) => ep.ipv6);
    const address = pickAddress(IPV6, pool, gateway, entry.network.Name, taken, requested, entry.lastAllocated6);
    return { address, subnet, gateway };
  }

  connect(container: { id: string; name: string }, plan: NetworkPlan, pid: number | undefined): Promise<ContainerNetworkAttachment> {
    if (plan.mode === 'container') return Promise.resolve({ networks: {}, sandboxKey: '', bridge: '', ports: {} });
    // Loopback only, which the runtime brought up in the container's own namespace.
    if (plan.detached) return Promise.resolve({ networks: {}, sandboxKey: pid === undefined ? '' : `/proc/${pid}/ns/net`, bridge: '', ports: {} });
    return this.lock.run(async () => {
      const joins = [{ networkId: plan.networkId, networkName: plan.networkName, endpoint: plan.endpoint }, ...(plan.extra ?? [])];
      const entries = joins.map((j) => {
        // By id, or by name when the plan predates the network (deferred) or the network was re-created.
        const entry = this.entries.get(j.networkId) ?? this.byName(j.networkName);
        if (!entry) throw new NotFound(`network ${j.networkName} not found`);
        return entry;
      });
      if (plan.mode === 'bridge' && pid === undefined) throw new InvalidParameter('a container on a bridge network needs its own network namespace');
      // For none, the runtime made the namespace and brought its loopback up (crun and runc both do).
      const joined: Array<{ entry: NetworkEntry; endpoint: EndpointRecord }> = [];
      // The first network is the container's eth0 and holds its default route; the others come as eth1...
      // The IPv6 default route goes through the first network with IPv6, which need not be the first one.
      const firstWithIPv6 = entries.findIndex((e) => this.hasIPv6(e));
      try {
        for (const [i, entry] of entries.entries()) {
          const endpoint = await this.join(entry, container, joins[i].endpoint, plan.mode === 'bridge' ? pid : undefined, i, i === 0, i === firstWithIPv6);
          joined.push({ entry, endpoint });
        }
        if (plan.mode === 'bridge' && pid !== undefined) {
          const [primary] = joined;
          if (plan.ports && plan.ports.length > 0) await this.publish(primary.entry, primary.endpoint, plan.ports);
          if (plan.embeddedDns) {
            for (const { entry, endpoint } of joined) if (!this.isPredefined(entry)) endpoint.dns = true;
            if (plan.dnsServers) primary.endpoint.dnsServers = plan.dnsServers;
            await this.host.startDns(container.id, pid, this.dnsAnswers(container.id));
            await Promise.all(joined.map(({ entry }) => this.store.save(entry)));
          }
        }
      } catch (err) {
        this.host.stopDns(container.id);
        for (const { entry, endpoint } of joined.reverse()) {
          entry.endpoints.delete(container.id);
          await this.saveEndpoints(entry).catch(() => undefined);
          if (endpoint.ports && endpoint.ports.length > 0) await this.unpublish(entry, endpoint).catch(() => undefined);
          await this.unplug(entry, endpoint).catch(() => undefined);
        }
        throw err;
      }
      const networks: Record<string, EndpointSettings> = {};
      for (const { entry, endpoint } of joined) {
        networks[entry.network.Name] = this.endpointSettings(entry.network.Id, endpoint);
        this.publishEndpoint('connect', entry, container.id);
      }
      const primary = joined[0];
      return {
        networks,
        hostsAddress: primary.endpoint.ipv4 || undefined,
        ...(primary.endpoint.ipv6 ? { hostsAddress6: primary.endpoint.ipv6 } : {}),
        sandboxKey: plan.mode === 'host' || pid === undefined ? '' : `/proc/${pid}/ns/net`,
        bridge: plan.mode === 'bridge' ? (primary.entry.bridge ?? '') : '',
        ports: portMap(primary.endpoint.ports ?? [], { ipv6: Boolean(primary.endpoint.ipv6) }),
      };
    });
  }

  /** The host ports every container holds now. */
  private publishedPorts(exceptContainerId?: string): PortMapping[] {
    const out: PortMapping[] = [];
    for (const entry of this.entries.values()) {
      for (const ep of entry.endpoints.values()) if (ep.containerId !== exceptContainerId) out.push(...(ep.ports ?? []));
    }
    return out;
  }

  /** Chooses the host ports (under the lock) and installs their forwarding rules; the choice is on disk first. */
  private async publish(entry: NetworkEntry, endpoint: EndpointRecord, requests: NonNullable<PlanExtras['ports']>): Promise<void> {
    if (!this.opts.iptables) throw new InvalidParameter('publishing ports needs the engine to manage firewall rules (--iptables)');
    const mappings = await allocatePorts(requests, this.publishedPorts(endpoint.containerId), {
      range: () => this.host.ephemeralPortRange(),
      isFree: (proto, hostIp, port) => this.host.hostPortFree(proto, hostIp, port),
    });
    endpoint.ports = mappings;
    await this.store.save(entry);
    await this.host.publishPorts({
      bridge: entry.bridge ?? this.opts.bridgeName,
      containerId: endpoint.containerId,
      address: endpoint.ipv4,
      ...(endpoint.ipv6 ? { address6: endpoint.ipv6 } : {}),
      ports: mappings,
    });
  }

  private async unpublish(entry: NetworkEntry, endpoint: EndpointRecord): Promise<void> {
    const bridge = entry.bridge ?? this.opts.bridgeName;
    await this.host.unpublishPorts({
      bridge,
      containerId: endpoint.containerId,
      address: endpoint.ipv4,
      ...(endpoint.ipv6 ? { address6: endpoint.ipv6 } : {}),
      ports: endpoint.ports ?? [],
    });
  }

  /**
   * What the embedded DNS server of one container answers: the containers of the user-defined networks it
   * shares with the asker, by name, alias, short id or `name.network`; other names go upstream.
   */
  private dnsAnswers(containerId: string): DnsAnswers {
    return {
      lookup: (rawName) => {
        const name = rawName.toLowerCase().replace(/\.$/, '');
        const found: string[] = [];
        const shared = [...this.entries.values()].filter((entry) => !this.isPredefined(entry) && entry.endpoints.has(containerId));
        const resolveIn = (entry: NetworkEntry, wanted: string) => {
          const network = entry.network.Name.toLowerCase();
          for (const ep of entry.endpoints.values()) {
            if (!ep.ipv4) continue;
            const names = [ep.containerName, ...(ep.aliases ?? [])].map((n) => n.toLowerCase());
            const matches =
              names.some((n) => n === wanted || `${n}.${network}` === wanted) || (wanted.length === 12 && ep.containerId.startsWith(wanted));
            if (!matches) continue;
            if (!found.includes(ep.ipv4)) found.push(ep.ipv4);
            if (ep.ipv6 && !found.includes(ep.ipv6)) found.push(ep.ipv6);
          }
        };
        // As Docker: the asker's own links (EndpointSettings.Links) first; a link's alias stands for the linked
        // container's name on that network, and for this asker only.
        for (const entry of shared) {
          const target = linkTarget(entry.endpoints.get(containerId)!, name, entry.network.Name.toLowerCase());
          if (target !== undefined) resolveIn(entry, target);
        }
        if (found.length > 0) return found;
        for (const entry of shared) {
          if (linkTarget(entry.endpoints.get(containerId)!, name, entry.network.Name.toLowerCase()) !== undefined) continue;
          resolveIn(entry, name);
        }
        return found.length > 0 ? found : undefined;
      },
      upstreams: () => {
        for (const entry of this.entries.values()) {
          const servers = entry.endpoints.get(containerId)?.dnsServers;
          if (servers && servers.length > 0) return servers;
        }
        return this.hostResolvers();
      },
    };
  }

  /** The host's resolvers (BERTH_DNS_UPSTREAM, a comma-separated list of ip[:port], overrides /etc/resolv.conf). */
  private hostResolvers(): string[] {
    const env = process.env.BERTH_DNS_UPSTREAM;
    if (env) return env.split(',').map((s) => s.trim()).filter(Boolean);
    try {
      return readFileSync('/etc/resolv.conf', 'utf8')
        .split('\n')
        .map((l) => l.trim().split(/\s+/))
        .filter(([k, v]) => k === 'nameserver' && v && !v.includes(':'))
        .map(([, v]) => v);
    } catch {
      return [];
    }
  }

  /**
   * Whether frames between the network's containers may skip the bridge (VethSpec.direct): only when this
   * engine's rules let all of them through, as they do unless icc is off.
   */
  private deliversDirectly(entry: NetworkEntry): boolean {
    return this.opts.iptables && entry.network.Options['com.docker.network.bridge.enable_icc'] !== 'false';
  }

  /** Deletes the endpoint's host interface, if it has one (the container's end goes with it), its direct delivery first. */
  private async unplug(entry: NetworkEntry, ep: EndpointRecord): Promise<void> {
    if (!ep.hostInterface) return;
    await this.undirect(entry, ep);
    await this.host.removeInterface(ep.hostInterface);
  }

  /** Ends the endpoint's direct delivery; a failure is only logged (the bridge still delivers). */
  private async undirect(entry: NetworkEntry, ep: EndpointRecord): Promise<void> {
    if (!ep.hostInterface || !ep.macAddress) return;
    const bridge = entry.bridge ?? this.opts.bridgeName;
    await this.host.dropDirectDelivery(bridge, ep.macAddress).catch((err) => {
      log.warn('cannot end the direct delivery of a container interface', { bridge, interface: ep.hostInterface, error: errorMessage(err) });
    });
  }

  /** Records the container's endpoint in one network and, for a bridge network, plugs it in. */
  private async join(
    entry: NetworkEntry,
    container: { id: string; name: string },
    request: EndpointRequest,
    pid: number | undefined,
    index: number,
    defaultRoute = index === 0,
    defaultRoute6 = defaultRoute,
  ): Promise<EndpointRecord> {
    const containerName = container.name.replace(/^\//, '');
    // A record left by an earlier run of this container (never disconnected) is replaced.
    const stale = entry.endpoints.get(container.id);
    if (stale) await this.unplug(entry, stale).catch(() => undefined);
    const endpoint: EndpointRecord = { containerId: container.id, containerName, endpointId: newId(), ipv4: '', prefixLen: 0, macAddress: '', pid };
    if (request.aliases) endpoint.aliases = [...request.aliases];
    if (request.links) endpoint.links = [...request.links];
    if (request.driverOpts) endpoint.driverOpts = { ...request.driverOpts };
    if (request.linkLocalIPs) endpoint.linkLocalIPs = [...request.linkLocalIPs];
    if (entry.network.Driver !== 'bridge' || pid === undefined) {
      entry.endpoints.set(container.id, endpoint);
      await this.saveEndpoints(entry);
      return endpoint;
    }
    const { address, subnet, gateway } = this.allocate(entry, container.id, request.ipv4Address);
    const v6 = this.hasIPv6(entry) ? this.allocate6(entry, container.id, request.ipv6Address) : undefined;
    endpoint.ipv4 = formatIPv4(address);
    endpoint.prefixLen = subnet.prefix;
    endpoint.macAddress = request.macAddress ?? macFromIPv4(address);
    endpoint.hostInterface = randomInterfaceName();
    endpoint.containerInterface = `eth${index}`;
    if (request.ipv4Address) endpoint.staticIPv4 = true;
    else entry.lastAllocated = endpoint.ipv4;
    if (v6) {
      endpoint.ipv6 = formatIPv6(v6.address);
      endpoint.prefixLen6 = v6.subnet.prefix;
      if (request.ipv6Address) endpoint.staticIPv6 = true;
      else entry.lastAllocated6 = endpoint.ipv6;
    }
    // The allocation is written while the interface is made: a crash in between leaves either a record that
    // recovery releases or an interface on the bridge that no record owns, which recovery removes.
    entry.endpoints.set(container.id, endpoint);
    const [saved, attached] = await Promise.allSettled([
      this.store.save(entry),
      this.host.attachVeth({
        pid,
        bridge: entry.bridge ?? this.opts.bridgeName,
        hostInterface: endpoint.hostInterface,
        containerInterface: `eth${index}`,
        address: endpoint.ipv4,
        prefixLen: subnet.prefix,
        gateway: !defaultRoute || entry.network.Internal ? undefined : formatIPv4(gateway),
        macAddress: endpoint.macAddress,
        mtu: this.mtuOf(entry),
        direct: this.deliversDirectly(entry),
        ...(endpoint.linkLocalIPs ? { linkLocal: endpoint.linkLocalIPs } : {}),
        ...(v6
          ? { ipv6: { address: endpoint.ipv6!, prefixLen: v6.subnet.prefix, gateway: !defaultRoute6 || entry.network.Internal ? undefined : formatIPv6(v6.gateway) } }
          : {}),
      }),
    ]);
    if (saved.status === 'rejected' || attached.status === 'rejected') {
      const err = attached.status === 'rejected' ? attached.reason : (saved as PromiseRejectedResult).reason;
      if (attached.status === 'fulfilled') await this.unplug(entry, endpoint).catch(() => undefined);
      entry.endpoints.delete(container.id);
      await this.store.save(entry).catch(() => undefined);
      throw new Error(`cannot connect container ${containerName} to network ${entry.network.Name}: ${errorMessage(err)}`, { cause: err });
    }
    return endpoint;
  }

  connectRunning(
    container: { id: string; name: string },
    networkRef: string,
    endpointConfig: unknown,
    pid: number,
    opts: { ownNamespace?: boolean; dns?: readonly string[] } = {},
  ): Promise<Record<string, EndpointSettings>> {
    const entry = this.find(networkRef);
    const current = [...this.entries.values()].filter((e) => e.endpoints.has(container.id));
    if (entry.network.Driver !== 'bridge' || current.some((e) => e.network.Driver !== 'bridge')) {
      throw new Forbidden('container cannot be disconnected from host network or connected to host network');
    }
    if (current.length === 0 && !opts.ownNamespace) throw new Forbidden(`container ${container.name.replace(/^\//, '')} has no network namespace of its own to connect`);
    const request = this.parseEndpoint(entry, endpointConfig, 'EndpointConfig');
    return this.lock.run(async () => {
      if (entry.endpoints.has(container.id)) {
        throw new Forbidden(`endpoint with name ${container.name.replace(/^\//, '')} already exists in network ${entry.network.Name}`);
      }
      const used = new Set(current.map((e) => e.endpoints.get(container.id)?.containerInterface ?? 'eth0'));
      let index = 0;
      while (used.has(`eth${index}`)) index++;
      // eth0 holds the default route; a later network gets none, even when it takes the name eth0 again.
      // A container without IPv6 so far takes its IPv6 default route from the network it joins now.
      const withIPv6 = current.some((e) => e.endpoints.get(container.id)?.ipv6);
      const endpoint = await this.join(entry, container, request, pid, index, index === 0 && current.length === 0, !withIPv6);
      if (!this.isPredefined(entry)) {
        // As Docker: a container that joins its first user-defined network (from the default bridge, say) gets
        // the embedded DNS server; the engine points its resolv.conf at it (servesDns).
        const served = current.some((e) => e.endpoints.get(container.id)?.dns);
        endpoint.dns = true;
        if (!served && opts.dns && opts.dns.length > 0) endpoint.dnsServers = [...opts.dns];
        try {
          if (!served) await this.host.startDns(container.id, pid, this.dnsAnswers(container.id));
          await this.store.save(entry);
        } catch (err) {
          entry.endpoints.delete(container.id);
          await this.store.save(entry).catch(() => undefined);
          await this.unplug(entry, endpoint).catch(() => undefined);
          throw err;
        }
      }
      this.publishEndpoint('connect', entry, container.id);
      return this.containerNetworks(container.id);
    });
  }

  /** The host ends of the container's veths (its bridge endpoints), in no particular order. */
  hostInterfaces(containerId: string): string[] {
    const out: string[] = [];
    for (const entry of this.entries.values()) {
      const ep = entry.endpoints.get(containerId);
      if (ep?.hostInterface) out.push(ep.hostInterface);
    }
    return out;
  }

  servesDns(containerId: string): boolean {
    for (const entry of this.entries.values()) if (entry.endpoints.get(containerId)?.dns) return true;
    return false;
  }

  /** Validates an endpoint config (network connect of a container that is not running) for the network. */
  checkEndpoint(networkRef: string, endpointConfig: unknown, field: string): void {
    this.parseEndpoint(this.find(networkRef), endpointConfig, field);
  }

  /** A container that is not running left the network's configuration: `network disconnect`, as Docker. */
  disconnectedConfigured(containerId: string, networkRef: string): void {
    const entry = this.find(networkRef);
    this.publishEndpoint('disconnect', entry, containerId);
  }

  disconnectOne(containerId: string, networkRef: string): Promise<Record<string, EndpointSettings>> {
    const entry = this.find(networkRef);
    return this.lock.run(async () => {
      const ep = entry.endpoints.get(containerId);
      if (!ep) throw new NotFound(`container ${containerId} is not connected to network ${entry.network.Name}`);
      if (entry.network.Driver !== 'bridge') throw new Forbidden('container cannot be disconnected from host network or connected to host network');
      entry.endpoints.delete(containerId);
      await this.store.save(entry);
      await this.unplug(entry, ep);
      // As Docker: the embedded DNS server keeps serving a container that leaves its last user-defined network
      // (its resolv.conf still names it); another endpoint of the container carries the mark (and its
      // upstreams), so that a daemon restart serves it again.
      if (ep.dns) {
        const rest = [...this.entries.values()].filter((e) => e.network.Driver === 'bridge' && e.endpoints.has(containerId));
        const heir = rest.find((e) => e.endpoints.get(containerId)!.dns) ? undefined : rest[0];
        if (heir) {
          const kept = heir.endpoints.get(containerId)!;
          kept.dns = true;
          if (ep.dnsServers && !kept.dnsServers) kept.dnsServers = ep.dnsServers;
          await this.store.save(heir);
        }
      }
      this.publishEndpoint('disconnect', entry, containerId);
      return this.containerNetworks(containerId);
    });
  }

  disconnect(containerId: string): Promise<void> {
    return this.lock.run(async () => {
      this.host.stopDns(containerId);
      for (const entry of this.entries.values()) {
        const ep = entry.endpoints.get(containerId);
        if (!ep) continue;
        if (ep.ports && ep.ports.length > 0) {
          await this.unpublish(entry, ep).catch((err) => {
            log.warn('cannot remove the port rules of a container', { id: containerId, error: errorMessage(err) });
          });
        }
        entry.endpoints.delete(containerId);
        await this.saveEndpoints(entry);
        // Before the address can be given to another container (whose MAC would be the same).
        await this.undirect(entry, ep);
        // The veth normally dies with the namespace; the kernel may not have got to it yet. Nobody waits for
        // its removal: its name is never used again.
        if (ep.hostInterface) {
          void this.host.removeInterface(ep.hostInterface).catch((err) => {
            log.warn('cannot remove a container interface', { interface: ep.hostInterface, error: errorMessage(err) });
          });
        }
        this.publishEndpoint('disconnect', entry, containerId);
      }
    });
  }

  recover(live: ReadonlyMap<string, LiveContainer>): Promise<void> {
    return this.lock.run(async () => {
      for (const entry of this.entries.values()) {
        const gone = [...entry.endpoints.values()].filter((ep) => !live.has(ep.containerId));
        for (const ep of gone) {
          if (ep.ports && ep.ports.length > 0) await this.unpublish(entry, ep).catch(() => undefined);
          await this.undirect(entry, ep);
          entry.endpoints.delete(ep.containerId);
        }
        if (entry.network.Driver !== 'bridge') {
          for (const [id, c] of live) {
            const settings = Object.values(c.networks).find((n) => n.NetworkID === entry.network.Id);
            if (!settings || entry.endpoints.has(id)) continue;
            entry.endpoints.set(id, { containerId: id, containerName: c.name.replace(/^\//, ''), endpointId: settings.EndpointID || newId(), ipv4: '', prefixLen: 0, macAddress: '' });
          }
        }
        if (gone.length > 0) {
          await this.saveEndpoints(entry);
          log.info('released network endpoints of containers that are not running', { network: entry.network.Name, count: gone.length });
        }
        for (const ep of gone) {
          this.publishEndpoint('disconnect', entry, ep.containerId);
        }
        const bridge = entry.network.Driver === 'bridge' ? (entry.bridge ?? (entry.network.Name === 'bridge' ? this.opts.bridgeName : undefined)) : undefined;
        if (!bridge) continue;
        if (this.opts.iptables) {
          const holders = new Set([...entry.endpoints.values()].filter((ep) => (ep.ports ?? []).length > 0).map((ep) => ep.containerId));
          await this.host.removeStalePortRules(bridge, holders, { ipv6: this.hasIPv6(entry) }).catch((err) => log.warn('cannot remove stale port rules', { bridge, error: errorMessage(err) }));
        }
        const owned = new Set([...entry.endpoints.values()].map((ep) => ep.hostInterface).filter(Boolean));
        for (const port of await this.host.bridgePorts(bridge)) {
          if (owned.has(port)) continue;
          log.info('removing an interface no live container owns', { bridge, interface: port });
          await this.host.removeInterface(port).catch((err) => log.warn('cannot remove interface', { interface: port, error: errorMessage(err) }));
        }
      }
      // The DNS listeners died with the previous daemon: the live containers get theirs again.
      const served = new Set<string>();
      for (const entry of this.entries.values()) {
        for (const ep of entry.endpoints.values()) {
          if (!ep.dns || !ep.pid || served.has(ep.containerId)) continue;
          served.add(ep.containerId);
          await this.host.startDns(ep.containerId, ep.pid, this.dnsAnswers(ep.containerId)).catch((err) => {
            log.warn('cannot serve DNS to a container again', { id: ep.containerId, error: errorMessage(err) });
          });
        }
      }
    });
  }

  /** The default bridge's name, subnet and gateway (for /info and tests). */
  defaultBridge(): { name: string; subnet: string; gateway: string } {
    const pool = ipv4Pool(this.byName('bridge')!.network)!;
    return { name: this.opts.bridgeName, subnet: pool.Subnet, gateway: pool.Gateway ?? '' };
  }

  /** Removes the default bridge and its firewall rules from the host (used by tests and uninstall). */
  async removeDefaultBridge(): Promise<void> {
    await this.host.removeNat(this.opts.bridgeName);
    await this.host.removeBridge(this.opts.bridgeName);
  }
}

/** The container name an endpoint's link alias (`alias` or `alias.network`) stands for, if `name` is one. */
function linkTarget(ep: EndpointRecord, name: string, network: string): string | undefined {
  for (const link of ep.links ?? []) {
    const [target, alias = target] = link.split(':');
    const a = alias.replace(/^.*\//, '').toLowerCase();
    if (a === name || `${a}.${network}` === name) return target.replace(/^\//, '').toLowerCase();
  }
  return undefined;
}

/** A Go duration such as 24h, 90m or 1h30m, taken back from now; undefined when malformed. */
function parseDuration(text: string): bigint | undefined {
  if (!/^(\d+(\.\d+)?(h|m|s|ms))+$/.test(text)) return undefined;
  const unit: Record<string, number> = { h: 3600e3, m: 60e3, s: 1e3, ms: 1 };
  let ms = 0;
  for (const [, n, , u] of text.matchAll(/(\d+(\.\d+)?)(ms|h|m|s)/g)) ms += Number(n) * unit[u];
  return nowNano() - BigInt(Math.round(ms)) * 1_000_000n;
}

function isEmptyObject(value: unknown): boolean {
  if (value === null || value === undefined) return true;
  if (typeof value !== 'object') return false;
  return Object.values(value as Record<string, unknown>).every(
    (v) => v === null || v === undefined || v === '' || (Array.isArray(v) && v.length === 0) || (typeof v === 'object' && isEmptyObject(v)),
  );
}

