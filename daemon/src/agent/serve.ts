/**
 * The agent's listeners: a unix socket (the root agent service on a Linux desktop) or a character device (the
 * guest's virtio-serial port). One client at a time: a new connection replaces the old one. Containers and
 * what the Host keeps live on when a client goes away; the daemon connects again and carries on.
 */
import { promises as fsp, constants as fsc, readFileSync } from 'node:fs';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { Duplex } from 'node:stream';
import { InvalidParameter } from '../errors.js';
import { Session, type CallHandler } from '../host/remote/session.js';
import { HOST_TYPES } from '../host/remote/types.js';
import { log } from '../util/log.js';
import { ENGINE_VERSION } from '../version.js';

export interface AgentServer {
  close(): Promise<void>;
}

function groupId(group: string): number {
  if (/^\d+$/.test(group)) return Number(group);
  for (const line of readFileSync('/etc/group', 'utf8').split('\n')) {
    const [name, , gid] = line.split(':');
    if (name === group && gid !== undefined) return Number(gid);
  }
  throw new InvalidParameter(`no such group: ${group}`);
}

function startSession(stream: Duplex, handler: CallHandler, hello: Record<string, unknown>): Session {
  const session = new Session(stream, { role: 'server', version: ENGINE_VERSION, handler, hello, types: HOST_TYPES });
  session.on('hello', (peer: { version: string }) => log.info('a daemon connected', { version: peer.version }));
  return session;
}

/** Serves on a unix socket of mode 0660, owned by `group` when given. */
export async function serveSocket(socketPath: string, handler: CallHandler, opts: { group?: string; hello?: Record<string, unknown> } = {}): Promise<AgentServer> {
  const gid = opts.group === undefined ? undefined : groupId(opts.group);
  // A folder made here is open to all (whatever the umask): the socket's own mode and group guard it.
  const made = await fsp.mkdir(path.dirname(socketPath), { recursive: true, mode: 0o755 });
  if (made) for (let dir = path.dirname(socketPath); dir.startsWith(made); dir = path.dirname(dir)) await fsp.chmod(dir, 0o755);
  await fsp.rm(socketPath, { force: true });
  let current: Session | undefined;
  const server = net.createServer((socket) => {
    // The newest client wins: a daemon that restarted finds its old connection still open here.
    current?.close();
    current = startSession(socket, handler, opts.hello ?? {});
  });
  // Made with no access for others before chmod and chown open it to the group.
  const oldMask = process.umask(0o177);
  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(socketPath, () => {
        server.off('error', reject);
        resolve();
      });
    });
  } finally {
    process.umask(oldMask);
  }
  if (gid !== undefined) await fsp.chown(socketPath, process.getuid?.() ?? 0, gid);
  await fsp.chmod(socketPath, 0o660);
  return {
    close: async () => {
      current?.close();
      await new Promise((resolve) => server.close(resolve));
      await fsp.rm(socketPath, { force: true });
    },
  };
}

/**
 * Serves on a character device. A read that returns nothing means the host side is not connected (a
 * virtio-serial port): the session ends and the device is read again, each new session starting by looking
 * for the daemon's magic past whatever the old one left queued.
 */
export async function serveDevice(devicePath: string, handler: CallHandler, opts: { hello?: Record<string, unknown> } = {}): Promise<AgentServer> {
  const fd = await new Promise<number>((resolve, reject) => fs.open(devicePath, fsc.O_RDWR | fsc.O_NOCTTY, (err, fd) => (err ? reject(err) : resolve(fd))));
  let stopped = false;
  let stream: Duplex | undefined;
  let session: Session | undefined;
  const fresh = () => {
    stream = new Duplex({
      read() {},
      write(chunk: Buffer, _enc, callback) {
        fs.write(fd, chunk, (err) => callback(err ?? null));
      },
      // The device stays open for the next session.
      destroy(err, callback) {
        callback(err);
      },
    });
    const current = startSession(stream, handler, opts.hello ?? {});
    session = current;
    // Whatever ended it (the host went away, bytes that made no sense), the next session reads on.
    current.once('close', () => {
      if (!stopped && session === current) fresh();
    });
  };
  fresh();
  const buffer = Buffer.allocUnsafe(64 * 1024);
  (async () => {
    while (!stopped) {
      const n = await new Promise<number>((resolve) => fs.read(fd, buffer, 0, buffer.length, null, (err, bytes) => resolve(err ? -1 : bytes)));
      if (stopped) break;
      if (n > 0) {
        stream!.push(Buffer.from(buffer.subarray(0, n)));
        continue;
      }
      // The host went away (or the read failed): end this session, wait a little, and serve the next one.
      if (session?.peerHello) log.info('the daemon disconnected');
      session?.close();
      await new Promise((resolve) => setTimeout(resolve, n < 0 ? 1000 : 250));
    }
  })();
  return {
    close: async () => {
      stopped = true;
      session?.close();
      // Not waited for: a read of the device may hold its thread until data comes.
      fs.close(fd, () => undefined);
    },
  };
}
