/**
 * Resource statistics of a running container, read from its cgroups (v1 and v2), /proc/stat and the
 * container's /proc/<pid>/net/dev. The container's cgroups are found from /proc/<pid>/cgroup and the cgroup
 * mounts of /proc/self/mountinfo, so wherever the runtime put them (crun puts cgroupsPath `/berth/<id>` in
 * every v1 hierarchy on these machines), the numbers are the container's.
 */
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseMountinfo } from '../mountinfo.js';
import type { ContainerStatsSample, StatsHost } from '../../host.js';

/** USER_HZ: the unit of cpuacct.stat and /proc/stat (100 on every Linux architecture we run on). */
const CLOCK_TICKS = 100;
const NS_PER_TICK = 1e9 / CLOCK_TICKS;

async function readText(file: string): Promise<string | undefined> {
  try {
    return await fs.readFile(file, 'utf8');
  } catch {
    return undefined;
  }
}

async function readNumber(file: string): Promise<number | undefined> {
  const text = (await readText(file))?.trim();
  if (text === undefined || text === '' || text === 'max') return undefined;
  const n = Number(text);
  return Number.isFinite(n) ? n : undefined;
}

/** `key value` lines (memory.stat, cpu.stat, cpuacct.stat). */
export function parseFlatKeyed(text: string | undefined): Record<string, number> {
  const out: Record<string, number> = {};
  for (const line of (text ?? '').split('\n')) {
    const [k, v] = line.trim().split(/\s+/);
    if (k && v !== undefined && /^\d+$/.test(v)) out[k] = Number(v);
  }
  return out;
}

export interface BlkioEntry {
  major: number;
  minor: number;
  op: string;
  value: number;
}

/** cgroup v1 blkio files: `MAJ:MIN Op value` lines (the `Total` line is left out, as Docker does). */
export function parseBlkio(text: string | undefined): BlkioEntry[] {
  const out: BlkioEntry[] = [];
  for (const line of (text ?? '').split('\n')) {
    const m = /^(\d+):(\d+)\s+(\S+)\s+(\d+)$/.exec(line.trim());
    if (m) out.push({ major: Number(m[1]), minor: Number(m[2]), op: m[3], value: Number(m[4]) });
  }
  return out;
}

/** cgroup v2 io.stat: `MAJ:MIN rbytes=.. wbytes=.. rios=.. wios=..` as v1-style entries. */
export function parseIoStat(text: string | undefined): { bytes: BlkioEntry[]; ios: BlkioEntry[] } {
  const bytes: BlkioEntry[] = [];
  const ios: BlkioEntry[] = [];
  for (const line of (text ?? '').split('\n')) {
    const [dev, ...fields] = line.trim().split(/\s+/);
    const m = /^(\d+):(\d+)$/.exec(dev ?? '');
    if (!m) continue;
    const kv = Object.fromEntries(fields.map((f) => f.split('=')).map(([k, v]) => [k, Number(v)]));
    const major = Number(m[1]);
    const minor = Number(m[2]);
    bytes.push({ major, minor, op: 'read', value: kv.rbytes ?? 0 }, { major, minor, op: 'write', value: kv.wbytes ?? 0 });
    ios.push({ major, minor, op: 'read', value: kv.rios ?? 0 }, { major, minor, op: 'write', value: kv.wios ?? 0 });
  }
  return { bytes, ios };
}

export interface NetDevStats {
  rx_bytes: number;
  rx_packets: number;
  rx_errors: number;
  rx_dropped: number;
  tx_bytes: number;
  tx_packets: number;
  tx_errors: number;
  tx_dropped: number;
}

/** /proc/<pid>/net/dev without the loopback interface. */
export function parseNetDev(text: string | undefined): Record<string, NetDevStats> {
  const out: Record<string, NetDevStats> = {};
  for (const line of (text ?? '').split('\n').slice(2)) {
    const colon = line.indexOf(':');
    if (colon < 0) continue;
    const name = line.slice(0, colon).trim();
    if (name === 'lo') continue;
    const f = line.slice(colon + 1).trim().split(/\s+/).map(Number);
    out[name] = {
      rx_bytes: f[0], rx_packets: f[1], rx_errors: f[2], rx_dropped: f[3],
      tx_bytes: f[8], tx_packets: f[9], tx_errors: f[10], tx_dropped: f[11],
    };
  }
  return out;
}

/** The "cpu" line of /proc/stat, in nanoseconds (user + nice + system + idle + iowait + irq + softirq). */
export function parseSystemCpu(text: string | undefined): number {
  const line = (text ?? '').split('\n').find((l) => l.startsWith('cpu '));
  if (!line) return 0;
  const fields = line.trim().split(/\s+/).slice(1, 8).map(Number);
  return fields.reduce((a, b) => a + b, 0) * NS_PER_TICK;
}

interface CgroupMounts {
  /** v1 controller name -> mount point and the mount's root within the hierarchy. */
  v1: Map<string, { mountPoint: string; root: string }>;
  v2?: { mountPoint: string; root: string };
}

export function parseCgroupMounts(mountinfo: string): CgroupMounts {
  const v1 = new Map<string, { mountPoint: string; root: string }>();
  let v2: { mountPoint: string; root: string } | undefined;
  for (const { fsType, mountPoint, root, superOptions } of parseMountinfo(mountinfo)) {
    if (fsType === 'cgroup2') v2 ??= { mountPoint, root };
    else if (fsType === 'cgroup') {
      for (const opt of superOptions) if (!v1.has(opt)) v1.set(opt, { mountPoint, root });
    }
  }
  return { v1, v2 };
}

/** /proc/<pid>/cgroup: controller -> path (v1), '' -> path for the v2 unified hierarchy. */
export function parseProcCgroup(text: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const line of text.split('\n')) {
    const m = /^\d+:([^:]*):(.*)$/.exec(line);
    if (!m) continue;
    if (m[1] === '') out.set('', m[2]);
    else for (const c of m[1].split(',')) out.set(c, m[2]);
  }
  return out;
}

/** Where a cgroup path (as /proc/<pid>/cgroup gives it) is under a hierarchy's mount. */
export function under(mount: { mountPoint: string; root: string }, cgroupPath: string): string {
  const rel = mount.root !== '/' && cgroupPath.startsWith(mount.root) ? cgroupPath.slice(mount.root.length) : cgroupPath;
  return path.join(mount.mountPoint, rel);
}

export class CgroupStats implements StatsHost {
  private mounts: Promise<CgroupMounts> | undefined;

  private cgroupMounts(): Promise<CgroupMounts> {
    this.mounts ??= fs.readFile('/proc/self/mountinfo', 'utf8').then(parseCgroupMounts);
    return this.mounts;
  }

  onlineCpus(): number {
    return os.cpus().length || 1;
  }

  async systemCpuUsage(): Promise<number> {
    return parseSystemCpu(await readText('/proc/stat'));
  }

  machineMemory(): number {
    return os.totalmem();
  }

  async sample(pid: number, opts: { networks: boolean }): Promise<ContainerStatsSample | undefined> {
    const procCgroup = await readText(`/proc/${pid}/cgroup`);
    if (procCgroup === undefined) return undefined;
    const paths = parseProcCgroup(procCgroup);
    const mounts = await this.cgroupMounts();
    const v1Dir = (controller: string): string | undefined => {
      const m = mounts.v1.get(controller);
      const p = paths.get(controller);
      return m && p !== undefined ? under(m, p) : undefined;
    };
    const useV1 = mounts.v1.has('memory') && paths.has('memory');
    const [systemCpu, netText] = await Promise.all([this.systemCpuUsage(), opts.networks ? readText(`/proc/${pid}/net/dev`) : Promise.resolve(undefined)]);
    const sample: ContainerStatsSample = useV1 ? await this.sampleV1(v1Dir) : await this.sampleV2(mounts.v2 && paths.has('') ? under(mounts.v2, paths.get('')!) : undefined);
    sample.systemCpuUsage = systemCpu;
    if (opts.networks) sample.networks = parseNetDev(netText);
    return sample;
  }

  private async sampleV1(dir: (controller: string) => string | undefined): Promise<ContainerStatsSample> {
    const cpuacct = dir('cpuacct');
    const cpu = dir('cpu');
    const memory = dir('memory');
    const blkio = dir('blkio');
    const pids = dir('pids');
    const [total, percpu, cpuacctStat, cpuStat, memUsage, memMax, memLimit, memFailcnt, memStat, ioBytes, ioServiced, pidsCurrent, pidsMax] = await Promise.all([
      cpuacct ? readNumber(path.join(cpuacct, 'cpuacct.usage')) : undefined,
      cpuacct ? readText(path.join(cpuacct, 'cpuacct.usage_percpu')) : undefined,
      cpuacct ? readText(path.join(cpuacct, 'cpuacct.stat')) : undefined,
      cpu ? readText(path.join(cpu, 'cpu.stat')) : undefined,
      memory ? readNumber(path.join(memory, 'memory.usage_in_bytes')) : undefined,
      memory ? readNumber(path.join(memory, 'memory.max_usage_in_bytes')) : undefined,
      memory ? readNumber(path.join(memory, 'memory.limit_in_bytes')) : undefined,
      memory ? readNumber(path.join(memory, 'memory.failcnt')) : undefined,
      memory ? readText(path.join(memory, 'memory.stat')) : undefined,
      blkio ? readText(path.join(blkio, 'blkio.throttle.io_service_bytes_recursive')) : undefined,
      blkio ? readText(path.join(blkio, 'blkio.throttle.io_serviced_recursive')) : undefined,
      pids ? readNumber(path.join(pids, 'pids.current')) : undefined,
      pids ? readNumber(path.join(pids, 'pids.max')) : undefined,
    ]);
    const ticks = parseFlatKeyed(cpuacctStat);
    const throttle = parseFlatKeyed(cpuStat);
    return {
      cgroupVersion: 1,
      cpu: {
        total: total ?? 0,
        percpu: (percpu ?? '').trim().split(/\s+/).filter((s) => s !== '').map(Number),
        kernel: (ticks.system ?? 0) * NS_PER_TICK,
        user: (ticks.user ?? 0) * NS_PER_TICK,
        periods: throttle.nr_periods ?? 0,
        throttledPeriods: throttle.nr_throttled ?? 0,
        throttledTime: throttle.throttled_time ?? 0,
      },
      memory: { usage: memUsage, maxUsage: memMax, limit: memLimit, failcnt: memFailcnt, stats: parseFlatKeyed(memStat) },
      blkio: { serviceBytes: parseBlkio(ioBytes), serviced: parseBlkio(ioServiced) },
      pids: { current: pidsCurrent, limit: pidsMax },
      systemCpuUsage: 0,
    };
  }

  private async sampleV2(dir: string | undefined): Promise<ContainerStatsSample> {
    const file = (name: string) => (dir ? path.join(dir, name) : '/nonexistent');
    const [cpuStat, memCurrent, memMax, memStat, memEvents, ioStat, pidsCurrent, pidsMax] = await Promise.all([
      readText(file('cpu.stat')),
      readNumber(file('memory.current')),
      readNumber(file('memory.max')),
      readText(file('memory.stat')),
      readText(file('memory.events')),
      readText(file('io.stat')),
      readNumber(file('pids.current')),
      readNumber(file('pids.max')),
    ]);
    const cpu = parseFlatKeyed(cpuStat);
    const io = parseIoStat(ioStat);
    return {
      cgroupVersion: 2,
      cpu: {
        total: (cpu.usage_usec ?? 0) * 1000,
        percpu: [],
        kernel: (cpu.system_usec ?? 0) * 1000,
        user: (cpu.user_usec ?? 0) * 1000,
        periods: cpu.nr_periods ?? 0,
        throttledPeriods: cpu.nr_throttled ?? 0,
        throttledTime: (cpu.throttled_usec ?? 0) * 1000,
      },
      memory: { usage: memCurrent, limit: memMax, failcnt: parseFlatKeyed(memEvents).max, stats: parseFlatKeyed(memStat) },
      blkio: { serviceBytes: io.bytes, serviced: io.ios },
      pids: { current: pidsCurrent, limit: pidsMax },
      systemCpuUsage: 0,
    };
  }
}
