/**
 * HostConfig.Init: the engine's init binary runs as the container's PID 1 with the command as its child,
 * so that signals reach the command and orphans are reaped. As Docker does, the host's binary is
 * bind-mounted read-only at /sbin/docker-init and the process becomes `docker-init -- <command>`; the
 * container's Path and Args stay the user's command.
 */
import { EngineError } from '../../errors.js';

/** Where the init binary appears inside the container (Docker's place). */
export const CONTAINER_INIT_PATH = '/sbin/docker-init';

/** The host's init binary, as the daemon found it at start. */
export interface InitBinarySetting {
  path?: string;
  /** Why there is none; the message of the error a start with Init answers. */
  problem?: string;
}

let initBinary: InitBinarySetting = { problem: 'no init binary is configured in this engine' };

/** Sets the init binary the daemon found at start (once, at composition). */
export function setInitBinary(setting: InitBinarySetting): void {
  initBinary = setting;
}

/**
 * The process args and the extra mount for a container's command under the init binary. Fails (500, as
 * dockerd answers a start whose init binary is missing) when the daemon has none.
 */
export function withInit(args: string[]): { args: string[]; mount: Record<string, unknown> } {
  if (!initBinary.path) {
    throw new EngineError(`cannot run the container with an init process (HostConfig.Init): ${initBinary.problem ?? 'no init binary'}`);
  }
  return {
    args: [CONTAINER_INIT_PATH, '--', ...args],
    mount: { destination: CONTAINER_INIT_PATH, type: 'bind', source: initBinary.path, options: ['bind', 'ro', 'rprivate'] },
  };
}
