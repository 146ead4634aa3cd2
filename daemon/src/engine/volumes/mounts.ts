/**
 * Volumes in containers: the mount points of a container planned from its create body (VolumesFrom, Binds,
 * Mounts of type volume, and the anonymous volumes of Config.Volumes and the image's VOLUME), the volumes
 * created on demand, the copy of the image's content into new volumes, the mounts at start and the
 * unmounts at stop, and the anonymous volumes removed with their container.
 */
import path from 'node:path';
import { newId } from '../../util/ids.js';
import { log } from '../../util/log.js';
import type { MountPoint } from '../containers/model.js';
import { parseBind } from '../containers/validate.js';
import { HOST_PATH_STYLE, isAbsoluteHostPath, normalizeHostPath, type PathStyle } from '../../util/hostpath.js';
import { EngineError, errorMessage, InvalidParameter, NotFound } from '../../errors.js';
import type { VolumeService } from './service.js';
import { checkDriver, validateVolumeName } from './validate.js';
import { ANONYMOUS_LABEL, VOLUME_NAME } from './types.js';

/** The parts of a container the volume code reads. */
export interface VolumeContainer {
  Id: string;
  Mounts: MountPoint[];
  HostConfig: Record<string, unknown>;
}

/** A volume a container needs, created on demand at container create. */
export interface NeededVolume {
  name: string;
  labels: Record<string, string>;
  driverOpts: Record<string, string>;
  /** A plugin's volume driver to create it with (the local driver when absent). */
  driver?: string;
}

export interface MountPlan {
  mounts: MountPoint[];
  volumes: NeededVolume[];
  /** Volume mounts whose volume gets the image's content at that path when it is empty. */
  copies: Array<{ name: string; destination: string }>;
}

function cleanDestination(field: string, dest: unknown): string {
  if (typeof dest !== 'string' || dest === '') throw new InvalidParameter(`invalid ${field}: a target path in the container is required`);
  if (!dest.startsWith('/')) throw new InvalidParameter(`invalid ${field}: the container path ${JSON.stringify(dest)} must be absolute`);
  const clean = path.posix.normalize(dest).replace(/\/+$/, '') || '/';
  if (clean === '/') throw new InvalidParameter(`invalid ${field}: cannot mount a volume over /`);
  return clean;
}

function stringMap(field: string, value: unknown): Record<string, string> {
  if (value === undefined || value === null) return {};
  if (typeof value !== 'object' || Array.isArray(value) || !Object.values(value as object).every((v) => typeof v === 'string')) {
    throw new InvalidParameter(`invalid ${field}: expected a map of strings`);
  }
  return { ...(value as Record<string, string>) };
}

/**
 * The driver of a volume the container needs, its type checked when that volume is planned; the driver
 * itself is looked up when the volume is created (an unknown one is then bad input, with Docker's wording).
 */
function driverInMount(driver: unknown): string | undefined {
  return checkDriver(driver);
}

/** Whether a Subpath stays inside its volume, lexically (as Go's filepath.IsLocal): relative, no `..` above it. */
export function isLocalSubpath(subpath: string): boolean {
  if (subpath === '' || subpath.startsWith('/')) return false;
  const clean = path.posix.normalize(subpath);
  return clean !== '..' && !clean.startsWith('../');
}

/** The Subpath of each volume mount of HostConfig.Mounts that has one, by its destination in the container. */
export function subpathsOf(hc: Record<string, unknown>): Map<string, string> {
  const out = new Map<string, string>();
  for (const m of (hc.Mounts as Array<Record<string, any>> | null | undefined) ?? []) {
    const subpath = m?.VolumeOptions?.Subpath;
    if (m?.Type !== 'volume' || typeof subpath !== 'string' || subpath === '') continue;
    const target = m.Target ?? m.Destination;
    if (typeof target === 'string') out.set(path.posix.normalize(target).replace(/\/+$/, '') || '/', subpath);
  }
  return out;
}

const PROPAGATIONS = ['private', 'rprivate', 'shared', 'rshared', 'slave', 'rslave'];

/**
 * Plans the mount points of a container. Precedence as Docker's: the mounts of VolumesFrom containers, then
 * Binds (replacing those at the same place), then Mounts (a clash with Binds is an error), then the
 * anonymous volumes of Config.Volumes and the image for places nothing else mounts. Throws InvalidParameter
 * on bad input; creates nothing.
 */
export function planMounts(
  body: Record<string, any>,
  imageVolumes: Record<string, unknown> | null | undefined,
  lookup: (ref: string) => VolumeContainer,
  mountpoint: (name: string) => string,
  style: PathStyle = HOST_PATH_STYLE,
): MountPlan {
  const hc = (body.HostConfig ?? {}) as Record<string, any>;
  // The volumes of Binds and the anonymous ones use HostConfig.VolumeDriver (only the local driver exists
  // here): an unknown one is an error when such a volume is planned, and is kept as given otherwise.
  const volumeDriver = hc.VolumeDriver;
  const byDestination = new Map<string, MountPoint>();
  const volumes = new Map<string, NeededVolume>();
  const copies = new Map<string, { name: string; destination: string }>();
  const need = (name: string, labels: Record<string, string> = {}, driverOpts: Record<string, string> = {}, driver?: string) => {
    if (!volumes.has(name)) volumes.set(name, { name, labels, driverOpts, ...(driver ? { driver } : {}) });
  };
  const volumeMount = (name: string, destination: string, rw: boolean, mode: string): MountPoint => ({
    Type: 'volume', Name: name, Source: mountpoint(name), Destination: destination, Driver: 'local', Mode: mode, RW: rw, Propagation: '',
  });

  for (const [i, entry] of ((hc.VolumesFrom as string[] | null) ?? []).entries()) {
    const field = `HostConfig.VolumesFrom[${i}]`;
    const [ref, mode, extra] = entry.split(':');
    if (!ref || extra !== undefined || (mode !== undefined && !['ro', 'rw', ''].includes(mode))) {
      throw new InvalidParameter(`invalid ${field} ${JSON.stringify(entry)}: expected <container>[:ro|rw]`);
    }
    let other: VolumeContainer;
    try {
      other = lookup(ref);
    } catch (err) {
      if (err instanceof NotFound) throw new InvalidParameter(`invalid ${field}: no such container: ${ref}`);
      throw err;
    }
    for (const m of other.Mounts) {
      if (m.Type !== 'volume' && m.Type !== 'bind') continue;
      const rw = mode === 'ro' ? false : mode === 'rw' ? true : m.RW;
      byDestination.set(path.posix.normalize(m.Destination).replace(/\/+$/, '') || '/', { ...m, RW: rw, Mode: mode ? mode : m.Mode });
      if (m.Type === 'volume' && m.Name) need(m.Name);
    }
  }

  const fromBinds = new Set<string>();
  for (const bind of (hc.Binds as string[] | null) ?? []) {
    const b = parseBind(bind, style);
    const destination = cleanDestination(`HostConfig.Binds entry ${JSON.stringify(bind)}`, b.destination);
    if (fromBinds.has(destination)) throw new InvalidParameter(`Duplicate mount point: ${destination}`);
    fromBinds.add(destination);
    if (b.volume) {
      need(b.source, {}, {}, driverInMount(volumeDriver));
      byDestination.set(destination, volumeMount(b.source, destination, !b.readOnly, b.options.join(',')));
      if (!b.options.includes('nocopy')) copies.set(destination, { name: b.source, destination });
      else copies.delete(destination);
    } else {
      copies.delete(destination);
      // The destination as given: the runtime spec mounts host binds from Binds under that same name.
      byDestination.set(destination, { Type: 'bind', Source: b.source, Destination: b.destination, Mode: b.options.join(','), RW: !b.readOnly, Propagation: b.propagation });
    }
  }

  const fromMounts = new Set<string>();
  for (const [i, m] of ((hc.Mounts as Array<Record<string, any>> | null) ?? []).entries()) {
    const field = `HostConfig.Mounts[${i}]`;
    if (m === null || typeof m !== 'object' || Array.isArray(m)) throw new InvalidParameter(`invalid ${field}: expected an object with Type, Source and Target`);
    const destination = cleanDestination(`${field}.Target`, m.Target ?? m.Destination);
    if (fromBinds.has(destination) || fromMounts.has(destination)) throw new InvalidParameter(`Duplicate mount point: ${destination}`);
    fromMounts.add(destination);
    if (m.Type === 'bind') {
      const invalid = (what: string) => new InvalidParameter(`invalid mount config for type "bind": ${what}`);
      if (m.VolumeOptions) throw invalid('field VolumeOptions must not be specified');
      if (m.TmpfsOptions) throw invalid('field TmpfsOptions must not be specified');
      if (typeof m.Source !== 'string' || m.Source === '') throw invalid('field Source must not be empty');
      if (!isAbsoluteHostPath(m.Source, style)) throw invalid(`invalid mount path: '${m.Source}' mount path must be absolute`);
      const propagation = m.BindOptions?.Propagation;
      if (propagation !== undefined && propagation !== '' && !PROPAGATIONS.includes(propagation)) throw invalid(`invalid propagation mode: ${propagation}`);
      byDestination.set(destination, {
        Type: 'bind', Source: normalizeHostPath(m.Source, style), Destination: destination, Mode: '', RW: m.ReadOnly !== true, Propagation: propagation || 'rprivate',
      });
      copies.delete(destination);
      continue;
    }
    if (m.Type === 'tmpfs') {
      const invalid = (what: string) => new InvalidParameter(`invalid mount config for type "tmpfs": ${what}`);
      if (m.Source !== undefined && m.Source !== null && m.Source !== '') throw invalid('field Source must not be specified');
      if (m.BindOptions) throw invalid('field BindOptions must not be specified');
      if (m.VolumeOptions) throw invalid('field VolumeOptions must not be specified');
      byDestination.set(destination, { Type: 'tmpfs', Source: '', Destination: destination, Mode: '', RW: m.ReadOnly !== true, Propagation: '' });
      copies.delete(destination);
      continue;
    }
    if (m.Type !== 'volume') {
      byDestination.delete(destination);
      copies.delete(destination);
      continue;
    }
    if (m.BindOptions) throw new InvalidParameter(`invalid ${field}: BindOptions must not be given for a mount of type volume`);
    if (m.TmpfsOptions) throw new InvalidParameter(`invalid ${field}: TmpfsOptions must not be given for a mount of type volume`);
    if (m.ReadOnly !== undefined && typeof m.ReadOnly !== 'boolean') throw new InvalidParameter(`invalid ${field}.ReadOnly: expected a boolean`);
    const options = (m.VolumeOptions ?? {}) as Record<string, any>;
    if (typeof options !== 'object' || Array.isArray(options)) throw new InvalidParameter(`invalid ${field}.VolumeOptions: expected an object`);
    const anonymous = m.Source === undefined || m.Source === null || m.Source === '';
    if (options.Subpath !== undefined && options.Subpath !== null && typeof options.Subpath !== 'string') {
      throw new InvalidParameter(`invalid ${field}.VolumeOptions.Subpath: expected a string`);
    }
    if (options.Subpath) {
      if (anonymous) throw new InvalidParameter('invalid mount config for type "volume": must not set Subpath when using anonymous volumes');
      if (!isLocalSubpath(options.Subpath)) throw new InvalidParameter('invalid mount config for type "volume": subpath must be a relative path within the volume');
    }
    if (options.NoCopy !== undefined && typeof options.NoCopy !== 'boolean') throw new InvalidParameter(`invalid ${field}.VolumeOptions.NoCopy: expected a boolean`);
    const driverConfig = (options.DriverConfig ?? {}) as Record<string, any>;
    if (typeof driverConfig !== 'object' || Array.isArray(driverConfig)) throw new InvalidParameter(`invalid ${field}.VolumeOptions.DriverConfig: expected an object`);
    const labels = stringMap(`${field}.VolumeOptions.Labels`, options.Labels);
    const driverOpts = stringMap(`${field}.VolumeOptions.DriverConfig.Options`, driverConfig.Options);
    let name: string;
    if (anonymous) {
      name = newId();
      labels[ANONYMOUS_LABEL] = '';
    } else {
      if (typeof m.Source !== 'string' || !VOLUME_NAME.test(m.Source)) {
        throw new InvalidParameter(`invalid mount config for type "volume": invalid ${field}.Source ${JSON.stringify(m.Source)}: a volume name with only [a-zA-Z0-9][a-zA-Z0-9_.-] (at least two characters), or empty for an anonymous volume`);
      }
      name = m.Source;
    }
    need(name, labels, driverOpts, driverInMount(driverConfig.Name));
    byDestination.set(destination, volumeMount(name, destination, m.ReadOnly !== true, ''));
    if (options.NoCopy === true) copies.delete(destination);
    else copies.set(destination, { name, destination });
  }

  const taken = new Set([...byDestination.keys(), ...fromMounts]);
  for (const dest of Object.keys((hc.Tmpfs as Record<string, string> | null) ?? {})) taken.add(path.posix.normalize(dest).replace(/\/+$/, ''));
  const anonymous = new Set([...Object.keys(imageVolumes ?? {}), ...Object.keys((body.Volumes as Record<string, unknown> | null) ?? {})]);
  for (const dest of anonymous) {
    const destination = cleanDestination(`Config.Volumes entry ${JSON.stringify(dest)}`, dest);
    if (taken.has(destination)) continue;
    taken.add(destination);
    const name = newId();
    need(name, { [ANONYMOUS_LABEL]: '' }, {}, driverInMount(volumeDriver));
    byDestination.set(destination, volumeMount(name, destination, true, ''));
    copies.set(destination, { name, destination });
  }

  for (const v of volumes.values()) validateVolumeName(v.name);
  const mounts = [...byDestination.values()].sort((a, b) => a.Destination.localeCompare(b.Destination));
  return { mounts, volumes: [...volumes.values()], copies: [...copies.values()] };
}

/** The volumes of a container being started. */
export interface MountedVolumes {
  /** Host paths to bind instead of a mount point's Source (a volume's Subpath), by destination. */
  sources: Map<string, string>;
  /** Lets go of what pins those paths, once the runtime mounted them. */
  release(): Promise<void>;
}

/** What the container engine does with volumes around its own verbs. */
export class ContainerVolumes {
  constructor(private readonly volumes: VolumeService) {}

  /**
   * Plans a container's mounts and creates the volumes it needs. Answers the mounts for its record, the
   * copies to make, and an undo that removes the volumes this call created.
   */
  async prepare(
    body: Record<string, any>,
    imageVolumes: Record<string, unknown> | null | undefined,
    lookup: (ref: string) => VolumeContainer,
  ): Promise<{ mounts: MountPoint[]; copies: MountPlan['copies']; undo: () => Promise<void> }> {
    const plan = planMounts(body, imageVolumes, lookup, (name) => this.volumes.mountpoint(name));
    const created: string[] = [];
    // Held until the container is recorded (its record then says it uses them): no remove or prune in between.
    const releases = plan.volumes.map((v) => this.volumes.reserve(v.name));
    const release = () => {
      for (const r of releases) r();
    };
    const undo = async () => {
      release();
      for (const name of created.reverse()) await this.volumes.remove(name, { force: true }).catch((err) => log.warn('volume not removed', { name, error: errorMessage(err) }));
    };
    const copies: MountPlan['copies'] = [];
    try {
      for (const v of plan.volumes) {
        const result = await this.volumes.create({ Name: v.name, Driver: v.driver, DriverOpts: v.driverOpts, Labels: v.labels });
        if (result.created) created.push(v.name);
      }
      // A plugin's volume is mounted where its driver says at each start: no host path is known before.
      for (const m of plan.mounts) {
        const volume = m.Type === 'volume' && m.Name ? this.volumes.find(m.Name) : undefined;
        if (volume && volume.Driver !== 'local') Object.assign(m, { Driver: volume.Driver, Source: '' });
      }
      // Only volumes of the local driver that hold nothing get the image's content, and not those mounted from the host.
      for (const c of plan.copies) {
        const volume = this.volumes.find(c.name);
        if (volume && volume.Driver === 'local' && !volume.Options.type && (await this.volumes.isEmpty(c.name))) copies.push(c);
      }
    } catch (err) {
      await undo();
      if (err instanceof NotFound) throw new InvalidParameter(errorMessage(err));
      throw err;
    }
    // The caller records the container in the same turn as this promise settles; macrotasks (another
    // request's remove) come after that.
    setImmediate(release);
    return { mounts: plan.mounts, copies, undo };
  }

  /** Copies the image's content at each place into its (empty) volume; `rootfs` is the container's root, mounted. */
  async populate(rootfs: string, copies: MountPlan['copies']): Promise<void> {
    for (const c of copies) {
      if (!(await this.volumes.isEmpty(c.name))) continue;
      try {
        await this.volumes.copyFromRootfs(c.name, rootfs, c.destination);
      } catch (err) {
        throw new EngineError(`copying the image's content at ${c.destination} into volume ${c.name}: ${errorMessage(err)}`, { cause: err });
      }
    }
  }

  /**
   * At start: mounts the container's volumes (the DriverOpts ones for their first running user), with
   * events. With the container's mounted root, the places of its mount points are made there first.
   */
  async mountAll(record: VolumeContainer, rootfs?: string): Promise<MountedVolumes> {
    const done: string[] = [];
    const sources = new Map<string, string>();
    const handles: Array<{ close(): Promise<void> }> = [];
    const release = async () => {
      for (const h of handles.splice(0)) await h.close().catch(() => undefined);
    };
    const subpaths = subpathsOf(record.HostConfig);
    try {
      for (const m of record.Mounts) {
        if (m.Type !== 'volume' || !m.Name) continue;
        const source = await this.volumes.mount(m.Name, { container: record.Id, destination: m.Destination, readWrite: m.RW, propagation: m.Propagation });
        done.push(m.Name);
        // A plugin's driver may answer another path at each mount.
        if (source !== m.Source) sources.set(m.Destination, source);
        // A part of the volume (VolumeOptions.Subpath): checked now, held open until the runtime mounted it.
        const subpath = subpaths.get(m.Destination);
        let directory = true;
        if (subpath) {
          const opened = await this.volumes.openSubpath(m.Name, subpath, source);
          handles.push(opened);
          sources.set(m.Destination, opened.path);
          directory = opened.directory;
        }
        // A volume is a folder (a part of one may be a file, for which the runtime makes a file).
        if (rootfs && directory) await this.volumes.makeMountPoint(rootfs, m.Destination);
      }
    } catch (err) {
      await release();
      for (const name of done) await this.volumes.unmount(name, record.Id).catch(() => undefined);
      throw err;
    }
    return { sources, release };
  }

  /** At stop: the container no longer holds its volumes. */
  async unmountAll(record: VolumeContainer): Promise<void> {
    for (const m of record.Mounts) {
      if (m.Type !== 'volume' || !m.Name) continue;
      await this.volumes.unmount(m.Name, record.Id).catch((err) => log.warn('volume unmount failed', { name: m.Name, error: errorMessage(err) }));
    }
  }

  /** After the container's removal (`rm -v`, AutoRemove): its anonymous volumes that nothing else uses go. */
  async removeAnonymous(record: VolumeContainer): Promise<void> {
    for (const m of record.Mounts) {
      if (m.Type !== 'volume' || !m.Name || !this.volumes.isAnonymous(m.Name)) continue;
      await this.volumes.remove(m.Name, { force: true }).catch((err) => log.warn('anonymous volume kept', { name: m.Name, error: errorMessage(err) }));
    }
  }
}
