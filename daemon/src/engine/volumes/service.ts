/**
 * The volume service: the local driver's volumes, their users and their mounts.
 *
 * Formats: `<data-root>/volumes/<name>/volume.json` holds one VolumeRecord as JSON with `FormatVersion: 1`,
 * written atomically; `<data-root>/volumes/<name>/_data` is the volume's content (the mount point of a
 * volume whose DriverOpts name a filesystem to mount). Who uses a volume is never stored here: the
 * container records say it (VolumeUsers), so a restarted daemon has its reference counts back at once.
 */
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { readJSONIfExists, writeJSONAtomic } from '../../util/atomic.js';
import { newId } from '../../util/ids.js';
import { log } from '../../util/log.js';
import { Conflict, EngineError, errorMessage, InvalidParameter, NotFound } from '../../errors.js';
import type { EventBus } from '../events.js';
import { exactMatch, matchLabels, matchNotLabels } from '../filters.js';
import type { VolumeDriverProxy, VolumeDrivers } from './drivers.js';
import { ANONYMOUS_LABEL, VOLUME_NAME, VOLUME_NAME_MAX, type VolumeRecord, type VolumeUsers, type VolumeView } from './types.js';
import { type LocalDriverOptions, type VolumeHost } from '../../host/host.js';

export const VOLUME_FORMAT_VERSION = 1;

interface VolumeFile extends VolumeRecord {
  FormatVersion: number;
}

export interface CreateVolumeRequest {
  Name?: unknown;
  Driver?: unknown;
  DriverOpts?: unknown;
  Labels?: unknown;
}

/** Where a mount of a volume goes, for the mount event. */
export interface MountUse {
  container: string;
  destination: string;
  readWrite: boolean;
  propagation: string;
}

const LOCAL_OPTION_KEYS = ['type', 'device', 'o'];

function isStringMap(value: unknown): value is Record<string, string> {
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

const NO_DRIVERS: VolumeDrivers = {
  lookup: async (name) => {
    throw new NotFound(`error looking up volume plugin ${name}: plugin "${name}" not found`);
  },
  all: async () => [],
};

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
    if (!device.startsWith('/')) throw new InvalidParameter(`invalid option device=${JSON.stringify(device)}: a bind volume's device must be an absolute host path`);
    if (!flags.includes('bind') && !flags.includes('rbind')) throw new InvalidParameter('a volume of type none needs o=bind (or rbind): only bind mounts have no filesystem type');
    if (!(await host.exists(device))) throw new InvalidParameter(`invalid option device=${JSON.stringify(device)}: no such file or directory on the host`);
  } else if (type !== 'tmpfs' && !device) {
    throw new InvalidParameter(`missing required option "device" for a volume of type ${type}`);
  }
}

function createdAtNow(): string {
  return new Date().toISOString().replace(/\.\d+Z$/, 'Z');
}

export class VolumeService {
  readonly root: string;
  private readonly volumes = new Map<string, VolumeRecord>();
  /** Running containers that mounted each volume (the host mount of DriverOpts volumes follows it). */
  private readonly active = new Map<string, Set<string>>();
  private readonly locks = new Map<string, Promise<unknown>>();
  /** Volumes a container being created will use (held from their creation until the container is recorded). */
  private readonly reserved = new Map<string, number>();
  private users: VolumeUsers = { containersUsingVolume: () => [], runningContainersUsingVolume: () => [] };
  /** The last host path a plugin's driver gave for each of its volumes. */
  private readonly driverMountpoints = new Map<string, string>();
  /** The scope each plugin's driver declared. */
  private readonly driverScopes = new Map<string, 'local' | 'global'>();

  constructor(
    dataRoot: string,
    private readonly host: VolumeHost,
    private readonly events: EventBus,
    private readonly drivers: VolumeDrivers = NO_DRIVERS,
  ) {
    this.root = path.join(dataRoot, 'volumes');
  }

  /** The plugin driver of a volume (the lookup error, with the operation and the volume before it). */
  private async driverOf(volume: VolumeRecord, op: string): Promise<VolumeDriverProxy> {
    try {
      return await this.drivers.lookup(volume.Driver);
    } catch (err) {
      if (err instanceof NotFound) throw new NotFound(`${op} ${volume.Name}: ${err.message}`, { cause: err });
      throw new EngineError(`${op} ${volume.Name}: ${errorMessage(err)}`, { cause: err });
    }
  }

  private async remember(driver: VolumeDriverProxy): Promise<void> {
    this.driverScopes.set(driver.name, await driver.capabilities());
  }

  setUsers(users: VolumeUsers): void {
    this.users = users;
  }

  /** Holds a volume as in use until `release` is called (a container create between planning and recording). */
  reserve(name: string): () => void {
    this.reserved.set(name, (this.reserved.get(name) ?? 0) + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const left = (this.reserved.get(name) ?? 1) - 1;
      if (left > 0) this.reserved.set(name, left);
      else this.reserved.delete(name);
    };
  }

  private inUse(name: string): boolean {
    return this.reserved.has(name) || this.users.containersUsingVolume(name).length > 0;
  }

  /** Serialises the changes of one volume (create, mount, unmount, remove). */
  private withLock<T>(name: string, fn: () => Promise<T>): Promise<T> {
    const prev = this.locks.get(name) ?? Promise.resolve();
    const next = prev.then(fn, fn);
    const settled = next.catch(() => undefined);
    this.locks.set(name, settled);
    void settled.then(() => {
      if (this.locks.get(name) === settled) this.locks.delete(name);
    });
    return next;
  }

  private dir(name: string): string {
    return path.join(this.root, name);
  }

  mountpoint(name: string): string {
    return path.join(this.dir(name), '_data');
  }

  /** Loads the stored volumes; a folder without a readable record (a create cut short) is removed. */
  async init(): Promise<void> {
    await fs.mkdir(this.root, { recursive: true, mode: 0o701 });
    await this.host.releaseStaleSubpaths?.().catch((err) => log.warn('stale volume subpath mounts kept', { error: errorMessage(err) }));
    for (const name of await fs.readdir(this.root)) {
      if (!VOLUME_NAME.test(name)) continue;
      let record: VolumeFile | undefined;
      try {
        record = await readJSONIfExists<VolumeFile>(path.join(this.dir(name), 'volume.json'));
      } catch (err) {
        log.warn('unreadable volume record', { name, error: errorMessage(err) });
        continue;
      }
      if (!record) {
        if (!(await this.host.isMounted(this.mountpoint(name)))) await this.host.removeVolumeDir(this.dir(name)).catch(() => undefined);
        continue;
      }
      const { FormatVersion: _version, ...volume } = record;
      this.volumes.set(name, volume);
    }
  }

  /**
   * Rebuilds which running containers hold each volume from the container records, and unmounts the
   * DriverOpts mounts no running container holds any more (their containers ended while the daemon was down).
   */
  async recover(): Promise<void> {
    this.active.clear();
    for (const volume of this.volumes.values()) {
      const running = this.users.runningContainersUsingVolume(volume.Name);
      if (running.length > 0) this.active.set(volume.Name, new Set(running));
      else if (volume.Driver === 'local' && volume.Options.type && (await this.host.isMounted(this.mountpoint(volume.Name)))) {
        await this.host.unmount(this.mountpoint(volume.Name)).catch((err) => log.warn('volume unmount failed', { name: volume.Name, error: errorMessage(err) }));
      }
    }
  }

  get(name: string): VolumeRecord {
    const volume = this.volumes.get(name);
    if (!volume) throw new NotFound(`get ${name}: no such volume`);
    return volume;
  }

  find(name: string): VolumeRecord | undefined {
    return this.volumes.get(name);
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

  /** A volume; one of a plugin's driver is asked for its mount point and status (`VolumeDriver.Get`). */
  async inspect(name: string): Promise<VolumeView> {
    const volume = this.get(name);
    if (volume.Driver === 'local') return this.view(volume);
    const driver = await this.driverOf(volume, 'get');
    await this.remember(driver);
    let described;
    try {
      described = await driver.get(name);
    } catch (err) {
      if (err instanceof NotFound) throw new NotFound(`get ${name}: ${err.message}`, { cause: err });
      throw new EngineError(`get ${name}: ${errorMessage(err)}`, { cause: err });
    }
    const mountpoint = described.Mountpoint || (await driver.path(name).catch(() => ''));
    if (mountpoint) this.driverMountpoints.set(name, mountpoint);
    const view = this.view(volume);
    if (described.Status && Object.keys(described.Status).length > 0) view.Status = described.Status;
    return view;
  }

  /**
   * Takes in the volumes the plugins' drivers list that have no record here (made by another engine, or
   * before this one knew the driver), as dockerd does; a driver that does not answer is skipped.
   */
  private async adoptDriverVolumes(): Promise<void> {
    for (const driver of await this.drivers.all()) {
      let listed;
      try {
        listed = await driver.list({ retry: false });
        await this.remember(driver);
      } catch (err) {
        log.warn('volume driver list failed', { driver: driver.name, error: errorMessage(err) });
        continue;
      }
      for (const v of listed) {
        if (!VOLUME_NAME.test(v.Name)) continue;
        if (!this.volumes.has(v.Name)) {
          await this.withLock(v.Name, async () => {
            if (this.volumes.has(v.Name)) return;
            await this.record({ Name: v.Name, Driver: driver.name, CreatedAt: createdAtNow(), Labels: {}, Options: {} });
          }).catch((err) => log.warn('volume of a driver not recorded', { name: v.Name, driver: driver.name, error: errorMessage(err) }));
        }
        // A name another driver holds here keeps that driver's volume.
        if (v.Mountpoint && this.volumes.get(v.Name)?.Driver === driver.name) this.driverMountpoints.set(v.Name, v.Mountpoint);
      }
    }
  }

  /** Writes the record of a volume of a plugin's driver (a folder with volume.json only). */
  private async record(volume: VolumeRecord): Promise<void> {
    const dir = this.dir(volume.Name);
    await fs.mkdir(dir, { mode: 0o700 });
    try {
      await writeJSONAtomic(path.join(dir, 'volume.json'), { FormatVersion: VOLUME_FORMAT_VERSION, ...volume } satisfies VolumeFile);
    } catch (err) {
      await fs.rm(dir, { recursive: true, force: true }).catch(() => undefined);
      throw err;
    }
    this.volumes.set(volume.Name, volume);
  }

  /** The list with its filters: name (substring), driver, label, dangling; the plugins' drivers' volumes too. */
  async list(filters: ReadonlyMap<string, string[]>): Promise<VolumeView[]> {
    await this.adoptDriverVolumes();
    return this.listRecorded(filters);
  }

  private listRecorded(filters: ReadonlyMap<string, string[]>): VolumeView[] {
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
    for (const volume of this.volumes.values()) {
      if (names.length > 0 && !names.some((n) => volume.Name.includes(n))) continue;
      if (drivers.length > 0 && !drivers.some((d) => volume.Driver.includes(d))) continue;
      if (!matchLabels(filters.get('label'), volume.Labels)) continue;
      if (dangling !== undefined && (this.users.containersUsingVolume(volume.Name).length === 0) !== dangling) continue;
      out.push(this.view(volume));
    }
    return out.sort((a, b) => a.Name.localeCompare(b.Name));
  }

  /**
   * Creates a volume (a generated name when none is given). A name that exists already answers that volume,
   * as Docker does. Validates everything before anything is written; a failed write leaves nothing behind.
   */
  async create(request: CreateVolumeRequest): Promise<{ volume: VolumeView; created: boolean }> {
    if (request.Name !== undefined && request.Name !== null && typeof request.Name !== 'string') throw new InvalidParameter('Name must be a string');
    const name = (request.Name as string | undefined) || newId();
    validateVolumeName(name);
    const anonymous = !request.Name;
    const given = checkDriver(request.Driver);
    const driverName = given === undefined ? undefined : (this.drivers.canonical?.(given) ?? given);
    if (request.DriverOpts !== undefined && request.DriverOpts !== null && !isStringMap(request.DriverOpts)) {
      throw new InvalidParameter('DriverOpts must be a map of strings');
    }
    if (request.Labels !== undefined && request.Labels !== null && !isStringMap(request.Labels)) throw new InvalidParameter('Labels must be a map of strings');
    const options = { ...((request.DriverOpts as Record<string, string> | null | undefined) ?? {}) };
    const labels = { ...((request.Labels as Record<string, string> | null | undefined) ?? {}) };
    // As Docker: a volume created without a name is anonymous (a later prune, from API 1.42, removes it).
    if (anonymous) labels[ANONYMOUS_LABEL] = '';
    return this.withLock(name, async () => {
      const existing = this.volumes.get(name);
      if (existing) {
        const asked = driverName ?? (typeof request.Driver === 'string' && request.Driver !== '' ? 'local' : undefined);
        if (asked !== undefined && asked !== existing.Driver) {
          throw new Conflict(`create ${name}: volume name must be unique: driver '${existing.Driver}' already has volume '${name}'`);
        }
        return { volume: this.view(existing), created: false };
      }
      if (driverName !== undefined) {
        // A plugin's driver: it makes the volume; the record here keeps its name, driver, labels and options.
        const volume: VolumeRecord = { Name: name, Driver: driverName, CreatedAt: createdAtNow(), Labels: labels, Options: options };
        const driver = await this.driverOf(volume, 'create');
        volume.Driver = driver.name;
        await this.remember(driver);
        try {
          await driver.create(name, options);
        } catch (err) {
          throw new EngineError(`create ${name}: ${errorMessage(err)}`, { cause: err });
        }
        try {
          await this.record(volume);
        } catch (err) {
          await driver.remove(name).catch(() => undefined);
          throw err;
        }
        this.events.publish('volume', 'create', name, { driver: volume.Driver });
        return { volume: this.view(volume), created: true };
      }
      await validateLocalOptions(options, this.host);
      const volume: VolumeRecord = { Name: name, Driver: 'local', CreatedAt: createdAtNow(), Labels: labels, Options: options };
      const dir = this.dir(name);
      await this.host.createVolumeDir(dir);
      try {
        await writeJSONAtomic(path.join(dir, 'volume.json'), { FormatVersion: VOLUME_FORMAT_VERSION, ...volume } satisfies VolumeFile);
      } catch (err) {
        await this.host.removeVolumeDir(dir).catch(() => undefined);
        throw err;
      }
      this.volumes.set(name, volume);
      this.events.publish('volume', 'create', name, { driver: volume.Driver });
      return { volume: this.view(volume), created: true };
    });
  }

  /** Removes a volume unless a container (in any state) uses it; `force` only makes a missing volume no error. */
  async remove(name: string, opts: { force?: boolean } = {}): Promise<void> {
    if (!this.volumes.has(name)) {
      if (opts.force) return;
      throw new NotFound(`get ${name}: no such volume`);
    }
    await this.withLock(name, async () => {
      const volume = this.volumes.get(name);
      if (!volume) {
        if (opts.force) return;
        throw new NotFound(`get ${name}: no such volume`);
      }
      const users = this.users.containersUsingVolume(name);
      if (users.length > 0) throw new Conflict(`remove ${name}: volume is in use - [${users.join(', ')}]`);
      if (this.reserved.has(name)) throw new Conflict(`remove ${name}: volume is in use by a container being created`);
      if (volume.Driver !== 'local') {
        try {
          await this.removeFromDriver(volume);
        } catch (err) {
          // Forced: the record goes even when its driver is gone or refuses, as dockerd purges it.
          if (!opts.force) throw err;
          log.warn('volume removed from the records only', { name, driver: volume.Driver, error: errorMessage(err) });
        }
      }
      await this.destroy(volume);
    });
  }

  private async removeFromDriver(volume: VolumeRecord): Promise<void> {
    const driver = await this.driverOf(volume, 'remove');
    try {
      await driver.remove(volume.Name);
    } catch (err) {
      throw new EngineError(`remove ${volume.Name}: ${errorMessage(err)}`, { cause: err });
    }
  }

  private async destroy(volume: VolumeRecord): Promise<void> {
    const mountpoint = this.mountpoint(volume.Name);
    if (volume.Driver === 'local' && (await this.host.isMounted(mountpoint))) await this.host.unmount(mountpoint);
    this.driverMountpoints.delete(volume.Name);
    // The record goes first: a crash halfway leaves a folder without a record, which init() removes.
    await fs.rm(path.join(this.dir(volume.Name), 'volume.json'), { force: true });
    this.volumes.delete(volume.Name);
    this.active.delete(volume.Name);
    const removal = volume.Driver === 'local' ? this.host.removeVolumeDir(this.dir(volume.Name)) : fs.rm(this.dir(volume.Name), { recursive: true, force: true });
    await removal.catch((err) => log.warn('volume folder not removed', { name: volume.Name, error: errorMessage(err) }));
    this.events.publish('volume', 'destroy', volume.Name, { driver: volume.Driver });
  }

  /**
   * Removes the volumes no container uses: from API 1.42 only anonymous ones unless `all`; label and
   * label! filters narrow it.
   */
  async prune(filters: ReadonlyMap<string, string[]>, opts: { all: boolean }): Promise<{ VolumesDeleted: string[]; SpaceReclaimed: number }> {
    const deleted: string[] = [];
    let reclaimed = 0;
    for (const volume of [...this.volumes.values()]) {
      if (!opts.all && !this.isAnonymous(volume.Name)) continue;
      if (!matchLabels(filters.get('label'), volume.Labels) || !matchNotLabels(filters.get('label!'), volume.Labels)) continue;
      if (this.inUse(volume.Name)) continue;
      await this.withLock(volume.Name, async () => {
        if (!this.volumes.has(volume.Name) || this.inUse(volume.Name)) return;
        const local = volume.Driver === 'local';
        const size = !local || volume.Options.type ? 0 : await this.host.diskUsage(this.mountpoint(volume.Name)).catch(() => 0);
        if (!local) await this.removeFromDriver(volume);
        await this.destroy(volume);
        deleted.push(volume.Name);
        reclaimed += size;
      }).catch((err) => log.warn('volume prune skipped a volume', { name: volume.Name, error: errorMessage(err) }));
    }
    this.events.publish('volume', 'prune', '', { reclaimed: String(reclaimed) });
    return { VolumesDeleted: deleted, SpaceReclaimed: reclaimed };
  }

  /**
   * A container starts using the volume: the DriverOpts filesystem is mounted for its first running user.
   * Answers the host path to bind into the container.
   */
  async mount(name: string, use: MountUse): Promise<string> {
    return this.withLock(name, async () => {
      const volume = this.get(name);
      const holders = this.active.get(name) ?? new Set<string>();
      let mountpoint = this.mountpoint(name);
      if (volume.Driver !== 'local') {
        // The driver mounts it for this container (its id names the use) and says where.
        const driver = await this.driverOf(volume, 'mount');
        try {
          mountpoint = await driver.mount(name, use.container);
        } catch (err) {
          throw new EngineError(`error while mounting volume '${name}': ${errorMessage(err)}`, { cause: err });
        }
        this.driverMountpoints.set(name, mountpoint);
      } else if (volume.Options.type && holders.size === 0 && !(await this.host.isMounted(mountpoint))) {
        try {
          await this.host.mount(mountpoint, { type: volume.Options.type, device: volume.Options.device, o: volume.Options.o });
        } catch (err) {
          throw new EngineError(`error while mounting volume '${name}': ${errorMessage(err)}`, { cause: err });
        }
      }
      holders.add(use.container);
      this.active.set(name, holders);
      this.events.publish('volume', 'mount', name, {
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
  async unmount(name: string, container: string): Promise<void> {
    await this.withLock(name, async () => {
      const volume = this.volumes.get(name);
      const holders = this.active.get(name);
      if (!volume || !holders?.has(container)) return;
      holders.delete(container);
      if (holders.size === 0) this.active.delete(name);
      if (volume.Driver !== 'local') {
        const driver = await this.driverOf(volume, 'unmount');
        await driver.unmount(name, container);
      } else if (holders.size === 0) {
        const mountpoint = this.mountpoint(name);
        if (volume.Options.type && (await this.host.isMounted(mountpoint))) await this.host.unmount(mountpoint);
      }
      this.events.publish('volume', 'unmount', name, { container, driver: volume.Driver });
    });
  }

  /** Whether a volume holds no file (before its first use, image content is copied into an empty one). */
  isEmpty(name: string): Promise<boolean> {
    return this.host.isEmpty(this.mountpoint(name));
  }

  copyFromRootfs(name: string, rootfs: string, containerPath: string): Promise<void> {
    return this.host.copyFromRootfs(rootfs, containerPath, this.mountpoint(name));
  }

  /** A part of a volume's content to mount (see VolumeHost.openBeneath). */
  openSubpath(name: string, subpath: string, base = this.mountpoint(name)): Promise<{ path: string; directory: boolean; close(): Promise<void> }> {
    return this.host.openBeneath(base, subpath);
  }

  /** Makes a mount point's folder inside a container root (see VolumeHost.makeMountPoint). */
  makeMountPoint(rootfs: string, containerPath: string): Promise<string> {
    return this.host.makeMountPoint(rootfs, containerPath);
  }

  /** Volumes with their sizes and reference counts, for /system/df. */
  async usage(): Promise<VolumeView[]> {
    const out: VolumeView[] = [];
    for (const volume of this.volumes.values()) {
      // A plugin's volume has no size known here (-1, as dockerd reports it).
      const size = volume.Driver !== 'local' ? -1 : await this.host.diskUsage(this.mountpoint(volume.Name)).catch(() => -1);
      out.push(this.view(volume, { Size: size, RefCount: this.users.containersUsingVolume(volume.Name).length }));
    }
    return out;
  }

  /** Names of the volumes recorded with a driver. */
  namesOfDriver(driver: string): string[] {
    return [...this.volumes.values()].filter((v) => v.Driver === driver).map((v) => v.Name);
  }

  get size(): number {
    return this.volumes.size;
  }
}
