/**
 * Where COPY and ADD read from: the unpacked build context (one folder) or an image's layers (COPY
 * --from), seen as one tree. Paths are resolved inside the tree's root: symlinks are followed as the
 * container would see them, never out of the root (`..` stops at the root, absolute targets restart there).
 */
import { createHash } from 'node:crypto';
import { createReadStream, promises as fs, type Stats } from 'node:fs';
import path from 'node:path';
import { InvalidParameter } from '../../errors.js';
import { compileLinear, type LinearRegExp } from '../regexp.js';

export interface SourceTree {
  /** lstat of a path in the tree ('' is the root); undefined when absent. */
  lstat(rel: string): Promise<Stats | undefined>;
  readlink(rel: string): Promise<string>;
  readdir(rel: string): Promise<string[]>;
  /** The host file that holds the path's bytes (for reading). */
  hostPath(rel: string): Promise<string>;
}

export class FolderTree implements SourceTree {
  constructor(readonly root: string) {}

  lstat(rel: string): Promise<Stats | undefined> {
    return fs.lstat(path.join(this.root, rel)).catch(() => undefined);
  }

  readlink(rel: string): Promise<string> {
    return fs.readlink(path.join(this.root, rel));
  }

  async readdir(rel: string): Promise<string[]> {
    return (await fs.readdir(path.join(this.root, rel))).sort();
  }

  async hostPath(rel: string): Promise<string> {
    return path.join(this.root, rel);
  }
}

function isWhiteout(st: Stats): boolean {
  return st.isCharacterDevice() && st.rdev === 0;
}

/** An image's unpacked layers (bottom first) as one tree: upper layers hide lower ones; whiteouts delete. */
export class LayersTree implements SourceTree {
  private readonly topFirst: string[];

  constructor(lowerDirs: string[]) {
    this.topFirst = [...lowerDirs].reverse();
  }

  /**
   * How a layer holds the folders above `rel`: all present as folders ('ok'), one missing ('missing': the
   * layer has nothing there), or one that is not a folder ('blocked': it hides the layers below). A link is
   * never followed on the host: the path is resolved in the image's view first.
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

  async lstat(rel: string): Promise<Stats | undefined> {
    return (await this.locate(rel))?.st;
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

  async hostPath(rel: string): Promise<string> {
    const found = await this.locate(rel);
    if (!found) throw new Error(`no such file: ${rel}`);
    return path.join(found.dir, rel);
  }
}

/** Clean relative form of a path inside a tree ('' for the root). */
export function cleanRel(p: string): string {
  const n = path.posix.normalize('/' + p).replace(/^\/+/, '').replace(/\/+$/, '');
  return n === '.' ? '' : n;
}

/**
 * Resolves `rel` in `tree`, following symlinks in every component (the last one too when `followLast`),
 * staying inside the root.
 */
export async function resolveInTree(tree: SourceTree, rel: string, followLast = true): Promise<string> {
  let pending = cleanRel(rel).split('/').filter(Boolean);
  const done: string[] = [];
  let hops = 0;
  while (pending.length > 0) {
    const part = pending.shift()!;
    if (part === '..') {
      done.pop();
      continue;
    }
    const candidate = [...done, part].join('/');
    const st = await tree.lstat(candidate);
    if (st?.isSymbolicLink() && (pending.length > 0 || followLast)) {
      if (++hops > 255) throw new InvalidParameter(`too many levels of symbolic links at ${candidate}`);
      const target = await tree.readlink(candidate);
      const parts = target.split('/').filter((x) => x !== '' && x !== '.');
      if (target.startsWith('/')) done.length = 0;
      pending = [...parts, ...pending];
      continue;
    }
    done.push(part);
  }
  return done.join('/');
}

/** Go's filepath.Match for one path component. */
function componentRegExp(pattern: string): LinearRegExp {
  let re = '^';
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i];
    if (c === '*') re += '[^/]*';
    else if (c === '?') re += '[^/]';
    else if (c === '[') {
      const end = pattern.indexOf(']', i + 1);
      if (end < 0) throw new InvalidParameter(`syntax error in pattern ${JSON.stringify(pattern)}`);
      let cls = pattern.slice(i + 1, end).replace(/\\/g, '\\\\');
      if (cls.startsWith('^') || cls.startsWith('!')) cls = '^' + cls.slice(1);
      re += `[${cls}]`;
      i = end;
    } else if (c === '\\' && i + 1 < pattern.length) re += pattern[++i].replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
    else re += c.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
  }
  return compileLinear(re + '$', 'source pattern');
}

/** Expands a source pattern with wildcards into the matching paths of the tree (sorted). */
export async function expandSource(tree: SourceTree, pattern: string): Promise<string[]> {
  const rel = cleanRel(pattern);
  if (!/[*?[]/.test(rel)) return (await tree.lstat(await resolveInTree(tree, rel, false).catch(() => rel))) ? [rel] : [];
  let matches = [''];
  for (const part of rel.split('/')) {
    const next: string[] = [];
    if (!/[*?[]/.test(part)) {
      for (const m of matches) next.push(m ? `${m}/${part}` : part);
    } else {
      const re = componentRegExp(part);
      for (const m of matches) {
        const dir = await resolveInTree(tree, m);
        const st = await tree.lstat(dir);
        if (!st?.isDirectory() && dir !== '') continue;
        for (const name of await tree.readdir(dir).catch(() => [] as string[])) if (re.test(name)) next.push(m ? `${m}/${name}` : name);
      }
    }
    matches = next;
  }
  const out: string[] = [];
  for (const m of matches) if (await tree.lstat(await resolveInTree(tree, m, false))) out.push(m);
  return out.sort();
}

export async function hashFile(file: string): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(file)) hash.update(chunk as Buffer);
  return hash.digest('hex');
}
