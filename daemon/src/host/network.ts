/**
 * The network part of the Host: bridges, veth pairs into a container's namespace, the firewall's NAT, forward
 * and port rules, and the embedded DNS server of each container (host/linux/network implements it).
 */

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

/**
 * An interface a network plugin made on the host (its Join's SrcName), moved into a container's namespace and
 * configured there: renamed, its MAC address, IPv4 address, static routes and default route set, brought up.
 */
export interface AdoptSpec {
  /** The container's init pid: its network namespace is /proc/<pid>/ns/net. */
  pid: number;
  /** The interface's name on the host. */
  hostName: string;
  /** Its name inside the container. */
  containerInterface: string;
  address: string;
  prefixLen: number;
  macAddress?: string;
  /** The default route's next hop, when the container gets its default route here. */
  gateway?: string;
  /** Routes to a destination (CIDR) through a next hop, or on the link when there is none. */
  routes?: Array<{ destination: string; nextHop?: string }>;
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
  /**
   * The container is reached by the host's route to `address` (an interface a network plugin made), not
   * through `bridge`, which then only tags the rules: the forward accept names no interface, and the host's
   * loopback reaches the ports through the route's interface (route_localnet on it, the source masqueraded).
   */
  routed?: boolean;
}

/** What the embedded DNS server asks the engine. */
export interface DnsAnswers {
  /**
   * The addresses `name` stands for, as seen by the container: its own networks' containers by name, alias
   * or short id, IPv4 (A) and IPv6 (AAAA) mixed. Undefined when the name is not the engine's (the server
   * forwards it).
   */
  lookup(name: string): string[] | undefined;
  /**
   * Upstream servers (`ip` or `ip:port`) for the names the engine does not know (the container's Dns);
   * undefined for the machine's own resolvers.
   */
  upstreams(): string[] | undefined;
}

/**
 * Told of every answer with addresses before the container gets it (sandbox policies allow the addresses of
 * allowed names): the answer waits for it. A hook the engine gives once (NetworkHost.observeDns); a remote Host
 * calls it back over its stream.
 */
export type DnsObserver = (containerId: string, name: string, records: Array<{ address: string; ttl: number }>) => Promise<void>;

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
  /** Moves a network plugin's interface into a container's namespace and configures it there. */
  adoptInterface(spec: AdoptSpec): Promise<void>;
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
  /** Sets the hook told of the embedded DNS server's answers with addresses (sandbox policies). */
  observeDns?(observer: DnsObserver): void;
}
