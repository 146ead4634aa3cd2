/** Remove and prune: a volume no container uses goes, from its driver too; its record first. */
import { log } from '../../util/log.js';
import { Conflict, EngineError, errorMessage, NotFound } from '../../errors.js';
import { matchLabels, matchNotLabels } from '../filters.js';
import type { VolumeContext } from './context.js';
import type { VolumeRecord } from './types.js';

/** Removes a volume unless a container (in any state) uses it; `force` only makes a missing volume no error. */
export async function remove(ctx: VolumeContext, name: string, opts: { force?: boolean } = {}): Promise<void> {
  if (!ctx.volumes.has(name)) {
    if (opts.force) return;
    throw new NotFound(`get ${name}: no such volume`);
  }
  await ctx.withLock(name, async () => {
    const volume = ctx.volumes.get(name);
    if (!volume) {
      if (opts.force) return;
      throw new NotFound(`get ${name}: no such volume`);
    }
    const users = ctx.users.containersUsingVolume(name);
    if (users.length > 0) throw new Conflict(`remove ${name}: volume is in use - [${users.join(', ')}]`);
    if (ctx.reserved.has(name)) throw new Conflict(`remove ${name}: volume is in use by a container being created`);
    if (volume.Driver !== 'local') {
      try {
        await removeFromDriver(ctx, volume);
      } catch (err) {
        // Forced: the record goes even when its driver is gone or refuses, as dockerd purges it.
        if (!opts.force) throw err;
        log.warn('volume removed from the records only', { name, driver: volume.Driver, error: errorMessage(err) });
      }
    }
    await destroy(ctx, volume);
  });
}

async function removeFromDriver(ctx: VolumeContext, volume: VolumeRecord): Promise<void> {
  const driver = await ctx.driverOf(volume, 'remove');
  try {
    await driver.remove(volume.Name);
  } catch (err) {
    throw new EngineError(`remove ${volume.Name}: ${errorMessage(err)}`, { cause: err });
  }
}

async function destroy(ctx: VolumeContext, volume: VolumeRecord): Promise<void> {
  const mountpoint = ctx.mountpoint(volume.Name);
  if (volume.Driver === 'local' && (await ctx.host.isMounted(mountpoint))) await ctx.host.unmount(mountpoint);
  ctx.driverMountpoints.delete(volume.Name);
  // The record goes first: a crash halfway leaves a folder without a record, which init() removes when empty
  // (and takes in again when it still holds files).
  await ctx.records.delete(volume.Name);
  ctx.volumes.delete(volume.Name);
  ctx.active.delete(volume.Name);
  if (volume.Driver === 'local') {
    await ctx.host.removeVolumeDir(ctx.dir(volume.Name)).catch((err) => log.warn('volume folder not removed', { name: volume.Name, error: errorMessage(err) }));
  }
  ctx.events.publish('volume', 'destroy', volume.Name, { driver: volume.Driver });
}

/**
 * Removes the volumes no container uses: from API 1.42 only anonymous ones unless `all`; label and
 * label! filters narrow it.
 */
export async function prune(ctx: VolumeContext, filters: ReadonlyMap<string, string[]>, opts: { all: boolean }): Promise<{ VolumesDeleted: string[]; SpaceReclaimed: number }> {
  const deleted: string[] = [];
  let reclaimed = 0;
  for (const volume of [...ctx.volumes.values()]) {
    if (!opts.all && !ctx.isAnonymous(volume.Name)) continue;
    if (!matchLabels(filters.get('label'), volume.Labels) || !matchNotLabels(filters.get('label!'), volume.Labels)) continue;
    if (ctx.inUse(volume.Name)) continue;
    await ctx.withLock(volume.Name, async () => {
      if (!ctx.volumes.has(volume.Name) || ctx.inUse(volume.Name)) return;
      const local = volume.Driver === 'local';
      const size = !local || volume.Options.type ? 0 : await ctx.host.diskUsage(ctx.mountpoint(volume.Name)).catch(() => 0);
      if (!local) await removeFromDriver(ctx, volume);
      await destroy(ctx, volume);
      deleted.push(volume.Name);
      reclaimed += size;
    }).catch((err) => log.warn('volume prune skipped a volume', { name: volume.Name, error: errorMessage(err) }));
  }
  ctx.events.publish('volume', 'prune', '', { reclaimed: String(reclaimed) });
  return { VolumesDeleted: deleted, SpaceReclaimed: reclaimed };
}

