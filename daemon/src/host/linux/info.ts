/**
 * HostInfo read from the running kernel: uname, /etc/os-release, /proc/meminfo, the CPU count, the cgroup
 * hierarchy and the OCI runtimes on PATH. Read on demand: every file is small, and some facts (IPv4
 * forwarding, runtimes) change while the daemon runs.
 *
 * Formats: `<data-root>/engine-id` holds the engine's ID (one line, a UUID), created on first start and
 * kept for the life of the data root, as dockerd keeps its engine ID.
 */
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { HostCapabilities, HostInfo } from '../host.js';
import { writeFileAtomic } from '../../util/atomic.js';

/** statfs magic numbers (linux/magic.h). */
const CGROUP2_SUPER_MAGIC = 0x63677270;

export interface HostInfoOptions {
  /** Runtimes the daemon may use, in order of preference; only those found on PATH are reported. */
  runtimes: readonly string[];
  defaultRuntime: string;
  /** Overrides of the files read, for tests. */
  procRoot?: string;
  etcRoot?: string;
  cgroupRoot?: string;
  pathEnv?: string;
}

async function readText(file: string): Promise<string | undefined> {
  try {
    return await fs.readFile(file, 'utf8');
  } catch {
    return undefined;
  }
}

async function exists(file: string): Promise<boolean> {
  try {
    await fs.access(file);
    return true;
  } catch {
    return false;
  }
}

/** Parses os-release (KEY=value, values optionally quoted). */
export function parseOsRelease(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const line of text.split('\n')) {
    const m = /^([A-Z0-9_]+)=(.*)$/.exec(line.trim());
    if (!m) continue;
    let value = m[2];
    if (/^".*"$/.test(value) || /^'.*'$/.test(value)) value = value.slice(1, -1).replace(/\\(["'\\$`])/g, '$1');
    out[m[1]] = value;
  }
  return out;
}

/** MemTotal of /proc/meminfo in bytes. */
export function parseMemTotal(text: string): number {
  const m = /^MemTotal:\s+(\d+)\s*kB/m.exec(text);
  return m ? Number(m[1]) * 1024 : 0;
}

/** Names of the enabled cgroup v1 controllers listed by /proc/cgroups. */
export function parseProcCgroups(text: string): Set<string> {
  const enabled = new Set<string>();
  for (const line of text.split('\n')) {
    if (line.startsWith('#') || line.trim() === '') continue;
    const [name, , , on] = line.split(/\s+/);
    if (on === '1') enabled.add(name);
  }
  return enabled;
}

/** Looks a program up on PATH; returns its full path or undefined. */
export async function which(program: string, pathEnv = process.env.PATH ?? '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'): Promise<string | undefined> {
  for (const dir of pathEnv.split(':')) {
    if (!dir) continue;
    const candidate = path.join(dir, program);
    try {
      await fs.access(candidate, fs.constants.X_OK);
      return candidate;
    } catch {
      // not here
    }
  }
  return undefined;
}

async function cgroupVersion(cgroupRoot: string): Promise<'1' | '2'> {
  try {
    const st = await fs.statfs(cgroupRoot);
    return st.type === CGROUP2_SUPER_MAGIC ? '2' : '1';
  } catch {
    return '1';
  }
}

async function capabilities(version: '1' | '2', procRoot: string, cgroupRoot: string): Promise<HostCapabilities> {
  const ipv4Forwarding = (await readText(path.join(procRoot, 'sys/net/ipv4/ip_forward')))?.trim() === '1';
  if (version === '2') {
    const controllers = new Set(((await readText(path.join(cgroupRoot, 'cgroup.controllers'))) ?? '').trim().split(/\s+/));
    return {
      memoryLimit: controllers.has('memory'),
      swapLimit: controllers.has('memory'),
      cpuCfsPeriod: controllers.has('cpu'),
      cpuCfsQuota: controllers.has('cpu'),
      cpuShares: controllers.has('cpu'),
      cpuSet: controllers.has('cpuset'),
      pidsLimit: controllers.has('pids'),
      oomKillDisable: false,
      ipv4Forwarding,
    };
  }
  const enabled = parseProcCgroups((await readText(path.join(procRoot, 'cgroups'))) ?? '');
  return {
    memoryLimit: enabled.has('memory'),
    swapLimit: enabled.has('memory') && (await exists(path.join(cgroupRoot, 'memory/memory.memsw.limit_in_bytes'))),
    cpuCfsPeriod: enabled.has('cpu') && (await exists(path.join(cgroupRoot, 'cpu/cpu.cfs_period_us'))),
    cpuCfsQuota: enabled.has('cpu') && (await exists(path.join(cgroupRoot, 'cpu/cpu.cfs_quota_us'))),
    cpuShares: enabled.has('cpu'),
    cpuSet: enabled.has('cpuset'),
    pidsLimit: enabled.has('pids'),
    oomKillDisable: enabled.has('memory') && (await exists(path.join(cgroupRoot, 'memory/memory.oom_control'))),
    ipv4Forwarding,
  };
}

/** Reads the facts of this machine that /info and /version report. */
export async function readHostInfo(opts: HostInfoOptions): Promise<HostInfo> {
  const procRoot = opts.procRoot ?? '/proc';
  const etcRoot = opts.etcRoot ?? '/etc';
  const cgroupRoot = opts.cgroupRoot ?? '/sys/fs/cgroup';
  const osRelease = parseOsRelease((await readText(path.join(etcRoot, 'os-release'))) ?? (await readText('/usr/lib/os-release')) ?? '');
  const version = await cgroupVersion(cgroupRoot);
  const runtimes: string[] = [];
  for (const name of opts.runtimes) if (await which(name, opts.pathEnv)) runtimes.push(name);
  return {
    kernelVersion: os.release(),
    operatingSystem: osRelease.PRETTY_NAME ?? osRelease.NAME ?? 'Linux',
    osVersion: osRelease.VERSION_ID ?? '',
    osType: 'linux',
    architecture: os.machine(),
    ncpu: os.availableParallelism(),
    memTotal: parseMemTotal((await readText(path.join(procRoot, 'meminfo'))) ?? '') || os.totalmem(),
    cgroupVersion: version,
    cgroupDriver: 'cgroupfs',
    storageDriver: 'overlay2',
    runtimes,
    defaultRuntime: opts.defaultRuntime,
    hostname: os.hostname(),
    capabilities: await capabilities(version, procRoot, cgroupRoot),
  };
}

/** The engine's ID, kept in the data root: created once, the same across restarts. */
export async function loadEngineId(dataRoot: string): Promise<string> {
  const file = path.join(dataRoot, 'engine-id');
  const existing = (await readText(file))?.trim();
  if (existing) return existing;
  const id = randomUUID();
  await writeFileAtomic(file, `${id}\n`, 0o600);
  return id;
}

/** Open file descriptors of this process. */
export async function countOpenFds(procRoot = '/proc'): Promise<number> {
  try {
    return (await fs.readdir(path.join(procRoot, 'self/fd'))).length;
  } catch {
    return 0;
  }
}

/**
 * Versions of the OCI runtimes and conmon, from `<tool> --version` (first line "<name> version X",
 * a "commit: <sha>" line). Tools that are missing or fail are left out.
 */
export async function readComponentVersions(tools: readonly string[]): Promise<Array<{ name: string; version: string; commit?: string }>> {
  const out: Array<{ name: string; version: string; commit?: string }> = [];
  for (const tool of tools) {
    const text = await new Promise<string | undefined>((resolve) => {
      execFile(tool, ['--version'], { timeout: 5000 }, (err, stdout) => resolve(err ? undefined : stdout));
    });
    if (text === undefined) continue;
    const parsed = parseToolVersion(text);
    if (parsed) out.push({ name: tool, ...parsed });
  }
  return out;
}

export function parseToolVersion(text: string): { version: string; commit?: string } | undefined {
  const version = /version:?\s+(\S+)/i.exec(text)?.[1];
  if (!version) return undefined;
  const commit = /^commit:\s*(\S+)/im.exec(text)?.[1];
  return commit ? { version, commit } : { version };
}

/** statfs f_type values of filesystems a data root may sit on, by the names `docker info` prints. */
const FILESYSTEM_NAMES: Record<number, string> = {
  0xef53: 'extfs',
  0x58465342: 'xfs',
  0x9123683e: 'btrfs',
  0x01021994: 'tmpfs',
  0x794c7630: 'overlayfs',
  0x2fc12fc1: 'zfs',
  0xf2f52010: 'f2fs',
};

/** The storage driver's status lines: the filesystem under the data root and overlay's features. */
export async function readDriverStatus(dataRoot: string): Promise<Array<[string, string]>> {
  let backing = 'unknown';
  try {
    const st = await fs.statfs(dataRoot);
    backing = FILESYSTEM_NAMES[st.type] ?? `0x${st.type.toString(16)}`;
  } catch {
    // leave unknown
  }
  return [
    ['Backing Filesystem', backing],
    ['Supports d_type', 'true'],
    ['Using metacopy', 'false'],
    ['Native Overlay Diff', 'true'],
    ['userxattr', 'false'],
  ];
}
