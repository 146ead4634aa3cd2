/**
 * The daemon's end of the agent protocol: one session at a time over a unix socket (the agent's socket, or
 * QEMU's chardev socket of the guest's serial port), opened again with backoff whenever it is lost. Calls made
 * while no session is up wait for the next one; calls marked `retry` (idempotent ones such as waiting for a
 * container's exit) are made again on the next session when the connection is lost under them.
 */
import { EventEmitter } from 'node:events';
import net from 'node:net';
import { Unavailable } from '../../errors.js';
import { log } from '../../util/log.js';
import { ENGINE_VERSION } from '../../version.js';
import { Session, type Hello } from './session.js';
import { HOST_TYPES } from './types.js';

/** `unix:///path`, `npipe://./pipe/name` (Windows: `\\.\pipe\name`) or a plain path. */
export function agentSocketPath(address: string): string {
  if (address.startsWith('unix://')) return address.slice('unix://'.length);
  if (address.startsWith('npipe://')) return address.slice('npipe://'.length).replace(/\//g, '\\').replace(/^\\?\.\\/, '\\\\.\\');
  if (address.includes('://')) throw new Error(`unsupported agent address ${JSON.stringify(address)}: expected unix://PATH`);
  return address;
}

/** What calls on a closed connection give: a promise that never settles. */
const STOPPED = new Promise<never>(() => {});

export interface CallOptions {
  retry?: boolean;
  signal?: AbortSignal;
}

export class AgentConnection extends EventEmitter {
  private current?: Session;
  private connecting?: Promise<Session>;
  private stopped = false;
  private backoffMs = 50;

  constructor(
    readonly socketPath: string,
    private readonly opts: { waitMs?: number } = {},
  ) {
    super();
  }

  /** The agent's hello on the current session (after `session()`). */
  get hello(): Hello | undefined {
    return this.current?.peerHello;
  }

  /** The live session, connecting (and waiting up to `waitMs` for the agent) when there is none. */
  session(): Promise<Session> {
    if (this.current && !this.current.closed) return Promise.resolve(this.current);
    this.connecting ??= this.connectLoop().finally(() => {
      this.connecting = undefined;
    });
    return this.connecting;
  }

  async call(target: string, args: unknown[], opts: CallOptions = {}): Promise<unknown> {
    for (;;) {
      if (this.stopped) return STOPPED;
      let session: Session;
      try {
        session = await this.session();
      } catch (err) {
        if (this.stopped) return STOPPED;
        // An idempotent call (a container's exit) waits for the agent however long it is away.
        if (opts.retry && !opts.signal?.aborted) continue;
        throw err;
      }
      try {
        return await session.call(target, args, opts.signal);
      } catch (err) {
        // Closed by this side (the daemon stops): as with a LinuxHost going away, what was pending stays so;
        // a container being waited for has not ended.
        if (this.stopped && session.closed) return STOPPED;
        // A failure of the connection, not of the call: an idempotent call is made again.
        if (opts.retry && session.closed && !opts.signal?.aborted) continue;
        throw err;
      }
    }
  }

  close(): void {
    this.stopped = true;
    this.current?.close();
  }

  private async connectLoop(): Promise<Session> {
    const deadline = Date.now() + (this.opts.waitMs ?? 30_000);
    let lastError: unknown;
    while (!this.stopped) {
      try {
        const session = await this.open();
        this.backoffMs = 50;
        return session;
      } catch (err) {
        if (lastError === undefined) log.warn('cannot reach the agent yet; trying again', { socket: this.socketPath, error: (err as Error).message });
        lastError = err;
        if (Date.now() >= deadline) break;
        await new Promise((resolve) => setTimeout(resolve, this.backoffMs));
        this.backoffMs = Math.min(this.backoffMs * 2, 1000);
      }
    }
    throw new Unavailable(`the agent at ${this.socketPath} cannot be reached: ${lastError instanceof Error ? lastError.message : 'stopped'}`);
  }

  private open(): Promise<Session> {
    return new Promise((resolve, reject) => {
      const socket = net.connect(this.socketPath);
      socket.once('error', reject);
      socket.once('connect', () => {
        socket.off('error', reject);
        const session = new Session(socket, { role: 'client', version: ENGINE_VERSION, types: HOST_TYPES });
        session.ready.then(
          (hello) => {
            this.current = session;
            log.info('connected to the agent', { socket: this.socketPath, version: hello.version });
            session.once('close', (err: Error) => {
              if (this.current === session) this.current = undefined;
              if (this.stopped) return;
              log.warn('lost the agent connection; connecting again', { error: err.message });
              this.emit('disconnect', err);
              // Connect again at once, so that the next call finds a session and restore work can run.
              this.session().then((next) => this.emit('reconnect', next.peerHello), () => {});
            });
            resolve(session);
          },
          reject,
        );
      });
    });
  }
}
