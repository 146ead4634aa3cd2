/**
 * Networks: the object model, the narrow interface the container engine calls to give containers their
 * network (ContainerNetworking), and the Host methods networking needs (NetworkHost).
 */

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
}

export type PortProto = 'tcp' | 'udp' | 'sctp';

/**
 * A container port published on a host port. `hostIp` '' stands for every address of the host (IPv6 ones too
 * when the container has an IPv6 address), '::' for every IPv6 address.
 */
export interface PortMapping {
  proto: PortProto;
  containerPort: number;
  hostIp: string;
  hostPort: number;
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

/** The default bridge as the host builds it. */
export interface BridgeSpec {
  name: string;
  /** Gateway address (the bridge's own address), dotted quad. */
  gateway: string;
  prefixLen: number;
  /** Subnet in CIDR notation. */
  subnet: string;
  mtu: number;
  /** The bridge's IPv6 gateway address and subnet (networks with EnableIPv6); without it the bridge has none of ours. */
  ipv6?: { gateway: string; prefixLen: number; subnet: string };
}

export interface VethSpec {
  /** The container's init pid: its network namespace is /proc/<pid>/ns/net. */
  pid: number;
  bridge: string;
  hostInterface: string;
  /** Name inside the container. */
  containerInterface: string;
  address: string;
  prefixLen: number;
  /** The default route's next hop; undefined on an internal network (no way out). */
  gateway?: string;
  macAddress: string;
  mtu: number;
  /** The container end's IPv6 address and, when `gateway` is given, its default IPv6 route. */
  ipv6?: { address: string; prefixLen: number; gateway?: string };
  /**
   * Frames the bridge's other containers send to `macAddress` go straight to this veth, past the bridge and
   * the firewall hooks the kernel runs for bridged frames: only where the rules let all traffic within the
   * bridge through (icc). Without it, or where the host cannot do it, they go through the bridge.
   */
  direct?: boolean;
  /** Link-local addresses (IPAMConfig.LinkLocalIPs) the container end gets besides its address (/16 or /64). */
  linkLocal?: string[];
}

/** The firewall rules of one bridge. */
export interface BridgeRules {
  bridge: string;
  subnet: string;
  /** The IPv6 subnet (EnableIPv6): the same rules in ip6tables. */
  subnet6?: string;
  /** Masquerade traffic leaving the host from the subnet (default true). */
  masquerade?: boolean;
  /** Internal network: no traffic in or out of the bridge, only between its containers. */
  internal?: boolean;
  /**
   * Bridges whose containers this bridge's containers must not reach (iptables interface names;
   * `br-+` stands for every bridge named br-...).
   */
  isolateFrom?: string[];
  /** Containers of the bridge may talk to each other (com.docker.network.bridge.enable_icc; default true). */
  icc?: boolean;
}

/** The port forwarding rules of one container (DNAT from the host ports to the container's address). */
export interface PublishSpec {
  bridge: string;
  containerId: string;
  address: string;
  /**
   * The container's IPv6 address (a network with IPv6): ports published on every host address ('') or on
   * IPv6 ones are forwarded to it by ip6tables; those on IPv4 addresses go to `address`.
   */
  address6?: string;
  ports: PortMapping[];
}

/** What the embedded DNS server asks the engine. */
export interface DnsAnswers {
  /**
   * The addresses `name` stands for, as seen by the container: its own networks' containers by name, alias
   * or short id, IPv4 (A) and IPv6 (AAAA) mixed. Undefined when the name is not the engine's (the server
   * forwards it).
   */
  lookup(name: string): string[] | undefined;
  /** Upstream servers (`ip` or `ip:port`) for the names the engine does not know. */
  upstreams(): string[];
}

/** The Host methods networking needs (host/linux/network implements them). */
export interface NetworkHost {
  /** IPv4 subnets the host already uses (routes and interface addresses), except those of `exceptDevice`. */
  usedSubnets(exceptDevice?: string): Promise<string[]>;
  /** IPv6 subnets the host already uses (routes and interface addresses, link-local and multicast left out). */
  usedIPv6Subnets(): Promise<string[]>;
  /**
   * The IPv4 address (a.b.c.d/n) of the named bridge: undefined when no link has that name, null when
   * the bridge exists without an address. Throws Conflict when the link exists but is not a bridge.
   */
  bridgeAddress(name: string): Promise<string | null | undefined>;
  /** Creates the bridge or brings an existing one to the spec (address, up). Idempotent. */
  ensureBridge(spec: BridgeSpec): Promise<void>;
  /** Deletes the bridge (and so detaches its ports). Idempotent. */
  removeBridge(name: string): Promise<void>;
  /** Turns on IPv4 forwarding. */
  enableForwarding(): Promise<void>;
  /** Turns on IPv6 forwarding (all and default), as dockerd does for its IPv6 networks. */
  enableIPv6Forwarding(): Promise<void>;
  /** Installs the bridge's NAT and forward rules, replacing earlier ones of the same bridge. */
  ensureNat(spec: BridgeRules): Promise<void>;
  /** Removes every firewall rule (iptables and ip6tables) tagged with the bridge's name. Idempotent. */
  removeNat(bridge: string): Promise<void>;
  /** Creates the veth pair, moves the container end into the namespace and configures both ends. */
  attachVeth(spec: VethSpec): Promise<void>;
  /** Deletes a host interface if it exists. */
  removeInterface(name: string): Promise<void>;
  /** Ends the direct delivery (VethSpec.direct) of frames for `macAddress` on the bridge. Idempotent. */
  dropDirectDelivery(bridge: string, macAddress: string): Promise<void>;
  /** Names of the interfaces attached to the bridge. */
  bridgePorts(bridge: string): Promise<string[]>;
  /** The kernel's range of ephemeral ports. */
  ephemeralPortRange(): Promise<{ first: number; last: number }>;
  /** Whether a host port can be bound now (no program on the host holds it). */
  hostPortFree(proto: PortProto, hostIp: string, port: number): Promise<boolean>;
  /** Installs the container's port forwarding rules. */
  publishPorts(spec: PublishSpec): Promise<void>;
  /** Removes the container's port forwarding rules. Idempotent. */
  unpublishPorts(spec: PublishSpec): Promise<void>;
  /** Removes the port rules of the bridge that belong to none of `keepContainerIds` (a crash's leftovers). */
  removeStalePortRules(bridge: string, keepContainerIds: ReadonlySet<string>, opts?: { ipv6?: boolean }): Promise<void>;
  /** Serves DNS on 127.0.0.11:53 (UDP and TCP) inside the network namespace of `pid`, answering with `answers`. */
  startDns(containerId: string, pid: number, answers: DnsAnswers): Promise<void>;
  /** Closes the container's DNS listeners. Idempotent. */
  stopDns(containerId: string): void;
}
