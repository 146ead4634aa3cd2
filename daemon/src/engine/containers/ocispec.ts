/**
 * The OCI runtime spec (config.json) of a container, built from its Config and HostConfig the way Docker
 * builds it: default capabilities, masked and read-only paths, /dev, /dev/shm, cgroup limits, rlimits, the
 * bind-mounted hosts/hostname/resolv.conf files.
 */
import { InvalidParameter } from '../../errors.js';
import type { ResolvedDevices } from './devices.js';
import { withInit } from './init.js';
import type { ContainerRecord } from './model.js';
import { parseSecurityOptions, seccompFor } from './seccomp.js';
import { capabilityHeld, hostRlimits } from '../machine.js';
import { CAPABILITIES, normaliseCapability, parseBind, validateUlimits } from './validate.js';

export const DEFAULT_CAPABILITIES = [
  'CAP_CHOWN', 'CAP_DAC_OVERRIDE', 'CAP_FSETID', 'CAP_FOWNER', 'CAP_MKNOD', 'CAP_NET_RAW', 'CAP_SETGID',
  'CAP_SETUID', 'CAP_SETFCAP', 'CAP_SETPCAP', 'CAP_NET_BIND_SERVICE', 'CAP_SYS_CHROOT', 'CAP_KILL', 'CAP_AUDIT_WRITE',
];

/** The paths a container that is not privileged gets masked and read-only unless its HostConfig names others. */
export const MASKED_PATHS = [
  '/proc/asound', '/proc/acpi', '/proc/interrupts', '/proc/kcore', '/proc/keys', '/proc/latency_stats',
  '/proc/timer_list', '/proc/timer_stats', '/proc/sched_debug', '/proc/scsi', '/sys/firmware', '/sys/devices/virtual/powercap',
];
export const READONLY_PATHS = ['/proc/bus', '/proc/fs', '/proc/irq', '/proc/sys', '/proc/sysrq-trigger'];

export const DEFAULT_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';
export const DEFAULT_SHM_SIZE = 64 * 1024 * 1024;

/** Docker's default device cgroup rules: deny all, then the usual character devices. */
const DEFAULT_DEVICE_RULES = [
  { allow: false, access: 'rwm' },
  { allow: true, type: 'c', major: 1, minor: 5, access: 'rwm' },
  { allow: true, type: 'c', major: 1, minor: 3, access: 'rwm' },
  { allow: true, type: 'c', major: 1, minor: 9, access: 'rwm' },
  { allow: true, type: 'c', major: 1, minor: 8, access: 'rwm' },
  { allow: true, type: 'c', major: 5, minor: 0, access: 'rwm' },
  { allow: true, type: 'c', major: 5, minor: 1, access: 'rwm' },
  { allow: true, type: 'c', major: 1, minor: 7, access: 'rwm' },
  { allow: true, type: 'c', major: 136, access: 'rwm' },
  { allow: true, type: 'c', major: 5, minor: 2, access: 'rwm' },
  { allow: true, type: 'c', major: 10, minor: 200, access: 'rwm' },
  { allow: false, type: 'c', major: 10, minor: 229, access: 'rwm' },
];

export interface ProcessUser {
  uid: number;
  gid: number;
  additionalGids: number[];
  home: string;
}

interface PasswdEntry {
  name: string;
  uid: number;
  gid: number;
  home: string;
}

function parsePasswd(text: string | undefined): PasswdEntry[] {
  return (text ?? '')
    .split('\n')
    .map((line) => line.split(':'))
    .filter((f) => f.length >= 7 && /^\d+$/.test(f[2]) && /^\d+$/.test(f[3]))
    .map((f) => ({ name: f[0], uid: Number(f[2]), gid: Number(f[3]), home: f[5] }));
}

interface GroupEntry {
  name: string;
  gid: number;
  members: string[];
}

function parseGroup(text: string | undefined): GroupEntry[] {
  return (text ?? '')
    .split('\n')
    .map((line) => line.split(':'))
    .filter((f) => f.length >= 4 && /^\d+$/.test(f[2]))
    .map((f) => ({ name: f[0], gid: Number(f[2]), members: f[3].split(',').filter(Boolean) }));
}

/**
 * Resolves `user`, `user:group`, `uid` or `uid:gid` against the image's /etc/passwd and /etc/group, as
 * Docker does: numeric ids need not exist; names must.
 */
export function resolveUser(spec: string, passwd: string | undefined, group: string | undefined, groupAdd: string[] = []): ProcessUser {
  const users = parsePasswd(passwd);
  const groups = parseGroup(group);
  const [userPart, groupPart] = spec === '' ? ['0', undefined] : spec.split(':', 2);
  let uid: number;
  let gid: number;
  let home = '/';
  let name: string | undefined;
  if (/^\d+$/.test(userPart)) {
    uid = Number(userPart);
    const entry = users.find((u) => u.uid === uid);
    gid = entry?.gid ?? 0;
    home = entry?.home ?? '/';
    name = entry?.name;
  } else {
    const entry = users.find((u) => u.name === userPart);
    if (!entry) throw new InvalidParameter(`unable to find user ${userPart}: no matching entries in passwd file`);
    uid = entry.uid;
    gid = entry.gid;
    home = entry.home;
    name = entry.name;
  }
  if (groupPart !== undefined && groupPart !== '') {
    if (/^\d+$/.test(groupPart)) gid = Number(groupPart);
    else {
      const g = groups.find((x) => x.name === groupPart);
      if (!g) throw new InvalidParameter(`unable to find group ${groupPart}: no matching entries in group file`);
      gid = g.gid;
    }
  }
  const additional = new Set<number>();
  if (name) for (const g of groups) if (g.members.includes(name) && g.gid !== gid) additional.add(g.gid);
  for (const extra of groupAdd) {
    if (/^\d+$/.test(extra)) additional.add(Number(extra));
    else {
      const g = groups.find((x) => x.name === extra);
      if (!g) throw new InvalidParameter(`unable to find group ${extra}: no matching entries in group file`);
      additional.add(g.gid);
    }
  }
  return { uid, gid, additionalGids: [...additional], home };
}

export interface SpecInputs {
  record: ContainerRecord;
  user: ProcessUser;
  /** 'new' for a fresh namespace, 'host' to share the host's, or a path to join. */
  network: 'new' | 'host' | { path: string };
  /** The cgroup parent path (absolute, below the cgroup root). */
  cgroupParent: string;
  /** The container's devices, device rules and block IO, read from the host at start (devices.ts). */
  devices?: ResolvedDevices;
  /** The variables of the container's legacy links (links.ts); its own Env wins over them. */
  linkEnv?: readonly string[];
  /** Host paths to bind in place of some mount points' Source (a volume's Subpath), by destination. */
  mountSources?: Map<string, string>;
}

/**
 * Every capability the runtime's caller holds (its bounding set, a fact of the Host): a runtime cannot grant
 * more, its capset would fail (machines without CAP_SYS_RESOURCE, for one).
 */
function allCapabilities(): string[] {
  return CAPABILITIES.filter((_, bit) => capabilityHeld(bit)).map((c) => `CAP_${c}`);
}

function capabilitiesFor(hc: Record<string, unknown>): string[] {
  const all = allCapabilities();
  if (hc.Privileged === true) return all;
  const adds = ((hc.CapAdd as string[] | null) ?? []).map((c) => normaliseCapability('HostConfig.CapAdd', c));
  const drops = ((hc.CapDrop as string[] | null) ?? []).map((c) => normaliseCapability('HostConfig.CapDrop', c));
  // As Docker: ALL in CapAdd starts from every capability, ALL in CapDrop from none; an added capability
  // survives a drop of the same name.
  const base = drops.includes('ALL') ? [] : adds.includes('ALL') ? all : DEFAULT_CAPABILITIES.filter((c) => !drops.includes(c));
  return [...new Set([...base, ...adds.filter((c) => c !== 'ALL')])];
}

function tmpfsOptions(options: string): { options: string[] } {
  const parts = options.split(',').map((o) => o.trim()).filter(Boolean);
  const base = ['nosuid', 'nodev', 'noexec'];
  const out = parts.length > 0 ? parts : [];
  for (const b of base) if (!out.includes(b) && !out.includes(b.replace(/^no/, ''))) out.push(b);
  return { options: out };
}

export function buildSpec({ record, user, network, cgroupParent, devices, mountSources, linkEnv = [] }: SpecInputs): Record<string, unknown> {
  const config = record.Config;
  const hc = record.HostConfig as Record<string, any>;
  const caps = capabilitiesFor(hc);
  const security = parseSecurityOptions(hc.SecurityOpt as string[] | null);
  const env = [...config.Env];
  const has = (k: string) => env.some((e) => e.startsWith(`${k}=`));
  if (!has('PATH')) env.unshift(`PATH=${DEFAULT_PATH}`);
  if (!has('HOSTNAME')) env.push(`HOSTNAME=${config.Hostname}`);
  if (config.Tty && !has('TERM')) env.push('TERM=xterm');
  for (const variable of linkEnv) if (!has(variable.slice(0, variable.indexOf('=')))) env.push(variable);
  if (!has('HOME')) env.push(`HOME=${user.home || '/'}`);

  // Rlimits: those asked for, and the daemon's own otherwise (a container given more than the host's hard
  // limit fails in the runtime's setrlimit).
  const asked = validateUlimits(hc.Ulimits as unknown[] | null);
  const own = hostRlimits().get('RLIMIT_NOFILE');
  const rlimits = [...asked];
  if (own && !asked.some((r) => r.type === 'RLIMIT_NOFILE')) rlimits.push({ type: 'RLIMIT_NOFILE', soft: own.soft, hard: own.hard });

  const shmSize = (hc.ShmSize as number) > 0 ? (hc.ShmSize as number) : DEFAULT_SHM_SIZE;
  const mounts: Array<Record<string, unknown>> = [
    { destination: '/proc', type: 'proc', source: 'proc', options: ['nosuid', 'noexec', 'nodev'] },
    { destination: '/dev', type: 'tmpfs', source: 'tmpfs', options: ['nosuid', 'strictatime', 'mode=755', 'size=65536k'] },
    { destination: '/dev/pts', type: 'devpts', source: 'devpts', options: ['nosuid', 'noexec', 'newinstance', 'ptmxmode=0666', 'mode=0620', 'gid=5'] },
    { destination: '/sys', type: 'sysfs', source: 'sysfs', options: ['nosuid', 'noexec', 'nodev', hc.Privileged ? 'rw' : 'ro'] },
    { destination: '/sys/fs/cgroup', type: 'cgroup', source: 'cgroup', options: ['nosuid', 'noexec', 'nodev', 'relatime', hc.Privileged ? 'rw' : 'ro'] },
    { destination: '/dev/mqueue', type: 'mqueue', source: 'mqueue', options: ['nosuid', 'noexec', 'nodev'] },
    { destination: '/dev/shm', type: 'tmpfs', source: 'shm', options: ['nosuid', 'noexec', 'nodev', 'mode=1777', `size=${shmSize}`] },
  ];
  const userMounts = new Set<string>();
  const userStart = mounts.length;
  for (const bind of (hc.Binds as string[] | null) ?? []) {
    const b = parseBind(bind);
    // Named volumes are in record.Mounts with their host folder (below).
    if (b.volume) continue;
    userMounts.add(b.destination);
    mounts.push({ destination: b.destination, type: 'bind', source: b.source, options: ['rbind', b.readOnly ? 'ro' : 'rw', b.propagation] });
  }
  for (const m of (hc.Mounts as Array<Record<string, any>> | null) ?? []) {
    // Volumes of Mounts are in record.Mounts with their host folder (below).
    if (m.Type === 'volume') continue;
    userMounts.add(m.Target);
    // The record's mount point of it has the cleaned path.
    userMounts.add(String(m.Target).replace(/\/+$/, '').replace(/\/{2,}/g, '/') || '/');
    if (m.Type === 'bind') {
      mounts.push({ destination: m.Target, type: 'bind', source: m.Source, options: ['rbind', m.ReadOnly ? 'ro' : 'rw', m.BindOptions?.Propagation ?? 'rprivate'] });
    } else if (m.Type === 'tmpfs') {
      const opts = ['nosuid', 'nodev', 'noexec'];
      if (m.TmpfsOptions?.SizeBytes) opts.push(`size=${m.TmpfsOptions.SizeBytes}`);
      if (m.TmpfsOptions?.Mode) opts.push(`mode=${Number(m.TmpfsOptions.Mode).toString(8)}`);
      if (m.ReadOnly) opts.push('ro');
      mounts.push({ destination: m.Target, type: 'tmpfs', source: 'tmpfs', options: opts });
    }
  }
  for (const [dest, options] of Object.entries((hc.Tmpfs as Record<string, string> | null) ?? {})) {
    userMounts.add(dest);
    mounts.push({ destination: dest, type: 'tmpfs', source: 'tmpfs', ...tmpfsOptions(options) });
  }
  // Volumes, and what VolumesFrom brings: the mount points of the record that nothing above mounts.
  for (const m of record.Mounts ?? []) {
    if (m.Type === 'tmpfs' || userMounts.has(m.Destination)) continue;
    userMounts.add(m.Destination);
    mounts.push({ destination: m.Destination, type: 'bind', source: mountSources?.get(m.Destination) ?? m.Source, options: ['rbind', m.RW ? 'rw' : 'ro', m.Propagation || 'rprivate'] });
  }
  // Parents before children (a bind below a volume's place is mounted after the volume), as Docker sorts them.
  const depth = (m: Record<string, unknown>) => String(m.destination).split('/').filter(Boolean).length;
  const ordered = mounts.splice(userStart).map((m, i) => ({ m, i })).sort((a, b) => depth(a.m) - depth(b.m) || a.i - b.i);
  mounts.push(...ordered.map(({ m }) => m));
  // As Docker: a shared mount keeps the root's propagation shared, a slave one at least rslave (else the
  // runtime's private root would cut them off from the host).
  const propagations = mounts.flatMap((m) => (Array.isArray(m.options) ? (m.options as string[]) : []));
  const rootfsPropagation = propagations.some((o) => o === 'shared' || o === 'rshared')
    ? 'shared'
    : propagations.some((o) => o === 'slave' || o === 'rslave')
      ? 'rslave'
      : undefined;
  // The files the engine writes for the container; a user mount at the same place wins.
  const files: Array<[string, string]> = [
    ['/etc/resolv.conf', record.ResolvConfPath],
    ['/etc/hostname', record.HostnamePath],
    ['/etc/hosts', record.HostsPath],
  ];
  for (const [dest, source] of files) {
    if (!source || userMounts.has(dest)) continue;
    mounts.push({ destination: dest, type: 'bind', source, options: ['rbind', 'rprivate', hc.ReadonlyRootfs ? 'ro' : 'rw'] });
  }

  const namespaces: Array<Record<string, string>> = [{ type: 'pid' }, { type: 'ipc' }, { type: 'uts' }, { type: 'mount' }];
  if (network === 'new') namespaces.push({ type: 'network' });
  else if (network !== 'host') namespaces.push({ type: 'network', path: network.path });
  if (hc.CgroupnsMode === 'private') namespaces.push({ type: 'cgroup' });
  if (hc.PidMode === 'host') namespaces.splice(namespaces.findIndex((n) => n.type === 'pid'), 1);
  if (hc.IpcMode === 'host') namespaces.splice(namespaces.findIndex((n) => n.type === 'ipc'), 1);
  if (hc.UTSMode === 'host') namespaces.splice(namespaces.findIndex((n) => n.type === 'uts'), 1);

  const resources: Record<string, unknown> = { devices: hc.Privileged ? [{ allow: true, access: 'rwm' }] : DEFAULT_DEVICE_RULES };
  const memory: Record<string, number> = {};
  if (hc.Memory > 0) memory.limit = hc.Memory;
  if (hc.MemorySwap > 0 || hc.MemorySwap === -1) memory.swap = hc.MemorySwap;
  else if (hc.Memory > 0) memory.swap = hc.Memory * 2;
  if (hc.MemoryReservation > 0) memory.reservation = hc.MemoryReservation;
  if (typeof hc.MemorySwappiness === 'number' && hc.MemorySwappiness >= 0) memory.swappiness = hc.MemorySwappiness;
  if (hc.OomKillDisable === true) (memory as Record<string, unknown>).disableOOMKiller = true;
  if (Object.keys(memory).length > 0) resources.memory = memory;
  const cpu: Record<string, unknown> = {};
  if (hc.CpuShares > 0) cpu.shares = hc.CpuShares;
  if (hc.NanoCpus > 0) {
    cpu.period = 100_000;
    cpu.quota = Math.round((hc.NanoCpus * 100_000) / 1e9);
  }
  if (hc.CpuPeriod > 0) cpu.period = hc.CpuPeriod;
  if (hc.CpuQuota > 0 || hc.CpuQuota === -1) cpu.quota = hc.CpuQuota;
  if (hc.CpusetCpus) cpu.cpus = hc.CpusetCpus;
  if (hc.CpusetMems) cpu.mems = hc.CpusetMems;
  if (Object.keys(cpu).length > 0) resources.cpu = cpu;
  if (typeof hc.PidsLimit === 'number' && hc.PidsLimit > 0) resources.pids = { limit: hc.PidsLimit };
  if (hc.BlkioWeight > 0) resources.blockIO = { weight: hc.BlkioWeight };
  if (devices) {
    if (devices.rules.length > 0) resources.devices = [...(resources.devices as object[]), ...devices.rules];
    if (Object.keys(devices.blockIO).length > 0) resources.blockIO = { ...(resources.blockIO as object | undefined), ...devices.blockIO };
  }

  let args = [...(config.Entrypoint ?? []), ...(config.Cmd ?? [])];
  if (hc.Init === true) {
    // The init binary as PID 1, the command its child (inspect keeps showing the command).
    const init = withInit(args);
    args = init.args;
    mounts.push(init.mount);
  }
  return {
    ociVersion: '1.0.2',
    process: {
      terminal: config.Tty,
      consoleSize: config.Tty && Array.isArray(hc.ConsoleSize) && hc.ConsoleSize[0] > 0 ? { height: hc.ConsoleSize[0], width: hc.ConsoleSize[1] } : undefined,
      user: { uid: user.uid, gid: user.gid, additionalGids: user.additionalGids.length > 0 ? user.additionalGids : undefined },
      args,
      env,
      cwd: config.WorkingDir || '/',
      capabilities: { bounding: caps, effective: caps, permitted: caps },
      rlimits,
      noNewPrivileges: security.noNewPrivileges,
      oomScoreAdj: typeof hc.OomScoreAdj === 'number' && hc.OomScoreAdj !== 0 ? hc.OomScoreAdj : undefined,
    },
    root: { path: 'rootfs', readonly: hc.ReadonlyRootfs === true },
    hostname: config.Hostname,
    domainname: config.Domainname || undefined,
    mounts,
    annotations: hc.Annotations ?? undefined,
    linux: {
      namespaces,
      rootfsPropagation,
      devices: devices && devices.devices.length > 0 ? devices.devices : undefined,
      cgroupsPath: `${cgroupParent}/${record.Id}`,
      resources,
      sysctl: hc.Sysctls ?? undefined,
      maskedPaths: hc.Privileged ? [] : (hc.MaskedPaths as string[] | undefined) ?? MASKED_PATHS,
      readonlyPaths: hc.Privileged ? [] : (hc.ReadonlyPaths as string[] | undefined) ?? READONLY_PATHS,
      seccomp: seccompFor(security, hc.Privileged === true, caps),
    },
  };
}
