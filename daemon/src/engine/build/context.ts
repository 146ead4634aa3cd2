/**
 * The build context: the request body (a tar, plain or compressed with gzip, bzip2 or xz, told apart by its
 * first bytes) unpacked into a private folder under the data root. Entries that would land outside that
 * folder (`../x`, absolute link targets do not matter: links are never followed when sources are read) are
 * refused. `.dockerignore` patterns are applied afterwards: ignored paths are removed from the folder, so
 * that COPY and ADD cannot see them.
 */
import { createReadStream, createWriteStream, promises as fs } from 'node:fs';
import path from 'node:path';
import { PassThrough, type Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import zlib from 'node:zlib';
import type tar from 'tar-stream';
import { tarStream } from '../../util/tar.js';
import { InvalidParameter, ToolFailure } from '../../errors.js';
import type { ToolsHost } from '../../host/host.js';
import { detectCompression } from '../../util/streams.js';
import { compileLinear, type LinearRegExp } from '../regexp.js';

/** Waits for the first bytes of `input` and puts them back, to tell the compression. */
function peek(input: Readable): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const cleanup = () => {
      input.off('readable', onReadable);
      input.off('end', onEnd);
      input.off('error', onError);
    };
    const onReadable = () => {
      const chunk = input.read() as Buffer | null;
      if (chunk === null) return;
      cleanup();
      input.unshift(chunk);
      resolve(chunk);
    };
    const onEnd = () => {
      cleanup();
      resolve(Buffer.alloc(0));
    };
    const onError = (err: Error) => {
      cleanup();
      reject(err);
    };
    input.on('readable', onReadable);
    input.once('end', onEnd);
    input.once('error', onError);
  });
}

/** What the build needs of the Host's tools: the decompressors of bzip2, xz and zstd archives. */
export type BuildTools = Pick<ToolsHost, 'decompressor'>;

/** The build's words for a decompressor's failure (the same for the context and for ADD's archives). */
export function decompressionError(err: unknown): unknown {
  if (!(err instanceof ToolFailure)) return err;
  if (err.failure.exitCode === undefined) return new InvalidParameter(`cannot run ${err.tool} to decompress the build context: ${err.failure.detail}`, { cause: err });
  return new InvalidParameter(`the build context could not be decompressed with ${err.tool}: ${err.failure.detail || `exit code ${err.failure.exitCode}`}`, { cause: err });
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

/** Unpacks a context tar (any supported compression) into `dir` (which exists and is empty). */
export async function unpackContext(input: Readable, dir: string, tools: BuildTools, signal?: AbortSignal): Promise<void> {
  const compression = detectCompression(await peek(input));
  const stream = input;
  const extract = tarStream().extract();
  const decompress = compression === 'gzip' ? zlib.createGunzip() : compression === 'none' ? new PassThrough() : tools.decompressor(compression, signal);
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
  try {
    await pipeline(stream, decompress, extract, { signal });
  } catch (caught) {
    const err = decompressionError(caught);
    if (err instanceof InvalidParameter) throw err;
    if ((err as Error).name === 'AbortError') throw err;
    throw new InvalidParameter(`invalid build context: ${(err as Error).message}`, { cause: err });
  }
  for (const [d, mode, mtime] of dirModes.reverse()) {
    await fs.chmod(d, mode | 0o700).catch(() => undefined);
    await fs.utimes(d, mtime, mtime).catch(() => undefined);
  }
}

// ---- .dockerignore ----

interface IgnorePattern {
  regexp: LinearRegExp;
  exclusion: boolean;
}

function patternRegExp(pattern: string): LinearRegExp {
  let re = '^';
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i];
    if (c === '*') {
      if (pattern[i + 1] === '*') {
        i++;
        // `**/` matches zero or more folders; a final `**` matches everything below.
        if (pattern[i + 1] === '/') {
          i++;
          re += '(?:.*/)?';
        } else re += '.*';
      } else re += '[^/]*';
    } else if (c === '?') re += '[^/]';
    else if (c === '[') {
      const end = pattern.indexOf(']', i + 1);
      if (end < 0) re += '\\[';
      else {
        let cls = pattern.slice(i + 1, end).replace(/\\/g, '\\\\');
        if (cls.startsWith('^') || cls.startsWith('!')) cls = '^' + cls.slice(1);
        re += `[${cls}]`;
        i = end;
      }
    } else if (c === '\\' && i + 1 < pattern.length) re += pattern[++i].replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
    else re += c.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
  }
  return compileLinear(re + '$', '.dockerignore pattern');
}

export function parseDockerignore(text: string): IgnorePattern[] {
  const out: IgnorePattern[] = [];
  for (const rawLine of text.split(/\r?\n/)) {
    let line = rawLine.trim();
    if (line === '' || line.startsWith('#')) continue;
    let exclusion = false;
    if (line.startsWith('!')) {
      exclusion = true;
      line = line.slice(1).trim();
    }
    line = path.posix.normalize(line).replace(/^\/+/, '').replace(/\/+$/, '');
    if (line === '' || line === '.') continue;
    out.push({ regexp: patternRegExp(line), exclusion });
  }
  return out;
}

/** Docker's rule: the last pattern that matches the path or one of its parent folders decides. */
export function isIgnored(patterns: IgnorePattern[], rel: string): boolean {
  let ignored = false;
  const parents: string[] = [];
  const parts = rel.split('/');
  for (let i = 1; i < parts.length; i++) parents.push(parts.slice(0, i).join('/'));
  for (const p of patterns) {
    if (p.exclusion === ignored) {
      // Only a pattern that could change the answer is tested.
      const matches = p.regexp.test(rel) || parents.some((parent) => p.regexp.test(parent));
      if (matches) ignored = !p.exclusion;
    }
  }
  return ignored;
}

/**
 * Removes what `.dockerignore` excludes from the unpacked context. The Dockerfile and `.dockerignore`
 * themselves stay readable for the builder (`keep`), as the CLI always sends them.
 */
export async function applyDockerignore(dir: string, keep: string[]): Promise<void> {
  const text = await fs.readFile(path.join(dir, '.dockerignore'), 'utf8').catch(() => undefined);
  if (text === undefined) return;
  const patterns = parseDockerignore(text);
  if (patterns.length === 0) return;
  const kept = new Set(keep.map((k) => path.posix.normalize(k).replace(/^\/+/, '')));
  const walk = async (rel: string): Promise<void> => {
    const names = await fs.readdir(path.join(dir, rel)).catch(() => [] as string[]);
    for (const name of names) {
      const childRel = rel ? `${rel}/${name}` : name;
      const full = path.join(dir, childRel);
      if (!kept.has(childRel) && isIgnored(patterns, childRel)) {
        // A folder whose contents an exception brings back is kept, and its other entries tested one by one.
        const hasException = patterns.some((p) => p.exclusion);
        const st = await fs.lstat(full);
        if (st.isDirectory() && hasException) {
          await walk(childRel);
          if ((await fs.readdir(full)).length === 0) await fs.rmdir(full);
          continue;
        }
        await fs.rm(full, { recursive: true, force: true });
        continue;
      }
      const st = await fs.lstat(full);
      if (st.isDirectory()) await walk(childRel);
    }
  };
  await walk('');
}

/** A stream of a context file, for the hash of COPY sources. */
export function openContextFile(file: string): Readable {
  return createReadStream(file);
}
