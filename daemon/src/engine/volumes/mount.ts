/**
 * Mount and unmount by containers: a DriverOpts filesystem is mounted for the first running user and
 * unmounted after the last; a plugin's driver mounts it per container.
 */
import { EngineError, errorMessage } from '../../errors.js';
import type { VolumeContext } from './context.js';

/** Where a mount of a volume goes, for the mount event. */
export interface MountUse {
  container: string;
  destination: string;
  readWrite: boolean;
  propagation: string;
}

/**
 * A container starts using the volume: the DriverOpts filesystem is mounted for its first running user.
 * Answers the host path to bind into the container.
 */
export async function mount(ctx: VolumeContext, name: string, use: MountUse): Promise<string> {
  return ctx.withLock(name, async () => {
    const volume = ctx.get(name);
    const holders = ctx.active.get(name) ?? new Set<string>();
    let mountpoint = ctx.mountpoint(name);
    if (volume.Driver !== 'local') {
      // The driver mounts it for this container (its id names the use) and says where.
      const driver = await ctx.driverOf(volume, 'mount');
      try {
        mountpoint = await driver.mount(name, use.container);
      } catch (err) {
        throw new EngineError(`error while mounting volume '${name}': ${errorMessage(err)}`, { cause: err });
      }
      ctx.driverMountpoints.set(name, mountpoint);
    } else if (volume.Options.type && holders.size === 0 && !(await ctx.host.isMounted(mountpoint))) {
      try {
        await ctx.host.mount(mountpoint, { type: volume.Options.type, device: volume.Options.device, o: volume.Options.o });
      } catch (err) {
        throw new EngineError(`error while mounting volume '${name}': ${errorMessage(err)}`, { cause: err });
      }
    }
    holders.add(use.container);
    ctx.active.set(name, holders);
    ctx.events.publish('volume', 'mount', name, {
      container: use.container,
      destination: use.destination,
      driver: volume.Driver,
      propagation: use.propagation,
      'read/write': String(use.readWrite),
    });
    return mountpoint;
  });
}

/** A container stopped using the volume: the DriverOpts filesystem is unmounted after its last running user. */
export async function unmount(ctx: VolumeContext, name: string, container: string): Promise<void> {
  await ctx.withLock(name, async () => {
    const volume = ctx.volumes.get(name);
    const holders = ctx.active.get(name);
    if (!volume || !holders?.has(container)) return;
    holders.delete(container);
    if (holders.size === 0) ctx.active.delete(name);
    if (volume.Driver !== 'local') {
      const driver = await ctx.driverOf(volume, 'unmount');
      await driver.unmount(name, container);
    } else if (holders.size === 0) {
      const mountpoint = ctx.mountpoint(name);
      if (volume.Options.type && (await ctx.host.isMounted(mountpoint))) await ctx.host.unmount(mountpoint);
    }
    ctx.events.publish('volume', 'unmount', name, { container, driver: volume.Driver });
  });
}

