/** The pids conmon writes for a container, and whether a container's conmon still runs. */
import { promises as fs, readFileSync } from 'node:fs';
import path from 'node:path';

function errno(err: unknown): string | undefined {
  return (err as NodeJS.ErrnoException | undefined)?.code;
}

/** A pid file's content as a pid, or undefined. */
export function parsePid(text: string): number | undefined {
  const pid = Number(text.trim());
  return Number.isInteger(pid) && pid > 0 ? pid : undefined;
}

export async function readPid(file: string): Promise<number | undefined> {
  try {
    return parsePid(await fs.readFile(file, 'utf8'));
  } catch (err) {
    if (errno(err) === 'ENOENT') return undefined;
    throw err;
  }
}

export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return errno(err) === 'EPERM';
  }
}

/**
 * Whether the conmon of container `id` (its files in `conmonFiles`) still runs. Read synchronously: a few bytes
 * of a local file and of procfs, on the path of every start.
 */
export async function monitorAlive(conmonFiles: string, id: string): Promise<boolean> {
  let pid: number | undefined;
  try {
    pid = parsePid(readFileSync(path.join(conmonFiles, 'conmon.pid'), 'utf8'));
  } catch {
    return false;
  }
  if (!pid || !alive(pid)) return false;
  // The pid may have been reused since (after a reboot or a crash): it must be conmon, for this container.
  let cmdline = '';
  try {
    cmdline = readFileSync(`/proc/${pid}/cmdline`, 'latin1');
  } catch {
    return false;
  }
  return cmdline.includes(`\0-c\0${id}\0`);
}
