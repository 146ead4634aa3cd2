/**
 * The data plane of swarm overlay networks on one node (host/linux/overlay implements it). Each network a
 * task of this node needs gets a sandbox of its own (a network namespace) holding a bridge and a VXLAN
 * device with the network's VNI; task containers join that bridge through a veth. The VXLAN's UDP socket
 * stays in the node's namespace (where the device was made), on the swarm's data path port. Peers are not
 * learned by flooding: the engine programs every remote endpoint (address, MAC, node) from the cluster store.
 */

/** One overlay network as this node builds it. */
export interface OverlaySpec {
  /** The network's id (the cluster's). */
  networkId: string;
  /** The VXLAN network identifier. */
  vni: number;
  /** The UDP port VXLAN traffic goes to and comes from (the swarm's DataPathPort). */
  port: number;
  /** This node's address on the underlay (the VTEP's source address). */
  localAddr: string;
  /** The network's subnet in CIDR notation, and its gateway (the bridge's address in the sandbox). */
  subnet: string;
  gateway: string;
  prefixLen: number;
  /** The MTU of the bridge and of the containers' interfaces (VXLAN adds 50 bytes). */
  mtu: number;
  /**
   * The bridge's MAC address, when other nodes send to its address (in the ingress network, where it is the
   * node's own endpoint): the one they hold for it, so that their frames reach the bridge itself.
   */
  bridgeMac?: string;
  /** The network's VXLAN traffic to other nodes is encrypted (setOverlayEncryption). */
  encrypted?: boolean;
}

/** An endpoint of the network on another node. */
export interface OverlayPeer {
  address: string;
  mac: string;
  /** The underlay address of the node that holds it. */
  node: string;
}

/** A container's interface on an overlay network. */
export interface OverlayAttachment {
  networkId: string;
  /** The container's init pid: its network namespace is /proc/<pid>/ns/net. */
  pid: number;
  /** Name of the interface inside the container. */
  ifname: string;
  address: string;
  prefixLen: number;
  macAddress: string;
  mtu: number;
}

/** A service's virtual IP and the addresses of its running tasks. */
export interface VipBackends {
  vip: string;
  backends: string[];
}

export interface IngressSpec {
  networkId: string;
  address: string;
  ports: Array<{ proto: 'tcp' | 'udp'; publishedPort: number; targetPort: number; backends: string[] }>;
}

/**
 * The encryption of encrypted networks' VXLAN traffic between this node and the others: ESP (RFC 4303, AES-GCM
 * as RFC 4106 gives it) in transport mode, carried in UDP on port 4500 (RFC 3948). Each direction between two
 * nodes has its own security association per key (its SPI and key derived from the swarm's key and the two
 * addresses); a node sends under the primary key and accepts any key of the ring. VXLAN of these networks
 * never leaves the node, nor is taken in, in clear.
 */
export interface OverlayEncryption {
  /** This node's underlay address, and the VXLAN port (the swarm's DataPathPort). */
  localAddr: string;
  port: number;
  /** The swarm's keys (base64 of 20 bytes: an AES-128 key and a 4-byte salt) by tag, and when each was made (ms). */
  keys: Array<{ tag: number; key: string; created?: number }>;
  /** The tag of the key to send under. */
  primary: number;
  /** The encrypted networks: their VNI and where each remote endpoint (by MAC) lives. */
  networks: Array<{ vni: number; peers: Array<{ mac: string; node: string }> }>;
}

export interface OverlayHost {
  /** Creates the network's sandbox, bridge and VXLAN device, or brings existing ones to the spec. Idempotent. */
  ensureOverlay(spec: OverlaySpec): Promise<void>;
  /** Replaces the network's forwarding and neighbour entries with exactly `peers`. */
  setOverlayPeers(networkId: string, peers: OverlayPeer[]): Promise<void>;
  /** Joins a running container to the network's bridge (its end of the veth configured and up). */
  attachOverlay(spec: OverlayAttachment): Promise<void>;
  /** Removes a container's interface `ifname` from an overlay network (the container whose init pid is `pid`). */
  detachOverlay(pid: number, ifname: string): Promise<void>;
  /**
   * Replaces the VIP rules of the container whose init pid is `pid`: a connection it opens to a VIP goes to
   * one of that VIP's backends, chosen at random per connection (nftables DNAT in the container's
   * namespace). An empty list removes them.
   */
  balanceVips(pid: number, vips: VipBackends[]): Promise<void>;
  /**
   * The routing mesh on this node: connections to the node's own addresses on each published port go into the
   * ingress network's sandbox (built with ensureOverlay), which sends each to one of the port's backends,
   * from `address` (the node's endpoint on that network, which ensureOverlay gave its bridge). Replaces the
   * previous ports; undefined removes the mesh from the node.
   */
  setIngress(spec: IngressSpec | undefined): Promise<void>;
  /**
   * Installs (or brings up to date: a new key, new peers) the encryption of encrypted networks on this node;
   * undefined removes it with all it holds. Their VXLAN devices must have been made with `encrypted`.
   */
  setOverlayEncryption(spec: OverlayEncryption | undefined): Promise<void>;
  /** Removes the network's sandbox with everything in it. Idempotent. */
  removeOverlay(networkId: string): Promise<void>;
  /** Ids of the networks whose sandboxes exist on this node (left over by an earlier run too). */
  overlays(): Promise<string[]>;
}
