/**
 * Connecting and disconnecting a container to and from a network (POST /networks/{id}/connect and
 * /disconnect). A running container joins or leaves at once; for one that is not running (created, exited)
 * only its configuration changes, as Docker does: it joins its configured networks at its next start. In
 * both cases the container's configuration (HostConfig.NetworkMode and its EndpointsConfig) keeps the
 * change, so that the next start plans the same networks. The container engine supplies the narrow lookup
 * below and serialises each change with the container's other state changes.
 *
 * Below it, the network side of joining: a container's planned networks at its start (connect), and one more
 * network for a running container (connectRunning).
 */
import { Forbidden, InvalidParameter, NotFound } from '../../errors.js';
import type { ContainerNetworkAttachment, ContainerNetworking, EndpointRecord, EndpointRequest, EndpointSettings, NetworkPlan } from './types.js';
import { portMap } from './ports.js';
import type { NetworkEntry } from './store.js';
import { DETACHED_KEY, type NetworkContext } from './context.js';
import { parseEndpoint } from './plan.js';
import { containerNetworks, endpointSettings, join, unplug } from './endpoint.js';
import { publish, unpublish } from './publish.js';
import { dnsAnswers } from './dns.js';
import { abandonSwarm, checkSwarmPorts, isSwarmEntry, joinGateway, mayBeSwarm, placeholder, prepareSwarm, recordSwarm, sandboxOnSwarm, type PreparedSwarm } from './swarm.js';

/** The container's network configuration as a change sees it (under the container's lock). */
export interface ContainerNetworkConfig {
  Id: string;
  Name: string;
  Running: boolean;
  Pid: number;
  /** HostConfig.NetworkMode as stored. */
  NetworkMode: string;
  /** The endpoint configs by network name (a copy: the change returns the new one). */
  EndpointsConfig: Record<string, unknown>;
  /** HostConfig.Dns: the embedded DNS server's upstreams when the container gets it. */
  Dns?: readonly string[];
  /** The container has a network policy (a sandbox). */
  Sandbox?: boolean;
}

/** What a change gives back; `Networks` undefined: the engine shows the planned (not yet joined) endpoints. */
export interface ContainerNetworkChange {
  NetworkMode?: string;
  EndpointsConfig: Record<string, unknown>;
  Networks?: Record<string, EndpointSettings>;
}

/** What connect and disconnect need of the container engine. */
export interface ContainerLookup {
  /** The container by id, name or unique id prefix; throws NotFound. */
  get(ref: string): { Id: string; Name: string };
  /**
   * Runs `change` under the container's lock and records what it returns (undefined: nothing changes):
   * the network configuration, and the endpoints inspect and list show.
   */
  configureNetworks(id: string, change: (current: ContainerNetworkConfig) => Promise<ContainerNetworkChange | undefined>): Promise<void>;
}

export interface NetworkContainerBackend {
  connectContainer(networkRef: string, containerRef: string, endpointConfig: unknown): Promise<void>;
  disconnectContainer(networkRef: string, containerRef: string, force: boolean): Promise<void>;
}

/** The networking parts used here. */
export type ConnectorNetworking = Pick<ContainerNetworking, 'connectRunning' | 'disconnectOne'> & {
  find(ref: string): { network: { Id: string; Name: string; Driver: string } };
  /** Validates an EndpointConfig for the network; throws InvalidParameter naming `field`. */
  checkEndpoint(networkRef: string, endpointConfig: unknown, field: string): void;
  /** Publishes `network disconnect` for a container that left a network's configuration while not running. */
  disconnectedConfigured(containerId: string, networkRef: string): void;
  /** Whether this node is in a swarm (a network unknown here may be a swarm network). */
  inSwarm?(): boolean;
};

// Docker's messages for the combinations a container's network namespace cannot take.
const SHARED_NETWORK = 'container sharing network namespace with another container or host cannot be connected to any other network';
const HOST_NETWORK = 'container cannot be disconnected from host network or connected to host network';
const NONE_NETWORK = 'container cannot be connected to multiple networks with one of the networks in private (none) mode';

function modeOf(networkMode: string): string {
  return networkMode === '' || networkMode === 'default' ? 'bridge' : networkMode;
}

export function containerConnector(networking: ConnectorNetworking, containers: ContainerLookup): NetworkContainerBackend {
  const tryFind = (ref: string) => {
    try {
      return networking.find(ref).network;
    } catch (err) {
      if (err instanceof NotFound) return undefined;
      throw err;
    }
  };
  /** The network ids the container is configured with: its NetworkMode's first, then its EndpointsConfig's. */
  const configured = (current: ContainerNetworkConfig): { modeId?: string; modeDriver?: string; keysById: Map<string, string[]> } => {
    const mode = modeOf(current.NetworkMode);
    const modeNetwork = mode.startsWith('container:') ? undefined : tryFind(mode);
    const keysById = new Map<string, string[]>();
    // A container that left its NetworkMode's network is configured with its EndpointsConfig's only.
    if (modeNetwork && current.EndpointsConfig[DETACHED_KEY] !== true) keysById.set(modeNetwork.Id, []);
    for (const key of Object.keys(current.EndpointsConfig)) {
      const network = key === 'default' && modeNetwork?.Name === 'bridge' ? modeNetwork : tryFind(key);
      if (!network) continue;
      keysById.set(network.Id, [...(keysById.get(network.Id) ?? []), key]);
    }
    return { modeId: modeNetwork?.Id, modeDriver: modeNetwork?.Driver, keysById };
  };

  /** The network to connect to; in a swarm, one unknown here stands for the swarm network of that name. */
  const findTarget = (ref: string) => {
    const found = tryFind(ref);
    if (found) return found;
    if (networking.inSwarm?.()) return { Id: '', Name: ref, Driver: 'overlay' };
    return networking.find(ref).network;
  };

  return {
    async connectContainer(networkRef, containerRef, endpointConfig) {
      const target = findTarget(networkRef);
      const c = containers.get(containerRef);
      await containers.configureNetworks(c.Id, async (current) => {
        const name = current.Name.replace(/^\//, '');
        const endpointsConfig = { ...current.EndpointsConfig };
        if (current.Sandbox && target.Driver === 'overlay') throw new InvalidParameter(sandboxOnSwarm(target.Name));
        if (current.Running && current.Pid > 0) {
          const detached = endpointsConfig[DETACHED_KEY] === true;
          const networks = await networking.connectRunning({ id: current.Id, name }, networkRef, endpointConfig, current.Pid, { ownNamespace: detached, dns: current.Dns });
          if (detached && tryFind(modeOf(current.NetworkMode))?.Id === target.Id) delete endpointsConfig[DETACHED_KEY];
          // A swarm network has a local record once joined: the configuration keeps its name.
          const key = target.Id ? target.Name : (tryFind(networkRef)?.Name ?? networkRef);
          return { EndpointsConfig: { ...endpointsConfig, [key]: endpointConfig ?? {} }, Networks: networks };
        }
        if (modeOf(current.NetworkMode).startsWith('container:')) throw new InvalidParameter(SHARED_NETWORK);
        const { modeId, modeDriver, keysById } = configured(current);
        // Docker's order: the endpoint config, then host, then a network already configured (left as it is,
        // without an error), then the combinations.
        if (target.Id) networking.checkEndpoint(target.Id, endpointConfig, 'EndpointConfig');
        if (target.Driver === 'host' && modeDriver !== 'host') throw new InvalidParameter(HOST_NETWORK);
        if (keysById.has(target.Id)) return undefined;
        if (modeDriver === 'host') throw new InvalidParameter(SHARED_NETWORK);
        if (modeDriver === 'null' || target.Driver === 'null') throw new InvalidParameter(NONE_NETWORK);
        // Back on its NetworkMode's network, a container that had left it is configured as before.
        if (modeId === target.Id) delete endpointsConfig[DETACHED_KEY];
        return { EndpointsConfig: { ...endpointsConfig, [target.Name]: endpointConfig ?? {} } };
      });
    },

    async disconnectContainer(networkRef, containerRef, _force) {
      const target = networking.find(networkRef).network;
      const c = containers.get(containerRef);
      let leftConfiguration = false;
      await containers.configureNetworks(c.Id, async (current) => {
        const name = current.Name.replace(/^\//, '');
        const { modeId, keysById } = configured(current);
        const running = current.Running && current.Pid > 0;
        if (!running && !keysById.has(target.Id)) throw new NotFound(`container ${name} is not connected to the network ${target.Name}`);
        // The rest of the configuration: without the network's entries; when the network was the container's
        // NetworkMode, the next configured network becomes the first (eth0, default route) at the next start.
        // Leaving the last network is allowed, as Docker: the container keeps its NetworkMode and runs with
        // loopback only (the EndpointsConfig says its NetworkMode's network is left) until it joins one again.
        const endpointsConfig = { ...current.EndpointsConfig };
        for (const key of keysById.get(target.Id) ?? []) delete endpointsConfig[key];
        let networkMode: string | undefined;
        if (target.Id === modeId) {
          const next = [...keysById.entries()].find(([id, keys]) => id !== target.Id && keys.length > 0);
          if (next) networkMode = networking.find(next[0]).network.Name;
          else endpointsConfig[DETACHED_KEY] = true;
        }
        if (running) {
          const networks = await networking.disconnectOne(current.Id, networkRef);
          return { NetworkMode: networkMode, EndpointsConfig: endpointsConfig, Networks: networks };
        }
        leftConfiguration = true;
        return { NetworkMode: networkMode, EndpointsConfig: endpointsConfig };
      });
      // As Docker: leaving a stopped container's configuration is a `disconnect` too (joining one is not:
      // `connect` comes when the container joins at its start).
      if (leftConfiguration) networking.disconnectedConfigured(c.Id, target.Id);
    },
  };
}

/** Joins a starting container to its planned networks: endpoints, published ports, the embedded DNS server. */
export function connect(ctx: NetworkContext, container: { id: string; name: string }, plan: NetworkPlan, pid: number | undefined): Promise<ContainerNetworkAttachment> {
  if (plan.mode === 'container') return Promise.resolve({ networks: {}, sandboxKey: '', bridge: '', ports: {} });
  // Loopback only, which the runtime brought up in the container's own namespace.
  if (plan.detached) return Promise.resolve({ networks: {}, sandboxKey: pid === undefined ? '' : `/proc/${pid}/ns/net`, bridge: '', ports: {} });
  const joins = [{ networkId: plan.networkId, networkName: plan.networkName, endpoint: plan.endpoint }, ...(plan.extra ?? [])];
  return prepareSwarmJoins(ctx, container, joins, plan.mode === 'bridge' ? pid : undefined, (prepared) => ctx.lock.run(async () => {
    const entries = joins.map((j, i) => {
      if (prepared.has(i)) return placeholder(j.networkName);
      // By id, or by name when the plan predates the network (deferred) or the network was re-created.
      const entry = ctx.entries.get(j.networkId) ?? ctx.byName(j.networkName);
      // A network unknown here may be a swarm network, which the container asks the swarm for (swarm.ts).
      if (!entry && mayBeSwarm(ctx)) return placeholder(j.networkName);
      if (!entry) throw new NotFound(`network ${j.networkName} not found`);
      return entry;
    });
    if (plan.mode === 'bridge' && pid === undefined) throw new InvalidParameter('a container on a bridge network needs its own network namespace');
    // For none, the runtime made the namespace and brought its loopback up (crun and runc both do).
    const joined: Array<{ entry: NetworkEntry; endpoint: EndpointRecord }> = [];
    // The first network is the container's eth0 and holds its default route; the others come as eth1...
    // The IPv6 default route goes through the first network with IPv6, which need not be the first one.
    const firstWithIPv6 = entries.findIndex((e) => ctx.hasIPv6(e));
    try {
      for (const [i, entry] of entries.entries()) {
        const ready = prepared.get(i);
        if (ready) {
          joined.push(await recordSwarm(ctx, ready));
          prepared.delete(i);
          continue;
        }
        if (isSwarmEntry(entry)) throw new InvalidParameter(`network ${entry.network.Name} is a swarm network: a container joins it with a network namespace of its own`);
        const endpoint = await join(ctx, entry, container, joins[i].endpoint, plan.mode === 'bridge' ? pid : undefined, i, i === 0, i === firstWithIPv6);
        joined.push({ entry, endpoint });
      }
      if (plan.mode === 'bridge' && pid !== undefined && isSwarmEntry(joined[0]?.entry)) {
        const gateway = await joinGateway(ctx, joined[0]!.entry, container.id, (bridge) => join(ctx, bridge, container, {}, pid, joined.length, true, false));
        if (gateway) joined.push(gateway);
        checkSwarmPorts(joined[0]!.entry.network.Name, joined[0]!.entry.network.Internal, plan.ports?.length ?? 0);
      }
      const outward = outwardOf(joined);
      if (plan.mode === 'bridge' && pid !== undefined) {
        const [primary] = joined;
        if (plan.ports && plan.ports.length > 0) await publish(ctx, outward!.entry, outward!.endpoint, plan.ports);
        if (plan.embeddedDns) {
          for (const { entry, endpoint } of joined) if (!ctx.isPredefined(entry)) endpoint.dns = true;
          // A sandbox on the default bridge alone: its endpoint there carries the mark (a daemon restart serves
          // it again); the names of the default bridge stay unanswered, as with Docker.
          if (!joined.some(({ endpoint }) => endpoint.dns)) primary.endpoint.dns = true;
          if (plan.dnsServers) primary.endpoint.dnsServers = plan.dnsServers;
          await ctx.host.startDns(container.id, pid, dnsAnswers(ctx, container.id));
          await Promise.all(joined.map(({ entry }) => ctx.store.save(entry)));
        }
      }
    } catch (err) {
      ctx.host.stopDns(container.id);
      for (const { entry, endpoint } of joined.reverse()) {
        entry.endpoints.delete(container.id);
        await ctx.saveEndpoints(entry).catch(() => undefined);
        if (endpoint.ports && endpoint.ports.length > 0) await unpublish(ctx, entry, endpoint).catch(() => undefined);
        await unplug(ctx, entry, endpoint).catch(() => undefined);
      }
      throw err;
    }
    const networks: Record<string, EndpointSettings> = {};
    for (const { entry, endpoint } of joined) {
      if (!endpoint.gateway) networks[entry.network.Name] = endpointSettings(ctx, entry.network.Id, endpoint);
      ctx.publishEndpoint('connect', entry, container.id);
    }
    const primary = joined[0];
    const outward = outwardOf(joined)!;
    return {
      networks,
      hostsAddress: primary.endpoint.ipv4 || undefined,
      ...(primary.endpoint.ipv6 ? { hostsAddress6: primary.endpoint.ipv6 } : {}),
      sandboxKey: plan.mode === 'host' || pid === undefined ? '' : `/proc/${pid}/ns/net`,
      bridge: plan.mode === 'bridge' ? (primary.entry.bridge ?? '') : '',
      ports: portMap(outward.endpoint.ports ?? [], { ipv6: Boolean(outward.endpoint.ipv6) }),
    };
  }));
}

/**
 * The steps of joining swarm networks that wait for the swarm (the managers, the sandbox), done before `then`
 * takes the context's lock; `then` records them (taking each from the map), and what it leaves is undone.
 */
async function prepareSwarmJoins<T>(
  ctx: NetworkContext,
  container: { id: string; name: string },
  joins: Array<{ networkId: string; networkName: string; endpoint: EndpointRequest }>,
  pid: number | undefined,
  then: (prepared: Map<number, PreparedSwarm>) => Promise<T>,
  /** The interface index of the first join (`eth<n>`). */
  firstIndex = 0,
): Promise<T> {
  const prepared = new Map<number, PreparedSwarm>();
  try {
    if (pid !== undefined) {
      for (const [i, j] of joins.entries()) {
        const known = ctx.entries.get(j.networkId) ?? ctx.byName(j.networkName);
        if (known ? !isSwarmEntry(known) : !mayBeSwarm(ctx)) continue;
        prepared.set(i, await prepareSwarm(ctx, known?.network.Id || j.networkName, container, j.endpoint, pid, firstIndex + i));
      }
    }
    return await then(prepared);
  } finally {
    for (const p of prepared.values()) await abandonSwarm(ctx, p);
  }
}

/**
 * The endpoint a container's ports are published through: its first network's, or, when that is a swarm
 * network, its way out on the default bridge.
 */
function outwardOf(joined: Array<{ entry: NetworkEntry; endpoint: EndpointRecord }>): { entry: NetworkEntry; endpoint: EndpointRecord } | undefined {
  if (!isSwarmEntry(joined[0]?.entry)) return joined[0];
  return joined.find(({ endpoint }) => endpoint.gateway) ?? joined.find(({ entry }) => entry.network.Driver === 'bridge') ?? joined[0];
}

/** Joins a running container to one more network (network connect). */
export function connectRunning(
  ctx: NetworkContext,
  container: { id: string; name: string },
  networkRef: string,
  endpointConfig: unknown,
  pid: number,
  opts: { ownNamespace?: boolean; dns?: readonly string[] } = {},
): Promise<Record<string, EndpointSettings>> {
  let entry: NetworkEntry;
  try {
    entry = ctx.find(networkRef);
  } catch (err) {
    // A network unknown here may be a swarm network, which the container asks the swarm for (swarm.ts).
    if (!(err instanceof NotFound) || !mayBeSwarm(ctx)) throw err;
    entry = placeholder(networkRef);
  }
  const current = [...ctx.entries.values()].filter((e) => e.endpoints.has(container.id));
  // Bridge, swarm and plugin networks combine; host and none do not.
  const joinable = (e: NetworkEntry) => e.network.Driver === 'bridge' || isSwarmEntry(e) || e.remote !== undefined;
  if (!joinable(entry) || !current.every(joinable)) {
    throw new Forbidden('container cannot be disconnected from host network or connected to host network');
  }
  if (current.length === 0 && !opts.ownNamespace) throw new Forbidden(`container ${container.name.replace(/^\//, '')} has no network namespace of its own to connect`);
  const request = parseEndpoint(ctx, entry, endpointConfig, 'EndpointConfig');
  const exists = () => new Forbidden(`endpoint with name ${container.name.replace(/^\//, '')} already exists in network ${entry.network.Name}`);
  if (entry.endpoints.has(container.id)) throw exists();
  const used = new Set(current.map((e) => e.endpoints.get(container.id)?.containerInterface ?? 'eth0'));
  let index = 0;
  while (used.has(`eth${index}`)) index++;
  const swarmJoin = isSwarmEntry(entry) ? [{ networkId: entry.network.Id, networkName: entry.network.Id || networkRef, endpoint: request }] : [];
  return prepareSwarmJoins(ctx, container, swarmJoin, pid, (prepared) => ctx.lock.run(async () => {
    if (entry.endpoints.has(container.id)) throw exists();
    // eth0 holds the default route; a later network gets none, even when it takes the name eth0 again.
    // A container without IPv6 so far takes its IPv6 default route from the network it joins now.
    const withIPv6 = current.some((e) => e.endpoints.get(container.id)?.ipv6);
    let endpoint: EndpointRecord;
    const ready = prepared.get(0);
    if (ready) {
      ({ entry, endpoint } = await recordSwarm(ctx, ready));
      prepared.delete(0);
    } else endpoint = await join(ctx, entry, container, request, pid, index, index === 0 && current.length === 0, !withIPv6);
    if (!ctx.isPredefined(entry)) {
      // As Docker: a container that joins its first user-defined network (from the default bridge, say) gets
      // the embedded DNS server; the engine points its resolv.conf at it (servesDns).
      const served = current.some((e) => e.endpoints.get(container.id)?.dns);
      endpoint.dns = true;
      if (!served && opts.dns && opts.dns.length > 0) endpoint.dnsServers = [...opts.dns];
      try {
        if (!served) await ctx.host.startDns(container.id, pid, dnsAnswers(ctx, container.id));
        await ctx.store.save(entry);
      } catch (err) {
        entry.endpoints.delete(container.id);
        await ctx.store.save(entry).catch(() => undefined);
        await unplug(ctx, entry, endpoint).catch(() => undefined);
        throw err;
      }
    }
    ctx.publishEndpoint('connect', entry, container.id);
    return containerNetworks(ctx, container.id);
  }), index);
}
