/**
 * tar-stream, loaded at its first use: an idle daemon carries neither it nor the loader of CommonJS
 * modules from ES modules (together several megabytes of resident memory).
 */
import { createRequire } from 'node:module';
import { Readable } from 'node:stream';
import type TarStream from 'tar-stream';

const require = createRequire(import.meta.url);
let loaded: typeof TarStream | undefined;

export function tarStream(): typeof TarStream {
  return (loaded ??= require('tar-stream') as typeof TarStream);
}

/**
 * A tar stream written by `write` into a tar-stream pack, as a Node Readable. `write` starts only when the
 * consumer first reads: an error it meets (a file that cannot be read, a corrupt archive being repacked)
 * always finds the consumer listening, and a stream that is never read does no work. `write` finalizes the
 * pack or throws; the consumer destroying the stream destroys the pack, which fails `write`'s next entry.
 */
export function lazyPack(write: (pack: TarStream.Pack) => Promise<void>): Readable {
  async function* packed() {
    const pack = tarStream().pack();
    // Errors reach the loop below; this listener keeps one raised after the loop ended from going unheard.
    pack.on('error', () => undefined);
    const writing = write(pack).then(
      () => undefined,
      (err: Error) => {
        pack.destroy(err);
      },
    );
    try {
      for await (const chunk of pack) yield chunk as Buffer;
    } finally {
      pack.destroy();
      await writing;
    }
  }
  return Readable.from(packed(), { objectMode: false });
}
