/**
 * The network service: the predefined networks (bridge, host, none) and user-defined bridge networks,
 * their store and address allocation, their Linux bridges and firewall rules, and the per-container
 * connect/disconnect the container engine calls. Each verb lives in its own file (create.ts, connect.ts,
 * plan.ts, ...) over the state they share (context.ts); this class only gathers them.
 */
import { defaultBridge, init, removeDefaultBridge } from './bridges.js';
import { connect, connectRunning } from './connect.js';
import { create } from './create.js';
import { NetworkContext, type EventPublisher, type NetworkServiceOptions } from './context.js';
import { checkEndpoint, disconnect, disconnectedConfigured, disconnectOne } from './disconnect.js';
import { serveDnsNow, servesDns } from './dns.js';
import { containerNetworks, directPeers, hostInterfaces, renamed } from './endpoint.js';
import { inspect, list, swarmContainers, type NetworkView } from './inspect.js';
import { planNetworks, plannedNetworks } from './plan.js';
import { recover } from './recover.js';
import { prune, remove } from './remove.js';
import type { NetworkPlugins } from './remote.js';
import type { SwarmAttacher } from './swarm.js';
import type { NetworkEntry } from './store.js';
import type { NetworkHost } from '../../host/host.js';
import type { ContainerNetworkAttachment, ContainerNetworking, EndpointSettings, LiveContainer, NetworkPlan, PlanOptions } from './types.js';

export { DEFAULT_MTU, DETACHED_KEY, ipv4Pool, ipv6Pool, PREDEFINED_NETWORKS, type NetworkServiceOptions } from './context.js';
export type { NetworkView } from './inspect.js';

export class NetworkService implements ContainerNetworking {
  private readonly ctx: NetworkContext;

  constructor(host: NetworkHost, events: EventPublisher, opts: NetworkServiceOptions) {
    this.ctx = new NetworkContext(host, events, opts);
  }

  // ---------------------------------------------------------------- daemon start

  /** Loads the store, creates the predefined networks once (stable ids), and builds the default bridge. */
  init(): Promise<void> {
    return init(this.ctx);
  }

  /** Releases the endpoints of containers that are not running and serves the live ones' DNS again. */
  recover(live: ReadonlyMap<string, LiveContainer>): Promise<void> {
    return recover(this.ctx, live);
  }

  /** The default bridge's name, subnet and gateway (for /info and tests). */
  defaultBridge(): { name: string; subnet: string; gateway: string } {
    return defaultBridge(this.ctx);
  }

  /** Removes the default bridge and its firewall rules from the host (used by tests and uninstall). */
  removeDefaultBridge(): Promise<void> {
    return removeDefaultBridge(this.ctx);
  }

  /** Network and IPAM drivers of plugins (the daemon's plugins, once it has them). */
  setPlugins(plugins: NetworkPlugins): void {
    this.ctx.plugins = plugins;
  }

  /** The swarm's networks, for standalone containers on attachable overlays (the daemon's cluster part). */
  setSwarm(swarm: SwarmAttacher): void {
    this.ctx.swarm = swarm;
  }

  /** This node's containers on swarm networks. */
  swarmEndpoints(): Array<{ networkId: string; containerId: string }> {
    return [...this.ctx.entries.values()].filter((e) => e.network.Driver === 'overlay').flatMap((e) => [...e.endpoints.keys()].map((containerId) => ({ networkId: e.network.Id, containerId })));
  }

  /** Whether this node is in a swarm (a network unknown here may be a swarm network). */
  inSwarm(): boolean {
    return this.ctx.swarm?.active() === true;
  }

  /** The containers of this node on a swarm network, as network inspect lists them (none when it has none here). */
  containersOf(networkId: string): NetworkView['Containers'] {
    return swarmContainers(this.ctx, networkId);
  }

  /** The names of the networks whose driver or IPAM driver is `driver`. */
  namesOfDriver(driver: string): string[] {
    return [...this.ctx.entries.values()].filter((e) => e.network.Driver === driver || e.network.IPAM.Driver === driver).map((e) => e.network.Name);
  }

  // ---------------------------------------------------------------- the API's verbs

  /** Finds a network by full id, then by name, then by a unique id prefix. */
  find(ref: string): NetworkEntry {
    return this.ctx.find(ref);
  }

  inspect(ref: string, opts: { scope?: string } = {}): NetworkView {
    return inspect(this.ctx, ref, opts);
  }

  /** Lists networks; `filters` are validated by the api layer's key list (driver, id, label, name, type, scope, dangling). */
  list(filters: ReadonlyMap<string, string[]> = new Map()): NetworkView[] {
    return list(this.ctx, filters);
  }

  /** Creates a user-defined bridge network: its record, its Linux bridge and its firewall rules. */
  create(body: unknown): Promise<{ Id: string; Warning: string }> {
    return create(this.ctx, body);
  }

  remove(ref: string): Promise<void> {
    return remove(this.ctx, ref);
  }

  /** Removes the user-defined networks no container uses (filters: until, label, label!). */
  prune(filters: ReadonlyMap<string, string[]> = new Map()): Promise<string[]> {
    return prune(this.ctx, filters);
  }

  // ---------------------------------------------------------------- containers

  plan(networkMode: string | undefined, networkingConfig: unknown, opts: PlanOptions = {}): NetworkPlan {
    return planNetworks(this.ctx, networkMode, networkingConfig, opts);
  }

  plannedNetworks(plan: NetworkPlan): Record<string, EndpointSettings> {
    return plannedNetworks(this.ctx, plan);
  }

  renamed(containerId: string, newName: string): Promise<void> {
    return renamed(this.ctx, containerId, newName);
  }

  containerNetworks(containerId: string): Record<string, EndpointSettings> {
    return containerNetworks(this.ctx, containerId);
  }

  connect(container: { id: string; name: string }, plan: NetworkPlan, pid: number | undefined): Promise<ContainerNetworkAttachment> {
    return connect(this.ctx, container, plan, pid);
  }

  connectRunning(
    container: { id: string; name: string },
    networkRef: string,
    endpointConfig: unknown,
    pid: number,
    opts: { ownNamespace?: boolean; dns?: readonly string[] } = {},
  ): Promise<Record<string, EndpointSettings>> {
    return connectRunning(this.ctx, container, networkRef, endpointConfig, pid, opts);
  }

  /** The host ends of the container's veths (its bridge endpoints), in no particular order. */
  hostInterfaces(containerId: string): string[] {
    return hostInterfaces(this.ctx, containerId);
  }

  /** The interfaces of other containers the container's frames may be handed to directly (endpoint.ts directPeers). */
  directPeers(containerId: string): Array<{ mac: string; hostInterface: string }> {
    return directPeers(this.ctx, containerId);
  }

  servesDns(containerId: string): boolean {
    return servesDns(this.ctx, containerId);
  }

  /** The embedded DNS server for a running container that has none yet (see dns.ts serveDnsNow). */
  serveDns(containerId: string, dns?: readonly string[]): Promise<boolean> {
    return serveDnsNow(this.ctx, containerId, dns);
  }

  /** Validates an endpoint config (network connect of a container that is not running) for the network. */
  checkEndpoint(networkRef: string, endpointConfig: unknown, field: string): void {
    checkEndpoint(this.ctx, networkRef, endpointConfig, field);
  }

  /** A container that is not running left the network's configuration: `network disconnect`, as Docker. */
  disconnectedConfigured(containerId: string, networkRef: string): void {
    disconnectedConfigured(this.ctx, containerId, networkRef);
  }

  disconnectOne(containerId: string, networkRef: string): Promise<Record<string, EndpointSettings>> {
    return disconnectOne(this.ctx, containerId, networkRef);
  }

  disconnect(containerId: string): Promise<void> {
    return disconnect(this.ctx, containerId);
  }
}
