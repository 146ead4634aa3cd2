/**
 * Mounts of a part of a volume (Mounts[].VolumeOptions.Subpath) in a container's filesystem view: the host
 * folder of the part, when every step of it exists and none is a symlink (as at the container's start);
 * otherwise the container has nothing mounted there either.
 */
import { promises as fs } from 'node:fs';
import path from 'node:path';
import type { FilesystemMount, FilesystemView } from '../../host.js';

async function subpathSource(volumeFolder: string, subpath: string): Promise<string | undefined> {
  let at = volumeFolder;
  for (const part of path.posix.normalize(subpath).split('/').filter((p) => p !== '' && p !== '.')) {
    if (part === '..') return undefined;
    at = path.join(at, part);
    try {
      if ((await fs.lstat(at)).isSymbolicLink()) return undefined;
    } catch {
      return undefined;
    }
  }
  return at;
}

/** The view with each subpath mount's source resolved, and those that cannot be mounted left out. */
export async function withSubpaths(view: FilesystemView): Promise<FilesystemView> {
  if (!view.mounts.some((m) => m.subpath !== undefined)) return view;
  const mounts: FilesystemMount[] = [];
  for (const m of view.mounts) {
    if (m.subpath === undefined) {
      mounts.push(m);
      continue;
    }
    const source = await subpathSource(m.source, m.subpath);
    if (source !== undefined) mounts.push({ destination: m.destination, source, readOnly: m.readOnly });
  }
  return { ...view, mounts };
}
