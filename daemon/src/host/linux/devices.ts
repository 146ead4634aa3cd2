/**
 * The machine's devices as containers get them: device nodes (one, or the nodes of a folder, or every node
 * of /dev for a privileged container), block devices' major:minor for the block IO settings, and which
 * block IO controls the cgroups offer. Errors carry Docker's messages.
 */
import { existsSync, promises as fs, readFileSync, type BigIntStats } from 'node:fs';
import path from 'node:path';
import { devMajor, devMinor } from '../../util/devnum.js';
import type { BlkioSupport, DeviceNode } from '../host.js';

/** Which block IO files the blkio (v1) or io (v2) controller of this machine has. */
export function readBlkioSupport(cgroupRoot = '/sys/fs/cgroup'): BlkioSupport {
  let support: BlkioSupport;
  const has = (...parts: string[]) => existsSync(path.join(cgroupRoot, ...parts));
  if (has('cgroup.controllers')) {
    let io = false;
    try {
      io = readFileSync(path.join(cgroupRoot, 'cgroup.controllers'), 'utf8').split(/\s+/).includes('io');
    } catch {
      // no controllers readable: none
    }
    const weight = io && (has('io.weight') || has('io.bfq.weight') || has('system.slice', 'io.weight') || has('system.slice', 'io.bfq.weight'));
    support = { weight, weightDevice: weight, throttle: io };
  } else {
    support = {
      weight: has('blkio', 'blkio.weight') || has('blkio', 'blkio.bfq.weight'),
      weightDevice: has('blkio', 'blkio.weight_device') || has('blkio', 'blkio.bfq.weight_device'),
      throttle: has('blkio', 'blkio.throttle.read_bps_device'),
    };
  }
  return support;
}

function majorMinor(rdev: bigint): { major: number; minor: number } {
  return { major: devMajor(rdev), minor: devMinor(rdev) };
}

const ERRNO_TEXT: Record<string, string> = {
  ENOENT: 'no such file or directory',
  EACCES: 'permission denied',
  ENOTDIR: 'not a directory',
  ELOOP: 'too many levels of symbolic links',
  ENAMETOOLONG: 'file name too long',
};

function errnoText(err: unknown): string {
  const code = (err as NodeJS.ErrnoException).code;
  return (code && ERRNO_TEXT[code]) || (err as Error).message;
}

class NotADevice extends Error {}

/** The device node at `p` (not following a symbolic link), or NotADevice. */
async function deviceAt(p: string, inContainer: string): Promise<DeviceNode> {
  const st: BigIntStats = await fs.lstat(p, { bigint: true });
  const type = st.isCharacterDevice() ? 'c' : st.isBlockDevice() ? 'b' : undefined;
  if (!type) throw new NotADevice('not a device node');
  return { path: inContainer, type, ...majorMinor(st.rdev), fileMode: Number(st.mode & 0o7777n), uid: Number(st.uid), gid: Number(st.gid) };
}

/** Every device node below `dir` (symbolic links and what cannot be read are left out), as Docker walks it. */
async function devicesBelow(dir: string, skip: (rel: string) => boolean = () => false, rel = ''): Promise<Array<{ rel: string; device: DeviceNode }>> {
  const out: Array<{ rel: string; device: DeviceNode }> = [];
  let entries: import('node:fs').Dirent[];
  try {
    entries = await fs.readdir(path.join(dir, rel), { withFileTypes: true });
  } catch {
    return out;
  }
  entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  for (const e of entries) {
    const r = rel ? `${rel}/${e.name}` : e.name;
    if (skip(r)) continue;
    if (e.isDirectory()) out.push(...(await devicesBelow(dir, skip, r)));
    else if (e.isCharacterDevice() || e.isBlockDevice()) {
      const device = await deviceAt(path.join(dir, r), '').catch(() => undefined);
      if (device) out.push({ rel: r, device });
    }
  }
  return out;
}

/** One Devices entry: its node, or the nodes of the folder it names. Errors carry Docker's message. */
export async function devicesFromPath(pathOnHost: string, pathInContainer: string): Promise<DeviceNode[]> {
  let resolved = pathOnHost;
  const fail = (reason: string) => new Error(`error gathering device information while adding custom device "${pathOnHost}": ${reason}`);
  try {
    if ((await fs.lstat(resolved)).isSymbolicLink()) resolved = await fs.realpath(resolved).catch(() => resolved);
    return [await deviceAt(resolved, pathInContainer)];
  } catch (err) {
    if (!(err instanceof NotADevice)) throw fail(errnoText(err));
  }
  const found = (await fs.stat(resolved)).isDirectory() ? await devicesBelow(resolved) : [];
  if (found.length === 0) throw fail('not a device node');
  return found.map(({ rel, device }) => ({ ...device, path: path.posix.join(pathInContainer, rel) }));
}

/** The major:minor of a block IO entry's device (following links, as Docker's stat does). */
export async function blockDevice(field: string, p: string): Promise<{ major: number; minor: number }> {
  let st: BigIntStats;
  try {
    st = await fs.stat(p, { bigint: true });
  } catch (err) {
    throw new Error(`${field}: stat ${p}: ${errnoText(err)}`);
  }
  if (!st.isBlockDevice()) throw new Error(`${field}: ${p} is not a block device`);
  return majorMinor(st.rdev);
}

/** Folders of /dev that a privileged container does not get from the host (its own are mounted there). */
const HOST_DEV_SKIP = new Set(['pts', 'shm', 'fd', 'mqueue', '.lxc', '.lxd-mounts', '.udev', 'console']);

/** Every device node of the machine's /dev (its own folders for a container's /dev left out), at the same paths. */
export async function allDevices(devRoot = '/dev'): Promise<DeviceNode[]> {
  return (await devicesBelow(devRoot, (r) => HOST_DEV_SKIP.has(r.split('/')[0]))).map(({ rel, device }) => ({ ...device, path: path.posix.join('/dev', rel) }));
}
