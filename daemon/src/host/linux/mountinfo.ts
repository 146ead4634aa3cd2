/** The lines of /proc/<pid>/mountinfo (proc(5)), with the octal escapes of paths (`\040` for a space) decoded. */

export interface MountEntry {
  /** major:minor of the file system's device. */
  device: string;
  /** The folder of the file system mounted here. */
  root: string;
  mountPoint: string;
  fsType: string;
  source: string;
  superOptions: string[];
  /** The optional fields: `shared:N` (a peer group), `master:N` (a slave of one), `unbindable`... */
  optional: string[];
}

function unescape(field: string): string {
  return field.replace(/\\([0-7]{3})/g, (_m, oct: string) => String.fromCharCode(parseInt(oct, 8)));
}

export function parseMountinfo(text: string): MountEntry[] {
  const out: MountEntry[] = [];
  for (const line of text.split('\n')) {
    const sep = line.indexOf(' - ');
    if (sep < 0) continue;
    const left = line.slice(0, sep).split(' ');
    const [fsType, source, superOptions] = line.slice(sep + 3).split(' ');
    if (left.length < 5 || !fsType) continue;
    out.push({
      device: left[2]!,
      root: unescape(left[3]!),
      mountPoint: unescape(left[4]!),
      fsType,
      source: source ?? '',
      superOptions: (superOptions ?? '').split(','),
      optional: left.slice(6),
    });
  }
  return out;
}

/**
 * The mount a path lies on (symlinks resolved by the caller): the entry with the longest mount point that is
 * the path or one of its parents, the later entry when several sit at the same place (the one on top).
 */
export function mountOf(entries: MountEntry[], resolvedPath: string): MountEntry | undefined {
  let best: MountEntry | undefined;
  for (const m of entries) {
    const inside = m.mountPoint === '/' || resolvedPath === m.mountPoint || resolvedPath.startsWith(`${m.mountPoint}/`);
    if (inside && (!best || m.mountPoint.length >= best.mountPoint.length)) best = m;
  }
  return best;
}
