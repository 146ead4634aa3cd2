/**
 * The builder's scratch space, on the daemon's machine (where the build context arrives from the client;
 * RUN steps happen on the Host, COPY and ADD send their layers to it as tars): one workspace per build,
 * holding the unpacked context and ADD's downloads. `state/fs-scratch.ts` implements it under
 * `<data-root>/build/tmp/`; daemon.ts hands it to the builder.
 */
import type { Readable } from 'node:stream';
import type { FileTree } from '../util/tree.js';

export interface BuildScratch {
  /** Removes the workspaces a stop of the daemon left behind. */
  reset(): Promise<void>;
  /** A new, empty workspace. */
  workspace(): Promise<BuildWorkspace>;
}

/** A folder of the scratch space read and changed by relative paths, never through a link. */
export interface ScratchTree extends FileTree {
  /** Removes a file, or a folder with all it holds; a missing one is fine. */
  remove(rel: string): Promise<void>;
  /** Removes an empty folder (ENOTEMPTY otherwise). */
  removeEmptyFolder(rel: string): Promise<void>;
}

export interface BuildWorkspace {
  /** The build context, empty until unpackContext. */
  readonly context: ScratchTree;
  /** ADD's downloads, by the names saveDownload gave. */
  readonly downloads: ScratchTree;
  /**
   * Unpacks a plain (decompressed) context tar into `context`: folders, files, links and hard links (to files
   * of the context); entries that would land outside it, or below a link or a file, are InvalidParameter;
   * devices and FIFOs are skipped. Folders get their modes and times once every entry is written.
   */
  unpackContext(tar: Readable, signal?: AbortSignal): Promise<void>;
  /** Writes `body` as a new download (mode 0600) and gives its name in `downloads`. */
  saveDownload(name: string, body: Readable, signal?: AbortSignal): Promise<void>;
  /** Removes the workspace and all it holds. */
  dispose(): Promise<void>;
}
