/**
 * Host paths as the guest sees them. A bind mount's source names a folder on the user's machine; the
 * container runs in the guest, where that folder is a share mounted elsewhere (QEMU and vfkit: the share's
 * guestPath; WSL2: Windows drives under /mnt/<letter>). A source outside every share has no guest path. Both
 * answer through the remote Host's one translation (host/remote/paths.ts GuestPaths).
 */
import { NotShared } from '../errors.js';
import { GuestPaths } from '../host/remote/paths.js';
import type { PathStyle } from '../util/hostpath.js';
import type { Share, VmConfig } from './driver.js';

function orUndefined(translate: () => string): string | undefined {
  try {
    return translate();
  } catch (err) {
    if (err instanceof NotShared) return undefined;
    throw err;
  }
}

/** The guest path of hostPath through the share that holds it (the longest match), or undefined. */
export function toGuestPath(shares: readonly Share[], hostPath: string, style: PathStyle = 'posix'): string | undefined {
  return orUndefined(() => new GuestPaths({ style, mappings: [...shares] }).toGuest(hostPath, { strict: true }));
}

/**
 * A Windows path in WSL2's view: `C:\Users\me\src` -> `/mnt/c/Users/me/src`; `\\wsl$\<distro>\path` and
 * `\\wsl.localhost\<distro>\path` -> `/path` when the distribution is the guest's own. Other UNC paths have
 * no WSL path.
 */
export function windowsToWslPath(winPath: string, distro: string): string | undefined {
  return orUndefined(() => new GuestPaths({ style: 'win32', mappings: [], wslDistro: distro }).toGuest(winPath, { strict: true }));
}

/**
 * The daemon's flags that tell it the guest's paths of its folders (host/remote/paths.ts translates with
 * them): each share's, the daemon's data root's when the guest keeps its own elsewhere, and under WSL2 the
 * distribution (whose /mnt/<letter> are the Windows drives).
 */
export function agentPathFlags(kind: 'qemu' | 'vfkit' | 'wsl2', config: Pick<VmConfig, 'name' | 'shares' | 'guestDataRoot'>, daemonDataRoot?: string): string[] {
  const flags: string[] = [];
  if (daemonDataRoot && config.guestDataRoot) flags.push('--agent-path', `${daemonDataRoot}=${config.guestDataRoot}`);
  for (const s of config.shares) flags.push('--agent-path', `${s.hostPath}=${s.guestPath}`);
  if (kind === 'wsl2') flags.push('--agent-wsl', config.name);
  return flags;
}
