/**
 * The local volume driver's host side: volume folders under the data root, the mounts of DriverOpts
 * volumes (tmpfs, bind, a device), and the copy of an image's content into a new volume.
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { constants, promises as fs } from 'node:fs';
import path from 'node:path';
import { InvalidParameter, NotFound } from '../../../errors.js';
import { ContainerFilesystem, walkInRoot } from '../archive/resolve.js';
import { diskUsage, isMountPoint } from '../runtime/rootfs.js';
import { linuxSys } from '../sys.js';
import type { LocalDriverOptions, VolumeHost } from '../../host.js';

const MAX_SYMLINKS = 40;
/** open(2)'s O_PATH (Linux): a handle on a file or folder that reads nothing and opens no device. */
const O_PATH = 0o10000000;

function run(cmd: string, args: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    execFile(cmd, args, { timeout: 120_000, maxBuffer: 1024 * 1024 }, (err, _stdout, stderr) => {
      if (err) reject(new Error(`${cmd} ${args.join(' ')}: ${(stderr || err.message).trim()}`));
      else resolve();
    });
  });
}

export class LinuxVolumeHost implements VolumeHost {
  /** Every folder this host creates, removes or mounts on lies below `volumesRoot`. */
  constructor(readonly volumesRoot: string) {}

  async listVolumeDirs(): Promise<string[]> {
    const entries = await fs.readdir(this.volumesRoot, { withFileTypes: true }).catch((err: NodeJS.ErrnoException) => {
      if (err.code === 'ENOENT') return [];
      throw err;
    });
    // Folders of this host's own (the subpath holders) start with a dot, which no volume name does.
    return entries.filter((e) => e.isDirectory() && !e.name.startsWith('.')).map((e) => e.name);
  }

  private inside(p: string): string {
    const resolved = path.resolve(p);
    if (!resolved.startsWith(path.resolve(this.volumesRoot) + '/')) throw new Error(`refusing to touch ${p}: not under the volumes folder ${this.volumesRoot}`);
    return resolved;
  }

  async createVolumeDir(dir: string): Promise<void> {
    const target = this.inside(dir);
    await fs.mkdir(this.volumesRoot, { recursive: true, mode: 0o701 });
    await fs.mkdir(target, { mode: 0o701 });
    try {
      await fs.mkdir(path.join(target, '_data'), { mode: 0o755 });
      // mkdir's mode is masked by the umask; a volume's root is 0755 as Docker makes it.
      await fs.chmod(path.join(target, '_data'), 0o755);
    } catch (err) {
      await fs.rm(target, { recursive: true, force: true });
      throw err;
    }
  }

  async removeVolumeDir(dir: string): Promise<void> {
    const target = this.inside(dir);
    // Never recurse into something still mounted (a bind volume's device is the user's own folder).
    if (await isMountPoint(path.join(target, '_data'))) throw new Error(`the volume at ${target} is still mounted`);
    await fs.rm(target, { recursive: true, force: true });
  }

  async mount(target: string, opts: Required<Pick<LocalDriverOptions, 'type'>> & LocalDriverOptions): Promise<void> {
    const where = this.inside(target);
    const args = ['-t', opts.type];
    if (opts.o) args.push('-o', opts.o);
    args.push(opts.device || (opts.type === 'tmpfs' ? 'tmpfs' : opts.type), where);
    await run('mount', args);
  }

  async unmount(target: string): Promise<void> {
    const where = this.inside(target);
    const sys = linuxSys();
    if (sys) {
      try {
        sys.unmount(where, false);
      } catch {
        sys.unmount(where, true);
      }
      return;
    }
    await run('umount', [where]).catch(() => run('umount', ['-l', where]));
  }

  isMounted(target: string): Promise<boolean> {
    return isMountPoint(path.resolve(target));
  }

  async exists(p: string): Promise<boolean> {
    return fs.stat(p).then(
      () => true,
      () => false,
    );
  }

  async isEmpty(dir: string): Promise<boolean> {
    const handle = await fs.opendir(dir);
    try {
      return (await handle.read()) === null;
    } finally {
      await handle.close().catch(() => undefined);
    }
  }

  diskUsage(dir: string): Promise<number> {
    return diskUsage(dir);
  }

  async copyFromRootfs(rootfs: string, containerPath: string, target: string): Promise<void> {
    const into = this.inside(target);
    const fsys = await ContainerFilesystem.open({ root: rootfs, mounts: [], readonlyRootfs: false });
    let source: string;
    try {
      source = (await fsys.resolve(containerPath, true)).hostPath;
    } catch {
      return; // nothing at that path in the image
    }
    const st = await fs.lstat(source).catch(() => undefined);
    if (!st?.isDirectory()) return;
    // The volume's root takes the owner and mode of the image's folder, as Docker's copy does.
    await fs.chown(into, st.uid, st.gid);
    await fs.chmod(into, st.mode & 0o7777);
    // -a: no link followed, owners, modes, times, xattrs kept; `/.` copies the folder's content.
    await run('cp', ['-a', '--', `${source}/.`, `${into}/`]);
  }

  /** Unmounts and removes what openBeneath left when the daemon stopped before a start released it. */
  async releaseStaleSubpaths(): Promise<void> {
    const holder = path.join(this.volumesRoot, '.subpaths');
    const entries = await fs.readdir(holder).catch(() => [] as string[]);
    for (const entry of entries) {
      const target = path.join(holder, entry);
      if (await isMountPoint(target)) await run('umount', ['-l', target]).catch(() => undefined);
      await fs.rm(target, { force: true }).catch(() => fs.rmdir(target).catch(() => undefined));
    }
  }

  async openBeneath(base: string, subpath: string): Promise<{ path: string; directory: boolean; close(): Promise<void> }> {
    const root = await fs.realpath(this.inside(base));
    const parts = subpath.split('/').filter((p) => p !== '' && p !== '.');
    const wanted = path.join(root, ...parts);
    if (wanted !== root && !wanted.startsWith(`${root}/`)) {
      throw new InvalidParameter(`path concatenation escapes the base directory, base: ${root}, subpath: ${subpath}`);
    }
    // Every step below the volume's root must be there and must not be a symlink (as Docker resolves it).
    let at = root;
    for (const part of path.relative(root, wanted).split('/').filter(Boolean)) {
      at = path.join(at, part);
      const stat = await fs.lstat(at).catch((err: NodeJS.ErrnoException) => {
        if (err.code === 'ENOENT' || err.code === 'ENOTDIR') throw new NotFound(`cannot access path ${wanted}: no such file or directory`);
        throw err;
      });
      if (stat.isSymbolicLink()) throw new NotFound(`cannot access path ${wanted}: too many levels of symbolic links`);
    }
    // A handle pins what was checked, and the mount the runtime binds is made from the handle (in this mount
    // namespace: the runtime's own cannot bind from it), so a symlink swapped in after the check (by a
    // container using the volume) cannot send the mount elsewhere. Where the handle's file sits is checked
    // again through it.
    const handle = await fs.open(wanted, O_PATH | constants.O_NOFOLLOW);
    let target: string | undefined;
    let directory = false;
    try {
      const [stat, real] = await Promise.all([handle.stat(), fs.readlink(`/proc/self/fd/${handle.fd}`)]);
      if (stat.isSymbolicLink() || real !== wanted) throw new NotFound(`cannot access path ${wanted}: it changed while it was opened`);
      const holder = path.join(this.volumesRoot, '.subpaths');
      await fs.mkdir(holder, { recursive: true, mode: 0o700 });
      target = path.join(holder, randomBytes(12).toString('hex'));
      directory = stat.isDirectory();
      if (directory) await fs.mkdir(target, { mode: 0o700 });
      else await fs.writeFile(target, '', { mode: 0o600, flag: 'wx' });
      // --no-canonicalize: mount(8) must not turn the handle's path back into a path name.
      await run('mount', ['--no-canonicalize', '--bind', `/proc/${process.pid}/fd/${handle.fd}`, target]);
    } catch (err) {
      if (target) await fs.rm(target, { recursive: true, force: true }).catch(() => undefined);
      throw err;
    } finally {
      await handle.close();
    }
    const mounted = target;
    return {
      path: mounted,
      directory,
      close: async () => {
        await run('umount', ['-l', mounted]).catch(() => undefined);
        await fs.rm(mounted, { force: true, recursive: false }).catch(() => fs.rmdir(mounted));
      },
    };
  }

  async makeMountPoint(rootfs: string, containerPath: string): Promise<string> {
    const root = path.resolve(rootfs);
    const hostPath = (p: string) => path.join(root, p);
    // Nothing runs in the root yet (the container is being started), so what is looked up stays as seen.
    return walkInRoot(containerPath, {
      hostPath,
      followLast: true,
      maxLinks: MAX_SYMLINKS,
      missing: async (_err, candidate) => {
        await fs.mkdir(hostPath(candidate), { mode: 0o755 });
      },
      tooManyLinks: () => new InvalidParameter(`too many levels of symbolic links in the mount point ${containerPath}`),
      notDirectory: (candidate) => new InvalidParameter(`cannot mount at ${containerPath}: ${candidate} is not a directory in the container`),
    });
  }
}
