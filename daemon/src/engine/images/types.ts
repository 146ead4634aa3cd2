/**
 * The image model shared by the image service and its consumers (containers, commit, build).
 */

import type { Readable } from 'node:stream';

/** The `config` section of an image configuration (Docker / OCI image spec), as the API shows it. */
export interface ImageRunConfig {
  User?: string;
  ExposedPorts?: Record<string, object>;
  Env?: string[];
  Entrypoint?: string[] | null;
  Cmd?: string[] | null;
  Volumes?: Record<string, object> | null;
  WorkingDir?: string;
  Labels?: Record<string, string> | null;
  StopSignal?: string;
  Healthcheck?: {
    Test?: string[];
    Interval?: number;
    Timeout?: number;
    StartPeriod?: number;
    StartInterval?: number;
    Retries?: number;
  };
  Shell?: string[];
  OnBuild?: string[] | null;
  ArgsEscaped?: boolean;
}

/** What a container needs to know of its image. */
/** What makes a new image from a parent (or nothing) plus an optional layer tar: commit and the builder. */
export interface CreateImageOptions {
  parent?: string;
  /** The layer as a tar with whiteouts as `.wh.` entries; without it the history entry is an empty layer. */
  layer?: Readable;
  config: ImageRunConfig;
  createdBy?: string;
  comment?: string;
  author?: string;
  /** Tags in any reference form. */
  tags?: string[];
  /** The committed container and its config (`container`, `container_config` of the image config). */
  container?: string;
  containerConfig?: Record<string, unknown>;
}

export interface ImageForContainer {
  /** `sha256:<hex>` of the image configuration. */
  id: string;
  /** The reference the caller used, normalised (`busybox:latest`), or the id when given by id. */
  reference: string;
  config: ImageRunConfig;
  os: string;
  architecture: string;
  /** Chain ids of the image's layers, bottom first; the layer store knows their unpacked folders. */
  chainIds: string[];
}

/** The narrow view of the image service that the container engine uses. */
export interface ImageLookup {
  /** Resolves a reference (name, name:tag, name@digest, full or short id); NotFound when absent. */
  resolveForContainer(ref: string): Promise<ImageForContainer>;
}

/** Lets the image service ask which images containers hold, so that removal answers 409 while in use. */
export interface ImageUsers {
  /** Ids of containers (any state) created from the image id. */
  containersUsingImage(imageId: string): string[];
}

/** The unpacked folders of layers, for the container engine's overlay mounts. */
export interface LayerFolders {
  /** The unpacked folder of each layer, in the order given (callers pass bottom first). NotFound when one is missing. */
  lowerDirs(chainIds: string[]): string[];
}

/** A layer read from an archive and unpacked into a staging area, not yet part of the store. */
export interface StagedLayer {
  /** `sha256:<hex>` of the uncompressed layer tar. */
  diffId: string;
  /** Bytes of the uncompressed layer tar. */
  size: number;
}

/** What the layer store keeps about one committed layer. */
export interface LayerInfo {
  chainId: string;
  diffId: string;
  parent: string | null;
  /** Bytes of the uncompressed layer tar. */
  tarSize: number;
  /** Bytes of the unpacked files (regular file contents). */
  diskSize: number;
}

/**
 * The layer store as the image service needs it (host/linux/layers implements it). Layers are unpacked
 * once into folders by chain id, and save gives back byte-identical layer tars (the same diff ids).
 */
export interface LayerStore extends LayerFolders {
  /**
   * Reads one layer tar (plain, gzip) from `input`, unpacks it safely into a staging area and gives its
   * diff id. Bad tars are InvalidParameter errors; nothing is left behind on failure.
   */
  stage(input: NodeJS.ReadableStream, signal?: AbortSignal): Promise<StagedLayer>;
  /** Makes a staged layer the layer `chainId` on top of `parent` (no-op when that layer exists already). */
  commit(staged: StagedLayer, chainId: string, parent: string | null): Promise<void>;
  /** Removes whatever a staged layer holds (safe to call after commit). */
  discard(staged: StagedLayer): Promise<void>;
  has(chainId: string): boolean;
  /** Every committed layer. */
  chainIds(): string[];
  info(chainId: string): LayerInfo | undefined;
  /** The uncompressed layer tar, byte for byte as it was loaded (checked against the diff id). */
  openTar(chainId: string): NodeJS.ReadableStream;
  /** Removes a layer (the caller knows that no image uses it any more). */
  remove(chainId: string): Promise<void>;
}
