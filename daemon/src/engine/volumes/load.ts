/** The volumes at daemon start: the records loaded, and the mounts of running containers rebuilt. */
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { readJSONIfExists } from '../../util/atomic.js';
import { log } from '../../util/log.js';
import { errorMessage } from '../../errors.js';
import type { VolumeContext, VolumeFile } from './context.js';
import { VOLUME_NAME } from './types.js';

/** Loads the stored volumes; a folder without a readable record (a create cut short) is removed. */
export async function init(ctx: VolumeContext): Promise<void> {
  await fs.mkdir(ctx.root, { recursive: true, mode: 0o701 });
  await ctx.host.releaseStaleSubpaths?.().catch((err) => log.warn('stale volume subpath mounts kept', { error: errorMessage(err) }));
  for (const name of await fs.readdir(ctx.root)) {
    if (!VOLUME_NAME.test(name)) continue;
    let record: VolumeFile | undefined;
    try {
      record = await readJSONIfExists<VolumeFile>(path.join(ctx.dir(name), 'volume.json'));
    } catch (err) {
      log.warn('unreadable volume record', { name, error: errorMessage(err) });
      continue;
    }
    if (!record) {
      if (!(await ctx.host.isMounted(ctx.mountpoint(name)))) await ctx.host.removeVolumeDir(ctx.dir(name)).catch(() => undefined);
      continue;
    }
    const { FormatVersion: _version, ...volume } = record;
    ctx.volumes.set(name, volume);
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

