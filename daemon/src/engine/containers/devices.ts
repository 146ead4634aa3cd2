/**
 * Host devices in containers, as Docker gives them: HostConfig.Devices (a device node, or a folder of them,
 * made inside the container with its device cgroup rule), DeviceCgroupRules (`c 1:3 rwm`), the per-device
 * block IO weights and throttles (from the device's major:minor), and privileged containers' copy of the
 * host's /dev. The checks of the values run at create; the device paths are looked at at start, as Docker
 * does (a device may come and go between the two).
 */
import { InvalidParameter } from '../../errors.js';
import type { DeviceNode, ProbeHost } from '../../host/host.js';
import { machineFacts } from '../machine.js';

/** A device node as the container's spec lists it (the Host reads it from the machine). */
export type LinuxDevice = DeviceNode;

/** What resolving devices needs of the Host's probe. */
export type DeviceProbe = Pick<ProbeHost, 'devices' | 'allDevices' | 'blockDevice'>;

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

function ruleFor(d: LinuxDevice, access: string): DeviceRule {
  return { allow: true, type: d.type, major: d.major, minor: d.minor, access };
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
  const s = machineFacts().blkio;
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

/** The block IO settings of the per-device lists of `hc`, each device given by its major:minor. */
export async function resolveBlockIO(hc: Record<string, any>, probe: Pick<ProbeHost, 'blockDevice'>): Promise<BlockIO> {
  const out: BlockIO = {};
  const weights = (hc.BlkioWeightDevice as Array<{ Path: string; Weight?: number }> | null) ?? [];
  if (weights.length > 0) {
    out.weightDevice = [];
    for (const w of weights) out.weightDevice.push({ ...(await probe.blockDevice('BlkioWeightDevice', w.Path)), weight: w.Weight ?? 0 });
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
    for (const t of list) rates.push({ ...(await probe.blockDevice(key, t.Path)), rate: t.Rate ?? 0 });
    (out as Record<string, RateDevice[]>)[ociKey] = rates;
  }
  return out;
}

/**
 * Everything the container's spec needs from its device settings, read from the host now (at start). A
 * privileged container gets every device node of the host's /dev, and its own Devices at other places.
 */
export async function resolveDevices(hc: Record<string, any>, probe: DeviceProbe): Promise<ResolvedDevices> {
  const devices: LinuxDevice[] = [];
  const rules: DeviceRule[] = [];
  const privileged = hc.Privileged === true;
  if (privileged) devices.push(...(await probe.allDevices()));
  for (const raw of (hc.Devices as Array<Record<string, unknown>> | null) ?? []) {
    const m = mapping(raw);
    // Privileged containers already have the host's node at the same place, and may use every device.
    if (privileged && m.PathOnHost === m.PathInContainer) continue;
    const found = await probe.devices(m.PathOnHost, m.PathInContainer);
    devices.push(...found);
    if (!privileged) rules.push(...found.map((d) => ruleFor(d, m.CgroupPermissions)));
  }
  if (!privileged) for (const rule of (hc.DeviceCgroupRules as string[] | null) ?? []) rules.push(parseCgroupRule(rule));
  // A later node at the same place wins (a Devices entry over the host's copy).
  const byPath = new Map(devices.map((d) => [d.path, d]));
  return { devices: [...byPath.values()], rules, blockIO: await resolveBlockIO(hc, probe) };
}
