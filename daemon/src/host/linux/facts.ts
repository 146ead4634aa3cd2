/**
 * The facts of this machine that the engine's checks need at once and that do not change while the daemon
 * runs: read once, when the Host is built. The runtime runs as a child of the daemon, so the daemon's own
 * limits and capabilities are those containers can be given.
 */
import { readFileSync } from 'node:fs';

/** The rows of /proc/<pid>/limits, by RLIMIT name. */
const LIMITS_ROWS: Record<string, string> = {
  RLIMIT_CPU: 'Max cpu time', RLIMIT_FSIZE: 'Max file size', RLIMIT_DATA: 'Max data size', RLIMIT_STACK: 'Max stack size',
  RLIMIT_CORE: 'Max core file size', RLIMIT_RSS: 'Max resident set', RLIMIT_NPROC: 'Max processes',
  RLIMIT_NOFILE: 'Max open files', RLIMIT_MEMLOCK: 'Max locked memory', RLIMIT_AS: 'Max address space',
  RLIMIT_LOCKS: 'Max file locks', RLIMIT_SIGPENDING: 'Max pending signals', RLIMIT_MSGQUEUE: 'Max msgqueue size',
  RLIMIT_NICE: 'Max nice priority', RLIMIT_RTPRIO: 'Max realtime priority', RLIMIT_RTTIME: 'Max realtime timeout',
};

/** Parses /proc/<pid>/limits into soft and hard limits by RLIMIT name ('unlimited' as MAX_SAFE_INTEGER). */
export function parseLimits(text: string): Record<string, { soft: number; hard: number }> {
  const limits: Record<string, { soft: number; hard: number }> = {};
  const lines = text.split('\n');
  for (const [rlimit, row] of Object.entries(LIMITS_ROWS)) {
    const line = lines.find((l) => l.startsWith(row));
    if (!line) continue;
    const [soft, hard] = line.slice(row.length).trim().split(/\s+/);
    const parse = (v: string) => (v === 'unlimited' ? Number.MAX_SAFE_INTEGER : Number(v));
    limits[rlimit] = { soft: parse(soft), hard: parse(hard) };
  }
  return limits;
}

function readText(file: string): string | undefined {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return undefined;
  }
}

/** The daemon's resource limits: nothing can raise them while it runs (no CAP_SYS_RESOURCE) and it does not lower them. */
export function readRlimits(procRoot = '/proc'): Record<string, { soft: number; hard: number }> {
  return parseLimits(readText(`${procRoot}/self/limits`) ?? '');
}

/** The daemon's capability bounding set (hex, as /proc shows it); undefined where it cannot be read. */
export function readCapabilityBoundingSet(procRoot = '/proc'): string | undefined {
  return /CapBnd:\s+([0-9a-f]+)/.exec(readText(`${procRoot}/self/status`) ?? '')?.[1];
}

/** /etc/machine-id, '' when the machine has none. */
export function readMachineId(etcRoot = '/etc'): string {
  return (readText(`${etcRoot}/machine-id`) ?? '').trim();
}
