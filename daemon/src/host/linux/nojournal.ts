/**
 * Deleted files on ext4 without a journal. There, the inode of a deleted file is not handed out again while the
 * inode table block that records its deletion waits to be written back (fs/ext4/ialloc.c, recently_deleted()),
 * and every inode allocation in that block group steps over each such inode with a buffer lookup. The engine
 * creates and deletes a few dozen files and folders per container (its record, the bundle, the overlay's folders,
 * conmon's and the runtime's files), so on such a file system each new file got slower the more containers had
 * been removed in the last half minute: a third of the daemon's CPU time in a start-up benchmark went to those
 * steps. A syncfs after each batch of deletions writes the blocks back, and the inodes are reusable at once.
 *
 * On a file system with a journal (or any other file system) nothing of this applies and nothing is done.
 */
import { readdirSync, readFileSync, realpathSync } from 'node:fs';
import path from 'node:path';
import { parseMountinfo } from './mountinfo.js';
import { linuxSys } from './sys.js';

/** The mount (from /proc/self/mountinfo) holding `dir`: its device number and file system type. */
function mountOf(dir: string): { device: string; fsType: string } | undefined {
  let real: string;
  try {
    real = realpathSync(dir);
  } catch {
    return undefined;
  }
  let best: { mountPoint: string; device: string; fsType: string } | undefined;
  for (const { mountPoint, device, fsType } of parseMountinfo(readFileSync('/proc/self/mountinfo', 'utf8'))) {
    const inside = mountPoint === '/' || real === mountPoint || real.startsWith(mountPoint + '/');
    // The last matching line wins among equal mount points (a mount stacked on another).
    if (inside && (!best || mountPoint.length >= best.mountPoint.length)) best = { mountPoint, device, fsType };
  }
  return best && { device: best.device, fsType: best.fsType };
}

/** The device (major:minor) of the file system holding `dir` when it is ext2/3/4 without a journal. */
function extWithoutJournalDevice(dir: string): string | undefined {
  const mount = mountOf(dir);
  if (!mount || !/^ext[234]$/.test(mount.fsType)) return undefined;
  let name: string;
  try {
    name = path.basename(realpathSync(`/sys/dev/block/${mount.device}`));
  } catch {
    return undefined;
  }
  let journals: string[];
  try {
    journals = readdirSync('/proc/fs/jbd2');
  } catch {
    journals = []; // no journal on any file system of this machine
  }
  return journals.some((j) => j.startsWith(`${name}-`)) ? undefined : mount.device;
}

/** Whether the folder lives on an ext2/3/4 file system without a journal (see above). */
export function onExtWithoutJournal(dir: string): boolean {
  return extWithoutJournalDevice(dir) !== undefined;
}

/**
 * What to run after a batch of deletions under `dirs` (util/later.ts): a syncfs of each of their file systems that
 * is ext without a journal; undefined when none is, or without the addon.
 */
export function writebackAfterDeletions(dirs: string[]): (() => Promise<void>) | undefined {
  const syncfs = linuxSys()?.syncfsAsync;
  if (!syncfs) return undefined;
  // One per file system: folders on the same device need one syncfs.
  const byDevice = new Map<string, string>();
  for (const dir of dirs) {
    const device = extWithoutJournalDevice(dir);
    if (device !== undefined) byDevice.set(device, dir);
  }
  if (byDevice.size === 0) return undefined;
  return async () => {
    for (const dir of byDevice.values()) {
      await new Promise<void>((resolve, reject) => syncfs(dir, (err) => (err ? reject(err) : resolve())));
    }
  };
}
