/**
 * The stats part of the Host: one reading of a container's cgroups and network counters
 * (host/linux/cgroups implements it).
 */

/** One reading of a container's cgroups (numbers in bytes and nanoseconds). */
export interface ContainerStatsSample {
  cgroupVersion: 1 | 2;
  cpu: { total: number; percpu: number[]; kernel: number; user: number; periods: number; throttledPeriods: number; throttledTime: number };
  memory: { usage?: number; maxUsage?: number; limit?: number; failcnt?: number; stats: Record<string, number> };
  blkio: { serviceBytes: Array<{ major: number; minor: number; op: string; value: number }>; serviced: Array<{ major: number; minor: number; op: string; value: number }> };
  pids: { current?: number; limit?: number };
  /** Host CPU time from /proc/stat, nanoseconds. */
  systemCpuUsage: number;
  /** Per interface, when the container has its own network namespace. */
  networks?: Record<string, object>;
}

/** What stats need of the Host. */
export interface StatsHost {
  /** Undefined when the process is gone. */
  sample(pid: number, opts: { networks: boolean }): Promise<ContainerStatsSample | undefined>;
  onlineCpus(): number;
  machineMemory(): number;
}
