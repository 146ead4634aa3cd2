/**
 * The nodes' sessions a dispatcher keeps (see dispatcher.ts): each node's session key lives on a lease of 3
 * heartbeat periods that its heartbeats renew; when the key goes, the leader marks the node down. A session
 * stream that closes unannounced, as the kernel closes the connections of a daemon that died, ends the session
 * after one heartbeat period unless the node opened a stream again by then. A node whose daemon stops or
 * restarts (its tasks keep running) announces it first, and its session then lives out its lease, as one
 * whose daemon stalls without closing anything does.
 */
import { log } from '../../util/log.js';
import { key, type ClusterStore } from './store.js';

type Lease = ReturnType<ClusterStore['client']['lease']>;

export class NodeSessions {
  private readonly leases = new Map<string, { lease: Lease; ttl: number; id: string }>();
  /** Each node's newest stream (an older one may close after a newer one opened). */
  private readonly streams = new Map<string, object>();
  /** Sessions whose stream closed unannounced: each ends when its timer fires. */
  private readonly graces = new Map<string, NodeJS.Timeout>();
  /** Nodes that announced their stream's close. */
  private readonly stopping = new Set<string>();
  private closed = false;

  constructor(private readonly store: ClusterStore, private readonly heartbeatSeconds: () => number) {}

  /**
   * Keeps the node's session key alive for 3 heartbeat periods from now, on this dispatcher's lease for the
   * node: a lease that expired meanwhile (its keepalive fails) is replaced, and a key that rides on another
   * lease (the node's own while it was a manager, another manager's) is put again on this one, which alone
   * the node's heartbeats renew.
   */
  async heartbeat(nodeId: string, remote: string): Promise<void> {
    const ttl = Math.max(3, 3 * this.heartbeatSeconds());
    let held = this.leases.get(nodeId);
    if (held && (held.lease.revoked() || held.ttl !== ttl)) {
      this.leases.delete(nodeId);
      held = undefined;
    }
    if (held) {
      const alive = await held.lease.keepaliveOnce().then(() => true, () => false);
      if (alive && this.store.get('sessions', nodeId)?.lease === held.id) return;
      if (!alive) {
        this.leases.delete(nodeId);
        held = undefined;
      }
    }
    const lease = held?.lease ?? this.store.client.lease(ttl, { autoKeepAlive: false });
    if (!held) {
      lease.on('lost', () => {
        if (this.leases.get(nodeId)?.lease === lease) this.leases.delete(nodeId);
      });
    }
    const node = this.store.get('nodes', nodeId)?.obj;
    await lease.put(key('sessions', nodeId)).value(JSON.stringify({ NodeID: nodeId, Addr: node?.Status?.Addr || remote.replace(/^::ffff:/, '') }));
    this.leases.set(nodeId, { lease, ttl, id: await lease.grant() });
  }

  /** The node's daemon stops or restarts: the close of its stream that follows is no sign of its death. */
  announceStop(nodeId: string): void {
    this.stopping.add(nodeId);
  }

  /** A session stream opened: the node is back, if its session was ending. Answers the stream's token for streamClosed. */
  streamOpened(nodeId: string): object {
    const stream = {};
    this.streams.set(nodeId, stream);
    this.stopping.delete(nodeId);
    const grace = this.graces.get(nodeId);
    if (grace) clearTimeout(grace);
    this.graces.delete(nodeId);
    return stream;
  }

  /**
   * A session stream closed. Unannounced, the session ends after one heartbeat period unless the node opened a
   * stream again, here or on another manager (whose session key then no longer rides on this lease).
   */
  streamClosed(nodeId: string, stream: object): void {
    if (this.streams.get(nodeId) !== stream) return;
    this.streams.delete(nodeId);
    if (this.closed || this.stopping.delete(nodeId)) return;
    const timer = setTimeout(() => {
      this.graces.delete(nodeId);
      const held = this.leases.get(nodeId);
      if (!held || this.streams.has(nodeId)) return;
      this.leases.delete(nodeId);
      log.info('swarm: a node\'s session stream closed and the node did not come back', { node: nodeId });
      held.lease.revoke().catch((err: unknown) => log.warn('swarm: a closed session could not be ended', { node: nodeId, error: String(err) }));
    }, this.heartbeatSeconds() * 1000);
    this.graces.set(nodeId, timer);
  }

  /** The dispatcher closes: the streams it closes are no sign of their nodes' death. */
  close(): void {
    this.closed = true;
    for (const timer of this.graces.values()) clearTimeout(timer);
    this.graces.clear();
    this.leases.clear();
  }
}
