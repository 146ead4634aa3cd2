/**
 * The OCI runtime's command line (crun or runc share it): start, kill, delete, all with `--root` in the
 * daemon's exec root. Creation itself runs under conmon (see conmon.ts).
 */
import { execFile } from 'node:child_process';
import { accessSync, constants, readFileSync, statSync } from 'node:fs';
import path from 'node:path';

export type RuntimeName = 'crun' | 'runc';

export class RuntimeCommandError extends Error {
  constructor(
    message: string,
    readonly stderr: string,
  ) {
    super(message);
    this.name = 'RuntimeCommandError';
  }
}

export class OciRuntime {
  constructor(
    readonly name: RuntimeName,
    readonly path: string,
    readonly stateRoot: string,
  ) {}

  private run(args: string[], timeoutMs = 30_000): Promise<string> {
    return new Promise((resolve, reject) => {
      execFile(this.path, [`--root=${this.stateRoot}`, ...args], { timeout: timeoutMs, maxBuffer: 4 << 20 }, (err, stdout, stderr) => {
        if (err) {
          const text = (stderr || err.message).trim();
          reject(new RuntimeCommandError(`${this.name} ${args[0]}: ${text}`, text));
          return;
        }
        resolve(stdout);
      });
    });
  }

  async start(id: string): Promise<void> {
    await this.run(['start', id]);
  }

  async kill(id: string, signal: number, all = false): Promise<void> {
    await this.run(['kill', ...(all ? ['--all'] : []), id, String(signal)]);
  }

  /** Removes the runtime's state of the container; a container the runtime does not know is not an error. */
  async delete(id: string): Promise<void> {
    try {
      await this.run(['delete', '--force', id]);
    } catch (err) {
      if (err instanceof RuntimeCommandError && isUnknownContainer(err.stderr)) return;
      throw err;
    }
  }
}

export function isUnknownContainer(stderr: string): boolean {
  return /does not exist|not exist|no such file or directory|container .* not found/i.test(stderr);
}

/** Whether `file` is a regular file (or a link to one) that this process may execute. */
export function isExecutableFile(file: string): boolean {
  try {
    if (!statSync(file).isFile()) return false;
    accessSync(file, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/**
 * The first executable called `name` in `dirs`: by default PATH, then the usual sbin folders (runc lives in
 * /usr/sbin on Debian).
 */
export function findExecutable(
  name: string,
  dirs: readonly string[] = [...(process.env.PATH ?? '').split(':'), '/usr/local/sbin', '/usr/local/bin', '/usr/sbin', '/usr/bin', '/sbin', '/bin'],
): string | undefined {
  for (const dir of dirs) {
    if (!dir) continue;
    const candidate = path.join(dir, name);
    if (isExecutableFile(candidate)) return candidate;
  }
  return undefined;
}

/**
 * Why a runtime cannot run containers on this host, or undefined when it can. crun refuses the hybrid cgroup
 * layout (cgroup v1 controllers plus a cgroup2 mount at /sys/fs/cgroup/unified) as soon as any controller is
 * enabled on the cgroup2 side: it fails every create with "cgroups in hybrid mode not supported".
 */
export function runtimeUnusableReason(name: RuntimeName, cgroupRoot = '/sys/fs/cgroup'): string | undefined {
  if (name !== 'crun') return undefined;
  let controllers: string;
  try {
    controllers = readFileSync(path.join(cgroupRoot, 'unified', 'cgroup.controllers'), 'utf8').trim();
  } catch {
    return undefined;
  }
  if (!controllers) return undefined;
  return `crun does not support hybrid cgroups with controllers enabled on cgroup v2 (${cgroupRoot}/unified has: ${controllers})`;
}

export interface RuntimeChoice {
  name: RuntimeName;
  path: string;
  /** Set when the preferred runtime could not be used and another was chosen. */
  warning?: string;
}

/** Picks the preferred runtime when it is installed and usable here, else the other one (with a warning). */
export function selectRuntime(preferred: RuntimeName, cgroupRoot?: string): RuntimeChoice {
  const other: RuntimeName = preferred === 'crun' ? 'runc' : 'crun';
  const problem = (name: RuntimeName): string | undefined =>
    findExecutable(name) === undefined ? `${name} is not installed` : runtimeUnusableReason(name, cgroupRoot);
  const preferredProblem = problem(preferred);
  if (!preferredProblem) return { name: preferred, path: findExecutable(preferred)! };
  const otherProblem = problem(other);
  if (otherProblem) throw new Error(`no usable OCI runtime: ${preferredProblem}; ${otherProblem}`);
  return { name: other, path: findExecutable(other)!, warning: `${preferredProblem}: using ${other}` };
}
