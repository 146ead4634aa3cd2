/** Processes read from /proc: memory figures, and the leftovers of a run stopped. */
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

/** User and system CPU time a process has used, in seconds; 0 when the process is gone. */
export function cpuSeconds(pid: number): number {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return 0;
  }
  // The fields after the command's closing parenthesis: utime and stime are the 12th and 13th.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS;
}

/** Clock ticks per second of /proc's CPU times (USER_HZ, 100 on Linux). */
const CLOCK_TICKS = 100;

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

/** Stops every process left that names the engine's root (monitors), with the containers they hold. */
export async function killLeftovers(root: string): Promise<number[]> {
  const left = findProcessesMentioning(root).filter((pid) => pid !== process.pid);
  for (const pid of left) {
    // The monitor's children are the containers' first processes: stop them before the monitor.
    for (const child of childrenOf(pid)) signal(child, 'SIGKILL');
    signal(pid, 'SIGKILL');
  }
  for (const pid of left) for (let i = 0; i < 50 && (await alive(pid)); i++) await new Promise((r) => setTimeout(r, 20));
  return left;
}

function childrenOf(pid: number): number[] {
  try {
    return readdirSync(`/proc/${pid}/task`).flatMap((task) => {
      try {
        return readFileSync(`/proc/${pid}/task/${task}/children`, 'utf8').split(/\s+/).filter(Boolean).map(Number);
      } catch {
        return [];
      }
    });
  } catch {
    return [];
  }
}

function signal(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(pid, sig);
  } catch {
    // already gone
  }
}

/**
 * A benchmark's cleanup, made to run once however often it is asked for, and on SIGINT or SIGTERM (then the
 * process exits with 130) until `release()` at the benchmark's end.
 */
export function cleanupOnce(work: () => Promise<void>, progress: (line: string) => void): { cleanup: () => Promise<void>; release: () => void } {
  let cleaned: Promise<void> | undefined;
  const cleanup = () => (cleaned ??= work());
  const onSignal = (sig: NodeJS.Signals) => {
    progress(`${sig}: cleaning up`);
    void cleanup().finally(() => process.exit(130));
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  return {
    cleanup,
    release: () => {
      process.removeListener('SIGINT', onSignal);
      process.removeListener('SIGTERM', onSignal);
    },
  };
}

/** killLeftovers, saying what it stopped. */
export async function stopLeftovers(root: string, progress: (line: string) => void): Promise<void> {
  const left = await killLeftovers(root);
  if (left.length) progress(`stopped ${left.length} processes left under ${root}: ${left.join(' ')}`);
}
