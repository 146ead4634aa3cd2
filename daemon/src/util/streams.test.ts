import assert from 'node:assert/strict';
import { PassThrough, Readable, Writable } from 'node:stream';
import { describe, it } from 'node:test';
import { tarStream } from './tar.js';
import { feed, peekStream } from './streams.js';

async function collect(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

/** The entries of a tar as tar-stream gives them (streamx streams), each handed to `onEntry`. */
async function withEntries(files: Array<{ name: string; body: Buffer }>, onEntry: (stream: Readable) => Promise<void>): Promise<void> {
  const pack = tarStream().pack();
  for (const f of files) pack.entry({ name: f.name, size: f.body.length }, f.body);
  pack.finalize();
  const extract = tarStream().extract();
  const done = new Promise<void>((resolve, reject) => {
    extract.on('entry', (_header, stream, next) => {
      onEntry(stream as unknown as Readable).then(() => next(), reject);
    });
    extract.on('finish', resolve);
    extract.on('error', reject);
  });
  (pack as unknown as Readable).pipe(extract as unknown as NodeJS.WritableStream);
  await done;
}

describe('stream helpers', () => {
  it('peeks at the first bytes of a node stream and gives every byte again, in order', async () => {
    const pieces = [Buffer.from('ab'), Buffer.from('cdef'), Buffer.from('ghij'), Buffer.from('klm')];
    const { head, stream } = await peekStream(Readable.from(pieces, { objectMode: false }), 5);
    assert.ok(head.length >= 5);
    assert.equal(head.subarray(0, 5).toString(), 'abcde');
    assert.equal((await collect(stream)).toString(), 'abcdefghijklm');
  });

  it('peeks at a stream shorter than asked for, and at an empty one', async () => {
    const short = await peekStream(Readable.from([Buffer.from('xy')], { objectMode: false }), 512);
    assert.equal(short.head.toString(), 'xy');
    assert.equal((await collect(short.stream)).toString(), 'xy');
    const empty = await peekStream(Readable.from([], { objectMode: false }), 6);
    assert.equal(empty.head.length, 0);
    assert.equal((await collect(empty.stream)).length, 0);
  });

  it('peeks into tar entries (streamx streams), small and large, without losing a byte', async () => {
    const big = Buffer.alloc(300_000, 7);
    big.write('start', 0);
    const seen: string[] = [];
    await withEntries(
      [
        { name: 'small', body: Buffer.from('tiny') },
        { name: 'big', body: big },
        { name: 'after', body: Buffer.from('still here') },
      ],
      async (entry) => {
        const { head, stream } = await peekStream(entry, 512);
        const all = await collect(stream);
        assert.equal(head.toString('latin1', 0, Math.min(4, head.length)), all.toString('latin1', 0, Math.min(4, all.length)));
        seen.push(all.length > 1000 ? `${all.length}:${all.equals(big)}` : all.toString());
      },
    );
    assert.deepEqual(seen, ['tiny', '300000:true', 'still here']);
  });

  it('feeds a destination in coalesced pieces and ends it', async () => {
    const writes: number[] = [];
    const sink = new Writable({
      write(chunk: Buffer, _enc, cb) {
        writes.push(chunk.length);
        cb();
      },
    });
    const source = Readable.from(Array.from({ length: 10 }, () => Buffer.alloc(1000, 1)), { objectMode: false });
    const finished = new Promise((resolve) => sink.on('finish', resolve));
    feed(source, sink, 3000);
    await finished;
    assert.deepEqual(writes, [3000, 3000, 3000, 1000]);
  });

  it('never destroys the source when the destination fails: the rest can still be read', async () => {
    const source = new PassThrough();
    const sink = new Writable({
      write(_chunk, _enc, cb) {
        cb(new Error('sink failed'));
      },
    });
    sink.on('error', () => undefined);
    const closed = new Promise((resolve) => sink.on('close', resolve));
    feed(source, sink);
    source.write(Buffer.from('first'));
    await closed;
    assert.equal(source.destroyed, false);
    source.end(Buffer.from('rest'));
    assert.match((await collect(source)).toString(), /rest$/);
  });
});
