/**
 * The daemon's own local session: the front ends the daemon serves itself (the `--ui` server in this
 * process, the desktop app that hosts the daemon) act for the local user who started it, who can already do
 * anything the engine can. They get one random bearer token, made at start, kept in memory only and never
 * written anywhere, that stands for a local administrator: every permission. Any other client still needs a
 * token of the store.
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { PERMISSIONS, type Principal } from './store.js';

export class LocalSession {
  /** The token's text: handed in process to the front ends, never to a file or the log. */
  readonly token: string;
  private readonly digest: Buffer;
  private readonly principal: Principal;

  constructor(created = new Date()) {
    this.token = `berth_local_${randomBytes(32).toString('base64url')}`;
    this.digest = createHash('sha256').update(this.token).digest();
    const when = created.toISOString();
    this.principal = {
      user: { id: 'local', userName: 'local', displayName: 'Local administrator', name: {}, emails: [], groups: [], active: true, created: when, lastModified: when },
      token: { id: 'local', userId: 'local', description: "the daemon's own front ends", permissions: [...PERMISSIONS], sha256: this.digest.toString('hex'), created: when },
    };
  }

  /** The local administrator when `text` is this session's token (compared in constant time). */
  verify(text: string): Principal | undefined {
    const presented = createHash('sha256').update(text).digest();
    return timingSafeEqual(presented, this.digest) ? this.principal : undefined;
  }
}
