/**
 * Host devices in containers, as Docker gives them: HostConfig.Devices (a device node, or a folder of them,
 * made inside the container with its device cgroup rule), DeviceCgroupRules (`c 1:3 rwm`), the per-device
 * block IO weights and throttles (from the device's major:minor), and privileged containers' copy of the
 * host's /dev. The checks of the values run at create; the device paths are looked at at start, as Docker
 * does (a device may come and go between the two).
 */
import { existsSync, promises as fs, readFileSync, type BigIntStats } from 'node:fs';
import path from 'node:path';
import { devMajor, devMinor } from '../../util/devnum.js';
import { InvalidParameter } from '../../errors.js';

export interface LinuxDevice {
  path: string;
  type: 'c' | 'b';
  major: number;
  minor: number;
  fileMode: number;
  uid: number;
  gid: number;
}

export interface DeviceRule {
  allow: boolean;
  type?: 'a' | 'c' | 'b';
  major?: number;
  minor?: number;
  access: string;
}

interface RateDevice {
  major: number;
  minor: number;
  rate: number;
}

export interface BlockIO {
  weightDevice?: Array<{ major: number; minor: number; weight: number }>;
  throttleReadBpsDevice?: RateDevice[];
  throttleWriteBpsDevice?: RateDevice[];
  throttleReadIOPSDevice?: RateDevice[];
  throttleWriteIOPSDevice?: RateDevice[];
}

/** What the container's spec gets from its devices: nodes to make, cgroup rules after the defaults, block IO. */
export interface ResolvedDevices {
  devices: LinuxDevice[];
  rules: DeviceRule[];
  blockIO: BlockIO;
}

const CGROUP_RULE = /^([acb]) ([0-9]+|\*):([0-9]+|\*) ([rwm]{1,3})$/;

/** Parses a DeviceCgroupRules entry (`c 1:3 rwm`, `b *:* r`, `a *:* rwm`) into an allow rule. */
export function parseCgroupRule(rule: string): DeviceRule {
  const m = CGROUP_RULE.exec(rule);
  if (!m) throw new InvalidParameter(`invalid device cgroup rule format: '${rule}' (expected 'a|b|c major|*:minor|* r|w|m', such as 'c 1:3 rwm')`);
  const out: DeviceRule = { allow: true, type: m[1] as DeviceRule['type'], access: m[4] };
  if (m[2] !== '*') out.major = Number(m[2]);
  if (m[3] !== '*') out.minor = Number(m[3]);
  return out;
}

interface DeviceMapping {
  PathOnHost: string;
  PathInContainer: string;
  CgroupPermissions: string;
}

/** A Devices entry with the defaults Docker's client fills in (same path inside, `rwm`). */
function mapping(raw: Record<string, unknown>): DeviceMapping {
  const onHost = raw.PathOnHost as string;
  return {
    PathOnHost: onHost,
    PathInContainer: (raw.PathInContainer as string | undefined) || onHost,
    CgroupPermissions: (raw.CgroupPermissions as string | undefined) || 'rwm',
  };
}

const BLKIO_FIELDS = ['BlkioWeightDevice', 'BlkioDeviceReadBps', 'BlkioDeviceWriteBps', 'BlkioDeviceReadIOps', 'BlkioDeviceWriteIOps'] as const;

/** The create-time checks of Devices, DeviceCgroupRules and the per-device block IO lists. */
export function validateDeviceFields(hc: Record<string, unknown>): void {
  for (const [i, raw] of ((hc.Devices as unknown[] | null) ?? []).entries()) {
    const field = `HostConfig.Devices[${i}]`;
    if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) throw new InvalidParameter(`invalid ${field}: expected an object {PathOnHost, PathInContainer, CgroupPermissions}`);
    const d = raw as Record<string, unknown>;
    for (const key of ['PathOnHost', 'PathInContainer', 'CgroupPermissions']) {
      if (d[key] !== undefined && d[key] !== null && typeof d[key] !== 'string') throw new InvalidParameter(`invalid ${field}.${key}: expected a string`);
    }
    if (typeof d.PathOnHost !== 'string' || d.PathOnHost === '') throw new InvalidParameter(`invalid ${field}: PathOnHost is required`);
    const m = mapping(d);
    if (!m.PathInContainer.startsWith('/')) throw new InvalidParameter(`invalid ${field}: the path in the container ${JSON.stringify(m.PathInContainer)} must be absolute`);
    if (!/^[rwm]{1,3}$/.test(m.CgroupPermissions) || new Set(m.CgroupPermissions).size !== m.CgroupPermissions.length) {
      throw new InvalidParameter(`invalid ${field}: invalid device mode ${JSON.stringify(m.CgroupPermissions)}: use a combination of r, w and m`);
    }
  }
  for (const rule of (hc.DeviceCgroupRules as string[] | null) ?? []) parseCgroupRule(rule);
  for (const key of BLKIO_FIELDS) {
    for (const [i, raw] of ((hc[key] as unknown[] | null) ?? []).entries()) {
      const field = `HostConfig.${key}[${i}]`;
      const valueKey = key === 'BlkioWeightDevice' ? 'Weight' : 'Rate';
      if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) throw new InvalidParameter(`invalid ${field}: expected an object {Path, ${valueKey}}`);
      const d = raw as Record<string, unknown>;
      if (typeof d.Path !== 'string' || !d.Path.startsWith('/')) throw new InvalidParameter(`invalid ${field}.Path: expected the absolute path of a block device such as /dev/sda`);
      const v = d[valueKey];
      if (v !== undefined && (typeof v !== 'number' || !Number.isInteger(v) || v < 0)) throw new InvalidParameter(`invalid ${field}.${valueKey}: expected a whole number, not negative`);
      if (valueKey === 'Weight' && typeof v === 'number' && v !== 0 && (v < 10 || v > 1000)) {
        throw new InvalidParameter(`invalid ${field}.Weight: ${v}: the range of blkio weight is from 10 to 1000`);
      }
    }
  }
}

/** Which block IO files the blkio (v1) or io (v2) controller of this host has. Read once. */
interface BlkioSupport {
  weight: boolean;
  weightDevice: boolean;
  throttle: boolean;
}

let support: BlkioSupport | undefined;

function blkioSupport(cgroupRoot = '/sys/fs/cgroup'): BlkioSupport {
  if (support) return support;
  const has = (...parts: string[]) => existsSync(path.join(cgroupRoot, ...parts));
  if (has('cgroup.controllers')) {
    let io = false;
    try {
      io = readFileSync(path.join(cgroupRoot, 'cgroup.controllers'), 'utf8').split(/\s+/).includes('io');
    } catch {
      // no controllers readable: none
    }
    const weight = io && (has('io.weight') || has('io.bfq.weight') || has('system.slice', 'io.weight') || has('system.slice', 'io.bfq.weight'));
    support = { weight, weightDevice: weight, throttle: io };
  } else {
    support = {
      weight: has('blkio', 'blkio.weight') || has('blkio', 'blkio.bfq.weight'),
      weightDevice: has('blkio', 'blkio.weight_device') || has('blkio', 'blkio.bfq.weight_device'),
      throttle: has('blkio', 'blkio.throttle.read_bps_device'),
    };
  }
  return support;
}

const KERNEL_MEMORY_WARNING = 'Your kernel does not support kernel memory limit capabilities or the cgroup is not mounted. Limitation discarded.';

/**
 * Docker's create-time warnings for limits this host cannot apply; the limit is discarded (left out of
 * `hc`, which the caller then stores). KernelMemory is never applied: kernels since 5.4 deprecate the kmem
 * limit and those here accept a write to memory.kmem.limit_in_bytes and keep it unlimited; cgroup v2 has none.
 */
export function discardUnsupported(hc: Record<string, any>): string[] {
  const warnings: string[] = [];
  if (typeof hc.KernelMemory === 'number' && hc.KernelMemory > 0) {
    warnings.push(KERNEL_MEMORY_WARNING);
    hc.KernelMemory = 0;
  }
  const s = blkioSupport();
  if (typeof hc.BlkioWeight === 'number' && hc.BlkioWeight > 0 && !s.weight) {
    warnings.push('Your kernel does not support Block I/O weight or the cgroup is not mounted. Weight discarded.');
    hc.BlkioWeight = 0;
  }
  const lists: Array<[string, boolean, string]> = [
    ['BlkioWeightDevice', s.weightDevice, 'Your kernel does not support Block I/O weight_device or the cgroup is not mounted. Weight-device discarded.'],
    ['BlkioDeviceReadBps', s.throttle, 'Your kernel does not support BPS Block I/O read limit or the cgroup is not mounted. Block I/O BPS read limit discarded.'],
    ['BlkioDeviceWriteBps', s.throttle, 'Your kernel does not support BPS Block I/O write limit or the cgroup is not mounted. Block I/O BPS write limit discarded.'],
    ['BlkioDeviceReadIOps', s.throttle, 'Your kernel does not support IOPS Block read limit or the cgroup is not mounted. Block I/O IOPS read limit discarded.'],
    ['BlkioDeviceWriteIOps', s.throttle, 'Your kernel does not support IOPS Block write limit or the cgroup is not mounted. Block I/O IOPS write limit discarded.'],
  ];
  for (const [key, supported, warning] of lists) {
    if (Array.isArray(hc[key]) && hc[key].length > 0 && !supported) {
      warnings.push(warning);
      hc[key] = [];
    }
  }
  return warnings;
}

function majorMinor(rdev: bigint): { major: number; minor: number } {
  return { major: devMajor(rdev), minor: devMinor(rdev) };
}

const ERRNO_TEXT: Record<string, string> = {
  ENOENT: 'no such file or directory',
  EACCES: 'permission denied',
  ENOTDIR: 'not a directory',
  ELOOP: 'too many levels of symbolic links',
  ENAMETOOLONG: 'file name too long',
};

function errnoText(err: unknown): string {
  const code = (err as NodeJS.ErrnoException).code;
  return (code && ERRNO_TEXT[code]) || (err as Error).message;
}

class NotADevice extends Error {}

/** The device node at `p` (not following a symbolic link), or NotADevice. */
async function deviceAt(p: string, inContainer: string): Promise<LinuxDevice> {
  const st: BigIntStats = await fs.lstat(p, { bigint: true });
  const type = st.isCharacterDevice() ? 'c' : st.isBlockDevice() ? 'b' : undefined;
  if (!type) throw new NotADevice('not a device node');
  return { path: inContainer, type, ...majorMinor(st.rdev), fileMode: Number(st.mode & 0o7777n), uid: Number(st.uid), gid: Number(st.gid) };
}

function ruleFor(d: LinuxDevice, access: string): DeviceRule {
  return { allow: true, type: d.type, major: d.major, minor: d.minor, access };
}

/** Every device node below `dir` (symbolic links and what cannot be read are left out), as Docker walks it. */
async function devicesBelow(dir: string, skip: (rel: string) => boolean = () => false, rel = ''): Promise<Array<{ rel: string; device: LinuxDevice }>> {
  const out: Array<{ rel: string; device: LinuxDevice }> = [];
  let entries: import('node:fs').Dirent[];
  try {
    entries = await fs.readdir(path.join(dir, rel), { withFileTypes: true });
  } catch {
    return out;
  }
  entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  for (const e of entries) {
    const r = rel ? `${rel}/${e.name}` : e.name;
    if (skip(r)) continue;
    if (e.isDirectory()) out.push(...(await devicesBelow(dir, skip, r)));
    else if (e.isCharacterDevice() || e.isBlockDevice()) {
      const device = await deviceAt(path.join(dir, r), '').catch(() => undefined);
      if (device) out.push({ rel: r, device });
    }
  }
  return out;
}

/** One Devices entry: its node, or the nodes of the folder it names. Errors carry Docker's message. */
async function devicesFromPath(m: DeviceMapping): Promise<LinuxDevice[]> {
  let resolved = m.PathOnHost;
  const fail = (reason: string) => new Error(`error gathering device information while adding custom device "${m.PathOnHost}": ${reason}`);
  try {
    if ((await fs.lstat(resolved)).isSymbolicLink()) resolved = await fs.realpath(resolved).catch(() => resolved);
    return [await deviceAt(resolved, m.PathInContainer)];
  } catch (err) {
    if (!(err instanceof NotADevice)) throw fail(errnoText(err));
  }
  const found = (await fs.stat(resolved)).isDirectory() ? await devicesBelow(resolved) : [];
  if (found.length === 0) throw fail('not a device node');
  return found.map(({ rel, device }) => ({ ...device, path: path.posix.join(m.PathInContainer, rel) }));
}

/** The major:minor of a block IO entry's device (following links, as Docker's stat does). */
async function blockDevice(field: string, p: string): Promise<{ major: number; minor: number }> {
  let st: BigIntStats;
  try {
    st = await fs.stat(p, { bigint: true });
  } catch (err) {
    throw new Error(`${field}: stat ${p}: ${errnoText(err)}`);
  }
  if (!st.isBlockDevice()) throw new Error(`${field}: ${p} is not a block device`);
  return majorMinor(st.rdev);
}

/** The block IO settings of the per-device lists of `hc`, each device given by its major:minor. */
export async function resolveBlockIO(hc: Record<string, any>): Promise<BlockIO> {
  const out: BlockIO = {};
  const weights = (hc.BlkioWeightDevice as Array<{ Path: string; Weight?: number }> | null) ?? [];
  if (weights.length > 0) {
    out.weightDevice = [];
    for (const w of weights) out.weightDevice.push({ ...(await blockDevice('BlkioWeightDevice', w.Path)), weight: w.Weight ?? 0 });
  }
  const throttles: Array<[string, keyof BlockIO]> = [
    ['BlkioDeviceReadBps', 'throttleReadBpsDevice'],
    ['BlkioDeviceWriteBps', 'throttleWriteBpsDevice'],
    ['BlkioDeviceReadIOps', 'throttleReadIOPSDevice'],
    ['BlkioDeviceWriteIOps', 'throttleWriteIOPSDevice'],
  ];
  for (const [key, ociKey] of throttles) {
    const list = (hc[key] as Array<{ Path: string; Rate?: number }> | null) ?? [];
    if (list.length === 0) continue;
    const rates: RateDevice[] = [];
    for (const t of list) rates.push({ ...(await blockDevice(key, t.Path)), rate: t.Rate ?? 0 });
    (out as Record<string, RateDevice[]>)[ociKey] = rates;
  }
  return out;
}

/** Folders of /dev that a privileged container does not get from the host (its own are mounted there). */
const HOST_DEV_SKIP = new Set(['pts', 'shm', 'fd', 'mqueue', '.lxc', '.lxd-mounts', '.udev', 'console']);

/**
 * Everything the container's spec needs from its device settings, read from the host now (at start). A
 * privileged container gets every device node of the host's /dev, and its own Devices at other places.
 */
export async function resolveDevices(hc: Record<string, any>, devRoot = '/dev'): Promise<ResolvedDevices> {
  const devices: LinuxDevice[] = [];
  const rules: DeviceRule[] = [];
  const privileged = hc.Privileged === true;
  if (privileged) {
    for (const { rel, device } of await devicesBelow(devRoot, (r) => HOST_DEV_SKIP.has(r.split('/')[0]))) {
      devices.push({ ...device, path: path.posix.join('/dev', rel) });
    }
  }
  for (const raw of (hc.Devices as Array<Record<string, unknown>> | null) ?? []) {
    const m = mapping(raw);
    // Privileged containers already have the host's node at the same place, and may use every device.
    if (privileged && m.PathOnHost === m.PathInContainer) continue;
    const found = await devicesFromPath(m);
    devices.push(...found);
    if (!privileged) rules.push(...found.map((d) => ruleFor(d, m.CgroupPermissions)));
  }
  if (!privileged) for (const rule of (hc.DeviceCgroupRules as string[] | null) ?? []) rules.push(parseCgroupRule(rule));
  // A later node at the same place wins (a Devices entry over the host's copy).
  const byPath = new Map(devices.map((d) => [d.path, d]));
  return { devices: [...byPath.values()], rules, blockIO: await resolveBlockIO(hc) };
}
