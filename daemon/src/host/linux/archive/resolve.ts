/**
 * Path resolution inside a container's root filesystem, as the container's processes see it, done from the
 * host: every component is looked up with lstat, symlinks are resolved against the container root (an
 * absolute link starts again at the container root, `..` never climbs above it), and a path at or below a
 * mount's destination continues in the mount's source folder. The kernel never follows a link on our
 * behalf, so no link in the container can lead to a host path outside the container root and its mounts.
 *
 * Opened files are checked once more through /proc/self/fd (see `checkOpened`): a container process that
 * swaps a folder for a link between our lookup and the open is caught there.
 */
import { promises as fs, type Stats } from 'node:fs';
import path from 'node:path';
import { InvalidParameter, NotFound } from '../../../errors.js';
import type { FilesystemMount, FilesystemView } from '../../host.js';

export type { FilesystemMount, FilesystemView };

/** Where one resolved container path lives on the host. */
export interface Location {
  /** The container path with every symlink resolved (absolute, clean). */
  containerPath: string;
  /** The host path of the same file. */
  hostPath: string;
  /** The folder that bounds `hostPath` (the container root or the mount's source). */
  boundary: string;
  /** The mount the path lies in, if any. */
  mount?: FilesystemMount;
  readOnly: boolean;
}

const MAX_SYMLINKS = 255;

function errno(err: unknown): string | undefined {
  return (err as NodeJS.ErrnoException | undefined)?.code;
}

/** Splits a container path into components, dropping empty ones and `.`. */
export function components(p: string): string[] {
  return p.split('/').filter((c) => c !== '' && c !== '.');
}

/** How a walk inside a root (see walkInRoot) reaches the files and answers what it meets. */
export interface RootWalk {
  /** The host path of a clean container path. */
  hostPath(containerPath: string): string;
  /** Whether a symlink that is the path's last component is followed. */
  followLast: boolean;
  /** The most symlinks followed before tooManyLinks. */
  maxLinks: number;
  /**
   * A component lstat failed on (with `err`): throws, or returns to take the component as it is (after
   * making it, or when a missing last component is allowed).
   */
  missing(err: unknown, containerPath: string, last: boolean): Promise<void>;
  tooManyLinks(): Error;
  /** A component before the last that is not a folder. */
  notDirectory(containerPath: string): Error;
}

/**
 * Resolves `p` (a container path, relative ones taken from the root) component by component with lstat, to a
 * clean container path with no symlink in it (except the last component when `followLast` is false): a link
 * is read and its target walked in its place, an absolute one from the root, and `..` never climbs above
 * the root. The kernel never follows a link on the walk's behalf.
 */
export async function walkInRoot(p: string, walk: RootWalk): Promise<string> {
  let pending = components(p);
  const resolved: string[] = [];
  let links = 0;
  while (pending.length > 0) {
    const component = pending.shift()!;
    if (component === '..') {
      resolved.pop();
      continue;
    }
    const candidate = '/' + [...resolved, component].join('/');
    const last = pending.length === 0;
    let st: Stats;
    try {
      st = await fs.lstat(walk.hostPath(candidate));
    } catch (err) {
      await walk.missing(err, candidate, last);
      resolved.push(component);
      continue;
    }
    if (st.isSymbolicLink() && (!last || walk.followLast)) {
      if (++links > walk.maxLinks) throw walk.tooManyLinks();
      const target = await fs.readlink(walk.hostPath(candidate));
      if (target.startsWith('/')) resolved.length = 0;
      pending = [...components(target), ...pending];
      continue;
    }
    if (!last && !st.isDirectory()) throw walk.notDirectory(candidate);
    resolved.push(component);
  }
  return '/' + resolved.join('/');
}

export class ContainerFilesystem {
  /** Mounts with destinations resolved inside the root, longest destination first. */
  private constructor(
    readonly view: FilesystemView,
    private readonly mounts: FilesystemMount[],
  ) {}

  /**
   * Resolves each mount's destination inside the root (a destination may pass through a symlink of the
   * image, as the runtime resolves it at mount time) and orders them so that the deepest mount wins.
   */
  static async open(view: FilesystemView): Promise<ContainerFilesystem> {
    // Host paths in their real form (no host symlinks): opened files are compared with them.
    const real = (p: string) => fs.realpath(p).catch(() => path.resolve(p));
    const rootView = { ...view, root: await real(view.root) };
    const plain = new ContainerFilesystem(rootView, []);
    const resolved: FilesystemMount[] = [];
    for (const m of view.mounts) {
      const destination = await plain.resolveContainerPath(m.destination, true).catch(() => path.posix.resolve('/', m.destination));
      resolved.push({ ...m, destination, source: await real(m.source) });
    }
    resolved.sort((a, b) => b.destination.length - a.destination.length);
    return new ContainerFilesystem(rootView, resolved);
  }

  /** The mount a clean container path lies in, if any. */
  mountOf(containerPath: string): FilesystemMount | undefined {
    return this.mounts.find((m) => containerPath === m.destination || containerPath.startsWith(m.destination === '/' ? '/' : m.destination + '/'));
  }

  /** Host location of a clean container path whose components are all resolved already. */
  locate(containerPath: string): Location {
    const mount = this.mountOf(containerPath);
    if (mount) {
      const rest = containerPath.slice(mount.destination.length).replace(/^\/+/, '');
      return { containerPath, hostPath: rest ? path.join(mount.source, rest) : mount.source, boundary: mount.source, mount, readOnly: mount.readOnly };
    }
    const root = path.resolve(this.view.root);
    return { containerPath, hostPath: containerPath === '/' ? root : path.join(root, containerPath), boundary: root, readOnly: this.view.readonlyRootfs };
  }

  /** The container paths of the mounts directly at `containerPath`'s children or below (for tree walks). */
  mountAt(containerPath: string): FilesystemMount | undefined {
    return this.mounts.find((m) => m.destination === containerPath);
  }

  /**
   * Resolves `p` (a container path, relative ones taken from the root) to a clean container path with no
   * symlink in it, except the last component when `followLast` is false. Missing components are NotFound
   * (a missing last component too, unless `allowMissingLast`).
   */
  async resolveContainerPath(p: string, followLast: boolean, allowMissingLast = false): Promise<string> {
    return walkInRoot(p, {
      hostPath: (containerPath) => this.locate(containerPath).hostPath,
      followLast,
      maxLinks: MAX_SYMLINKS,
      missing: async (err, candidate, last) => {
        if (errno(err) === 'ENOENT' || errno(err) === 'ENOTDIR') {
          if (last && allowMissingLast) return;
          throw new NotFound(`Could not find the file ${p} in container: no such file or directory`);
        }
        if (errno(err) === 'ENAMETOOLONG') throw new InvalidParameter(`path ${p} is too long once its links are resolved`, { cause: err });
        throw err;
      },
      tooManyLinks: () => new InvalidParameter(`too many levels of symbolic links in ${p}`),
      notDirectory: (candidate) => new NotFound(`Could not find the file ${p} in container: ${candidate} is not a directory`),
    });
  }

  /** Resolves and locates `p`; see resolveContainerPath. */
  async resolve(p: string, followLast: boolean, allowMissingLast = false): Promise<Location> {
    return this.locate(await this.resolveContainerPath(p, followLast, allowMissingLast));
  }

  /**
   * Checks that an open file descriptor names a file inside `boundary` (the real path the kernel opened,
   * read from /proc/self/fd). Throws when a folder on the way was swapped for a link since it was resolved.
   */
  static async checkOpened(fd: number, boundary: string, what: string): Promise<void> {
    const real = await fs.readlink(`/proc/self/fd/${fd}`);
    const bound = path.resolve(boundary);
    if (real !== bound && !real.startsWith(bound === '/' ? '/' : bound + '/')) {
      throw new InvalidParameter(`${what} changed while it was being copied and now leads outside the container`);
    }
  }
}
