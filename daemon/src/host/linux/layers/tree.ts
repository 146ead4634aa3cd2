/**
 * An image's unpacked layer folders (bottom first) read as one tree, for the layer store's layerTree*
 * members: upper layers hide lower ones, whiteouts (0:0 character devices, `.wh.` names, opaque markers)
 * delete, and a link is never followed on this machine (its target is the image's business).
 */
import { createReadStream, promises as fs, type Stats } from 'node:fs';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { NotFound } from '../../../errors.js';
import { pathInfoOf, type FileTree, type PathInfo } from '../../../util/tree.js';

function isWhiteout(st: Stats): boolean {
  return st.isCharacterDevice() && st.rdev === 0;
}

export class LayersTree implements FileTree {
  private readonly topFirst: string[];

  constructor(lowerDirs: string[]) {
    this.topFirst = [...lowerDirs].reverse();
  }

  /**
   * How a layer holds the folders above `rel`: all present as folders ('ok'), one missing ('missing': the
   * layer has nothing there), or one that is not a folder ('blocked': it hides the layers below).
   */
  private async ancestors(dir: string, rel: string): Promise<'ok' | 'missing' | 'blocked'> {
    const parts = rel.split('/').filter(Boolean);
    let current = dir;
    for (let i = 0; i < parts.length - 1; i++) {
      current = path.join(current, parts[i]);
      const st = await fs.lstat(current).catch(() => undefined);
      if (!st) return 'missing';
      if (!st.isDirectory()) return 'blocked';
    }
    return 'ok';
  }

  private async locate(rel: string): Promise<{ dir: string; st: Stats } | undefined> {
    for (const dir of this.topFirst) {
      const above = await this.ancestors(dir, rel);
      if (above === 'blocked') return undefined;
      if (above === 'missing') continue;
      const st = await fs.lstat(path.join(dir, rel)).catch(() => undefined);
      if (st) return isWhiteout(st) ? undefined : { dir, st };
      if (rel !== '' && (await fs.lstat(path.join(dir, path.dirname(rel), `.wh.${path.basename(rel)}`)).catch(() => undefined))) return undefined;
    }
    return undefined;
  }

  async lstat(rel: string): Promise<PathInfo | undefined> {
    const found = await this.locate(rel);
    return found && pathInfoOf(found.st);
  }

  async readlink(rel: string): Promise<string> {
    const found = await this.locate(rel);
    if (!found) throw new Error(`no such file: ${rel}`);
    return fs.readlink(path.join(found.dir, rel));
  }

  async readdir(rel: string): Promise<string[]> {
    const names = new Set<string>();
    const hidden = new Set<string>();
    for (const dir of this.topFirst) {
      const above = rel === '' ? 'ok' : await this.ancestors(dir, `${rel}/x`);
      if (above === 'blocked') break;
      if (above === 'missing') continue;
      const st = await fs.lstat(path.join(dir, rel)).catch(() => undefined);
      if (!st) continue;
      if (!st.isDirectory()) break;
      for (const name of await fs.readdir(path.join(dir, rel)).catch(() => [] as string[])) {
        if (name === '.wh..wh..opq') continue;
        if (name.startsWith('.wh.')) {
          hidden.add(name.slice(4));
          continue;
        }
        if (hidden.has(name) || names.has(name)) continue;
        const child = await fs.lstat(path.join(dir, rel, name)).catch(() => undefined);
        if (child && isWhiteout(child)) hidden.add(name);
        else names.add(name);
      }
    }
    return [...names].sort();
  }

  /** The file's bytes; refused when the path is not a regular file of the tree. */
  async open(rel: string): Promise<Readable> {
    const found = await this.locate(rel);
    if (!found || !found.st.isFile()) throw new NotFound(`no such file: ${rel}`);
    return createReadStream(path.join(found.dir, rel), { highWaterMark: 256 * 1024 });
  }
}
