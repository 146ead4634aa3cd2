/** Memory figures of processes read from /proc. */
import { promises as fs, readdirSync, readFileSync } from 'node:fs';

/** VmRSS of a process in bytes; undefined when the process is gone. */
export function rssBytes(pid: number): number | undefined {
  let status: string;
  try {
    status = readFileSync(`/proc/${pid}/status`, 'utf8');
  } catch {
    return undefined;
  }
  const m = /^VmRSS:\s+(\d+)\s+kB$/m.exec(status);
  return m ? Number(m[1]) * 1024 : 0;
}

/** The argument vector of a process; undefined when the process is gone or is a kernel thread. */
export function cmdline(pid: number): string[] | undefined {
  try {
    const raw = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
    if (raw === '') return undefined;
    return raw.replace(/\0$/, '').split('\0');
  } catch {
    return undefined;
  }
}

/** Waits until the process has been quiet for a while, then reads its RSS (the median of a few readings). */
export async function settledRss(pid: number, quietMs = 1000, readings = 5): Promise<number> {
  await new Promise((r) => setTimeout(r, quietMs));
  const values: number[] = [];
  for (let i = 0; i < readings; i++) {
    const v = rssBytes(pid);
    if (v === undefined) throw new Error(`process ${pid} is gone`);
    values.push(v);
    await new Promise((r) => setTimeout(r, 100));
  }
  values.sort((a, b) => a - b);
  return values[Math.floor(values.length / 2)]!;
}

/** Whether a process still exists (and is not a zombie). */
export async function alive(pid: number): Promise<boolean> {
  try {
    const stat = await fs.readFile(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z';
  } catch {
    return false;
  }
}

export const MB = 1024 * 1024;

/** PIDs of all processes whose arguments mention `needle` (a path, usually). */
export function findProcessesMentioning(needle: string): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const argv = cmdline(Number(entry));
    if (argv && argv.some((a) => a.includes(needle))) pids.push(Number(entry));
  }
  return pids.sort((a, b) => a - b);
}
