/**
 * Networks: the object model, and the narrow interface the container engine calls to give containers their
 * network (ContainerNetworking). The Host methods networking needs are host/network.ts (NetworkHost).
 */
import type { PortMapping, PortProto } from '../../host/host.js';

/** A network in the API's shape, newest version (api/compat trims it per request). */
export interface NetworkRecord {
  Name: string;
  Id: string;
  /** RFC 3339 with nanoseconds. */
  Created: string;
  Scope: 'local' | 'swarm' | 'global';
  /** bridge, host or null (the `none` network). */
  Driver: string;
  EnableIPv4: boolean;
  EnableIPv6: boolean;
  IPAM: { Driver: string; Options: Record<string, string> | null; Config: IPAMPool[] };
  Internal: boolean;
  Attachable: boolean;
  Ingress: boolean;
  ConfigFrom: { Network: string };
  ConfigOnly: boolean;
  Options: Record<string, string>;
  Labels: Record<string, string>;
}

export interface IPAMPool {
  Subnet: string;
  Gateway?: string;
  IPRange?: string;
  AuxiliaryAddresses?: Record<string, string>;
}

/** One container's membership of a network, as persisted. */
export interface EndpointRecord {
  containerId: string;
  containerName: string;
  endpointId: string;
  /** IPv4 address without prefix ('' on host and none). */
  ipv4: string;
  prefixLen: number;
  macAddress: string;
  /** Name of the host side of the veth pair (bridge networks). */
  hostInterface?: string;
  /** Name of the interface inside the container (eth0, eth1...). */
  containerInterface?: string;
  /** The address was asked for by the client (IPAMConfig.IPv4Address). */
  staticIPv4?: boolean;
  /** IPv6 address without prefix, on a network with EnableIPv6 (RFC 5952 text). */
  ipv6?: string;
  prefixLen6?: number;
  /** The IPv6 address was asked for by the client (IPAMConfig.IPv6Address). */
  staticIPv6?: boolean;
  /** The container's init pid when it joined (for SandboxKey). */
  pid?: number;
  /** Network-scoped aliases (EndpointsConfig.Aliases, `--network-alias`), resolved by the embedded DNS. */
  aliases?: string[];
  /** Ports published to the host through this endpoint (the container's first network only). */
  ports?: PortMapping[];
  /** The embedded DNS server listens in the container's namespace (user-defined networks). */
  dns?: boolean;
  /** HostConfig.Dns: the embedded DNS server's upstreams for this container (on its first network). */
  dnsServers?: string[];
  /** EndpointSettings.Links as the client gave them (`name:alias`): the aliases this container resolves. */
  links?: string[];
  /** EndpointSettings.DriverOpts as the client gave them. */
  driverOpts?: Record<string, string>;
  /** IPAMConfig.LinkLocalIPs: further addresses of the container's interface. */
  linkLocalIPs?: string[];
  /** Joined through a network plugin (which made its interface): it leaves through the plugin too. */
  remote?: boolean;
  /** On a swarm network: the id of the attachment the swarm's managers gave (released when it leaves). */
  swarmAttachment?: string;
  /**
   * On the default bridge, the way out of a container whose first network is a swarm network (as Docker's
   * docker_gwbridge): its default route and published ports; not one of the container's networks in inspect.
   */
  gateway?: boolean;
}

/** A container's endpoint in a network as container inspect and list show it (EndpointSettings). */
export interface EndpointSettings {
  IPAMConfig: { IPv4Address?: string; IPv6Address?: string; LinkLocalIPs?: string[] } | null;
  Links: string[] | null;
  Aliases: string[] | null;
  MacAddress: string;
  DriverOpts: Record<string, string> | null;
  GwPriority: number;
  NetworkID: string;
  EndpointID: string;
  Gateway: string;
  IPAddress: string;
  IPPrefixLen: number;
  IPv6Gateway: string;
  GlobalIPv6Address: string;
  GlobalIPv6PrefixLen: number;
  DNSNames: string[] | null;
}

/**
 * How a container is networked, resolved from HostConfig.NetworkMode and NetworkingConfig at create.
 * Plain data: the engine may keep it, but should plan again at start (the network may be gone).
 */
export type NetworkPlan = PlanExtras &
  (
  | {
      mode: 'bridge' | 'host' | 'none';
      networkId: string;
      networkName: string;
      endpoint: EndpointRequest;
      /** Further bridge networks joined at create (EndpointsConfig naming several networks), as eth1... */
      extra?: Array<{ networkId: string; networkName: string; endpoint: EndpointRequest }>;
      /**
       * The container left every network (network disconnect of its last one): it runs with loopback only, in
       * a namespace of its own (mode 'none', no network named), while its NetworkMode stays the user's.
       */
      detached?: boolean;
    }
  /** Shares the network namespace of another container (`container:<id|name>`); the engine resolves the reference. */
  | { mode: 'container'; container: string }
  );

export interface EndpointRequest {
  ipv4Address?: string;
  ipv6Address?: string;
  macAddress?: string;
  aliases?: string[];
  /** EndpointSettings.Links (`name` or `name:alias`): names only this container resolves, on this network. */
  links?: string[];
  driverOpts?: Record<string, string>;
  linkLocalIPs?: string[];
}

/** What a plan carries besides the networks: how the container's name resolution files are written. */
export interface PlanExtras {
  /** The address `host-gateway` in ExtraHosts stands for (the default bridge's gateway). */
  hostGateway?: string;
  /** The container's resolver is the embedded DNS server (127.0.0.11): user-defined networks. */
  embeddedDns?: boolean;
  /** Ports to publish (PortBindings, PublishAllPorts), checked at plan time; host ports chosen at connect. */
  ports?: PortRequest[];
  /** HostConfig.Dns: the embedded DNS server's upstreams when given. */
  dnsServers?: string[];
}

/** One container port to publish, as asked for. `hostPortFirst` 0 means any free (ephemeral) port. */
export interface PortRequest {
  proto: PortProto;
  containerPort: number;
  /** '' for every host address. */
  hostIp: string;
  hostPortFirst: number;
  hostPortLast: number;
}

/** What `plan` needs to know of the container besides its network fields. */
export interface PlanOptions {
  macAddress?: string;
  deferUnknownNetwork?: boolean;
  portBindings?: unknown;
  publishAllPorts?: boolean;
  exposedPorts?: readonly string[];
  dns?: readonly string[];
  /** The container is a sandbox: the embedded DNS server serves it on the default bridge too (its answers feed the domain rules). */
  sandbox?: boolean;
}

/** What connecting a container gave it. */
export interface ContainerNetworkAttachment {
  /** NetworkSettings.Networks: network name -> endpoint. Empty for `container:` mode. */
  networks: Record<string, EndpointSettings>;
  /** The address /etc/hosts maps the container's hostname to (undefined: only loopback entries). */
  hostsAddress?: string;
  /** The container's IPv6 address on its first network, when that network has IPv6 (Docker lists it in /etc/hosts too). */
  hostsAddress6?: string;
  /** NetworkSettings.SandboxKey. */
  sandboxKey: string;
  /** Name of the bridge on the host the container is attached to ('' otherwise). */
  bridge: string;
  /** NetworkSettings.Ports of the published ports (empty when none). */
  ports: Record<string, Array<{ HostIp: string; HostPort: string }>>;
}

/**
 * What the container engine calls to network its containers. The container runs in a network namespace
 * made by the runtime (none for `host` mode); `connect` is called between `crun create` and `crun start`.
 */
export interface ContainerNetworking {
  /**
   * Validates HostConfig.NetworkMode and NetworkingConfig (the create body's fields, as sent) and
   * resolves them. Throws NotFound for an unknown network, InvalidParameter naming the bad field. With
   * `deferUnknownNetwork`, an unknown NetworkMode name gives a plan whose `connect` fails with NotFound
   * instead (Docker's behaviour: create succeeds, start answers 404).
   */
  plan(networkMode: string | undefined, networkingConfig: unknown, opts?: PlanOptions): NetworkPlan;
  /** The endpoints a created but not running container shows (no addresses yet). */
  plannedNetworks(plan: NetworkPlan): Record<string, EndpointSettings>;
  /**
   * Gives the container its network: for bridge, a veth pair into `pid`'s namespace with an address, the
   * MAC derived from it and a default route; for none, loopback only; for host, nothing on the host.
   * Publishes the `network connect` event. Undoes its own work when it fails.
   */
  connect(container: { id: string; name: string }, plan: NetworkPlan, pid: number | undefined): Promise<ContainerNetworkAttachment>;
  /**
   * Releases the container's addresses and whatever outlives its namespace; publishes `network disconnect`.
   * Idempotent: a second call, or a call for a container that never connected, does nothing.
   */
  disconnect(containerId: string): Promise<void>;
  /** The container's current endpoints (empty when it is not connected). */
  containerNetworks(containerId: string): Record<string, EndpointSettings>;
  /** The container was renamed: its endpoints (and so the embedded DNS) answer to the new name. */
  renamed(containerId: string, newName: string): Promise<void>;
  /**
   * Connects a running container (init pid `pid`) to one more bridge network (POST /networks/{id}/connect):
   * a new interface eth<N> without default route. `endpointConfig` is the request's EndpointConfig. With
   * `ownNamespace`, a container on no network (it left its last one) has its own namespace: it joins as eth0.
   * Resolves with the container's endpoints after the change.
   */
  connectRunning(
    container: { id: string; name: string },
    networkRef: string,
    endpointConfig: unknown,
    pid: number,
    opts?: { ownNamespace?: boolean; dns?: readonly string[] },
  ): Promise<Record<string, EndpointSettings>>;
  /** Whether the embedded DNS server serves the container (it is on a user-defined network). */
  servesDns(containerId: string): boolean;
  /** Disconnects a running container from one network (POST /networks/{id}/disconnect); NotFound when not connected. */
  disconnectOne(containerId: string, networkRef: string): Promise<Record<string, EndpointSettings>>;
  /**
   * At daemon start: releases the allocations and removes the interfaces of every container not in `live`
   * (what a crash left behind), and gives the live containers back their endpoints on host and none, which
   * are kept in memory only.
   */
  recover(live: ReadonlyMap<string, LiveContainer>): Promise<void>;
}

/** A container found running at daemon start, with the networks its record names. */
export interface LiveContainer {
  name: string;
  networks: Record<string, { NetworkID?: string; EndpointID?: string }>;
}

