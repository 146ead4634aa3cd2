/**
 * Container root filesystems on overlayfs: the image's layer folders as lower dirs, the container's own
 * upper and work dirs, mounted on `merged`.
 *
 * Lower dirs are given bottom-first (the order layers are listed in the image) and mounted top-first, as
 * overlay wants them. The mount system call of the addon takes the layers' absolute paths; the kernel takes
 * mount options in one page, so when they do not fit (or there is no addon) the options name each layer by a
 * short symlink `lower/<n>` relative to the container's folder, and `mount` runs with that folder as its
 * working directory, so the whole string stays short however long the layer paths are.
 */
import { execFile } from 'node:child_process';
import { constants, existsSync, promises as fs, type Stats } from 'node:fs';
import path from 'node:path';
import { fsSteps, linuxSys, type FsStep, type LinuxSys } from '../sys.js';
import { parseMountinfo } from '../mountinfo.js';

function run(cmd: string, args: string[], cwd?: string): Promise<void> {
  return new Promise((resolve, reject) => {
    execFile(cmd, args, { cwd, timeout: 60_000 }, (err, _stdout, stderr) => {
      if (err) reject(new Error(`${cmd} ${args.join(' ')}: ${(stderr || err.message).trim()}`));
      else resolve();
    });
  });
}

/** Mount points at or below `dir`. */
export async function mountsUnder(dir: string): Promise<string[]> {
  const text = await fs.readFile('/proc/self/mountinfo', 'utf8');
  return parseMountinfo(text)
    .map((m) => m.mountPoint)
    .filter((p) => p === dir || p.startsWith(dir + '/'));
}

export async function isMountPoint(dir: string): Promise<boolean> {
  return (await mountsUnder(dir)).includes(dir);
}

/** The overlay mount options for a container folder holding `lower/0..n-1`, `upper` and `work`. */
export function overlayOptions(layerCount: number): string {
  const lowers: string[] = [];
  for (let i = layerCount - 1; i >= 0; i--) lowers.push(`lower/${i}`);
  return `lowerdir=${lowers.join(':')},upperdir=upper,workdir=work`;
}

/**
 * Mounts the overlay of `lowerDirs` (bottom-first) with the upper and work dirs of `containerDir` on
 * `containerDir/merged`; returns the merged path. Mounting an already mounted rootfs returns it as is.
 */
export async function mountOverlay(containerDir: string, lowerDirs: string[]): Promise<string> {
  const merged = path.join(containerDir, 'merged');
  // Nothing can be mounted on a folder that does not exist yet (a first start): no need to read the mount table.
  if (existsSync(merged) && (await isMountPoint(merged))) return merged;
  if (!existsSync(path.dirname(containerDir))) await fs.mkdir(path.dirname(containerDir), { recursive: true, mode: 0o710 });
  // An image without layers still needs one lower dir: an empty one.
  const lowers = lowerDirs.length > 0 ? lowerDirs.map((d) => path.resolve(d)) : [path.join(containerDir, 'empty')];
  // The folders, and a check of the layers, as one task of the thread pool.
  const results = await fsSteps([
    ['mkdir', containerDir, 0o710],
    ...['upper', 'work', 'merged'].map((d): FsStep => ['mkdir', path.join(containerDir, d), 0o755]),
    ...(lowerDirs.length === 0 ? [['mkdir', lowers[0]!, 0o755] as FsStep] : []),
    ...lowers.map((d): FsStep => ['exists', path.join(d, '.')]),
  ]);
  const missing = results.slice(-lowers.length).findIndex((r) => r !== 0);
  if (missing >= 0) throw new Error(`layer folder ${lowers[missing]} does not exist`);
  // The mount system call (on the thread pool) when the addon is there and absolute paths fit in the page the
  // kernel reads; else `mount` run in the container folder, with short options naming the layers by links.
  const sys = linuxSys();
  const absolute = overlayOptions(lowers.length).replace(/(lower\/\d+|upper|work)(?=[:,]|$)/g, (rel) => {
    const m = /^lower\/(\d+)$/.exec(rel);
    return m ? lowers[Number(m[1])]! : path.join(containerDir, rel);
  });
  if (sys && absolute.length < 4000) {
    const mountAsync = sys.mountOverlayAsync;
    if (mountAsync) await new Promise<void>((resolve, reject) => mountAsync(merged, absolute, (err) => (err ? reject(err) : resolve())));
    else sys.mountOverlay(merged, absolute);
    return merged;
  }
  const lowerLinks = path.join(containerDir, 'lower');
  await fs.rm(lowerLinks, { recursive: true, force: true });
  await fs.mkdir(lowerLinks, { mode: 0o700 });
  for (let i = 0; i < lowers.length; i++) await fs.symlink(lowers[i]!, path.join(lowerLinks, String(i)));
  await run('mount', ['-t', 'overlay', 'overlay', '-o', overlayOptions(lowers.length), 'merged'], containerDir);
  return merged;
}

function umountOnPool(sys: LinuxSys & { unmountAsync: NonNullable<LinuxSys['unmountAsync']> }, target: string, lazy: boolean): Promise<void> {
  return new Promise((resolve, reject) => sys.unmountAsync(target, lazy, (err) => (err ? reject(err) : resolve())));
}

/**
 * Unmounts `merged` until it is no mount point; a busy mount is detached lazily rather than left behind. With
 * the addon, umount2 itself says when nothing (more) is mounted there (EINVAL, or ENOENT for no folder), which
 * spares reading the mount table, and it runs on the thread pool: an overlay's unmount syncs its upper
 * filesystem, which takes long on a busy disk and must not stall the daemon.
 */
export async function unmountOverlay(containerDir: string): Promise<void> {
  const merged = path.join(containerDir, 'merged');
  const sys = linuxSys();
  if (sys?.unmountAsync) {
    const pool = sys as LinuxSys & { unmountAsync: NonNullable<LinuxSys['unmountAsync']> };
    for (let i = 0; i < 16; i++) {
      try {
        await umountOnPool(pool, merged, false);
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code;
        if (code === 'EINVAL' || code === 'ENOENT') return;
        if (code !== 'EBUSY') throw err;
        await umountOnPool(pool, merged, true);
      }
    }
    if (await isMountPoint(merged)) throw new Error(`${merged} is still mounted`);
    return;
  }
  if (!(await isMountPoint(merged))) return;
  if (sys) {
    try {
      sys.unmount(merged, false);
    } catch {
      sys.unmount(merged, true);
    }
    return;
  }
  try {
    await run('umount', [merged]);
  } catch {
    await run('umount', ['-l', merged]);
  }
}

const MAX_SYMLINKS = 40;

/** Overlay's whiteout: a character device 0/0 hides the same name in the layers below. */
function isWhiteout(st: Stats): boolean {
  return st.isCharacterDevice() && st.rdev === 0;
}

/**
 * Reads a file as the merged view of the layers shows it (bottom-first list): each path component is looked
 * up from the top layer down, whiteouts (overlay's 0/0 devices and `.wh.` files) and non-directories hide
 * what lies below, and symlinks are resolved against the image root, never followed by the kernel, so that
 * no link can lead outside the layers. Opaque directories (marked by an xattr) are not detected. Returns
 * undefined when the path does not name a regular file, and refuses files larger than `maxBytes`.
 */
export async function readFileFromLayers(lowerDirs: string[], file: string, maxBytes = 16 << 20): Promise<Buffer | undefined> {
  const topFirst = lowerDirs.map((d) => path.resolve(d)).reverse();
  // levels[k]: the layers (top-first) in which the first k resolved components are all real directories.
  const levels: string[][] = [topFirst];
  const resolved: string[] = [];
  let pending = file.split('/').filter((c) => c !== '' && c !== '.');
  let links = 0;

  const hidden = async (layer: string, rel: string): Promise<boolean> =>
    fs.lstat(path.join(layer, path.dirname(rel), `.wh.${path.basename(rel)}`)).then(() => true, () => false);

  while (pending.length > 0) {
    const component = pending.shift()!;
    if (component === '..') {
      if (resolved.length > 0) {
        resolved.pop();
        levels.pop();
      }
      continue;
    }
    const rel = [...resolved, component].join('/');
    const dirLayers: string[] = [];
    let top: { layer: string; st: Stats } | undefined;
    for (const layer of levels[levels.length - 1]) {
      const st = await fs.lstat(path.join(layer, rel)).catch(() => undefined);
      if (!st) {
        if (await hidden(layer, rel)) break;
        continue;
      }
      if (isWhiteout(st)) break;
      if (!top) top = { layer, st };
      if (!st.isDirectory()) break;
      dirLayers.push(layer);
    }
    if (!top) return undefined;
    if (top.st.isSymbolicLink()) {
      if (++links > MAX_SYMLINKS) return undefined;
      const target = await fs.readlink(path.join(top.layer, rel));
      if (target.startsWith('/')) {
        resolved.length = 0;
        levels.length = 1;
      }
      pending = [...target.split('/').filter((c) => c !== '' && c !== '.'), ...pending];
      continue;
    }
    if (pending.length === 0) {
      if (!top.st.isFile()) return undefined;
      if (top.st.size > maxBytes) throw new Error(`${file} in the image is larger than ${maxBytes} bytes`);
      const handle = await fs.open(path.join(top.layer, rel), constants.O_RDONLY | constants.O_NOFOLLOW);
      try {
        return await handle.readFile();
      } finally {
        await handle.close();
      }
    }
    if (!top.st.isDirectory()) return undefined;
    resolved.push(component);
    levels.push(dirLayers);
  }
  return undefined;
}

/** Bytes of the regular files below `dir` (not following symlinks); 0 when it does not exist. */
export async function diskUsage(dir: string): Promise<number> {
  let total = 0;
  const pending = [dir];
  while (pending.length > 0) {
    const current = pending.pop()!;
    let entries: import('node:fs').Dirent[];
    try {
      entries = await fs.readdir(current, { withFileTypes: true });
    } catch {
      continue;
    }
    for (const entry of entries) {
      const full = path.join(current, entry.name);
      if (entry.isDirectory()) pending.push(full);
      else if (entry.isFile()) total += (await fs.lstat(full).catch(() => undefined))?.size ?? 0;
    }
  }
  return total;
}
