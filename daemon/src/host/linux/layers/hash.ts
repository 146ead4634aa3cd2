/**
 * The layerhash addon (daemon/native/layerfs, built by node-gyp with the layerfs addon): SHA-256 on libuv's
 * thread pool, for util/digest's StreamDigest (diff ids of layers, digests of pulled blobs). Set with
 * useOffThreadHasher(loadLayerHasher) where the composition starts; BERTH_LAYERHASH_ADDON names another
 * build of it, or `none` to hash in the main thread.
 */
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { OffThreadHasher } from '../../../util/digest.js';

const here = path.dirname(fileURLToPath(import.meta.url));
/** daemon/ from dist/src/host/linux/layers (compiled) */
const daemonDir = path.resolve(here, '..', '..', '..', '..', '..');

/** The addon, or null when it is not built, cannot load (a host without OpenSSL's symbols) or is turned off. */
export function loadLayerHasher(): OffThreadHasher | null {
  if (process.env.BERTH_LAYERHASH_ADDON === 'none') return null;
  const require = createRequire(import.meta.url);
  const candidates = [process.env.BERTH_LAYERHASH_ADDON, path.join(daemonDir, 'native', 'layerfs', 'build', 'Release', 'layerhash.node')];
  for (const candidate of candidates) {
    if (!candidate) continue;
    try {
      return require(candidate) as OffThreadHasher;
    } catch {
      // Not built, or not loadable here: the next candidate, or hashed in the main thread.
    }
  }
  return null;
}
