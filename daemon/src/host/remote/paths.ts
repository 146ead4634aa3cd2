/**
 * The one translation of paths between the daemon's machine and the guest the remote Host runs on. The
 * daemon names folders by its own paths (its data root's `containers/<id>/hosts`, a bind mount's `C:\src`);
 * every such path crossing to the agent goes through GuestPaths.toGuest, which gives the guest's path of it:
 *
 * - through the mapping that holds it, the deepest winning: a shared folder and its mount in the guest
 *   (virtiofs or 9p under vfkit and QEMU), the daemon's data root and the guest's, its exec root and the
 *   guest's;
 * - under WSL2, a drive path by WSL's mounts of the drives (`C:\src` is `/mnt/c/src`), and
 *   `\\wsl$\<distro>\x` or `\\wsl.localhost\<distro>\x` of the guest's own distribution as `/x`;
 * - a path that is already the guest's (one the Host gave, such as a root filesystem or a layer's folder)
 *   unchanged: on Windows every POSIX path, elsewhere every path outside the mappings.
 *
 * A Windows path outside all of these is never sent: it is a NotShared error naming it and the shared
 * folders (as Docker Desktop's "not shared from the host"). So is, with `strict` (the sources of bind mounts
 * a user gave, checked at create), a path outside the mappings where the daemon's paths are POSIX too.
 */
import path from 'node:path';
import { NotShared } from '../../errors.js';
import { HOST_PATH_STYLE, isWindowsHostPath, normalizeHostPath, normalizeWindowsPath, type PathMapping, type PathStyle } from '../../util/hostpath.js';

export { parsePathMapping, type PathMapping } from '../../util/hostpath.js';

export interface GuestPathsOptions {
  /** The daemon machine's spelling of paths. */
  style: PathStyle;
  mappings: PathMapping[];
  /**
   * The guest is this WSL2 distribution: Windows drives are at `/mnt/<letter>` in it, and its own files at
   * `\\wsl$\<distro>\...` on Windows.
   */
  wslDistro?: string;
}

interface Mapping {
  host: string;
  /** `host` with a separator at its end, what the paths below it start with (case folded on Windows). */
  prefix: string;
  guest: string;
}

/** WSL2 mounts every drive of Windows at /mnt/<letter> (its automount root). */
const WSL_DRIVES = '/mnt';

export class GuestPaths {
  private readonly mappings: Mapping[];

  constructor(private readonly opts: GuestPathsOptions) {
    this.mappings = opts.mappings
      .map((m) => {
        if (!m.guestPath.startsWith('/')) throw new RangeError(`the guest path of ${m.hostPath} must be absolute: ${m.guestPath}`);
        const host = normalizeHostPath(m.hostPath, opts.style);
        return { host, prefix: this.fold(host.endsWith(this.sep) ? host : host + this.sep), guest: path.posix.normalize(m.guestPath) };
      })
      .sort((a, b) => b.host.length - a.host.length);
  }

  private get sep(): string {
    return this.opts.style === 'win32' ? '\\' : '/';
  }

  /** Windows' file names are compared without case. */
  private fold(p: string): string {
    return this.opts.style === 'win32' ? p.toLowerCase() : p;
  }

  /** Whether `p` is spelled as a path of the daemon's machine that the guest cannot read as it is. */
  private foreign(p: string): boolean {
    return this.opts.style === 'win32' && isWindowsHostPath(p);
  }

  /** The guest's path of `p` through the mappings and WSL's drives, or undefined. */
  private mapped(p: string): string | undefined {
    const host = normalizeHostPath(p, this.opts.style);
    const folded = this.fold(host + this.sep);
    for (const m of this.mappings) {
      if (!folded.startsWith(m.prefix)) continue;
      const rest = host.slice(m.host.length).split(/[\\/]+/).filter(Boolean);
      return path.posix.join(m.guest, ...rest);
    }
    if (this.opts.style === 'win32' && this.opts.wslDistro !== undefined) {
      const win = normalizeWindowsPath(p);
      const drive = win && /^([A-Za-z]):\\?(.*)$/.exec(win);
      if (drive) return path.posix.join(WSL_DRIVES, drive[1]!.toLowerCase(), ...drive[2]!.split('\\').filter(Boolean));
      const unc = win && /^\\\\(?:wsl\$|wsl\.localhost)\\([^\\]+)(.*)$/i.exec(win);
      if (unc && unc[1]!.toLowerCase() === this.opts.wslDistro.toLowerCase()) return path.posix.join('/', ...unc[2]!.split('\\').filter(Boolean));
    }
    return undefined;
  }

  /**
   * The guest's path of a path the daemon sends. Values that are no absolute path (a mount's `tmpfs`
   * source, an empty string) are given back as they are.
   */
  toGuest(p: string, opts: { strict?: boolean } = {}): string {
    const absolute = p.startsWith('/') || this.foreign(p);
    if (!absolute) return p;
    const guest = this.mapped(p);
    if (guest !== undefined) return guest;
    // On Windows a POSIX path is the guest's own (as Docker Desktop takes `-v /var/run/x:/x`).
    if (this.foreign(p) || (opts.strict && this.opts.style === 'posix')) throw this.notShared(p);
    return p;
  }

  /** The folders of the daemon's machine the guest sees, as the error names them. */
  sharedFolders(): string[] {
    const out = this.mappings.map((m) => m.host).sort();
    if (this.opts.style === 'win32' && this.opts.wslDistro !== undefined) out.push('every drive (C:\\ is /mnt/c in the guest)', `\\\\wsl$\\${this.opts.wslDistro}`);
    return out;
  }

  private notShared(p: string): NotShared {
    const shared = this.sharedFolders();
    return new NotShared(
      `mounts denied: the path ${p} is not shared with the VM the containers run in; ` +
        (shared.length ? `the shared folders are ${shared.join(', ')}` : 'no folder is shared'),
    );
  }
}

/**
 * The translation a daemon with `--agent` uses: its `--agent-path` mappings and `--agent-wsl` distribution;
 * on Windows always, so that no Windows path reaches the agent. Undefined where the agent names folders as
 * the daemon does (a root agent of the same machine, a VM sharing folders at their own paths).
 */
export function guestPathsFor(opts: { mappings?: PathMapping[]; wslDistro?: string }, style: PathStyle = HOST_PATH_STYLE): GuestPaths | undefined {
  if (!opts.mappings?.length && opts.wslDistro === undefined && style !== 'win32') return undefined;
  return new GuestPaths({ style, mappings: opts.mappings ?? [], wslDistro: opts.wslDistro });
}

/**
 * `value` with what `steps` select given through `fn`: `*` steps over an array's items, a number or name
 * into an array or object. Copies on the way down; the caller's objects are never edited.
 */
export function mapAt(value: unknown, steps: string[], fn: (v: string) => string): unknown {
  if (steps.length === 0) return typeof value === 'string' ? fn(value) : value;
  if (value === null || typeof value !== 'object') return value;
  const [step, ...rest] = steps as [string, ...string[]];
  if (step === '*') return Array.isArray(value) ? value.map((item) => mapAt(item, rest, fn)) : value;
  if (!(step in value)) return value;
  const copy = (Array.isArray(value) ? [...value] : { ...value }) as Record<string, unknown>;
  copy[step] = mapAt(copy[step], rest, fn);
  return copy;
}

/** The arguments of a call with the paths its spec names (`1.mounts.*.source`) in the guest's terms. */
export function argsToGuest(args: unknown[], selectors: { paths?: string[]; sources?: string[] }, paths: GuestPaths): unknown[] {
  let out: unknown = args;
  for (const sel of selectors.paths ?? []) out = mapAt(out, sel.split('.'), (p) => paths.toGuest(p));
  for (const sel of selectors.sources ?? []) out = mapAt(out, sel.split('.'), (p) => paths.toGuest(p, { strict: true }));
  return out as unknown[];
}
