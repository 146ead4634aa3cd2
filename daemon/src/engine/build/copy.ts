/**
 * COPY and ADD: the files of a step planned as layer entries (destination rules of the classic builder,
 * --chown, --chmod, missing parent folders made), hashed for the build cache (names, modes, owners and the
 * bytes of every file; not the times), then written as a layer tar stream. ADD also unpacks local tar
 * archives (plain, gzip, bzip2, xz) into the destination and takes http(s) URLs fetched beforehand.
 */
import { createHash } from 'node:crypto';
import path from 'node:path';
import { PassThrough, Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import zlib from 'node:zlib';
import type tar from 'tar-stream';
import { lazyPack, tarStream } from '../../util/tar.js';
import { InvalidParameter, errorMessage } from '../../errors.js';
import { detectCompression } from '../../util/streams.js';
import { decompressionError, readText, type BuildTools } from './context.js';
import { cleanRel, expandSource, hashFile, ImageTree, resolveInTree, type SourceTree } from './sources.js';
import type { Instruction } from './parser.js';
import { expandWord, expandWords, type Lookup } from './words.js';
import type { StageState } from './types.js';
import { DEFAULT_SHELL, jsonArray } from './helpers.js';
import type { BuildRun } from './run.js';

/** A file of a tree: the context, an image's layers, or the downloads. */
export interface TreeFile {
  tree: SourceTree;
  rel: string;
}

export type EntrySource = { file: TreeFile } | { content: Buffer } | { archive: TreeFile; compression: string };

export interface CopyEntry {
  /** Path in the layer, relative to the root ('' never: the root is not written). */
  name: string;
  type: 'file' | 'directory' | 'symlink' | 'archive';
  mode: number;
  uid: number;
  gid: number;
  mtime: Date;
  size: number;
  linkname?: string;
  source?: EntrySource;
}

export interface CopySource {
  tree: SourceTree;
  pattern: string;
  /** ADD: archives from here are unpacked (never for URLs, never for --from). */
  unpackArchives?: boolean;
  /** A fetched URL: the file to copy and its name at the destination. */
  fetched?: Fetched;
  /** A heredoc: inline content with its name. */
  inline?: { name: string; content: Buffer };
}

export interface CopyPlan {
  entries: CopyEntry[];
  /** sha256 hex of what the step writes (the cache key's content part). */
  hash: string;
  /** Docker's label in the history: file, dir or multi. */
  kind: 'file' | 'dir' | 'multi';
}

const ROOT_DIR_MODE = 0o755;

/** A downloaded file of ADD, in the build's workspace. */
export interface Fetched extends TreeFile {
  name: string;
  mtime: Date;
}

/** Up to the first `size` bytes of a file of a tree. */
async function readHead({ tree, rel }: TreeFile, size: number): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let length = 0;
  const stream = await tree.open(rel);
  try {
    for await (const chunk of stream) {
      chunks.push(chunk as Buffer);
      length += (chunk as Buffer).length;
      if (length >= size) break;
    }
  } finally {
    stream.destroy();
  }
  return Buffer.concat(chunks).subarray(0, size);
}

async function isArchive(file: TreeFile): Promise<string | undefined> {
  const head = await readHead(file, 512);
  const compression = detectCompression(head);
  if (compression !== 'none') return compression;
  if (head.length === 512 && head.subarray(257, 262).toString('latin1') === 'ustar') return 'none';
  return undefined;
}

export async function planCopy(opts: {
  sources: CopySource[];
  dest: string;
  workdir: string;
  /** The stage's image as a tree (what exists at the destination); undefined for scratch. */
  image?: SourceTree;
  chown?: { uid: number; gid: number };
  chmod?: number;
  instruction: 'COPY' | 'ADD';
}): Promise<CopyPlan> {
  const { dest, image, chown, chmod } = opts;
  const destAbs = dest.startsWith('/') ? dest : path.posix.join(opts.workdir || '/', dest);
  const destRel = cleanRel(destAbs);
  const destIsDir = dest.endsWith('/') || dest === '.' || dest.endsWith('/.') || destRel === '';
  const entries: CopyEntry[] = [];
  const emitted = new Map<string, CopyEntry>();
  const emit = (e: CopyEntry) => {
    const known = emitted.get(e.name);
    if (known) entries.splice(entries.indexOf(known), 1);
    emitted.set(e.name, e);
    entries.push(e);
  };
  const existsInImage = async (rel: string): Promise<'dir' | 'other' | undefined> => {
    if (rel === '') return 'dir';
    if (!image) return undefined;
    const st = await image.lstat(await resolveInTree(image, rel).catch(() => rel));
    return st ? (st.type === 'directory' ? 'dir' : 'other') : undefined;
  };
  const uid = chown?.uid ?? 0;
  const gid = chown?.gid ?? 0;
  const now = new Date();
  /** Makes the folder `rel` and its missing parents (parents root-owned, the folder itself chowned). */
  const ensureDir = async (rel: string, own: boolean) => {
    const parts = rel.split('/').filter(Boolean);
    for (let i = 1; i <= parts.length; i++) {
      const p = parts.slice(0, i).join('/');
      if (emitted.has(p)) continue;
      const there = await existsInImage(p);
      if (there === 'dir') continue;
      const mine = own && i === parts.length;
      emit({ name: p, type: 'directory', mode: ROOT_DIR_MODE, uid: mine ? uid : 0, gid: mine ? gid : 0, mtime: now, size: 0 });
    }
  };

  // Sources resolved first: the destination rules depend on how many there are.
  const resolved: Array<{ source: CopySource; rel: string }> = [];
  for (const source of opts.sources) {
    if (source.fetched || source.inline) {
      resolved.push({ source, rel: '' });
      continue;
    }
    const matches = await expandSource(source.tree, source.pattern);
    if (matches.length === 0) {
      throw new InvalidParameter(`${opts.instruction} failed: file not found in build context or excluded by .dockerignore: stat ${source.pattern}: file does not exist`);
    }
    for (const m of matches) resolved.push({ source, rel: m });
  }
  if (resolved.length > 1 && !destIsDir) {
    throw new InvalidParameter(`When using ${opts.instruction} with more than one source file, the destination must be a directory and end with a /`);
  }
  const destDir = destIsDir || (await existsInImage(destRel)) === 'dir';
  let kind: CopyPlan['kind'] = resolved.length > 1 ? 'multi' : 'file';
  const hash = createHash('sha256');

  const fileEntry = async (name: string, file: TreeFile, st: { mode: number; mtime: Date; size: number }) => {
    const contentHash = await hashFile(file.tree, file.rel);
    hash.update(`${name}\0file\0${chmod ?? st.mode & 0o7777}\0${uid}:${gid}\0${contentHash}\n`);
    emit({ name, type: 'file', mode: chmod ?? st.mode & 0o7777, uid, gid, mtime: st.mtime, size: st.size, source: { file } });
  };

  const copyTree = async (tree: SourceTree, rel: string, target: string): Promise<void> => {
    for (const name of await tree.readdir(rel)) {
      const childRel = rel ? `${rel}/${name}` : name;
      const childTarget = target ? `${target}/${name}` : name;
      const st = await tree.lstat(childRel);
      if (!st) continue;
      const mtime = new Date(st.mtimeMs);
      if (st.type === 'directory') {
        const mode = chmod ?? st.mode & 0o7777;
        hash.update(`${childTarget}\0dir\0${mode}\0${uid}:${gid}\n`);
        emit({ name: childTarget, type: 'directory', mode, uid, gid, mtime, size: 0 });
        await copyTree(tree, childRel, childTarget);
      } else if (st.type === 'symlink') {
        const linkname = await tree.readlink(childRel);
        hash.update(`${childTarget}\0symlink\0${linkname}\0${uid}:${gid}\n`);
        emit({ name: childTarget, type: 'symlink', mode: 0o777, uid, gid, mtime, size: 0, linkname });
      } else if (st.type === 'file') {
        await fileEntry(childTarget, { tree, rel: childRel }, { mode: st.mode, mtime, size: st.size });
      }
    }
  };

  for (const { source, rel } of resolved) {
    if (source.inline) {
      const target = destDir ? cleanRel(`${destRel}/${source.inline.name}`) : destRel;
      await ensureDir(path.posix.dirname('/' + target).slice(1), destDir && target !== destRel);
      const mode = chmod ?? 0o644;
      hash.update(`${target}\0inline\0${mode}\0${uid}:${gid}\0${createHash('sha256').update(source.inline.content).digest('hex')}\n`);
      emit({ name: target, type: 'file', mode, uid, gid, mtime: now, size: source.inline.content.length, source: { content: source.inline.content } });
      continue;
    }
    if (source.fetched) {
      const target = destDir ? cleanRel(`${destRel}/${source.fetched.name}`) : destRel;
      if (destDir) await ensureDir(destRel, true);
      else await ensureDir(path.posix.dirname('/' + target).slice(1), false);
      const st = await source.fetched.tree.lstat(source.fetched.rel);
      if (!st) throw new Error(`the download of ${source.fetched.name} is missing`);
      await fileEntry(target, source.fetched, { mode: 0o600, mtime: source.fetched.mtime, size: st.size });
      continue;
    }
    const real = await resolveInTree(source.tree, rel);
    const st = await source.tree.lstat(real);
    if (!st) throw new InvalidParameter(`${opts.instruction} failed: ${rel} is a link to a missing file`);
    if (st.type === 'directory') {
      if (resolved.length === 1) kind = 'dir';
      await ensureDir(destRel, true);
      await copyTree(source.tree, real, destRel);
      continue;
    }
    if (st.type !== 'file') throw new InvalidParameter(`${opts.instruction} failed: ${rel} is not a regular file or folder`);
    const file: TreeFile = { tree: source.tree, rel: real };
    const compression = source.unpackArchives ? await isArchive(file) : undefined;
    if (compression) {
      await ensureDir(destRel, true);
      const contentHash = await hashFile(file.tree, file.rel);
      hash.update(`${destRel}\0archive\0${uid}:${gid}\0${contentHash}\n`);
      emit({ name: `${destRel}\0archive\0${entries.length}`, type: 'archive', mode: 0, uid, gid, mtime: now, size: 0, source: { archive: file, compression } });
      continue;
    }
    const target = destDir ? cleanRel(`${destRel}/${path.posix.basename(rel)}`) : destRel;
    await ensureDir(path.posix.dirname('/' + target).slice(1), destDir);
    await fileEntry(target, file, { mode: st.mode, mtime: new Date(st.mtimeMs), size: st.size });
  }
  return { entries, hash: hash.digest('hex'), kind };
}

function decompressor(compression: string, tools: BuildTools, signal?: AbortSignal): NodeJS.ReadWriteStream {
  if (compression === 'gzip') return zlib.createGunzip();
  if (compression === 'none') return new PassThrough();
  return tools.decompressor(compression === 'bzip2' ? 'bzip2' : compression === 'zstd' ? 'zstd' : 'xz', signal);
}

/**
 * Writes a planned step as a layer tar. Nothing is read or written before the consumer reads the stream: a
 * failure (an archive entry pointing outside its destination, a corrupt archive) always finds the
 * consumer listening, and a stream never read does no work.
 */
export function packCopy(plan: CopyPlan, destOwner: { uid: number; gid: number } | undefined, tools: BuildTools, signal?: AbortSignal): Readable {
  return lazyPack((pack) => writeCopy(pack, plan, destOwner, tools, signal));
}

/** Writes the plan's entries into `pack` and finalizes it. */
async function writeCopy(pack: tar.Pack, plan: CopyPlan, destOwner: { uid: number; gid: number } | undefined, tools: BuildTools, signal?: AbortSignal): Promise<void> {
  const entry = (header: Partial<tar.Header> & { name: string }, body?: Buffer): Promise<void> =>
    new Promise((resolve, reject) => pack.entry(header, body ?? '', (err) => (err ? reject(err) : resolve())));
  const unpackInto = async (archive: TreeFile, compression: string, destRel: string) => {
    const extract = tarStream().extract();
    extract.on('entry', (header, body, next) => {
      void (async () => {
        const rel = path.posix.normalize(header.name.replace(/^\/+/, ''));
        if (rel === '..' || rel.startsWith('../')) throw new InvalidParameter(`ADD: the archive entry ${JSON.stringify(header.name)} points outside its destination`);
        const base = path.posix.basename(rel);
        const name = cleanRel(`${destRel}/${rel}`);
        if (name === '' || base.startsWith('.wh.')) {
          body.resume();
          return;
        }
        const own = destOwner ?? { uid: header.uid ?? 0, gid: header.gid ?? 0 };
        const common = { name, mode: (header.mode ?? 0o644) & 0o7777, uid: own.uid, gid: own.gid, mtime: header.mtime ?? new Date() };
        if (header.type === 'file' || header.type === 'contiguous-file') {
          const sink = pack.entry({ ...common, type: 'file', size: header.size ?? 0 });
          await pipeline(body, sink);
          return;
        }
        body.resume();
        if (header.type === 'directory') await entry({ ...common, type: 'directory', size: 0 });
        else if (header.type === 'symlink') await entry({ ...common, type: 'symlink', size: 0, linkname: header.linkname ?? '' });
        else if (header.type === 'link') await entry({ ...common, type: 'link', size: 0, linkname: cleanRel(`${destRel}/${path.posix.normalize(header.linkname ?? '')}`) });
      })().then(() => next(), (err: Error) => next(err));
    });
    await pipeline(await archive.tree.open(archive.rel), decompressor(compression, tools, signal), extract, { signal }).catch((err: unknown) => {
      throw decompressionError(err);
    });
  };
  for (const e of plan.entries) {
    if (signal?.aborted) throw signal.reason ?? new Error('aborted');
    const header = { name: e.name, mode: e.mode, uid: e.uid, gid: e.gid, mtime: e.mtime };
    if (e.type === 'directory') await entry({ ...header, type: 'directory', size: 0 });
    else if (e.type === 'symlink') await entry({ ...header, type: 'symlink', size: 0, linkname: e.linkname });
    else if (e.type === 'archive') {
      const src = e.source as { archive: TreeFile; compression: string };
      await unpackInto(src.archive, src.compression, e.name.split('\0')[0]);
    } else if (e.source && 'content' in e.source) await entry({ ...header, type: 'file', size: e.source.content.length }, e.source.content);
    else if (e.source && 'file' in e.source) {
      const { tree, rel } = e.source.file;
      if (e.size === 0) {
        await entry({ ...header, type: 'file', size: 0 });
        continue;
      }
      const sink = pack.entry({ ...header, type: 'file', size: e.size });
      await pipeline(await tree.open(rel), sink);
    }
  }
  pack.finalize();
}

/** Resolves `--chown` (numeric ids or names from the image's /etc/passwd and /etc/group). */
export async function resolveChown(spec: string, image: SourceTree | undefined): Promise<{ uid: number; gid: number }> {
  const [userPart, groupPart] = spec.split(':');
  const readDb = async (file: string): Promise<string[][]> => {
    if (!image) return [];
    try {
      const text = await readText(image, await resolveInTree(image, file));
      return text.split('\n').filter(Boolean).map((l) => l.split(':'));
    } catch {
      return [];
    }
  };
  let uid: number;
  let gid: number | undefined;
  if (/^\d+$/.test(userPart)) uid = Number(userPart);
  else {
    const row = (await readDb('etc/passwd')).find((r) => r[0] === userPart);
    if (!row) throw new InvalidParameter(`unable to convert uid/gid chown string to host mapping: can't find uid for user ${userPart}: no such user: ${userPart}`);
    uid = Number(row[2]);
    gid = Number(row[3]);
  }
  if (groupPart !== undefined && groupPart !== '') {
    if (/^\d+$/.test(groupPart)) gid = Number(groupPart);
    else {
      const row = (await readDb('etc/group')).find((r) => r[0] === groupPart);
      if (!row) throw new InvalidParameter(`unable to convert uid/gid chown string to host mapping: can't find gid for group ${groupPart}: no such group: ${groupPart}`);
      gid = Number(row[2]);
    }
  } else if (gid === undefined) gid = uid;
  return { uid, gid };
}

export async function fetchUrl(build: BuildRun, url: string): Promise<Fetched> {
  let response: Response;
  try {
    response = await fetch(url, { signal: build.signal, redirect: 'follow' });
  } catch (err) {
    throw new InvalidParameter(`ADD failed: cannot download ${url}: ${errorMessage((err as Error).cause ?? err)}`, { cause: err });
  }
  if (!response.ok || !response.body) throw new InvalidParameter(`ADD failed: cannot download ${url}: the server answered ${response.status} ${response.statusText}`);
  const file = `download-${createHash('sha256').update(url).digest('hex').slice(0, 16)}-${Date.now()}`;
  await build.workspace.saveDownload(file, Readable.fromWeb(response.body as import('node:stream/web').ReadableStream<Uint8Array>), build.signal);
  const lastModified = response.headers.get('last-modified');
  const mtime = lastModified && !Number.isNaN(Date.parse(lastModified)) ? new Date(lastModified) : new Date(0);
  let name = path.posix.basename(new URL(url).pathname);
  if (!name || name === '/') name = '__unnamed__';
  return { tree: build.workspace.downloads, rel: file, name, mtime };
}

export async function copyStep(build: BuildRun, state: StageState, ins: Instruction, lookup: Lookup): Promise<void> {
  const { images } = build.builder.d;
  const isAdd = ins.keyword === 'ADD';
  const words = jsonArray(ins.args) ?? expandWords(ins.args, lookup, build.escape);
  const dest = words[words.length - 1];
  const sourceWords = words.slice(0, -1);
  let tree: SourceTree = build.workspace.context;
  let fromLabel = '';
  if (ins.flags.from) {
    if (isAdd) throw new InvalidParameter('ADD does not take --from; use COPY --from');
    const from = expandWord(ins.flags.from[0], lookup, build.escape);
    const stage = build.stageResults.get(from.toLowerCase());
    let chainIds: string[];
    if (stage) chainIds = stage.chainIds;
    else {
      if (/^\d+$/.test(from)) throw new InvalidParameter(`invalid from flag value ${from}: no stage with that index before this one`);
      chainIds = images.find(from).image.chainIds;
    }
    tree = new ImageTree(build.builder.d.host.layers, chainIds);
    fromLabel = `from ${from} `;
  }
  const image = build.layersTree(state);
  const sources: CopySource[] = [];
  for (const word of sourceWords) {
    const heredoc = /^<<-?["']?([A-Za-z_][A-Za-z0-9_]*)["']?$/.exec(word);
    const doc = heredoc ? ins.heredocs.find((h) => h.name === heredoc[1]) : undefined;
    if (doc) {
      const content = doc.quoted ? doc.content : expandWord(doc.content.replace(/"/g, '\\"').replace(/'/g, "\\'"), lookup, build.escape);
      sources.push({ tree, pattern: '', inline: { name: doc.name, content: Buffer.from(content) } });
    } else if (isAdd && /^https?:\/\//i.test(word)) {
      sources.push({ tree, pattern: '', fetched: await fetchUrl(build, word) });
    } else if (/^[a-z][a-z0-9+.-]*:\/\//i.test(word)) {
      throw new InvalidParameter(`${ins.keyword}: ${word}: only http(s) URLs can be added`);
    } else {
      sources.push({ tree, pattern: word, unpackArchives: isAdd && !ins.flags.from });
    }
  }
  const chown = ins.flags.chown ? await resolveChown(expandWord(ins.flags.chown[0], lookup, build.escape), image) : undefined;
  const chmod = ins.flags.chmod ? parseInt(ins.flags.chmod[0], 8) : undefined;
  const plan = await planCopy({ sources, dest, workdir: state.config.WorkingDir ?? '/', image, chown, chmod, instruction: isAdd ? 'ADD' : 'COPY' });
  const destAbs = dest.startsWith('/') ? dest : path.posix.join(state.config.WorkingDir || '/', dest);
  const shell = state.config.Shell ?? DEFAULT_SHELL;
  const text = `${ins.keyword} ${fromLabel}${plan.kind}:${plan.hash} in ${destAbs} `;
  await build.commitStep(state, `${shell.join(' ')} #(nop) ${text}`, plan.hash, async () => packCopy(plan, chown, build.builder.d.host, build.signal), build.nop(state, text));
}
