/**
 * Two steps of crun's command line done without spawning crun, on the container start path:
 *
 * - start: `crun create` leaves the container's init blocked on `<state root>/<id>/exec.fifo` (the init holds
 *   the reading end). `crun start` checks the state, opens the FIFO for writing, unlinks it (which is how crun
 *   tells "created" from "running" afterwards) and writes one NUL byte, which lets the init exec the process.
 *   startCreated does the same. It does not run OCI poststart hooks: callers use `crun start` for specs with
 *   hooks.
 * - delete of a container whose init is gone (conmon reported its exit): `crun delete` removes the container's
 *   cgroup in every hierarchy and its state folder. removeStopped does the same; it refuses (and the caller
 *   falls back to `crun delete --force`) whenever something is unusual: a systemd cgroup, a cgroup that still
 *   holds processes (rmdir fails with EBUSY), an unreadable state.
 *
 * Only for crun: runc's FIFO works the other way round and its state is another format.
 */
import { closeSync, constants, openSync, promises as fs, readFileSync, unlinkSync, writeSync } from 'node:fs';
import path from 'node:path';
import { removeTree } from '../sys.js';
import { parseMountinfo } from '../mountinfo.js';

function errno(err: unknown): string | undefined {
  return (err as NodeJS.ErrnoException | undefined)?.code;
}

export class DirectUnavailable extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'DirectUnavailable';
  }
}

/** What `crun create` wrote to `<state root>/<id>/status` that matters here. */
export interface CrunStatus {
  pid: number;
  cgroupPath: string;
  systemdCgroup: boolean;
}

export function parseCrunStatus(text: string): CrunStatus {
  const raw = JSON.parse(text) as { pid?: unknown; 'cgroup-path'?: unknown; 'systemd-cgroup'?: unknown };
  return {
    pid: typeof raw.pid === 'number' ? raw.pid : 0,
    cgroupPath: typeof raw['cgroup-path'] === 'string' ? raw['cgroup-path'] : '',
    systemdCgroup: raw['systemd-cgroup'] === true,
  };
}

/** Mount points of the cgroup hierarchies (v1 and v2) in a mountinfo text. */
export function cgroupMounts(mountinfo: string): string[] {
  return parseMountinfo(mountinfo)
    .filter((m) => m.fsType === 'cgroup' || m.fsType === 'cgroup2')
    .map((m) => m.mountPoint);
}

let mounts: string[] | undefined;

/** The host's cgroup hierarchies, read once (they do not change while the daemon runs). */
function hostCgroupMounts(): string[] {
  mounts ??= cgroupMounts(readFileSync('/proc/self/mountinfo', 'utf8'));
  return mounts;
}

/**
 * Lets a created container's init run its process (crun's `start` without the spawn). Throws
 * DirectUnavailable when the container is not waiting (no FIFO, or nobody reads it: its init died).
 */
export function startCreated(stateRoot: string, id: string): void {
  const fifo = path.join(stateRoot, id, 'exec.fifo');
  let fd: number;
  try {
    // Non-blocking: with no reader (an init that died) the open fails with ENXIO instead of hanging (libuv adds
    // O_CLOEXEC itself).
    fd = openSync(fifo, constants.O_WRONLY | constants.O_NONBLOCK);
  } catch (err) {
    throw new DirectUnavailable(`cannot open ${fifo}: ${errno(err) ?? (err as Error).message}`);
  }
  try {
    unlinkSync(fifo);
    writeSync(fd, Buffer.alloc(1));
  } finally {
    closeSync(fd);
  }
}

/**
 * Removes the cgroups and the state of a crun container whose init has exited. Resolves false when the
 * runtime does not know the container (nothing to do); rejects with DirectUnavailable when `crun delete` must
 * do it. The hierarchies are done in parallel: a cgroup's removal waits for the kernel to take it offline.
 */
export async function removeStopped(stateRoot: string, id: string): Promise<boolean> {
  const dir = path.join(stateRoot, id);
  let status: CrunStatus;
  try {
    status = parseCrunStatus(await fs.readFile(path.join(dir, 'status'), 'utf8'));
  } catch (err) {
    if (errno(err) === 'ENOENT') {
      // No status: either no container at all, or a create that stopped half-way (crun delete handles that).
      try {
        await fs.rmdir(dir);
      } catch (e) {
        if (errno(e) === 'ENOENT') return false;
        throw new DirectUnavailable(`the state folder of ${id} holds no status`);
      }
      return false;
    }
    throw new DirectUnavailable(`unreadable state of ${id}: ${(err as Error).message}`);
  }
  if (status.systemdCgroup) throw new DirectUnavailable(`container ${id} is in a systemd cgroup`);
  const rel = status.cgroupPath.replace(/^\/+/, '');
  if (rel !== '') {
    if (rel.split('/').includes('..')) throw new DirectUnavailable(`unexpected cgroup path ${status.cgroupPath}`);
    const results = await Promise.allSettled(hostCgroupMounts().map((mount) => fs.rmdir(path.join(mount, rel))));
    for (const [i, r] of results.entries()) {
      if (r.status === 'fulfilled' || errno(r.reason) === 'ENOENT') continue;
      // EBUSY: processes are still in it (leftovers of a container sharing the host's pid namespace).
      throw new DirectUnavailable(`cannot remove cgroup ${path.join(hostCgroupMounts()[i]!, rel)}: ${errno(r.reason) ?? (r.reason as Error).message}`);
    }
  }
  await removeTree(dir);
  return true;
}
