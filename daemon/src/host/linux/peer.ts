/**
 * Who is at the other end of a unix socket connection, as the kernel recorded it at connect() (SO_PEERCRED,
 * through the linuxsys addon): the daemon's listeners tell its administrator from other local users by it.
 */
import type { Socket } from 'node:net';
import { linuxSys } from './sys.js';

/** The uid of the process that connected the socket; undefined when it cannot be known (no addon, not a unix socket). */
export function peerUid(socket: Socket): number | undefined {
  const get = linuxSys()?.peerCredentials;
  const fd = (socket as unknown as { _handle?: { fd?: unknown } })._handle?.fd;
  if (!get || typeof fd !== 'number' || fd < 0) return undefined;
  try {
    return get(fd).uid;
  } catch {
    return undefined;
  }
}

/** Whether the peer runs as root or as this process's own user (unknown peers are not). */
export function peerIsAdmin(socket: Socket): boolean {
  const uid = peerUid(socket);
  return uid !== undefined && (uid === 0 || uid === process.geteuid?.());
}
