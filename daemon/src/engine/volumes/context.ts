/**
 * The state the volume verbs share (create.ts, remove.ts, mount.ts, list.ts, load.ts): the records, who
 * mounted each volume, the per-volume locks, the plugins' drivers, the Host's volume part and the event bus.
 *
 * A volume is two things: its record, the daemon's own state (records.ts, which describes the format), and for
 * the local driver its content, a folder the Host makes on its machine and names: `<volumesRoot>/<name>/_data`
 * (the mount point of a volume whose DriverOpts name a filesystem to mount). Who uses a volume is never
 * stored: the container records say it (VolumeUsers), so a restarted daemon has its reference counts back at once.
 */
import path from 'node:path';
import { EngineError, errorMessage, NotFound } from '../../errors.js';
import type { EventBus } from '../events.js';
import type { VolumeDriverProxy, VolumeDrivers } from './drivers.js';
import type { VolumeHost } from '../../host/host.js';
import { VolumeRecords, type VolumeState } from './records.js';
import { ANONYMOUS_LABEL, type VolumeRecord, type VolumeUsers, type VolumeView } from './types.js';


const NO_DRIVERS: VolumeDrivers = {
  lookup: async (name) => {
    throw new NotFound(`error looking up volume plugin ${name}: plugin "${name}" not found`);
  },
  all: async () => [],
};

export function createdAtNow(): string {
  return new Date().toISOString().replace(/\.\d+Z$/, 'Z');
}

export class VolumeContext {
  readonly records: VolumeRecords;
  readonly volumes = new Map<string, VolumeRecord>();
  /** Running containers that mounted each volume (the host mount of DriverOpts volumes follows it). */
  readonly active = new Map<string, Set<string>>();
  readonly locks = new Map<string, Promise<unknown>>();
  /** Volumes a container being created will use (held from their creation until the container is recorded). */
  readonly reserved = new Map<string, number>();
  users: VolumeUsers = { containersUsingVolume: () => [], runningContainersUsingVolume: () => [] };
  /** The last host path a plugin's driver gave for each of its volumes. */
  readonly driverMountpoints = new Map<string, string>();
  /** The scope each plugin's driver declared. */
  readonly driverScopes = new Map<string, 'local' | 'global'>();

  constructor(
    state: VolumeState,
    readonly host: VolumeHost,
    readonly events: EventBus,
    readonly drivers: VolumeDrivers = NO_DRIVERS,
  ) {
    this.records = new VolumeRecords(state);
  }

  /** Where the Host keeps the local driver's volumes on its machine. */
  get root(): string {
    return this.host.volumesRoot;
  }

  /** The plugin driver of a volume (the lookup error, with the operation and the volume before it). */
  async driverOf(volume: VolumeRecord, op: string): Promise<VolumeDriverProxy> {
    try {
      return await this.drivers.lookup(volume.Driver);
    } catch (err) {
      if (err instanceof NotFound) throw new NotFound(`${op} ${volume.Name}: ${err.message}`, { cause: err });
      throw new EngineError(`${op} ${volume.Name}: ${errorMessage(err)}`, { cause: err });
    }
  }

  async remember(driver: VolumeDriverProxy): Promise<void> {
    this.driverScopes.set(driver.name, await driver.capabilities());
  }

  inUse(name: string): boolean {
    return this.reserved.has(name) || this.users.containersUsingVolume(name).length > 0;
  }

  /** Serialises the changes of one volume (create, mount, unmount, remove). */
  withLock<T>(name: string, fn: () => Promise<T>): Promise<T> {
    const prev = this.locks.get(name) ?? Promise.resolve();
    const next = prev.then(fn, fn);
    const settled = next.catch(() => undefined);
    this.locks.set(name, settled);
    void settled.then(() => {
      if (this.locks.get(name) === settled) this.locks.delete(name);
    });
    return next;
  }

  dir(name: string): string {
    return path.join(this.root, name);
  }

  mountpoint(name: string): string {
    return path.join(this.dir(name), '_data');
  }

  get(name: string): VolumeRecord {
    const volume = this.volumes.get(name);
    if (!volume) throw new NotFound(`get ${name}: no such volume`);
    return volume;
  }

  isAnonymous(name: string): boolean {
    return Object.prototype.hasOwnProperty.call(this.volumes.get(name)?.Labels ?? {}, ANONYMOUS_LABEL);
  }

  view(volume: VolumeRecord, usage: VolumeView['UsageData'] = null): VolumeView {
    const local = volume.Driver === 'local';
    return {
      CreatedAt: volume.CreatedAt,
      Driver: volume.Driver,
      Labels: { ...volume.Labels },
      Mountpoint: local ? this.mountpoint(volume.Name) : (this.driverMountpoints.get(volume.Name) ?? ''),
      Name: volume.Name,
      Options: { ...volume.Options },
      Scope: local ? 'local' : (this.driverScopes.get(volume.Driver) ?? 'local'),
      UsageData: usage,
    };
  }

  /** Writes a volume's record and knows it from then on. */
  async record(volume: VolumeRecord): Promise<void> {
    await this.records.save(volume);
    this.volumes.set(volume.Name, volume);
  }
}
