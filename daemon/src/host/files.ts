/**
 * The files part of the Host: a container's files seen through its mounted root and bind mounts (archive in
 * and out, stat, export, changes), with paths resolved inside the root (host/linux/archive implements it).
 */
import type { Readable } from 'node:stream';

/** A bind mount of the container: `destination` is a container path, `source` a host path. */
export interface FilesystemMount {
  destination: string;
  source: string;
  readOnly: boolean;
  /**
   * A part of the volume folder `source` (Mounts[].VolumeOptions.Subpath): the Host mounts it when every step
   * exists and none is a symlink, and leaves the mount out otherwise (as the runtime did at start).
   */
  subpath?: string;
}

/** The container's filesystem as the host sees it: the mounted root plus the container's bind mounts. */
export interface FilesystemView {
  /** Host path of the mounted root filesystem. */
  root: string;
  mounts: FilesystemMount[];
  readonlyRootfs: boolean;
}

/** The stat the archive endpoints send (X-Docker-Container-Path-Stat); `mode` is a Go os.FileMode. */
export interface PathStat {
  name: string;
  size: number;
  mode: number;
  mtime: string;
  linkTarget: string;
}

export interface FilesystemChange {
  Path: string;
  Kind: 0 | 1 | 2;
}

export interface ExtractRequest {
  noOverwriteDirNonDir: boolean;
  chown?: { uid: number; gid: number };
  signal?: AbortSignal;
}

/** One of the files the engine writes for a container, at the host path its record names. */
export interface EtcFileWrite {
  file: string;
  data: string;
}

/**
 * How writeEtcFiles writes: `fresh` unlinks and makes each file anew (before a start binds them); `inPlace`
 * rewrites the same inode (a running container's bind mount sees the new content); `placeholder` makes a
 * missing file empty with mode 0755 and leaves an existing one alone (the data is not used).
 */
export type EtcFileWriteMode = 'fresh' | 'inPlace' | 'placeholder';

/** What the file verbs need of the Host. */
export interface ContainerFilesHost {
  /**
   * Writes the files the engine makes for a container's /etc (hosts, hostname, resolv.conf), which the
   * runtime binds into it, at the paths of the container's record (see EtcFileWriteMode).
   */
  writeEtcFiles(files: EtcFileWrite[], mode: EtcFileWriteMode): Promise<void>;
  /** The text of one of those files, or undefined when it does not exist. */
  readEtcFile(file: string): Promise<string | undefined>;
  mountRootfs(id: string, lowerDirs: string[]): Promise<string>;
  unmountRootfs(id: string): Promise<void>;
  readFileFromLayers(lowerDirs: string[], path: string): Promise<Buffer | undefined>;
  /** Stat of a container path (path rules of the archive endpoints). NotFound, InvalidParameter. */
  statPath(view: FilesystemView, path: string): Promise<PathStat>;
  /** The stat and a tar stream of a container path. */
  archivePath(view: FilesystemView, path: string, signal?: AbortSignal): Promise<{ stat: PathStat; tar: Readable }>;
  /** Extracts a tar stream into the container folder `path`. */
  extractArchive(view: FilesystemView, path: string, tar: Readable, opts: ExtractRequest): Promise<void>;
  /** A tar stream of the whole root filesystem (mounts not included). */
  exportRootfs(root: string, signal?: AbortSignal): Readable;
  /** Changes of the container's writable layer against its image. */
  changes(id: string, lowerDirs: string[], ignoreAdded: ReadonlySet<string>): Promise<FilesystemChange[]>;
  /**
   * A layer tar of the container's writable layer (its changes against `lowerDirs`, deletions as whiteouts),
   * for commit and build; `ignoreAdded` are paths the runtime adds that are no change of the container.
   */
  diffTar(id: string, lowerDirs: string[], ignoreAdded: ReadonlySet<string>, signal?: AbortSignal): Readable;
}
