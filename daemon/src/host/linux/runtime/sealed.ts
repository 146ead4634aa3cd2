/** The sealed in-memory copy of the OCI runtime's binary that conmon runs (see sealedRuntimeCopy). */
import { readlinkSync } from 'node:fs';
import { errorMessage } from '../../../errors.js';
import { log } from '../../../util/log.js';
import { linuxSys } from '../sys.js';

/**
 * `/proc/<daemon pid>/fd/N` of a sealed in-memory copy of the OCI runtime's binary, or undefined without the
 * addon. crun and runc protect the host's binary from the container (CVE-2019-5736) by running from a copy of
 * themselves unless they already run from a sealed memfd; making that copy costs every create and exec a bind
 * mount and a lazy unmount, which waits for an RCU grace period (milliseconds, more under load). The copy made
 * once here gives the same protection: nothing can write to it. The daemon holds it open while it runs; conmon
 * runs the runtime only while the daemon waits for it.
 */
export function sealedRuntimeCopy(file: string): SealedRuntime | undefined {
  const sys = linuxSys();
  if (!sys?.sealedCopy) return undefined;
  try {
    const fd = sys.sealedCopy(file);
    return { fd, path: `/proc/${process.pid}/fd/${fd}` };
  } catch (err) {
    log.warn(`runtime: no sealed copy of ${file}, containers' creates run it from its path: ${errorMessage(err)}`);
    return undefined;
  }
}

export interface SealedRuntime {
  fd: number;
  /** `/proc/<daemon pid>/fd/<fd>`, what conmon executes. */
  path: string;
}

const SEALED_NAME = '/memfd:berth-runtime';

/** Whether the daemon's fd still is the sealed copy. */
export function sealedRuntimeOpen(sealed: SealedRuntime): boolean {
  try {
    return readlinkSync(`/proc/self/fd/${sealed.fd}`).startsWith(SEALED_NAME);
  } catch {
    return false;
  }
}
