/**
 * Stream helpers of the image service: looking at the first bytes of a stream without losing them, and
 * recognising how a layer (or a whole archive) is compressed. Gzip is decoded in process; the others
 * answer a clear error.
 */
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
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

/**
 * Reads at least `want` bytes of `input` (fewer when it is shorter) and returns them with a stream that
 * gives all of `input` again from its first byte.
 */
export async function peekStream(input: NodeJS.ReadableStream | Readable, want: number): Promise<{ head: Buffer; stream: Readable }> {
  const iterator = (input as AsyncIterable<Buffer | string>)[Symbol.asyncIterator]();
  let head = Buffer.alloc(0);
  let ended = false;
  while (head.length < want) {
    const r = await iterator.next();
    if (r.done) {
      ended = true;
      break;
    }
    head = Buffer.concat([head, typeof r.value === 'string' ? Buffer.from(r.value) : r.value]);
  }
  const first = head;
  async function* rest(): AsyncGenerator<Buffer> {
    if (first.length > 0) yield first;
    if (ended) return;
    for (;;) {
      const r = await iterator.next();
      if (r.done) return;
      yield typeof r.value === 'string' ? Buffer.from(r.value) : r.value;
    }
  }
  return { head: first, stream: Readable.from(rest(), { objectMode: false }) };
}

/**
 * Returns a stream of the uncompressed content of `input` (the same bytes when it is not compressed) and
 * what compression it found.
 */
export async function decompressed(input: NodeJS.ReadableStream | Readable): Promise<{ stream: Readable; compression: Compression }> {
  const { head, stream: raw } = await peekStream(input, 6);
  const compression = detectCompression(head);
  switch (compression) {
    case 'none':
      return { stream: raw, compression };
    case 'gzip': {
      const gunzip = createGunzip();
      pipeline(raw, gunzip).catch(() => undefined);
      return { stream: gunzip, compression };
    }
    default:
      // Drained rather than destroyed: the input may be one entry of an archive that goes on.
      raw.resume();
      await new Promise((resolve) => {
        raw.once('end', resolve);
        raw.once('error', resolve);
      });
      throw new InvalidParameter(`${compression} compressed content is not supported: use an uncompressed or gzip compressed tar`);
  }
}
