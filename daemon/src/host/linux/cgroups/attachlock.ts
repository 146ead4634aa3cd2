/**
 * The kernel's lock for moving processes between cgroups, taken early. Every move (the OCI runtime writing the
 * container's init into `cgroup.procs`) takes one global lock for writing (cgroup_threadgroup_rwsem), and taking
 * it after a quiet moment waits for an RCU grace period first: 7 to 25 ms on these machines, in the middle of
 * every `create`, with nothing else to do meanwhile. Once taken, it is taken again at no cost until a grace
 * period after its last release (kernel/rcu/sync.c).
 *
 * So when a container start begins, the daemon moves its own main thread into the cgroup it is already in (a
 * move that changes nothing, on a thread of the pool): the grace period then runs beside the rest of the start
 * (the root filesystem, conmon's start, the runtime reading its spec) instead of after it. Where the lock does
 * not wait (cgroup hierarchies mounted with `favordynmods`), this costs a write of a few bytes.
 */
import { promises as fs, readFileSync } from 'node:fs';
import path from 'node:path';
import { parseCgroupMounts, parseProcCgroup, under } from './stats.js';

/**
 * The file through which the daemon's main thread is moved into the cgroup it is in, from /proc/self/mountinfo
 * and the thread's /proc cgroup file: `tasks` of its cgroup in a cgroup v1 hierarchy (the runtime moves
 * containers in those on a hybrid host), else `cgroup.procs` of its cgroup v2 group; undefined when neither is
 * mounted.
 */
export function ownCgroupMoveFile(mountinfo: string, procCgroup: string): string | undefined {
  const mounts = parseCgroupMounts(mountinfo);
  const paths = parseProcCgroup(procCgroup);
  for (const [controller, group] of paths) {
    const mount = controller === '' ? undefined : mounts.v1.get(controller);
    if (mount) return path.join(under(mount, group), 'tasks');
  }
  const group = paths.get('');
  return mounts.v2 && group !== undefined ? path.join(under(mounts.v2, group), 'cgroup.procs') : undefined;
}

/** ownCgroupMoveFile of this process's main thread; undefined when it cannot be read. */
function daemonMoveFile(): string | undefined {
  try {
    return ownCgroupMoveFile(readFileSync('/proc/self/mountinfo', 'utf8'), readFileSync(`/proc/${process.pid}/task/${process.pid}/cgroup`, 'utf8'));
  } catch {
    return undefined;
  }
}

export class AttachLockWarmer {
  private pending: Promise<void> | undefined;

  constructor(private readonly file: string | undefined = daemonMoveFile()) {}

  /** Resolves once no warm-up is under way (for tests). */
  async settled(): Promise<void> {
    await this.pending;
  }

  /** Takes the lock once, in the background; a warm-up already under way serves. */
  warm(): void {
    if (!this.file || this.pending) return;
    const file = this.file;
    this.pending = fs
      .writeFile(file, String(process.pid))
      .catch(() => undefined)
      .finally(() => {
        this.pending = undefined;
      });
  }
}
