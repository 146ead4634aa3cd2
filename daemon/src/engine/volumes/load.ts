/** The volumes at daemon start: the records loaded, and the mounts of running containers rebuilt. */
import { log } from '../../util/log.js';
import { errorMessage } from '../../errors.js';
import { createdAtNow, type VolumeContext } from './context.js';
import { VOLUME_NAME } from './types.js';

/**
 * Loads the stored records (those of the former layout moved first). A volume folder of the Host that no
 * record names and that is not mounted is, when empty, a create cut short: it is removed. One holding files is
 * taken in as a volume of the local driver, as dockerd's local driver finds its folders (the records were
 * lost, or another daemon made it through the same agent).
 */
export async function init(ctx: VolumeContext): Promise<void> {
  await ctx.host.releaseStaleSubpaths?.().catch((err) => log.warn('stale volume subpath mounts kept', { error: errorMessage(err) }));
  await ctx.records.migrateLegacy();
  for (const volume of await ctx.records.load()) ctx.volumes.set(volume.Name, volume);
  for (const name of await ctx.host.listVolumeDirs()) {
    if (!VOLUME_NAME.test(name) || ctx.volumes.has(name)) continue;
    const content = ctx.mountpoint(name);
    try {
      if (await ctx.host.isMounted(content)) continue;
      if (!(await ctx.host.exists(content)) || (await ctx.host.isEmpty(content))) {
        await ctx.host.removeVolumeDir(ctx.dir(name));
        continue;
      }
      await ctx.record({ Name: name, Driver: 'local', CreatedAt: createdAtNow(), Labels: {}, Options: {} });
      log.info('a volume folder without a record is taken in', { name, path: content });
    } catch (err) {
      log.warn('a volume folder without a record is left alone', { name, error: errorMessage(err) });
    }
  }
}

/**
 * Rebuilds which running containers hold each volume from the container records, and unmounts the
 * DriverOpts mounts no running container holds any more (their containers ended while the daemon was down).
 */
export async function recover(ctx: VolumeContext): Promise<void> {
  ctx.active.clear();
  for (const volume of ctx.volumes.values()) {
    const running = ctx.users.runningContainersUsingVolume(volume.Name);
    if (running.length > 0) ctx.active.set(volume.Name, new Set(running));
    else if (volume.Driver === 'local' && volume.Options.type && (await ctx.host.isMounted(ctx.mountpoint(volume.Name)))) {
      await ctx.host.unmount(ctx.mountpoint(volume.Name)).catch((err) => log.warn('volume unmount failed', { name: volume.Name, error: errorMessage(err) }));
    }
  }
}

