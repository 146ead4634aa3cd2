/**
 * Stream helpers shared by the image service, the builder and the layer store: looking at the first bytes
 * of a stream without losing them, and recognising how a layer (or a whole archive) is compressed. Gzip is
 * decoded in process by `decompressed`; the others answer a clear error there.
 */
import { Readable } from 'node:stream';
import { createGunzip } from 'node:zlib';
import { InvalidParameter } from '../errors.js';

export type Compression = 'none' | 'gzip' | 'bzip2' | 'xz' | 'zstd';

export function detectCompression(head: Buffer): Compression {
  if (head.length >= 2 && head[0] === 0x1f && head[1] === 0x8b) return 'gzip';
  if (head.length >= 3 && head.subarray(0, 3).toString('latin1') === 'BZh') return 'bzip2';
  if (head.length >= 6 && head.subarray(0, 6).equals(Buffer.from([0xfd, 0x37, 0x7a, 0x58, 0x5a, 0x00]))) return 'xz';
  if (head.length >= 4 && head.readUInt32LE(0) === 0xfd2fb528) return 'zstd';
  return 'none';
}

/** True once `stream` emitted 'end' (Node streams say so in readableEnded, streamx ones in their state). */
function endEmitted(stream: Readable): boolean {
  if (typeof stream.readableEnded === 'boolean') return stream.readableEnded;
  return (stream as unknown as { _readableState?: { ended?: boolean } })._readableState?.ended === true;
}

function prematureClose(): Error {
  return Object.assign(new Error('Premature close'), { code: 'ERR_STREAM_PREMATURE_CLOSE' });
}

/**
 * Reads at least `want` bytes of `input` (fewer when it is shorter) and returns them with a stream that
 * gives all of `input` again from its first byte: `input` itself, with the bytes read put back in front
 * of it (no stream stage in between), or, when `input` ended while it was read, a stream of those bytes.
 * Works on Node streams and on streamx streams (tar-stream's entries).
 */
export async function peekStream(input: NodeJS.ReadableStream | Readable, want: number): Promise<{ head: Buffer; stream: Readable }> {
  const source = input as Readable;
  if (endEmitted(source)) return { head: Buffer.alloc(0), stream: Readable.from([], { objectMode: false }) };
  if (source.destroyed) throw source.errored ?? prematureClose();
  const parts: Buffer[] = [];
  let length = 0;
  const ended = await new Promise<boolean>((resolve, reject) => {
    const finish = (result: boolean | Error): void => {
      source.off('data', onData);
      source.off('end', onEnd);
      source.off('error', onError);
      source.off('close', onClose);
      if (result instanceof Error) reject(result);
      else resolve(result);
    };
    const onData = (chunk: Buffer | string): void => {
      const bytes = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
      parts.push(bytes);
      length += bytes.length;
      if (length >= want) {
        // Put back at once, in this same tick: an end already pushed is emitted on the next tick.
        source.pause();
        for (let i = parts.length - 1; i >= 0; i--) source.unshift(parts[i]);
        finish(false);
      }
    };
    const onEnd = (): void => finish(true);
    const onError = (err: Error): void => finish(err);
    const onClose = (): void => finish(source.errored ?? prematureClose());
    source.on('data', onData);
    source.on('end', onEnd);
    source.on('error', onError);
    source.on('close', onClose);
  });
  const head = parts.length === 1 ? parts[0] : Buffer.concat(parts, length);
  if (ended) return { head, stream: Readable.from(length > 0 ? [head] : [], { objectMode: false }) };
  return { head, stream: source };
}

/**
 * Writes what `source` gives into `dest` with backpressure, and ends `dest` at the end of `source`. An
 * error of `source` destroys `dest`; nothing that happens to `dest` ever destroys `source` (it may be one
 * entry of an archive that goes on): once `dest` fails or closes, `source` is left paused and detached.
 * With `coalesce`, small chunks are gathered into pieces of about that many bytes first (a socket gives
 * 20-64 KiB at a time, and every piece costs the same in each stage after it). Returns a function that
 * detaches `source` at once.
 */
export function feed(source: Readable, dest: NodeJS.WritableStream & { destroy(err?: Error): void }, coalesce = 0): () => void {
  let detached = false;
  let held: Buffer[] = [];
  let heldBytes = 0;
  const write = (chunk: Buffer): void => {
    if (!dest.write(chunk)) {
      source.pause();
      dest.once('drain', onDrain);
    }
  };
  const flush = (): void => {
    if (heldBytes === 0) return;
    const piece = held.length === 1 ? held[0] : Buffer.concat(held, heldBytes);
    held = [];
    heldBytes = 0;
    write(piece);
  };
  const onData = (chunk: Buffer): void => {
    if (coalesce <= 0 || (heldBytes === 0 && chunk.length >= coalesce)) {
      write(chunk);
      return;
    }
    held.push(chunk);
    heldBytes += chunk.length;
    if (heldBytes >= coalesce) flush();
  };
  const onDrain = (): void => {
    if (!detached) source.resume();
  };
  const onEnd = (): void => {
    detach();
    flush();
    dest.end();
  };
  const onError = (err: Error): void => {
    detach();
    dest.destroy(err);
  };
  const onClose = (): void => {
    if (detached) return;
    onError(source.errored ?? prematureClose());
  };
  const detach = (): void => {
    if (detached) return;
    detached = true;
    source.off('data', onData);
    source.off('end', onEnd);
    source.off('error', onError);
    source.off('close', onClose);
    dest.off('drain', onDrain);
    dest.off('error', detach);
    dest.off('close', detach);
    source.pause();
  };
  if (endEmitted(source)) {
    dest.end();
    return () => undefined;
  }
  if (source.destroyed) {
    dest.destroy(source.errored ?? prematureClose());
    return () => undefined;
  }
  dest.on('error', detach);
  dest.on('close', detach);
  source.on('end', onEnd);
  source.on('error', onError);
  source.on('close', onClose);
  source.on('data', onData);
  source.resume();
  return detach;
}

/** Reads `input` to its end and throws nothing (the rest of a file an archive goes on after). */
export async function drainStream(input: Readable): Promise<void> {
  if (endEmitted(input) || input.destroyed) return;
  await new Promise<void>((resolve) => {
    const done = (): void => {
      input.off('end', done);
      input.off('error', done);
      input.off('close', done);
      resolve();
    };
    input.on('end', done);
    input.on('error', done);
    input.on('close', done);
    input.resume();
  });
}

/** The decoded stream of `input` and how it was compressed; `detach` stops reading `input` (see feed). */
export interface Decoded {
  stream: Readable;
  compression: Compression;
  detach(): void;
}

/**
 * Returns a stream of the uncompressed content of `input` (`input` itself when it is not compressed) and
 * what compression it found. `input` is never destroyed here: on a failure it is left paused for the
 * caller to drain or drop.
 */
export async function decompressed(input: NodeJS.ReadableStream | Readable, gunzipChunk?: number): Promise<Decoded> {
  const { head, stream: raw } = await peekStream(input, 6);
  const compression = detectCompression(head);
  switch (compression) {
    case 'none':
      return { stream: raw, compression, detach: () => raw.pause() };
    case 'gzip': {
      // Compressed pieces of about the output's size: each write is one trip to the thread pool.
      const gunzip = createGunzip(gunzipChunk ? { chunkSize: gunzipChunk } : {});
      return { stream: gunzip, compression, detach: feed(raw, gunzip, gunzipChunk ?? 0) };
    }
    default:
      // Drained rather than destroyed: the input may be one entry of an archive that goes on.
      await drainStream(raw);
      throw new InvalidParameter(`${compression} compressed content is not supported: use an uncompressed or gzip compressed tar`);
  }
}
