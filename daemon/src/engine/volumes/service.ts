/**
 * The volume service: the local driver's volumes, their users and their mounts. Each verb lives in its own
 * file (create.ts, remove.ts, mount.ts, list.ts, load.ts) over the state they share (context.ts, which also
 * describes the records' format); this class only gathers them.
 */
import type { EventBus } from '../events.js';
import { VolumeContext } from './context.js';
import { create } from './create.js';
import type { VolumeDrivers } from './drivers.js';
import { inspect, list, usage } from './list.js';
import { init, recover } from './load.js';
import { mount, unmount, type MountUse } from './mount.js';
import { prune, remove } from './remove.js';
import type { VolumeHost } from '../../host/host.js';
import type { VolumeState } from './records.js';
import type { VolumeRecord, VolumeUsers, VolumeView } from './types.js';
import type { CreateVolumeRequest } from './validate.js';

export { VOLUME_FORMAT_VERSION, type VolumeState } from './records.js';
export type { MountUse } from './mount.js';
export { checkDriver, validateLocalOptions, validateVolumeName, type CreateVolumeRequest } from './validate.js';

export class VolumeService {
  private readonly ctx: VolumeContext;

  /** `state` keeps the records (the daemon's own state); `host` the local driver's folders on its machine. */
  constructor(state: VolumeState, host: VolumeHost, events: EventBus, drivers?: VolumeDrivers) {
    this.ctx = new VolumeContext(state, host, events, drivers);
  }

  get root(): string {
    return this.ctx.root;
  }

  setUsers(users: VolumeUsers): void {
    this.ctx.users = users;
  }

  /** Holds a volume as in use until `release` is called (a container create between planning and recording). */
  reserve(name: string): () => void {
    const ctx = this.ctx;
    ctx.reserved.set(name, (ctx.reserved.get(name) ?? 0) + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const left = (ctx.reserved.get(name) ?? 1) - 1;
      if (left > 0) ctx.reserved.set(name, left);
      else ctx.reserved.delete(name);
    };
  }

  mountpoint(name: string): string {
    return this.ctx.mountpoint(name);
  }

  /** Loads the stored records; a volume folder no record names is removed when empty, taken in otherwise. */
  init(): Promise<void> {
    return init(this.ctx);
  }

  /** Rebuilds which running containers hold each volume, and unmounts the DriverOpts mounts nobody holds. */
  recover(): Promise<void> {
    return recover(this.ctx);
  }

  get(name: string): VolumeRecord {
    return this.ctx.get(name);
  }

  find(name: string): VolumeRecord | undefined {
    return this.ctx.volumes.get(name);
  }

  isAnonymous(name: string): boolean {
    return this.ctx.isAnonymous(name);
  }

  view(volume: VolumeRecord, usage: VolumeView['UsageData'] = null): VolumeView {
    return this.ctx.view(volume, usage);
  }

  /** A volume; one of a plugin's driver is asked for its mount point and status (`VolumeDriver.Get`). */
  inspect(name: string): Promise<VolumeView> {
    return inspect(this.ctx, name);
  }

  /** The list with its filters: name (substring), driver, label, dangling; the plugins' drivers' volumes too. */
  list(filters: ReadonlyMap<string, string[]>): Promise<VolumeView[]> {
    return list(this.ctx, filters);
  }

  /** Creates a volume (a generated name when none is given); a name that exists already answers that volume. */
  create(request: CreateVolumeRequest): Promise<{ volume: VolumeView; created: boolean }> {
    return create(this.ctx, request);
  }

  /** Removes a volume unless a container (in any state) uses it; `force` only makes a missing volume no error. */
  remove(name: string, opts: { force?: boolean } = {}): Promise<void> {
    return remove(this.ctx, name, opts);
  }

  /** Removes the volumes no container uses (from API 1.42 only anonymous ones unless `all`). */
  prune(filters: ReadonlyMap<string, string[]>, opts: { all: boolean }): Promise<{ VolumesDeleted: string[]; SpaceReclaimed: number }> {
    return prune(this.ctx, filters, opts);
  }

  /** A container starts using the volume: answers the host path to bind into the container. */
  mount(name: string, use: MountUse): Promise<string> {
    return mount(this.ctx, name, use);
  }

  /** A container stopped using the volume. */
  unmount(name: string, container: string): Promise<void> {
    return unmount(this.ctx, name, container);
  }

  /** Whether a volume holds no file (before its first use, image content is copied into an empty one). */
  isEmpty(name: string): Promise<boolean> {
    return this.ctx.host.isEmpty(this.ctx.mountpoint(name));
  }

  copyFromRootfs(name: string, rootfs: string, containerPath: string): Promise<void> {
    return this.ctx.host.copyFromRootfs(rootfs, containerPath, this.ctx.mountpoint(name));
  }

  /** A part of a volume's content to mount (see VolumeHost.openBeneath). */
  openSubpath(name: string, subpath: string, base = this.mountpoint(name)): Promise<{ path: string; directory: boolean; close(): Promise<void> }> {
    return this.ctx.host.openBeneath(base, subpath);
  }

  /** Makes a mount point's folder inside a container root (see VolumeHost.makeMountPoint). */
  makeMountPoint(rootfs: string, containerPath: string): Promise<string> {
    return this.ctx.host.makeMountPoint(rootfs, containerPath);
  }

  /** Volumes with their sizes and reference counts, for /system/df. */
  usage(): Promise<VolumeView[]> {
    return usage(this.ctx);
  }

  /** Names of the volumes recorded with a driver. */
  namesOfDriver(driver: string): string[] {
    return [...this.ctx.volumes.values()].filter((v) => v.Driver === driver).map((v) => v.Name);
  }

  get size(): number {
    return this.ctx.volumes.size;
  }
}
