/**
 * Files of a container: `docker cp` both ways (archive HEAD/GET/PUT), export and changes. The engine decides
 * what the container's filesystem is (its root, its bind mounts, what is read-only) and keeps a stopped
 * container's root mounted only while a copy needs it; the Host does the file work (safe resolution inside
 * the root, tar in and out).
 */
import path from 'node:path';
import { Readable } from 'node:stream';
import { InvalidParameter } from '../../errors.js';
import type { EventBus } from '../events.js';
import { ensurePlaceholderFiles } from './files.js';
import type { ContainerRecord } from './model.js';
import { resolveUser } from './ocispec.js';
import { parseBind } from './validate.js';
import type { ContainerFilesHost, FilesystemChange, FilesystemMount, FilesystemView, LayerFolders, PathStat } from '../../host/host.js';

/** The stat the archive endpoints send, as the Host gives it. */
export type { PathStat };

/** What the file verbs need of the container service. */
export interface ContainerAccess {
  get(ref: string): ContainerRecord;
  /** Runs fn while no start, stop or removal of the container is under way. */
  serialised<T>(id: string, fn: () => Promise<T>): Promise<T>;
}

/**
 * The mount points the runtime creates in a container root; Docker keeps them in an init layer below the
 * container's own, so `docker diff` never lists them as added.
 */
export const RUNTIME_MOUNT_POINTS: ReadonlySet<string> = new Set([
  '/dev', '/dev/pts', '/dev/shm', '/dev/mqueue', '/dev/console', '/proc', '/sys', '/sys/fs/cgroup',
  '/.dockerenv', '/etc', '/etc/resolv.conf', '/etc/hosts', '/etc/hostname', '/etc/mtab',
]);

/** The container path a request names: relative paths start at the root; the trailing `/` or `/.` is kept. */
export function containerPathParam(raw: string | undefined): string {
  if (raw === undefined || raw === '') throw new InvalidParameter('path cannot be empty');
  if (raw.includes('\0')) throw new InvalidParameter('path cannot contain a NUL byte');
  // The kernel's limits (PATH_MAX, NAME_MAX), told as a bad parameter rather than met as ENAMETOOLONG.
  if (Buffer.byteLength(raw) >= 4096) throw new InvalidParameter(`path is too long: ${Buffer.byteLength(raw)} bytes, the limit is 4095`);
  const longName = raw.split('/').find((name) => Buffer.byteLength(name) > 255);
  if (longName !== undefined) throw new InvalidParameter(`path has a file name too long: ${Buffer.byteLength(longName)} bytes, the limit is 255`);
  return raw.startsWith('/') ? raw : `/${raw}`;
}

/**
 * The stream `tar`, ended only once `release` is done: a client that read the whole archive finds the
 * container as it was before (a stopped container's root unmounted again). Destroying it releases too.
 */
function releasedAtEnd(tar: Readable, release: () => Promise<void>): Readable {
  async function* guarded() {
    try {
      for await (const chunk of tar) yield chunk as Buffer;
    } finally {
      tar.destroy();
      await release();
    }
  }
  return Readable.from(guarded(), { objectMode: false });
}

export class ContainerFiles {
  /** Copies under way on a container whose root this module mounted. */
  private readonly holds = new Map<string, number>();

  constructor(
    private readonly deps: {
      containers: ContainerAccess;
      host: ContainerFilesHost;
      images: LayerFolders;
      events: EventBus;
    },
  ) {}

  /** Docker's events of the file verbs: archive-path (GET), extract-to-dir (PUT), export. */
  private publish(record: ContainerRecord, action: string): void {
    this.deps.events.publish('container', action, record.Id, { ...record.Config.Labels, image: record.Config.Image, name: record.Name.slice(1) });
  }

  /** The bind mounts of a container, as the runtime mounts them (engine files included). */
  mounts(record: ContainerRecord): FilesystemMount[] {
    const hc = record.HostConfig as Record<string, any>;
    const out: FilesystemMount[] = [];
    const seen = new Set<string>();
    for (const bind of (hc.Binds as string[] | null) ?? []) {
      const b = parseBind(bind);
      if (b.volume) continue;
      out.push({ destination: b.destination, source: b.source, readOnly: b.readOnly });
      seen.add(b.destination);
    }
    const subpaths = new Map<string, string>();
    for (const m of (hc.Mounts as Array<Record<string, any>> | null) ?? []) {
      const clean = path.posix.normalize(String(m.Target)).replace(/(.)\/+$/, '$1');
      if (m.Type === 'bind') {
        out.push({ destination: m.Target, source: m.Source, readOnly: m.ReadOnly === true });
        seen.add(m.Target);
        seen.add(clean);
      } else if (m.Type === 'volume' && typeof m.VolumeOptions?.Subpath === 'string' && m.VolumeOptions.Subpath !== '') {
        subpaths.set(clean, m.VolumeOptions.Subpath);
      }
    }
    // Volumes and what VolumesFrom brings, in their host folders.
    for (const m of record.Mounts ?? []) {
      if (m.Type === 'tmpfs' || seen.has(m.Destination)) continue;
      const subpath = subpaths.get(m.Destination);
      // A part of a volume: the Host finds its folder (missing or through a symlink, it is not mounted).
      out.push(subpath === undefined ? { destination: m.Destination, source: m.Source, readOnly: !m.RW } : { destination: m.Destination, source: m.Source, readOnly: !m.RW, subpath });
      seen.add(m.Destination);
    }
    const files: Array<[string, string]> = [
      ['/etc/resolv.conf', record.ResolvConfPath],
      ['/etc/hostname', record.HostnamePath],
      ['/etc/hosts', record.HostsPath],
    ];
    for (const [destination, source] of files) {
      if (source && !seen.has(destination)) out.push({ destination, source, readOnly: hc.ReadonlyRootfs === true });
    }
    return out;
  }

  /**
   * Gives the container's filesystem view for the duration of `use`: a running container's mounted root,
   * or a stopped container's root mounted for the copy and unmounted after the last copy ends (unless the
   * container started meanwhile).
   */
  private async acquire(record: ContainerRecord): Promise<{ view: FilesystemView; release: () => Promise<void> }> {
    const { host, containers, images } = this.deps;
    const id = record.Id;
    const root = await containers.serialised(id, async () => {
      // Removed while this waited its turn: its folder is gone, and so is the container (404).
      containers.get(id);
      if (!record.State.Running && !record.State.Restarting && !record.State.Paused) await ensurePlaceholderFiles(this.deps.host, record);
      const lowerDirs = images.lowerDirs(record.ImageChainIds);
      const merged = await host.mountRootfs(id, lowerDirs);
      this.holds.set(id, (this.holds.get(id) ?? 0) + 1);
      return merged;
    });
    let released = false;
    const release = async () => {
      if (released) return;
      released = true;
      await containers.serialised(id, async () => {
        const left = (this.holds.get(id) ?? 1) - 1;
        if (left > 0) this.holds.set(id, left);
        else this.holds.delete(id);
        if (left <= 0 && !record.State.Running && !record.State.Restarting && !record.State.Paused) await host.unmountRootfs(id).catch(() => undefined);
      });
    };
    const view = { root, mounts: this.mounts(record), readonlyRootfs: (record.HostConfig as Record<string, any>).ReadonlyRootfs === true };
    return { view, release };
  }

  private async withView<T>(record: ContainerRecord, fn: (view: FilesystemView) => Promise<T>): Promise<T> {
    const { view, release } = await this.acquire(record);
    try {
      return await fn(view);
    } finally {
      await release();
    }
  }

  /** HEAD archive: the stat of a path. */
  async stat(ref: string, rawPath: string | undefined): Promise<PathStat> {
    const record = this.deps.containers.get(ref);
    const p = containerPathParam(rawPath);
    return this.withView(record, (view) => this.deps.host.statPath(view, p));
  }

  /** GET archive: the stat and a tar stream of a path; the root stays mounted until the stream closes. */
  async archive(ref: string, rawPath: string | undefined, signal?: AbortSignal): Promise<{ stat: PathStat; tar: Readable }> {
    const record = this.deps.containers.get(ref);
    const p = containerPathParam(rawPath);
    const { view, release } = await this.acquire(record);
    try {
      const out = await this.deps.host.archivePath(view, p, signal);
      this.publish(record, 'archive-path');
      return { stat: out.stat, tar: releasedAtEnd(out.tar, release) };
    } catch (err) {
      await release();
      throw err;
    }
  }

  /** PUT archive: extracts a tar into a folder of the container. */
  async extract(ref: string, rawPath: string | undefined, tar: Readable, opts: { noOverwriteDirNonDir: boolean; copyUIDGID: boolean; signal?: AbortSignal }): Promise<void> {
    const record = this.deps.containers.get(ref);
    const p = containerPathParam(rawPath);
    let chown: { uid: number; gid: number } | undefined;
    if (opts.copyUIDGID && record.Config.User) {
      // As Docker: with copyUIDGID, the files belong to the container's configured user.
      const lowerDirs = this.deps.images.lowerDirs(record.ImageChainIds);
      const [passwd, group] = await Promise.all([
        this.deps.host.readFileFromLayers(lowerDirs, '/etc/passwd'),
        this.deps.host.readFileFromLayers(lowerDirs, '/etc/group'),
      ]);
      const user = resolveUser(record.Config.User, passwd?.toString('utf8'), group?.toString('utf8'));
      chown = { uid: user.uid, gid: user.gid };
    }
    await this.withView(record, (view) =>
      this.deps.host.extractArchive(view, p, tar, { noOverwriteDirNonDir: opts.noOverwriteDirNonDir, chown, signal: opts.signal }),
    );
    this.publish(record, 'extract-to-dir');
  }

  /** GET export: the container's root filesystem as a tar stream. */
  async export(ref: string, signal?: AbortSignal): Promise<Readable> {
    const record = this.deps.containers.get(ref);
    const { view, release } = await this.acquire(record);
    const tar = releasedAtEnd(this.deps.host.exportRootfs(view.root, signal), release);
    this.publish(record, 'export');
    return tar;
  }

  /** GET changes. */
  async changes(ref: string): Promise<FilesystemChange[]> {
    const record = this.deps.containers.get(ref);
    return this.deps.host.changes(record.Id, this.deps.images.lowerDirs(record.ImageChainIds), RUNTIME_MOUNT_POINTS);
  }
}
