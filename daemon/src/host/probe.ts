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
