/**
 * The system calls layer unpacking needs beyond Node's fs: mknod (overlay whiteouts are 0:0 character
 * devices; layers may carry device nodes and FIFOs) and lsetxattr (the overlay opaque marker, file
 * capabilities). They come from the small N-API addon in daemon/native/layerfs (built by node-gyp:
 * `npm run build:native -w daemon`). Without the addon they fall back to commands: `mknod`, and python3's
 * os.setxattr (the attr package's setfattr is not installed everywhere); slower, but whiteouts and
 * xattrs are rare in layers.
 */
import { execFile } from 'node:child_process';
import { constants, promises as fs } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

interface LayerFsAddon {
  mknod(path: string, mode: number, major: number, minor: number): void;
  lsetxattr(path: string, name: string, value: Buffer): void;
  writeFile(path: string, data: Buffer, mode: number, uid: number, gid: number, mtimeSec: number, mtimeNsec: number): Promise<void>;
}

const here = path.dirname(fileURLToPath(import.meta.url));
/** daemon/ from dist/src/host/linux/layers (compiled) */
const daemonDir = path.resolve(here, '..', '..', '..', '..', '..');

let addon: LayerFsAddon | null | undefined;
let addonError: string | undefined;

function loadAddon(): LayerFsAddon | null {
  if (addon !== undefined) return addon;
  const require = createRequire(import.meta.url);
  // BERTH_LAYERFS_ADDON=none runs the command fallbacks (tests of that path).
  if (process.env.BERTH_LAYERFS_ADDON === 'none') {
    addonError = 'disabled by BERTH_LAYERFS_ADDON=none';
    addon = null;
    return addon;
  }
  const candidates = [
    process.env.BERTH_LAYERFS_ADDON,
    path.join(daemonDir, 'native', 'layerfs', 'build', 'Release', 'layerfs.node'),
  ].filter((p): p is string => !!p);
  for (const candidate of candidates) {
    try {
      addon = require(candidate) as LayerFsAddon;
      return addon;
    } catch (err) {
      addonError = (err as Error).message;
    }
  }
  addon = null;
  return addon;
}

const run = promisify(execFile);

export const S_IFIFO = 0o010000;
export const S_IFCHR = 0o020000;
export const S_IFBLK = 0o060000;

/** Creates a device node or FIFO; `mode` holds the type bits and the permissions. */
export async function mknod(file: string, mode: number, major: number, minor: number): Promise<void> {
  const native = loadAddon();
  if (native) {
    native.mknod(file, mode, major, minor);
    return;
  }
  const type = (mode & 0o170000) === S_IFCHR ? 'c' : (mode & 0o170000) === S_IFBLK ? 'b' : 'p';
  const args = ['-m', (mode & 0o7777).toString(8), file, type];
  if (type !== 'p') args.push(String(major), String(minor));
  await run('mknod', args);
}

const SETXATTR_PY = 'import os,sys; os.setxattr(sys.argv[1], sys.argv[2], bytes.fromhex(sys.argv[3]), follow_symlinks=False)';

/** Sets an extended attribute without following a final symlink. */
export async function lsetxattr(file: string, name: string, value: Buffer): Promise<void> {
  const native = loadAddon();
  if (native) {
    native.lsetxattr(file, name, value);
    return;
  }
  try {
    await run('python3', ['-c', SETXATTR_PY, file, name, value.toString('hex')]);
  } catch (err) {
    throw new Error(`cannot set extended attribute ${name} on ${file} (layerfs addon not built: ${addonError ?? 'not found'}): ${(err as Error).message}`, { cause: err });
  }
}

/**
 * Creates the new regular file `file` (never an existing one, never through a final symlink) holding
 * `data`, with its permissions (setuid/setgid/sticky included), owner and mtime. With the addon it is
 * one thread-pool round trip instead of six.
 */
export async function writeNewFile(file: string, data: Buffer, mode: number, uid: number, gid: number, mtime: Date): Promise<void> {
  const native = loadAddon();
  if (native?.writeFile) {
    const ms = mtime.getTime();
    const sec = Math.floor(ms / 1000);
    await native.writeFile(file, data, mode & 0o7777, uid, gid, sec, (ms - sec * 1000) * 1_000_000);
    return;
  }
  const handle = await fs.open(file, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600);
  try {
    if (data.length > 0) await handle.write(data);
    await handle.chown(uid, gid);
    await handle.chmod(mode & 0o7777);
    await handle.utimes(mtime, mtime);
  } finally {
    await handle.close();
  }
}

/** True when the native addon is loaded (tests use it to know whether xattrs can be checked). */
export function haveNativeAddon(): boolean {
  return loadAddon() !== null;
}
