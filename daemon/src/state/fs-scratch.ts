/**
 * The builder's scratch space (state/scratch.ts) on this machine's file system: one folder per build under
 * `<data-root>/build/tmp/` (`b-XXXXXX/context/` and `b-XXXXXX/downloads/`), removed when the build ends and
 * at start. The context tar is unpacked without ever writing through a link: each parent folder is made here,
 * one at a time, and a path running through a link or a file is refused.
 */
import { createReadStream, createWriteStream, promises as fs } from 'node:fs';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { InvalidParameter } from '../errors.js';
import { tarStream } from '../util/tar.js';
import { pathInfoOf, type PathInfo } from '../util/tree.js';
import type { BuildScratch, BuildWorkspace, ScratchTree } from './scratch.js';

export class FsBuildScratch implements BuildScratch {
  /** `dir`: the scratch folder (`<data-root>/build/tmp`). */
  constructor(readonly dir: string) {}

  async reset(): Promise<void> {
    await fs.rm(this.dir, { recursive: true, force: true });
    await fs.mkdir(this.dir, { recursive: true, mode: 0o700 });
  }

  async workspace(): Promise<BuildWorkspace> {
    await fs.mkdir(this.dir, { recursive: true, mode: 0o700 });
    const workDir = await fs.mkdtemp(path.join(this.dir, 'b-'));
    await fs.mkdir(path.join(workDir, 'context'));
    await fs.mkdir(path.join(workDir, 'downloads'));
    return new FsWorkspace(workDir);
  }
}

/** A folder read by relative paths ('' is the folder itself). */
export class FolderTree implements ScratchTree {
  constructor(readonly root: string) {}

  private at(rel: string): string {
    return path.join(this.root, rel);
  }

  async lstat(rel: string): Promise<PathInfo | undefined> {
    const st = await fs.lstat(this.at(rel)).catch(() => undefined);
    return st && pathInfoOf(st);
  }

  readlink(rel: string): Promise<string> {
    return fs.readlink(this.at(rel));
  }

  async readdir(rel: string): Promise<string[]> {
    return (await fs.readdir(this.at(rel))).sort();
  }

  async open(rel: string): Promise<Readable> {
    const stream = createReadStream(this.at(rel), { highWaterMark: 256 * 1024 });
    // Opened before it is given: a missing file is refused here, not on the stream.
    await new Promise<void>((resolve, reject) => {
      stream.once('open', () => {
        stream.off('error', reject);
        resolve();
      });
      stream.once('error', reject);
    });
    return stream;
  }

  async remove(rel: string): Promise<void> {
    await fs.rm(this.at(rel), { recursive: true, force: true });
  }

  async removeEmptyFolder(rel: string): Promise<void> {
    await fs.rmdir(this.at(rel));
  }
}

class FsWorkspace implements BuildWorkspace {
  readonly context: FolderTree;
  readonly downloads: FolderTree;

  constructor(private readonly workDir: string) {
    this.context = new FolderTree(path.join(workDir, 'context'));
    this.downloads = new FolderTree(path.join(workDir, 'downloads'));
  }

  unpackContext(tar: Readable, signal?: AbortSignal): Promise<void> {
    return unpackInto(tar, this.context.root, signal);
  }

  async saveDownload(name: string, body: Readable, signal?: AbortSignal): Promise<void> {
    if (name.includes('/') || name === '' || name === '.' || name === '..') throw new InvalidParameter(`invalid download name ${JSON.stringify(name)}`);
    await pipeline(body, createWriteStream(path.join(this.downloads.root, name), { mode: 0o600 }), { signal });
  }

  async dispose(): Promise<void> {
    await fs.rm(this.workDir, { recursive: true, force: true }).catch(() => undefined);
  }
}

/** Resolves a tar entry name inside `root`; InvalidParameter when it would land outside. */
export function entryPath(root: string, name: string): string {
  const rel = path.posix.normalize(name.replace(/^\/+/, ''));
  if (rel === '..' || rel.startsWith('../')) {
    throw new InvalidParameter(`invalid build context: the entry ${JSON.stringify(name)} points outside the context`);
  }
  const clean = rel.replace(/\/+$/, '');
  return clean === '' || clean === '.' ? root : path.join(root, clean);
}

/** Makes the folders of `rel` below `root`, refusing a path that runs through a link or a file. */
async function makeParents(root: string, rel: string, entryName: string): Promise<void> {
  let current = root;
  for (const part of rel.split(path.sep).filter((p) => p !== '' && p !== '.')) {
    current = path.join(current, part);
    const st = await fs.lstat(current).catch(() => undefined);
    if (!st) {
      await fs.mkdir(current, { mode: 0o755 });
      continue;
    }
    if (!st.isDirectory()) throw new InvalidParameter(`invalid build context: ${JSON.stringify(entryName)} lies below a link or a file`);
  }
}

/** Unpacks a plain tar into `dir` (which exists and is empty). */
async function unpackInto(input: Readable, dir: string, signal?: AbortSignal): Promise<void> {
  const extract = tarStream().extract();
  const root = path.resolve(dir);
  const dirModes: Array<[string, number, Date]> = [];
  extract.on('entry', (header, body, next) => {
    const done = (err?: unknown) => {
      if (err) {
        body.resume();
        next(err as Error);
      } else next();
    };
    void (async () => {
      const target = entryPath(root, header.name);
      if (target === root) {
        body.resume();
        return;
      }
      // Parents that are links are never written through: each is made here, as a folder, one at a time.
      await makeParents(root, path.relative(root, path.dirname(target)), header.name);
      const mode = (header.mode ?? 0o644) & 0o7777;
      switch (header.type) {
        case 'directory':
          await fs.mkdir(target, { recursive: true });
          dirModes.push([target, mode, header.mtime ?? new Date()]);
          body.resume();
          return;
        case 'file':
        case 'contiguous-file': {
          await fs.rm(target, { force: true, recursive: true });
          await pipeline(body, createWriteStream(target, { flags: 'wx', mode }));
          await fs.chmod(target, mode);
          if (header.mtime) await fs.utimes(target, header.mtime, header.mtime);
          return;
        }
        case 'symlink':
          await fs.rm(target, { force: true, recursive: true });
          await fs.symlink(header.linkname ?? '', target);
          body.resume();
          return;
        case 'link': {
          const source = entryPath(root, header.linkname ?? '');
          await fs.rm(target, { force: true, recursive: true });
          // The link's target is looked up through folders made here only, never through a link.
          await makeParents(root, path.relative(root, path.dirname(source)), header.name);
          const st = await fs.lstat(source).catch(() => undefined);
          if (!st || !st.isFile()) throw new InvalidParameter(`invalid build context: hard link ${JSON.stringify(header.name)} to a missing file`);
          await fs.link(source, target);
          body.resume();
          return;
        }
        default:
          // Devices, FIFOs and PAX metadata have no place in a build context.
          body.resume();
      }
    })().then(() => done(), done);
  });
  await pipeline(input, extract, { signal });
  for (const [d, mode, mtime] of dirModes.reverse()) {
    await fs.chmod(d, mode | 0o700).catch(() => undefined);
    await fs.utimes(d, mtime, mtime).catch(() => undefined);
  }
}
