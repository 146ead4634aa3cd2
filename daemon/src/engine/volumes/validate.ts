/** Checks of a volume create request: the name, the driver, the local driver's options. */
import { InvalidParameter } from '../../errors.js';
import type { LocalDriverOptions, VolumeHost } from '../../host/host.js';
import { VOLUME_NAME, VOLUME_NAME_MAX } from './types.js';
import { isAbsoluteHostPath } from '../../util/hostpath.js';

export interface CreateVolumeRequest {
  Name?: unknown;
  Driver?: unknown;
  DriverOpts?: unknown;
  Labels?: unknown;
}

const LOCAL_OPTION_KEYS = ['type', 'device', 'o'];

export function isStringMap(value: unknown): value is Record<string, string> {
  return value !== null && typeof value === 'object' && !Array.isArray(value) && Object.values(value as object).every((v) => typeof v === 'string');
}

/** Checks a volume name; the message says what is allowed. */
export function validateVolumeName(name: string): void {
  // The name is a folder's name on disk: the kernel's NAME_MAX bounds it.
  if (name.length > VOLUME_NAME_MAX) throw new InvalidParameter(`invalid volume name: ${name.length} characters, the limit is ${VOLUME_NAME_MAX}`);
  if (!VOLUME_NAME.test(name)) {
    throw new InvalidParameter(
      `invalid volume name ${JSON.stringify(name)}: only [a-zA-Z0-9][a-zA-Z0-9_.-] are allowed, at least two characters. If you intended to pass a host directory, use an absolute path`,
    );
  }
}

/** Checks a driver name's type; answers the name of a plugin's driver, or undefined for the local driver. */
export function checkDriver(driver: unknown): string | undefined {
  if (driver === undefined || driver === null || driver === '' || driver === 'local') return undefined;
  if (typeof driver !== 'string') throw new InvalidParameter('Driver must be a string');
  return driver;
}

/**
 * Checks the local driver's DriverOpts: only type, device and o; a type is needed once any is given; type
 * none is a bind mount of an existing absolute `device`, with o=bind; other types (tmpfs aside) need a device.
 */
export async function validateLocalOptions(opts: Record<string, string>, host: Pick<VolumeHost, 'exists'>): Promise<void> {
  const keys = Object.keys(opts);
  if (keys.length === 0) return;
  for (const key of keys) {
    if (!LOCAL_OPTION_KEYS.includes(key)) throw new InvalidParameter(`invalid option ${JSON.stringify(key)} for the local volume driver: use type, device and o`);
  }
  const { type, device, o = '' } = opts as LocalDriverOptions;
  if (!type) throw new InvalidParameter('missing required option "type" for the local volume driver (for example type=tmpfs, or type=none with o=bind and device=/path)');
  if (!/^[a-z0-9_.-]+$/i.test(type)) throw new InvalidParameter(`invalid option type=${JSON.stringify(type)}: not a filesystem type`);
  if (/[\0\n]/.test(o) || /[\0\n]/.test(device ?? '')) throw new InvalidParameter('invalid option: o and device must not hold NUL or newline characters');
  if (device?.startsWith('-')) throw new InvalidParameter(`invalid option device=${JSON.stringify(device)}: a device must not start with "-"`);
  const flags = o.split(',').map((s) => s.trim());
  if (type === 'none') {
    if (!device) throw new InvalidParameter('missing required option "device" for a volume of type none: give the host path to bind (device=/path, o=bind)');
    if (!isAbsoluteHostPath(device)) throw new InvalidParameter(`invalid option device=${JSON.stringify(device)}: a bind volume's device must be an absolute host path`);
    if (!flags.includes('bind') && !flags.includes('rbind')) throw new InvalidParameter('a volume of type none needs o=bind (or rbind): only bind mounts have no filesystem type');
    if (!(await host.exists(device))) throw new InvalidParameter(`invalid option device=${JSON.stringify(device)}: no such file or directory on the host`);
  } else if (type !== 'tmpfs' && !device) {
    throw new InvalidParameter(`missing required option "device" for a volume of type ${type}`);
  }
}
