/**
 * Logs of tasks on other nodes. The manager that serves `service logs` writes a log request in the store
 * (`logs/<id>`: the task's node and container, follow and tail, and its own swarm address), on a lease it keeps
 * while it reads. The node that runs the task learns of it with its assignments (a worker through its
 * dispatcher session, a manager from the store) and streams the container's log to that manager's dispatcher
 * (`POST /logs/<id>`, with its node certificate): one JSON line per record. The manager ends the request by
 * revoking its lease (the node then stops) or by closing the stream.
 */
import { randomBytes } from 'node:crypto';
import https from 'node:https';
import type { IncomingMessage } from 'node:http';
import { log } from '../../util/log.js';
import type { NodeCertificates } from '../../host/cluster.js';
import { key, type ClusterStore } from './store.js';
import { newObjectId, type Obj } from './types.js';

/** One record of a container's log. */
export interface LogRecord {
  timeNano: bigint;
  stream: 'stdout' | 'stderr';
  complete: boolean;
  data: Buffer;
}

export interface LogReadOptions {
  follow: boolean;
  tail?: number;
  signal: AbortSignal;
}

export type ContainerLogReader = (containerId: string, opts: LogReadOptions) => AsyncIterable<LogRecord[]> | undefined;

const encode = (r: LogRecord) => JSON.stringify({ t: String(r.timeNano), s: r.stream, c: r.complete, d: r.data.toString('base64') });

function decode(line: string): LogRecord | undefined {
  try {
    const o = JSON.parse(line) as Obj;
    return { timeNano: BigInt(o.t), stream: o.s === 'stderr' ? 'stderr' : 'stdout', complete: o.c === true, data: Buffer.from(String(o.d ?? ''), 'base64') };
  } catch {
    return undefined;
  }
}

/** How long a manager waits for the node to start streaming before it gives up on that task's log. */
const CONNECT_TIMEOUT_MS = 10_000;

/** The requesting manager's side: log requests it made, and the streams nodes send for them. */
export class LogRequests {
  /** Requests waiting for their node's stream: the node expected, and where the stream goes. */
  private readonly waiting = new Map<string, { nodeId: string; take: (req: IncomingMessage | undefined) => void }>();

  constructor(private readonly store: ClusterStore, private readonly managerAddr: string) {}

  /** A node's stream for request `id` (from the dispatcher): false when nobody waits for it. */
  accept(id: string, nodeId: string, req: IncomingMessage): boolean {
    const wanted = this.waiting.get(id);
    if (!wanted || wanted.nodeId !== nodeId) return false;
    this.waiting.delete(id);
    wanted.take(req);
    return true;
  }

  /** The log of `task`'s container on its own node, as batches of records. */
  async *read(task: Obj, opts: LogReadOptions): AsyncIterable<LogRecord[]> {
    // A node without a session (down, or gone) cannot answer: its tasks' logs are left out at once.
    if (!this.store.get('sessions', String(task.NodeID))) return;
    const id = newObjectId(randomBytes(16));
    const lease = this.store.client.lease(10, { autoKeepAlive: true });
    lease.on('lost', () => undefined);
    let incoming: IncomingMessage | undefined;
    const arrived = new Promise<IncomingMessage | undefined>((resolve) => {
      const timer = setTimeout(() => resolve(undefined), CONNECT_TIMEOUT_MS);
      const done = (req: IncomingMessage | undefined) => (clearTimeout(timer), resolve(req));
      this.waiting.set(id, { nodeId: String(task.NodeID), take: done });
      opts.signal.addEventListener('abort', () => done(undefined), { once: true });
    });
    try {
      const request = { ID: id, NodeID: task.NodeID, TaskID: task.ID, ContainerID: task.Status?.ContainerStatus?.ContainerID ?? '', Manager: this.managerAddr, Follow: opts.follow, Tail: opts.tail ?? -1 };
      await lease.put(key('logs', id)).value(JSON.stringify(request));
      incoming = await arrived;
      if (!incoming) return;
      const abort = () => incoming?.destroy();
      opts.signal.addEventListener('abort', abort, { once: true });
      incoming.setEncoding('utf8');
      let buffered = '';
      for await (const text of incoming as AsyncIterable<string>) {
        buffered += text;
        const lines = buffered.split('\n');
        buffered = lines.pop()!;
        const batch = lines.map(decode).filter((r): r is LogRecord => r !== undefined);
        if (batch.length) yield batch;
      }
    } catch (err) {
      if (!opts.signal.aborted) log.debug('swarm: a remote task log ended', { error: String(err) });
    } finally {
      this.waiting.delete(id);
      incoming?.destroy();
      await lease.revoke().catch(() => undefined);
    }
  }
}

/** The node's side: ships the logs the managers asked for, and stops when a request goes away. */
export class LogShipper {
  private readonly running = new Map<string, AbortController>();

  constructor(private readonly certs: () => NodeCertificates, private readonly readLog: ContainerLogReader | undefined) {}

  /** The node's current log requests (a request gone from the list is stopped). */
  update(requests: Obj[]): void {
    const ids = new Set(requests.map((r) => String(r.ID)));
    for (const [id, ctl] of this.running) if (!ids.has(id)) (ctl.abort(), this.running.delete(id));
    for (const r of requests) if (!this.running.has(r.ID)) this.ship(r);
  }

  stop(): void {
    for (const ctl of this.running.values()) ctl.abort();
    this.running.clear();
  }

  private ship(r: Obj): void {
    const ctl = new AbortController();
    this.running.set(r.ID, ctl);
    const batches = this.readLog?.(r.ContainerID, { follow: r.Follow === true, tail: r.Tail >= 0 ? r.Tail : undefined, signal: ctl.signal });
    const i = String(r.Manager).lastIndexOf(':');
    const certs = this.certs();
    const req = https.request({
      host: String(r.Manager).slice(0, i).replace(/^\[|\]$/g, ''),
      port: Number(String(r.Manager).slice(i + 1)),
      method: 'POST',
      path: `/logs/${encodeURIComponent(r.ID)}`,
      ca: certs.ca,
      cert: certs.cert,
      key: certs.key,
      checkServerIdentity: (_h, cert) => (cert.subject?.OU === 'swarm-manager' ? undefined : new Error('not a swarm manager')),
      headers: { 'Content-Type': 'application/x-ndjson' },
    });
    req.on('response', (res) => res.resume());
    req.on('error', () => ctl.abort());
    ctl.signal.addEventListener('abort', () => req.destroy(), { once: true });
    void (async () => {
      try {
        if (batches) {
          for await (const batch of batches) {
            if (ctl.signal.aborted) break;
            if (!req.write(batch.map(encode).join('\n') + '\n')) await new Promise((resolve) => req.once('drain', resolve));
          }
        }
        req.end();
      } catch (err) {
        if (!ctl.signal.aborted) log.debug('swarm: shipping a task log failed', { error: String(err) });
        req.destroy();
      }
    })();
  }
}
