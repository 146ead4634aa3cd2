/**
 * The init binary that `HostConfig.Init` runs as a container's PID 1 (tini, as Docker's docker-init):
 * found once at daemon start, from `--init-path` or by name, and its version for /info and /version.
 */
import { execFile } from 'node:child_process';
import path from 'node:path';
import type { InitBinary } from '../host.js';
import { findExecutable, isExecutableFile } from './runtime/ociruntime.js';

/** The names looked up when no `--init-path` is given, in this order (tini-static runs in any image). */
export const DEFAULT_INIT_NAMES = ['docker-init', 'tini-static', 'tini'] as const;

/** Where Docker's packages put docker-init, searched before PATH as dockerd does. */
const LIBEXEC_DIRS = ['/usr/local/libexec/docker', '/usr/libexec/docker', '/usr/local/lib/docker', '/usr/lib/docker'];

/**
 * Finds the init binary: `requested` (a path, or a name looked up like a command) when given, else the
 * first of DEFAULT_INIT_NAMES found in Docker's libexec folders or on PATH.
 */
export function findInitBinary(
  requested: string | undefined,
  envPath = process.env.PATH ?? '',
  libexecDirs: readonly string[] = LIBEXEC_DIRS,
): InitBinary {
  const searchDirs = [...libexecDirs, ...envPath.split(':').filter(Boolean)];
  if (requested !== undefined && requested !== '') {
    if (requested.includes('/')) {
      const file = path.resolve(requested);
      if (isExecutableFile(file)) return { name: requested, path: file };
      return { name: requested, problem: `the init binary ${JSON.stringify(requested)} given by --init-path does not exist or is not an executable file` };
    }
    const found = findExecutable(requested, searchDirs);
    if (found) return { name: requested, path: found };
    return { name: requested, problem: `the init binary ${JSON.stringify(requested)} given by --init-path was not found on PATH` };
  }
  for (const name of DEFAULT_INIT_NAMES) {
    const found = findExecutable(name, searchDirs);
    if (found) return { name: 'docker-init', path: found };
  }
  return {
    name: 'docker-init',
    problem: `no init binary found (looked for ${DEFAULT_INIT_NAMES.join(', ')} on PATH): install tini or start the daemon with --init-path`,
  };
}

/**
 * Parses tini's `--version` output: "tini version 0.19.0 - git.de40ad0" (Docker's builds) or
 * "tini version 0.19.0" (Debian's).
 */
export function parseInitVersion(text: string): { version: string; commit: string } | undefined {
  const m = /tini version\s+(\S+)(?:\s+-\s+git\.([0-9a-f]+))?/i.exec(text);
  if (!m) return undefined;
  return { version: m[1]!, commit: m[2] ?? '' };
}

/** The version of the init binary, or undefined when it cannot be run or says something else. */
export function readInitVersion(binary: InitBinary): Promise<{ version: string; commit: string } | undefined> {
  const file = binary.path;
  if (!file) return Promise.resolve(undefined);
  return new Promise((resolve) => {
    execFile(file, ['--version'], { timeout: 5000 }, (err, stdout) => resolve(err ? undefined : parseInitVersion(stdout)));
  });
}
