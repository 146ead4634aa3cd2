/**
 * The volumes part of the Host: the local driver's folders and mounts, and the mount points of volumes in a
 * container root (host/linux/volumes implements it).
 */

/** The local driver's options (DriverOpts): `type`, `device` and `o`, as mount(8) takes them. */
export interface LocalDriverOptions {
  type?: string;
  device?: string;
  o?: string;
}

/**
 * What the volume service asks of the Host. The Host names where volumes live on its machine: volume `name`'s
 * folder is `<volumesRoot>/<name>`, its content `<volumesRoot>/<name>/_data` (the Mountpoint the API shows).
 * Every folder given to the members below lies under `volumesRoot`. What the engine knows of a volume (name,
 * driver, labels, options) is its own state, never kept in these folders.
 */
export interface VolumeHost {
  /** The folder the local driver's volumes are kept in on the Host's machine (fixed while the Host lives). */
  readonly volumesRoot: string;
  /** Names of the volume folders under `volumesRoot` (those made by createVolumeDir and not removed). */
  listVolumeDirs(): Promise<string[]>;
  /** Creates `<dir>` (0700) and `<dir>/_data` (0755); fails if `<dir>` exists. */
  createVolumeDir(dir: string): Promise<void>;
  /** Removes the volume's folder and everything under it (nothing mounted may remain below it). */
  removeVolumeDir(dir: string): Promise<void>;
  /** Mounts `source` of `fstype` on `target` with the comma-separated options of `o` (type none + bind: a bind mount). */
  mount(target: string, opts: Required<Pick<LocalDriverOptions, 'type'>> & LocalDriverOptions): Promise<void>;
  unmount(target: string): Promise<void>;
  isMounted(target: string): Promise<boolean>;
  /** Whether `path` exists on the host (a bind volume's device). */
  exists(path: string): Promise<boolean>;
  isEmpty(dir: string): Promise<boolean>;
  /** Bytes of the files under `dir` (apparent sizes, each inode once). */
  diskUsage(dir: string): Promise<number>;
  /**
   * Copies what the folder `containerPath` of the container root `rootfs` holds into `target`, keeping
   * owners, modes, times and xattrs. The path is resolved inside the root (symlinks never leave it); a
   * missing path or one that is not a folder copies nothing.
   */
  copyFromRootfs(rootfs: string, containerPath: string, target: string): Promise<void>;
  /**
   * Makes the folder a mount lands on in the container root `rootfs`, before the runtime mounts there:
   * symlinks on the way are resolved inside the root (so a link that dangles, or points at `/..`, ends in
   * the root), and missing folders are created. Answers the resolved container path.
   */
  makeMountPoint(rootfs: string, containerPath: string): Promise<string>;
  /**
   * Opens `subpath` below the folder `base` (a volume's content) for a mount: it must exist, and no step of it
   * may be a symlink (NotFound otherwise). Answers a path the runtime can bind that stays on what was checked
   * until `close`.
   */
  openBeneath(base: string, subpath: string): Promise<{ path: string; directory: boolean; close(): Promise<void> }>;
  /** Lets go of what openBeneath held for starts a stop of the daemon interrupted. */
  releaseStaleSubpaths?(): Promise<void>;
}
