/**
 * Host paths as the guest sees them. A bind mount's source names a folder on the user's machine; the
 * container runs in the guest, where that folder is a share mounted elsewhere (QEMU and vfkit: the share's
 * guestPath; WSL2: Windows drives under /mnt/<letter>). A source outside every share has no guest path.
 */
import path from 'node:path';
import type { Share, VmConfig } from './driver.js';

/** The guest path of hostPath through the share that holds it (the longest match), or undefined. */
export function toGuestPath(shares: readonly Share[], hostPath: string): string | undefined {
  const p = path.posix.normalize(hostPath);
  let best: Share | undefined;
  for (const s of shares) {
    const root = path.posix.normalize(s.hostPath).replace(/\/+$/, '') || '/';
    if (p === root || p.startsWith(root === '/' ? '/' : root + '/')) {
      if (!best || root.length > best.hostPath.length) best = { ...s, hostPath: root };
    }
  }
  if (!best) return undefined;
  const rest = p.slice(best.hostPath === '/' ? 1 : best.hostPath.length + 1);
  return rest ? path.posix.join(best.guestPath, rest) : best.guestPath;
}

/**
 * A Windows path in WSL2's view: `C:\Users\me\src` -> `/mnt/c/Users/me/src`; `\\wsl$\<distro>\path` and
 * `\\wsl.localhost\<distro>\path` -> `/path` when the distribution is the guest's own. Other UNC paths have
 * no WSL path.
 */
export function windowsToWslPath(winPath: string, distro: string): string | undefined {
  const drive = /^([A-Za-z]):(?:[\\/](.*))?$/.exec(winPath);
  if (drive) {
    const rest = (drive[2] ?? '').split(/[\\/]+/).filter(Boolean);
    return path.posix.join('/mnt', drive[1]!.toLowerCase(), ...rest);
  }
  const unc = /^[\\/]{2}(wsl\$|wsl\.localhost)[\\/]([^\\/]+)(?:[\\/](.*))?$/i.exec(winPath);
  if (unc && unc[2]!.toLowerCase() === distro.toLowerCase()) {
    return path.posix.join('/', ...(unc[3] ?? '').split(/[\\/]+/).filter(Boolean));
  }
  return undefined;
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
