/**
 * Where COPY and ADD read from: the unpacked build context (the build's scratch workspace) or an image's
 * layers (COPY --from, read on the Host), each seen as one tree. Paths are resolved inside the tree's root: symlinks are followed as the
 * container would see them, never out of the root (`..` stops at the root, absolute targets restart there).
 */
import { createHash } from 'node:crypto';
import path from 'node:path';
import { Readable } from 'node:stream';
import { InvalidParameter } from '../../errors.js';
import type { LayerStore } from '../../host/host.js';
import type { FileTree, PathInfo } from '../../util/tree.js';
import { compileLinear, type LinearRegExp } from '../regexp.js';

/** A tree COPY and ADD read from: the context (the build's scratch workspace) or an image's layers. */
export type SourceTree = FileTree;

/** What an image's tree needs of the Host's layer store. */
export type LayerTrees = Pick<LayerStore, 'layerTreeStat' | 'layerTreeReadlink' | 'layerTreeReaddir' | 'layerTreeRead'>;

/** An image's layers (bottom first) as one tree, read on the Host that holds them. */
export class ImageTree implements SourceTree {
  constructor(
    private readonly layers: LayerTrees,
    private readonly chainIds: string[],
  ) {}

  lstat(rel: string): Promise<PathInfo | undefined> {
    return this.layers.layerTreeStat(this.chainIds, rel);
  }

  readlink(rel: string): Promise<string> {
    return this.layers.layerTreeReadlink(this.chainIds, rel);
  }

  readdir(rel: string): Promise<string[]> {
    return this.layers.layerTreeReaddir(this.chainIds, rel);
  }

  async open(rel: string): Promise<Readable> {
    const stream = await this.layers.layerTreeRead(this.chainIds, rel);
    return stream instanceof Readable ? stream : new Readable().wrap(stream);
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
    if (st?.type === 'symlink' && (pending.length > 0 || followLast)) {
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
        if (st?.type !== 'directory' && dir !== '') continue;
        for (const name of await tree.readdir(dir).catch(() => [] as string[])) if (re.test(name)) next.push(m ? `${m}/${name}` : name);
      }
    }
    matches = next;
  }
  const out: string[] = [];
  for (const m of matches) if (await tree.lstat(await resolveInTree(tree, m, false))) out.push(m);
  return out.sort();
}

/** The sha256 (hex) of a file of a tree. */
export async function hashFile(tree: SourceTree, rel: string): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of await tree.open(rel)) hash.update(chunk as Buffer);
  return hash.digest('hex');
}
