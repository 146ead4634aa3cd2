/**
 * The probe part of the Host: facts about the machine containers run on (the kernel, its resource controls,
 * the runtimes), read where the containers run rather than where the engine runs.
 */

/** Facts about the kernel and machine, for /info and /version. */
export interface HostInfo {
  kernelVersion: string;
  operatingSystem: string;
  osVersion: string;
  osType: 'linux';
  architecture: string;
  ncpu: number;
  memTotal: number;
  cgroupVersion: '1' | '2';
  cgroupDriver: 'cgroupfs';
  storageDriver: 'overlay2';
  runtimes: string[];
  defaultRuntime: string;
  hostname: string;
  /** Resource controls the kernel offers containers (the booleans of /info); absent when unknown. */
  capabilities?: HostCapabilities;
}

export interface HostCapabilities {
  memoryLimit: boolean;
  swapLimit: boolean;
  cpuCfsPeriod: boolean;
  cpuCfsQuota: boolean;
  cpuShares: boolean;
  cpuSet: boolean;
  pidsLimit: boolean;
  oomKillDisable: boolean;
  ipv4Forwarding: boolean;
}

/** The init binary that HostConfig.Init runs as a container's PID 1, found once when the Host is built. */
export interface InitBinary {
  /** What /info shows as InitBinary: the `--init-path` value, or "docker-init" as dockerd's default. */
  name: string;
  /** The host path of the executable; absent when none was found. */
  path?: string;
  /** Why there is no path, worded for the error a start with Init answers. */
  problem?: string;
}

/** A device node of the machine, as a container's spec lists it (`path` is the path in the container). */
export interface DeviceNode {
  path: string;
  type: 'c' | 'b';
  major: number;
  minor: number;
  fileMode: number;
  uid: number;
  gid: number;
}

/** Which block IO controls the machine's cgroups offer (the blkio controller of v1, io of v2). */
export interface BlkioSupport {
  weight: boolean;
  weightDevice: boolean;
  throttle: boolean;
}

/** A component's version, as /version lists it (the runtime, conmon, the init binary). */
export interface ComponentVersion {
  name: string;
  version: string;
  commit?: string;
}

/**
 * The facts of the machine containers run on. The properties do not change while the daemon runs: each is
 * read once (host/linux at its first use; a remote Host when it connects); the methods read what may change.
 */
export interface ProbeHost {
  /** The OCI runtime containers run with: the one asked for, unless it cannot work here. */
  readonly runtimeName: string;
  /** The path of that runtime's executable (managed plugins run with it). */
  readonly runtimePath: string;
  /** Warnings about the machine to log at start (e.g. the preferred runtime cannot work here). */
  readonly warnings: readonly string[];
  readonly initBinary: InitBinary;
  /** The resource limits containers may be given, by RLIMIT name (they get the NOFILE one by default). */
  readonly rlimits: Readonly<Record<string, { soft: number; hard: number }>>;
  /** The capability bounding set of the runtime's caller (hex, as /proc shows it): no container gets more; absent where unknown. */
  readonly capabilityBoundingSet?: string;
  /** The machine's id (/etc/machine-id), '' when it has none: seeds the IPv6 ULA prefix of networks. */
  readonly machineId: string;
  /** The block IO controls containers can be given (the others are discarded with Docker's warnings). */
  readonly blkio: BlkioSupport;
  /** The kernel, OS, CPUs, memory, cgroups and runtimes, for /info and /version. */
  info(): Promise<HostInfo>;
  /** Versions of the runtimes, conmon and the init binary, for /version. */
  componentVersions(): Promise<ComponentVersion[]>;
  /**
   * The device nodes at `pathOnHost` (its node, or the nodes of the folder it names), at `pathInContainer`
   * and below; fails with Docker's message when there is none.
   */
  devices(pathOnHost: string, pathInContainer: string): Promise<DeviceNode[]>;
  /** Every device node of the machine's /dev, at the same paths (what a privileged container gets). */
  allDevices(): Promise<DeviceNode[]>;
  /** The major:minor of the block device at `path` (links followed); fails with a message naming `field`. */
  blockDevice(field: string, path: string): Promise<{ major: number; minor: number }>;
  /** The machine's /etc/resolv.conf or /etc/hosts (what a container's own start from); undefined when it has none. */
  etcFile(name: 'resolv.conf' | 'hosts'): Promise<string | undefined>;
  /** Whether `hostPath` exists on the machine (links followed): a bind mount's source must. */
  pathExists(hostPath: string): Promise<boolean>;
  /** The storage driver's status lines for /info (DriverStatus). */
  driverStatus(): Promise<Array<[string, string]>>;
}
