/** Inspect, list (with the volumes the plugins' drivers list) and the usage /system/df shows. */
import { log } from '../../util/log.js';
import { EngineError, errorMessage, InvalidParameter, NotFound } from '../../errors.js';
import { matchLabels } from '../filters.js';
import { createdAtNow, type VolumeContext } from './context.js';
import { VOLUME_NAME, type VolumeView } from './types.js';

/** A volume; one of a plugin's driver is asked for its mount point and status (`VolumeDriver.Get`). */
export async function inspect(ctx: VolumeContext, name: string): Promise<VolumeView> {
  const volume = ctx.get(name);
  if (volume.Driver === 'local') return ctx.view(volume);
  const driver = await ctx.driverOf(volume, 'get');
  await ctx.remember(driver);
  let described;
  try {
    described = await driver.get(name);
  } catch (err) {
    if (err instanceof NotFound) throw new NotFound(`get ${name}: ${err.message}`, { cause: err });
    throw new EngineError(`get ${name}: ${errorMessage(err)}`, { cause: err });
  }
  const mountpoint = described.Mountpoint || (await driver.path(name).catch(() => ''));
  if (mountpoint) ctx.driverMountpoints.set(name, mountpoint);
  const view = ctx.view(volume);
  if (described.Status && Object.keys(described.Status).length > 0) view.Status = described.Status;
  return view;
}

/**
 * Takes in the volumes the plugins' drivers list that have no record here (made by another engine, or
 * before this one knew the driver), as dockerd does; a driver that does not answer is skipped.
 */
async function adoptDriverVolumes(ctx: VolumeContext): Promise<void> {
  for (const driver of await ctx.drivers.all()) {
    let listed;
    try {
      listed = await driver.list({ retry: false });
      await ctx.remember(driver);
    } catch (err) {
      log.warn('volume driver list failed', { driver: driver.name, error: errorMessage(err) });
      continue;
    }
    for (const v of listed) {
      if (!VOLUME_NAME.test(v.Name)) continue;
      if (!ctx.volumes.has(v.Name)) {
        await ctx.withLock(v.Name, async () => {
          if (ctx.volumes.has(v.Name)) return;
          await ctx.record({ Name: v.Name, Driver: driver.name, CreatedAt: createdAtNow(), Labels: {}, Options: {} });
        }).catch((err) => log.warn('volume of a driver not recorded', { name: v.Name, driver: driver.name, error: errorMessage(err) }));
      }
      // A name another driver holds here keeps that driver's volume.
      if (v.Mountpoint && ctx.volumes.get(v.Name)?.Driver === driver.name) ctx.driverMountpoints.set(v.Name, v.Mountpoint);
    }
  }
}

/** The list with its filters: name (substring), driver, label, dangling; the plugins' drivers' volumes too. */
export async function list(ctx: VolumeContext, filters: ReadonlyMap<string, string[]>): Promise<VolumeView[]> {
  await adoptDriverVolumes(ctx);
  return listRecorded(ctx, filters);
}

function listRecorded(ctx: VolumeContext, filters: ReadonlyMap<string, string[]>): VolumeView[] {
  const names = filters.get('name') ?? [];
  const drivers = filters.get('driver') ?? [];
  const danglingValues = filters.get('dangling') ?? [];
  let dangling: boolean | undefined;
  for (const v of danglingValues) {
    if (v === 'true' || v === '1') dangling = true;
    else if (v === 'false' || v === '0') dangling = false;
    else throw new InvalidParameter(`invalid filter 'dangling=${v}': expected true, false, 1 or 0`);
  }
  const out: VolumeView[] = [];
  for (const volume of ctx.volumes.values()) {
    if (names.length > 0 && !names.some((n) => volume.Name.includes(n))) continue;
    if (drivers.length > 0 && !drivers.some((d) => volume.Driver.includes(d))) continue;
    if (!matchLabels(filters.get('label'), volume.Labels)) continue;
    if (dangling !== undefined && (ctx.users.containersUsingVolume(volume.Name).length === 0) !== dangling) continue;
    out.push(ctx.view(volume));
  }
  return out.sort((a, b) => a.Name.localeCompare(b.Name));
}

/** Volumes with their sizes and reference counts, for /system/df. */
export async function usage(ctx: VolumeContext): Promise<VolumeView[]> {
  const out: VolumeView[] = [];
  for (const volume of ctx.volumes.values()) {
    // A plugin's volume has no size known here (-1, as dockerd reports it).
    const size = volume.Driver !== 'local' ? -1 : await ctx.host.diskUsage(ctx.mountpoint(volume.Name)).catch(() => -1);
    out.push(ctx.view(volume, { Size: size, RefCount: ctx.users.containersUsingVolume(volume.Name).length }));
  }
  return out;
}

