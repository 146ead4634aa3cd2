/**
 * The sandbox part of the Host: a container's egress network policy enforced in the kernel, on the host ends
 * of its veths, and the addresses the embedded DNS lets through for a while.
 */

/** A compiled network policy: nftables sets, the base chain, the refusal chain and the chains they jump to. */
export interface SandboxProgram {
  sets: string[];
  chain: string[];
  refuse: string[];
  /** Further chains the rules jump to. */
  chains: Array<{ name: string; rules: string[] }>;
}

/** What sandboxes need of the Host (host/linux/network/sandbox.ts implements it with nftables). */
export interface SandboxHost {
  applyPolicy(containerId: string, interfaces: readonly string[], program: SandboxProgram): Promise<void>;
  removePolicy(containerId: string): Promise<void>;
  allowAddresses(containerId: string, set: string, name: string, addresses: readonly string[], ttlSeconds: number): Promise<void>;
  allowedAddresses(containerId: string): Promise<Array<{ set: string; address: string; name: string; expiresInSeconds: number }>>;
  installedPolicies(): Promise<string[]>;
  removePolicyByShortId(shortId: string): Promise<void>;
  /**
   * The containers of the sandbox's bridges its allowed frames are handed to directly, by MAC address (the
   * host end of their veth), as frames between other containers skip the bridge. Optional: without it they
   * go through the bridge.
   */
  setDirectPeers?(containerId: string, peers: ReadonlyArray<{ mac: string; hostInterface: string }>): Promise<void>;
}
