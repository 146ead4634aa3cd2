/**
 * The layers part of the Host: image layers unpacked once into folders by chain id, and their tars given
 * back byte for byte (host/linux/layers implements it on overlayfs).
 */
import type { PathInfo } from '../util/tree.js';

export type { PathInfo } from '../util/tree.js';

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

  // The layers `chainIds` (bottom first) read as one tree, as a container of the image sees its files: upper
  // layers hide lower ones, whiteouts delete, and a link is never followed on the machine (the builder's COPY
  // --from, --chown names and destination checks). Paths are relative to the root ('' is the root).

  /** What is at `rel`; undefined when absent. */
  layerTreeStat(chainIds: string[], rel: string): Promise<PathInfo | undefined>;
  layerTreeReadlink(chainIds: string[], rel: string): Promise<string>;
  /** The names in the folder `rel`, sorted. */
  layerTreeReaddir(chainIds: string[], rel: string): Promise<string[]>;
  /** The bytes of the regular file `rel` (the call fails when it is not one). */
  layerTreeRead(chainIds: string[], rel: string): Promise<NodeJS.ReadableStream>;
}
