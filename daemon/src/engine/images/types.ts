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

