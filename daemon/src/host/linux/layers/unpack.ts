/**
 * Unpacks one image layer tar into its own folder, as overlayfs wants it for a lower layer:
 *
 * - `.wh.NAME` becomes a 0:0 character device NAME (an overlay whiteout); `.wh..wh..opq` marks its folder
 *   opaque (xattr trusted.overlay.opaque=y); other `.wh..wh.*` aufs metadata is skipped.
 * - Modes (with setuid/setgid/sticky), owners, mtimes, PAX xattrs (SCHILY.xattr.*), device nodes, FIFOs,
 *   symlinks and hard links are kept.
 * - Safety: the folder is fresh and only this code writes to it, so it tracks what each path is. No entry
 *   may leave the folder: names with `..` escaping it are refused, an entry whose parent is a symlink is
 *   refused (nothing is ever written through a symlink), and a hard link must name an earlier non-folder
 *   entry of the same layer. Files are created with O_NOFOLLOW|O_EXCL.
 * - Speed: a small file (up to SMALL_FILE bytes) is read whole from the tar and written by one native
 *   call on the thread pool (open, write, fchown, fchmod, futimens, close), and the next entries are read
 *   while up to IN_FLIGHT such writes run. Any entry that touches a path already written (replacing it,
 *   a hard link, a whiteout, an existing folder) waits for every write in flight first, and so do the
 *   folder mtimes at the end, so the result is the same as writing one entry after the other. Larger
 *   files are streamed, in writes of up to LARGE_WRITE bytes.
 */
import { createRequire } from 'node:module';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { tarStream } from '../../../util/tar.js';
import { InvalidParameter } from '../../../errors.js';
import { LayerWriter, XATTR_PREFIX, type SplitTarget } from './layerwriter.js';

export type { SplitTarget } from './layerwriter.js';

export interface UnpackResult {
  /** Bytes of regular file contents written. */
  diskSize: number;
  entries: number;
}

/**
 * tar-stream decodes PAX values as UTF-8, which mangles binary xattr values (file capabilities). Values
 * of SCHILY.xattr.* records are decoded as latin1 instead, so `Buffer.from(value, 'latin1')` gives back
 * the exact bytes; every other record (ASCII or UTF-8 names) decodes as before.
 */
function patchPaxDecoding(): void {
  const require = createRequire(import.meta.url);
  const headers = require(path.join(path.dirname(require.resolve('tar-stream')), 'headers.js')) as {
    decodePax(buf: Buffer): Record<string, string>;
    __berthBinaryXattrs?: boolean;
  };
  if (headers.__berthBinaryXattrs) return;
  headers.__berthBinaryXattrs = true;
  headers.decodePax = (input: Buffer) => {
    const result: Record<string, string> = {};
    let buf = input;
    while (buf.length) {
      let i = 0;
      while (i < buf.length && buf[i] !== 32) i++;
      const len = parseInt(buf.subarray(0, i).toString('latin1'), 10);
      if (!len || len > buf.length) return result;
      const record = buf.subarray(i + 1, len - 1);
      const eq = record.indexOf(0x3d);
      if (eq === -1) return result;
      const key = record.subarray(0, eq).toString('utf8');
      result[key] = record.subarray(eq + 1).toString(key.startsWith(XATTR_PREFIX) ? 'latin1' : 'utf8');
      buf = buf.subarray(len);
    }
    return result;
  };
}
patchPaxDecoding();

/** Bytes the tar parser takes before the feeding waits for it (one pass: fewer pauses of the source). */
const PARSER_BUFFER = 1 << 20;

/**
 * Unpacks the uncompressed layer tar read from `source` into the existing empty folder `root`. Malformed
 * or unsafe tars reject with InvalidParameter; the caller removes `root` on failure. Every chunk of the
 * tar goes, in one pass, to `onChunk` (the caller's digest), to the split recorder and to the tar parser.
 * `source` is only read, never destroyed: after a failure it is left paused for the caller to drain.
 */
export async function unpackLayer(
  source: Readable,
  root: string,
  split?: SplitTarget,
  onChunk?: (chunk: Buffer) => Promise<void> | undefined,
): Promise<UnpackResult> {
  // Nothing is awaited before the listeners are on `source`: an early error would otherwise go unseen.
  if (source.destroyed) throw new InvalidParameter(`invalid layer tar: ${source.errored?.message ?? 'the stream closed before it was read'}`);
  const writer = new LayerWriter(root, split);
  const extract = tarStream().extract({ highWaterMark: PARSER_BUFFER });
  let failure: unknown;
  let stopped = false;
  let ended = false;
  let waits = 0;
  const resumeAfterWait = (): void => {
    if (--waits === 0 && !stopped) source.resume();
  };
  const waitFor = (work: Promise<void>): void => {
    waits++;
    if (waits === 1) source.pause();
    work.then(resumeAfterWait, (err: Error) => {
      failure ??= err;
      extract.destroy(err);
    });
  };
  const onData = (chunk: Buffer): void => {
    if (stopped || extract.destroyed) return;
    const hashing = onChunk?.(chunk);
    if (hashing) waitFor(hashing);
    const recording = split?.recorder.push(chunk);
    if (recording) waitFor(recording);
    if (!extract.write(chunk)) {
      waits++;
      if (waits === 1) source.pause();
      extract.once('drain', resumeAfterWait);
    }
  };
  const stopFeeding = (): void => {
    if (stopped) return;
    stopped = true;
    source.off('data', onData);
    source.pause();
  };
  const done = new Promise<void>((resolve, reject) => {
    extract.on('entry', (header, source, next) => {
      const stream = source as unknown as Readable;
      // The archive's own error reaches us through `extract`; the entry repeats it.
      stream.on('error', () => undefined);
      writer.entry(header, stream).then(
        () => next(),
        (err: unknown) => {
          failure ??= err;
          stream.resume();
          next(err as Error);
        },
      );
    });
    extract.on('finish', () => resolve());
    extract.on('close', () => resolve());
    extract.on('error', (err: Error) => reject(failure ?? err));
    source.on('error', (err: Error) => {
      if (stopped) return;
      failure ??= err;
      extract.destroy(err);
      reject(err);
    });
    source.on('close', () => {
      if (ended || stopped) return;
      const err = (source as Readable & { errored?: Error | null }).errored ?? new Error('the layer stream closed before its end');
      failure ??= err;
      extract.destroy(err);
      reject(err);
    });
    source.on('end', () => {
      ended = true;
      if (!stopped) (extract as unknown as { end(): void }).end();
    });
    extract.on('error', stopFeeding);
    extract.on('close', stopFeeding);
    source.on('data', onData);
    source.resume();
  });
  try {
    await done;
  } catch (err) {
    stopFeeding();
    await writer.settle();
    if (err instanceof InvalidParameter) throw err;
    const code = (err as NodeJS.ErrnoException).code;
    if (code === undefined || code === 'ENOTDIR' || code === 'EISDIR' || code === 'EEXIST' || code === 'ENAMETOOLONG') {
      throw new InvalidParameter(`invalid layer tar: ${(err as Error).message}`, { cause: err });
    }
    throw err;
  }
  if (failure) {
    await writer.settle();
    throw failure;
  }
  try {
    await writer.finish();
  } catch (err) {
    await writer.settle();
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOTDIR' || code === 'EISDIR' || code === 'EEXIST') throw new InvalidParameter(`invalid layer tar: ${(err as Error).message}`, { cause: err });
    throw err;
  }
  return { diskSize: writer.diskSize, entries: writer.entries };
}
