/** Commands the benchmarks run beside the engine: their output kept whole, and busybox's timings read from it. */
import { spawn } from 'node:child_process';

/** Runs a command to its end with the environment added to the benchmark's own, keeping its output. */
export function exec(cmd: string, args: string[], env?: Record<string, string>): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c) => (stdout += c));
    child.stderr.on('data', (c) => (stderr += c));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

/** Seconds from busybox `time -p` output. */
export function realSeconds(text: string): number {
  const m = /^real\s+([\d.]+)/m.exec(text);
  if (!m) throw new Error(`no timing in: ${text}`);
  return Number(m[1]);
}

/** Seconds of CPU, user and system, from busybox `time -p` output. */
export function cpuSeconds(text: string): number {
  const user = /^user\s+([\d.]+)/m.exec(text);
  const sys = /^sys\s+([\d.]+)/m.exec(text);
  if (!user || !sys) throw new Error(`no CPU times in: ${text}`);
  return Number(user[1]) + Number(sys[1]);
}
