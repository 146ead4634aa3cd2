/**
 * The network namespaces of overlay networks a daemon made (host/linux/overlay names them from a digest of
 * its exec root): tests and benchmarks remove them after the daemon, as they remove its containers.
 */
import { createHash } from 'node:crypto';
import { spawnSync } from 'node:child_process';
import { readdirSync } from 'node:fs';

export function overlayNamespaces(execRoot: string): string[] {
  const prefix = `bov${createHash('sha256').update(execRoot).digest('hex').slice(0, 6)}-`;
  try {
    return readdirSync('/run/netns').filter((n) => n.startsWith(prefix));
  } catch {
    return [];
  }
}

export function removeOverlayNamespaces(execRoot: string): void {
  for (const ns of overlayNamespaces(execRoot)) spawnSync('ip', ['netns', 'del', ns]);
}
