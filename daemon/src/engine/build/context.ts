/**
 * The build context: the request body (a tar, plain or compressed with gzip, bzip2 or xz, told apart by its
 * first bytes) unpacked into the build's workspace of the daemon's scratch space (state/scratch.ts). Entries that would land outside that
 * folder (`../x`, absolute link targets do not matter: links are never followed when sources are read) are
 * refused. `.dockerignore` patterns are applied afterwards: ignored paths are removed from the folder, so
 * that COPY and ADD cannot see them.
 */
import path from 'node:path';
import { PassThrough, type Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import zlib from 'node:zlib';
import { InvalidParameter, ToolFailure } from '../../errors.js';
import type { ToolsHost } from '../../host/host.js';
import type { BuildWorkspace, ScratchTree } from '../../state/scratch.js';
import type { FileTree } from '../../util/tree.js';
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

/**
 * Unpacks a context tar (any supported compression) into the workspace's context: the decompression here,
 * the files by the workspace (which refuses entries outside the context, or below a link or a file).
 */
export async function unpackContext(input: Readable, workspace: Pick<BuildWorkspace, 'unpackContext'>, tools: BuildTools, signal?: AbortSignal): Promise<void> {
  const compression = detectCompression(await peek(input));
  const decompress = compression === 'gzip' ? zlib.createGunzip() : compression === 'none' ? new PassThrough() : tools.decompressor(compression, signal);
  const plain = new PassThrough();
  try {
    await Promise.all([pipeline(input, decompress, plain, { signal }), workspace.unpackContext(plain, signal)]);
  } catch (caught) {
    const err = decompressionError(caught);
    if (err instanceof InvalidParameter) throw err;
    if ((err as Error).name === 'AbortError') throw err;
    throw new InvalidParameter(`invalid build context: ${(err as Error).message}`, { cause: err });
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
export async function applyDockerignore(context: ScratchTree, keep: string[]): Promise<void> {
  const text = await readText(context, '.dockerignore').catch(() => undefined);
  if (text === undefined) return;
  const patterns = parseDockerignore(text);
  if (patterns.length === 0) return;
  const kept = new Set(keep.map((k) => path.posix.normalize(k).replace(/^\/+/, '')));
  const walk = async (rel: string): Promise<void> => {
    const names = await context.readdir(rel).catch(() => [] as string[]);
    for (const name of names) {
      const childRel = rel ? `${rel}/${name}` : name;
      if (!kept.has(childRel) && isIgnored(patterns, childRel)) {
        // A folder whose contents an exception brings back is kept, and its other entries tested one by one.
        const hasException = patterns.some((p) => p.exclusion);
        const st = await context.lstat(childRel);
        if (st?.type === 'directory' && hasException) {
          await walk(childRel);
          if ((await context.readdir(childRel)).length === 0) await context.removeEmptyFolder(childRel);
          continue;
        }
        await context.remove(childRel);
        continue;
      }
      const st = await context.lstat(childRel);
      if (st?.type === 'directory') await walk(childRel);
    }
  };
  await walk('');
}

/** A small file of a tree as text (the Dockerfile, .dockerignore, /etc/passwd). */
export async function readText(tree: FileTree, rel: string): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of await tree.open(rel)) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}
