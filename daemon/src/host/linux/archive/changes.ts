/**
 * Filesystem changes of a container (`docker diff`), read from its overlay upper folder:
 * - a whiteout (character device 0/0) is a deleted path (Kind 2);
 * - an opaque folder (xattr trusted.overlay.opaque = y) replaced the folder below: the folder is reported
 *   as changed, and what the layers below held in it and the upper folder does not is deleted;
 * - any other entry is added (Kind 1) when no layer below shows that path, changed (Kind 0) otherwise;
 * - the folders holding an added or deleted path are changed (Kind 0) too, as Docker lists them.
 * Sorted by path, as `docker diff` prints them.
 */
import { execFile } from 'node:child_process';
import { promises as fs, type Stats } from 'node:fs';
import path from 'node:path';

export interface FilesystemChange {
  Path: string;
  /** 0 modified, 1 added, 2 deleted. */
  Kind: 0 | 1 | 2;
}

function isWhiteout(st: Stats): boolean {
  return st.isCharacterDevice() && st.rdev === 0;
}

const OPAQUE_PY = [
  'import os,sys',
  'for d,_,_ in os.walk(sys.argv[1]):',
  '  try:',
  "    v=os.getxattr(d,'trusted.overlay.opaque',follow_symlinks=False)",
  '  except OSError:',
  '    continue',
  "  if v==b'y': print(os.path.relpath(d,sys.argv[1]))",
].join('\n');

/** Folders of `upper` marked opaque (relative paths); none when the xattr cannot be read here. */
export function opaqueFolders(upper: string): Promise<Set<string>> {
  return new Promise((resolve) => {
    execFile('python3', ['-c', OPAQUE_PY, upper], { maxBuffer: 64 << 20, timeout: 60_000 }, (err, stdout) => {
      if (err) return resolve(new Set());
      resolve(new Set(stdout.split('\n').filter((l) => l !== '' && l !== '.')));
    });
  });
}

/** How the layers below (top-first) show a path: present or not (whiteouts and `.wh.` files hide it). */
async function inLowerLayers(topFirst: string[], rel: string): Promise<boolean> {
  for (const layer of topFirst) {
    const st = await fs.lstat(path.join(layer, rel)).catch(() => undefined);
    if (st) return !isWhiteout(st);
    const wh = await fs.lstat(path.join(layer, path.dirname(rel), `.wh.${path.basename(rel)}`)).catch(() => undefined);
    if (wh) return false;
  }
  return false;
}

async function lowerChildren(topFirst: string[], rel: string): Promise<Set<string>> {
  const names = new Set<string>();
  for (const layer of topFirst) {
    for (const name of await fs.readdir(path.join(layer, rel)).catch(() => [] as string[])) {
      if (!name.startsWith('.wh.')) names.add(name);
    }
  }
  return names;
}

/**
 * `ignoreAdded`: paths the runtime creates as mount points (Docker keeps them in an init layer, so they never
 * show as added). A folder that existed below and holds no reported change is left out: overlay copies a
 * folder up whenever something inside it is created, including those mount points.
 */
export async function upperChanges(upper: string, lowerDirs: string[], ignoreAdded: ReadonlySet<string> = new Set()): Promise<FilesystemChange[]> {
  const topFirst = lowerDirs.map((d) => path.resolve(d)).reverse();
  const opaque = await opaqueFolders(upper);
  const changes = new Map<string, FilesystemChange['Kind']>();
  const touchParent = (p: string) => {
    const parent = path.posix.dirname(p);
    if (parent !== '/' && !changes.has(parent)) changes.set(parent, 0);
  };

  const walk = async (rel: string): Promise<void> => {
    let names: string[];
    try {
      names = await fs.readdir(path.join(upper, rel));
    } catch {
      return;
    }
    for (const name of names) {
      const childRel = rel ? `${rel}/${name}` : name;
      const containerPath = '/' + childRel;
      const st = await fs.lstat(path.join(upper, childRel)).catch(() => undefined);
      if (!st) continue;
      if (isWhiteout(st)) {
        changes.set(containerPath, 2);
        touchParent(containerPath);
        continue;
      }
      const existed = await inLowerLayers(topFirst, childRel);
      if (!existed) {
        if (ignoreAdded.has(containerPath)) continue;
        changes.set(containerPath, 1);
        touchParent(containerPath);
      } else if (!st.isDirectory() || opaque.has(childRel)) {
        changes.set(containerPath, 0);
      }
      if (st.isDirectory()) {
        if (opaque.has(childRel) && existed) {
          const kept = new Set(await fs.readdir(path.join(upper, childRel)).catch(() => [] as string[]));
          for (const gone of await lowerChildren(topFirst, childRel)) {
            if (!kept.has(gone)) changes.set(`${containerPath}/${gone}`, 2);
          }
        }
        await walk(childRel);
        if (existed && [...changes.keys()].some((p) => p.startsWith(containerPath + '/'))) changes.set(containerPath, 0);
      }
    }
  };
  await walk('');
  return [...changes.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([Path, Kind]) => ({ Path, Kind }));
}
