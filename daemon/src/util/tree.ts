/**
 * A tree of files read by relative paths, without following links on the machine that holds it: the
 * builder's view of its context (the daemon's scratch, state/scratch.ts) and of an image's layers (the
 * Host's layer store). Plain data, so that a remote Host can answer it.
 */
import type { Readable } from 'node:stream';

/** What lstat says of a path, as plain data. */
export interface PathInfo {
  type: 'file' | 'directory' | 'symlink' | 'other';
  /** st_mode: the permission bits (mode & 0o7777) and the kind. */
  mode: number;
  size: number;
  mtimeMs: number;
}

/** Paths are relative to the tree's root ('' is the root), with `/` between parts. */
export interface FileTree {
  /** What is at the path (a link is not followed); undefined when absent. */
  lstat(rel: string): Promise<PathInfo | undefined>;
  readlink(rel: string): Promise<string>;
  /** The names in a folder, sorted. */
  readdir(rel: string): Promise<string[]>;
  /** The bytes of a regular file (refused at once when the path is not one). */
  open(rel: string): Promise<Readable>;
}

/** The PathInfo of an fs.Stats (or anything shaped like one). */
export function pathInfoOf(st: { isFile(): boolean; isDirectory(): boolean; isSymbolicLink(): boolean; mode: number; size: number; mtimeMs: number }): PathInfo {
  const type = st.isFile() ? 'file' : st.isDirectory() ? 'directory' : st.isSymbolicLink() ? 'symlink' : 'other';
  return { type, mode: st.mode, size: st.size, mtimeMs: st.mtimeMs };
}
