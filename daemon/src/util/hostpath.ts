/**
 * Paths of the daemon's own machine, as users and the daemon spell them. Elsewhere than Windows a folder is
 * a POSIX path. On Windows it is a drive path (`C:\src`, `C:/src`), a UNC path (`\\server\share\x`), or a
 * drive path as MSYS shells (Git Bash) write it to keep it from their own conversion (`/c/src`, `//c/src`);
 * a POSIX path there (`/var/run/x`) names a folder of the guest, as Docker Desktop takes it.
 */
import path from 'node:path';

export type PathStyle = 'posix' | 'win32';

/** This machine's spelling of paths. */
export const HOST_PATH_STYLE: PathStyle = process.platform === 'win32' ? 'win32' : 'posix';

const DRIVE = /^([A-Za-z]):(?:[\\/]|$)/;
const MSYS_DRIVE = /^\/\/?([A-Za-z])(?:\/|$)/;
const UNC = /^[\\/]{2}[^\\/]+[\\/][^\\/]+/;

/**
 * Whether `p` is a path of Windows that only the daemon's side knows (a drive or UNC path, in any of the
 * spellings above): what must never reach the guest untranslated.
 */
export function isWindowsHostPath(p: string): boolean {
  return DRIVE.test(p) || MSYS_DRIVE.test(p) || UNC.test(p);
}

/** Whether `p` is an absolute path in `style` (a bind mount's source, a bind volume's device). */
export function isAbsoluteHostPath(p: string, style: PathStyle = HOST_PATH_STYLE): boolean {
  if (style === 'posix') return p.startsWith('/');
  return p.startsWith('/') || isWindowsHostPath(p);
}

/**
 * One spelling of a Windows path: `C:\src\app` (the drive letter upper-case, backslashes, `.` and `..`
 * resolved, no trailing separator but the drive root's), `\\server\share\x`; undefined for a path that is
 * no Windows drive or UNC path.
 */
export function normalizeWindowsPath(p: string): string | undefined {
  const msys = MSYS_DRIVE.exec(p);
  // `//c/src` is MSYS's drive c, not the UNC share `src` of the machine `c`.
  if (msys && !DRIVE.test(p)) p = `${msys[1]}:\\${p.slice(msys[0].length)}`;
  if (DRIVE.test(p)) {
    const n = path.win32.normalize(p.length === 2 ? `${p}\\` : p);
    const out = n[0]!.toUpperCase() + n.slice(1);
    return out.length > 3 ? out.replace(/\\+$/, '') : out;
  }
  if (UNC.test(p)) return path.win32.normalize(p).replace(/\\+$/, '');
  return undefined;
}

/** A host path in one spelling: Windows paths as normalizeWindowsPath, POSIX ones normalized. */
export function normalizeHostPath(p: string, style: PathStyle = HOST_PATH_STYLE): string {
  if (style === 'win32') {
    const win = normalizeWindowsPath(p);
    if (win !== undefined) return win;
  }
  return path.posix.normalize(p).replace(/(.)\/+$/, '$1');
}

/**
 * The fields of a Binds entry (`src:dest[:options]`): a Windows source keeps its drive's colon
 * (`C:\src:/src:ro` is `C:\src`, `/src`, `ro`).
 */
export function splitBind(bind: string, style: PathStyle = HOST_PATH_STYLE): string[] {
  if (style === 'win32') {
    const drive = /^[A-Za-z]:(?=[\\/])/.exec(bind);
    if (drive) {
      const rest = bind.slice(2).split(':');
      return [drive[0] + rest[0], ...rest.slice(1)];
    }
  }
  return bind.split(':');
}

export interface PathMapping {
  /** A folder of the daemon's machine, in its spelling. */
  hostPath: string;
  /** The same folder's path in the guest (POSIX, absolute). */
  guestPath: string;
}

/**
 * The daemon's `--agent-path HOST=GUEST`: split at the last `=` before the guest's absolute path (a
 * Windows folder may hold `=` in its name, a guest path starts with `/`).
 */
export function parsePathMapping(spec: string): PathMapping {
  const at = spec.lastIndexOf('=/');
  if (at <= 0) throw new RangeError(`--agent-path ${spec}: expected HOST=GUEST with an absolute guest path`);
  return { hostPath: spec.slice(0, at), guestPath: spec.slice(at + 1) };
}
