/**
 * Tar split: what a layer tar holds besides file contents (headers, PAX records, padding, the end
 * blocks), kept beside the unpacked folder so that the exact tar (and so its diff id) can be rebuilt
 * from the two, the way Docker keeps tar-split data. The layer is stored once, as files, plus a little.
 *
 * ## Format (version 1)
 *
 * `layer.split`, a sequence of records:
 * - `0x01, u32be n, n bytes`: raw tar bytes;
 * - `0x02, u32be id, u64be size`: `size` bytes of file contents, read from `paths[id]` of `layer.refs.json`.
 *
 * `layer.refs.json`: `{"version": 1, "paths": ["diff/bin/busybox", "aside/7", ...]}`, paths relative to
 * the layer folder. A file that a later entry of the same tar replaces or removes is moved to `aside/`
 * (outside the folder containers see) instead of being deleted, so that its contents stay available.
 */
import { constants, promises as fs } from 'node:fs';
import path from 'node:path';
import { Readable, type Writable } from 'node:stream';
import { StreamDigest } from '../../../util/digest.js';

const RAW = 0x01;
const FILE = 0x02;
const MAX_RAW_RECORD = 1 << 20;
/** File contents are read back in pieces of up to this size when a tar is rebuilt. */
const READ_PIECE = 1 << 20;

interface ContentRange {
  start: number;
  end: number;
  id: number;
}

/**
 * Sees every byte of the uncompressed layer tar (`push`, in order) and where file contents lie
 * (`addContent`, from the tar parser), and writes the split records to `out`. Bytes not yet known to be
 * metadata or content are held until the parser has told; that is at most what the streams buffer.
 */
export class SplitRecorder {
  readonly paths: string[] = [];
  private pending: Buffer[] = [];
  private pendingStart = 0;
  private pendingLength = 0;
  private done = 0;
  private readonly ranges: ContentRange[] = [];

  constructor(private readonly out: Writable) {}

  /** Registers the contents of one regular file entry; returns its reference id. */
  addContent(start: number, size: number, file: string): number {
    const id = this.paths.length;
    this.paths.push(file);
    // Bytes already written out as raw (the parser told late) stay raw; the rest of them follow as raw too.
    if (size > 0 && start >= this.done) this.ranges.push({ start, end: start + size, id });
    return id;
  }

  /** The file holding a reference's contents moved (replaced or removed by a later entry). */
  relocate(id: number, file: string): void {
    this.paths[id] = file;
  }

  /**
   * Takes the next bytes of the tar. Returns a promise when the output wants the caller to wait (its
   * buffer is full), undefined when the caller can go on.
   */
  push(chunk: Buffer): Promise<void> | undefined {
    this.pending.push(chunk);
    this.pendingLength += chunk.length;
    return this.process(false);
  }

  /** Writes what is left (the end blocks) and ends the output. */
  async finish(): Promise<void> {
    await this.process(true);
    await new Promise<void>((resolve, reject) => {
      this.out.once('error', reject);
      this.out.end(() => resolve());
    });
  }

  private take(n: number): Buffer {
    const parts: Buffer[] = [];
    let need = n;
    while (need > 0) {
      const head = this.pending[0];
      if (head.length <= need) {
        parts.push(head);
        this.pending.shift();
        need -= head.length;
      } else {
        parts.push(head.subarray(0, need));
        this.pending[0] = head.subarray(need);
        need = 0;
      }
    }
    this.pendingStart += n;
    this.pendingLength -= n;
    return parts.length === 1 ? parts[0] : Buffer.concat(parts);
  }

  private process(final: boolean): Promise<void> | undefined {
    const records: Buffer[] = [];
    const end = this.pendingStart + this.pendingLength;
    while (this.done < end) {
      const range = this.ranges[0];
      if (range && range.start <= this.done) {
        const upto = Math.min(range.end, end);
        this.take(upto - this.done);
        this.done = upto;
        if (upto === range.end) {
          const record = Buffer.alloc(13);
          record[0] = FILE;
          record.writeUInt32BE(range.id, 1);
          record.writeBigUInt64BE(BigInt(range.end - range.start), 5);
          records.push(record);
          this.ranges.shift();
        }
        continue;
      }
      const limit = range ? Math.min(range.start, end) : final ? end : this.done;
      if (limit <= this.done) break;
      const n = Math.min(limit - this.done, MAX_RAW_RECORD);
      const bytes = this.take(n);
      const head = Buffer.alloc(5);
      head[0] = RAW;
      head.writeUInt32BE(n, 1);
      records.push(head, Buffer.from(bytes));
      this.done += n;
    }
    if (records.length === 0) return undefined;
    if (this.out.write(records.length === 1 ? records[0] : Buffer.concat(records))) return undefined;
    return new Promise<void>((resolve, reject) => {
      const onError = (err: Error) => reject(err);
      this.out.once('error', onError);
      this.out.once('drain', () => {
        this.out.off('error', onError);
        resolve();
      });
    });
  }
}

async function readExactly(handle: fs.FileHandle, position: number, length: number): Promise<Buffer> {
  const buf = Buffer.alloc(length);
  let got = 0;
  while (got < length) {
    const { bytesRead } = await handle.read(buf, got, length - got, position + got);
    if (bytesRead === 0) throw new Error('layer split data is truncated');
    got += bytesRead;
  }
  return buf;
}

/**
 * Rebuilds the layer tar of the layer folder `dir` from its split data and files, checking on the way
 * that it still has the diff id it was loaded with (the stream fails otherwise).
 */
export function rebuildTar(dir: string, diffId: string, paths: string[]): Readable {
  async function* generate(): AsyncGenerator<Buffer> {
    const hash = new StreamDigest();
    const split = await fs.open(path.join(dir, 'layer.split'), 'r');
    try {
      let position = 0;
      const { size: total } = await split.stat();
      while (position < total) {
        const kind = (await readExactly(split, position, 1))[0];
        if (kind === RAW) {
          const n = (await readExactly(split, position + 1, 4)).readUInt32BE(0);
          const bytes = await readExactly(split, position + 5, n);
          position += 5 + n;
          await hash.update(bytes);
          yield bytes;
        } else if (kind === FILE) {
          const head = await readExactly(split, position + 1, 12);
          position += 13;
          const id = head.readUInt32BE(0);
          const size = Number(head.readBigUInt64BE(4));
          const rel = paths[id];
          if (rel === undefined) throw new Error(`layer split data names an unknown file reference ${id}`);
          const file = await fs.open(path.join(dir, rel), constants.O_RDONLY | constants.O_NOFOLLOW);
          try {
            let offset = 0;
            while (offset < size) {
              // A fresh buffer each time: the digest and the consumer may still hold the last one.
              const chunk = Buffer.allocUnsafe(Math.min(size - offset, READ_PIECE));
              const { bytesRead } = await file.read(chunk, 0, chunk.length, offset);
              if (bytesRead === 0) throw new Error(`${rel} is shorter than the layer says (${offset} of ${size} bytes)`);
              offset += bytesRead;
              const out = chunk.subarray(0, bytesRead);
              await hash.update(out);
              yield out;
            }
          } finally {
            await file.close();
          }
        } else {
          throw new Error(`layer split data has an unknown record type ${kind}`);
        }
      }
    } finally {
      await split.close();
    }
    const digest = await hash.digest();
    if (digest !== diffId) throw new Error(`the layer rebuilt from ${dir} has digest ${digest}, not its diff id ${diffId}: the layer files were changed`);
  }
  return Readable.from(generate(), { objectMode: false });
}
