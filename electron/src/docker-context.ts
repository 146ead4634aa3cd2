/**
 * The `berth` docker CLI context: the app's engine made reachable by external CLIs (`docker --context berth
 * ...`, `docker context use berth`) without touching the user's current context.
 *
 * The docker CLI keeps each context's metadata in `<docker config>/contexts/meta/<sha256 of the name, hex>/
 * meta.json` as `{"Name", "Metadata", "Endpoints": {"docker": {"Host", "SkipTLSVerify"}}}`; the docker config
 * folder is `$DOCKER_CONFIG`, or `~/.docker`. The current context lives in `config.json` (`currentContext`),
 * which this module never writes.
 */
import { createHash } from 'node:crypto';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

export const CONTEXT_NAME = 'berth';

/** The docker CLI's configuration folder. */
export function dockerConfigDir(env: NodeJS.ProcessEnv = process.env, home = os.homedir()): string {
  return env.DOCKER_CONFIG || path.join(home, '.docker');
}

/** Where the CLI looks for a context's metadata. */
export function contextMetaFile(configDir: string, name = CONTEXT_NAME): string {
  return path.join(configDir, 'contexts', 'meta', createHash('sha256').update(name).digest('hex'), 'meta.json');
}

export function contextMeta(host: string, name = CONTEXT_NAME): unknown {
  return {
    Name: name,
    Metadata: { Description: 'The engine of the Berth desktop app' },
    Endpoints: { docker: { Host: host, SkipTLSVerify: false } },
  };
}

/** The context's endpoint for an engine serving `socketPath`: a unix socket, or a Windows named pipe (`\\.\pipe\NAME`). */
export function contextHostFor(socketPath: string): string {
  const pipe = /^\\\\\.\\pipe\\(.+)$/.exec(socketPath);
  return pipe ? `npipe:////./pipe/${pipe[1]}` : `unix://${socketPath}`;
}

/**
 * Writes (or rewrites, when its endpoint changed) the context for an engine that serves `socketPath`.
 * Atomic: a CLI reading at the same time sees the old file or the new one. Returns the file written, or
 * undefined when it already said the same.
 */
export async function writeDockerContext(socketPath: string, configDir = dockerConfigDir(), name = CONTEXT_NAME): Promise<string | undefined> {
  const file = contextMetaFile(configDir, name);
  const content = JSON.stringify(contextMeta(contextHostFor(socketPath), name));
  const before = await fs.readFile(file, 'utf8').catch(() => undefined);
  if (before === content) return undefined;
  await fs.mkdir(path.dirname(file), { recursive: true, mode: 0o700 });
  const tmp = `${file}.${process.pid}.tmp`;
  await fs.writeFile(tmp, content, { mode: 0o644 });
  await fs.rename(tmp, file);
  return file;
}
