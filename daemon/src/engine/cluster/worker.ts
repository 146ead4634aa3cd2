/**
 * The other side of the swarm port (see dispatcher.ts): a joining node's requests (the CA checked against its
 * token, the join, a certificate for its role), and WorkerSession, a worker's link to the managers: it keeps a
 * session with one of them, sends heartbeats and task states, and serves the assignments to the node's agent.
 */
import { X509Certificate } from 'node:crypto';
import https from 'node:https';
import type { ClientRequest } from 'node:http';
import { Conflict, Forbidden, InvalidParameter, NotFound } from '../../errors.js';
import type { AttachAnswer, AttachRequest, AttachmentSource } from './network/attachable.js';
import type { AgentSource } from './agent.js';
import type { NodeNetworks } from './network/plane.js';
import type { NodeCertificates } from '../../host/cluster.js';
import { caDigest, parseJoinToken } from './tokens.js';
import type { Obj } from './types.js';

function request(
  addr: { host: string; port: number },
  method: string,
  path: string,
  opts: { ca?: string; cert?: string; key?: string; body?: unknown; timeoutMs?: number },
): Promise<{ status: number; text: string; peerCa?: string }> {
  return new Promise((resolve, reject) => {
    const payload = opts.body === undefined ? undefined : JSON.stringify(opts.body);
    const req = https.request(
      {
        host: addr.host,
        port: addr.port,
        method,
        path,
        ca: opts.ca,
        cert: opts.cert,
        key: opts.key,
        rejectUnauthorized: !!opts.ca,
        // The CA is pinned: any certificate it signed for a manager will do, whatever address reached it.
        checkServerIdentity: (_host, cert) => (cert.subject?.OU === 'swarm-manager' ? undefined : new Error('the remote node is not a swarm manager')),
        headers: payload ? { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(payload) } : {},
        timeout: opts.timeoutMs ?? 20_000,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }));
        res.on('error', reject);
      },
    );
    req.on('timeout', () => req.destroy(new Error(`no answer from ${addr.host}:${addr.port}`)));
    req.on('error', reject);
    req.end(payload);
  });
}

/** Gets a manager's CA and checks it against the token's digest before anything else is sent. */
export async function fetchRemoteCA(addr: { host: string; port: number }, token: string): Promise<string> {
  const { digest } = parseJoinToken(token);
  const res = await request(addr, 'GET', '/ca', {});
  if (res.status !== 200) throw new Error(`the manager at ${addr.host}:${addr.port} answered ${res.status} for its CA`);
  const ca = res.text;
  try {
    new X509Certificate(ca);
  } catch {
    throw new Error(`the manager at ${addr.host}:${addr.port} sent no valid CA certificate`);
  }
  if (caDigest(ca) !== digest) throw new InvalidParameter(`remote CA does not match fingerprint. Expected: ${digest}`);
  return ca;
}

export interface JoinAnswer {
  nodeId: string;
  clusterId: string;
  role: 'manager' | 'worker';
  cert: string;
  /** Managers only: the swarm's data key. */
  dataKey?: string;
  managers: string[];
  etcdEndpoints: string[];
  initialCluster?: string;
}

export async function requestJoin(addr: { host: string; port: number }, ca: string, body: Obj): Promise<JoinAnswer> {
  const res = await request(addr, 'POST', '/join', { ca, body, timeoutMs: 30_000 });
  let parsed: Obj = {};
  try {
    parsed = JSON.parse(res.text) as Obj;
  } catch {
    // Reported below.
  }
  if (res.status === 400) throw new InvalidParameter(String(parsed.message ?? 'join refused'));
  if (res.status !== 200) throw new Error(String(parsed.message ?? `join failed with status ${res.status}`));
  return parsed as JoinAnswer;
}

/** A certificate for the node's current role from the manager at `addr` (the caller's certificate authenticates it). */
export async function requestCertificate(addr: { host: string; port: number }, certs: NodeCertificates, csr: string, swarmPort: number): Promise<JoinAnswer> {
  const res = await request(addr, 'POST', '/certificate', { ca: certs.ca, cert: certs.cert, key: certs.key, body: { csr, swarmPort }, timeoutMs: 30_000 });
  if (res.status !== 200) throw new Error(`the manager at ${addr.host}:${addr.port} answered ${res.status}: ${res.text}`);
  return JSON.parse(res.text) as JoinAnswer;
}

export interface WorkerSessionOptions {
  nodeId: string;
  managers(): string[];
  certs: NodeCertificates;
  advertiseAddr: string;
  onManagers(managers: string[]): void;
  /** The role the node's spec names (a promotion when it is manager). */
  onRole(role: string): void;
  /** The managers ask the node to renew its certificate at once (a forced rotation). */
  onRenew?(): void;
  /** The swarm's root CA, when it is not the one the node trusts (a rotation ended). */
  onTrustRoot?(root: string): void;
}

/** A worker's link to the managers: the assignments stream, heartbeats and task states. */
export class WorkerSession implements AgentSource, AttachmentSource {
  private current: { tasks: Obj[]; secrets: Map<string, Obj>; configs: Map<string, Obj>; networks?: NodeNetworks; logs: Obj[]; attachments: Obj[] } = {
    tasks: [], secrets: new Map(), configs: new Map(), logs: [], attachments: [],
  };
  private listeners: Array<() => void> = [];
  private stopped = false;
  private active?: ClientRequest;
  /** The manager the assignments stream is open to, once it answered. */
  private streamAddr?: { host: string; port: number };
  private heartbeatTimer?: NodeJS.Timeout;
  private period = 5;
  private managerIndex = 0;
  private received = false;
  private known: string[] = [];
  /** Whether the managers' last message asked for a renewal. */
  renewRequested = false;

  constructor(private readonly opts: WorkerSessionOptions) {}

  managers(): Array<{ NodeID: string; Addr: string }> {
    return (this.known.length ? this.known : this.opts.managers()).map((Addr) => ({ NodeID: '', Addr }));
  }

  start(): void {
    this.connect();
    // Heartbeats go to the manager of the assignments stream: its lease carries the node's session, and it
    // ends the session soon after the stream closes unannounced.
    const beat = () => {
      if (this.stopped) return;
      void this.call('POST', '/heartbeat', {}, { addr: this.streamAddr }).catch(() => undefined).finally(() => {
        if (!this.stopped) this.heartbeatTimer = setTimeout(beat, this.period * 1000);
      });
    };
    this.heartbeatTimer = setTimeout(beat, 1000);
  }

  /**
   * Ends the session's stream and heartbeats. `announce`: the daemon only stops or restarts (its tasks keep
   * running), and tells the manager of its stream first, so that the close is not taken for its death.
   */
  async stop(opts: { announce?: boolean } = {}): Promise<void> {
    this.stopped = true;
    if (this.heartbeatTimer) clearTimeout(this.heartbeatTimer);
    const addr = this.streamAddr;
    if (opts.announce && addr && this.active) {
      await this.call('POST', '/heartbeat', { Stopping: true }, { addr, timeoutMs: 1000 }).catch(() => undefined);
    }
    this.active?.destroy();
  }

  private target(): { host: string; port: number } | undefined {
    const list = this.known.length ? this.known : this.opts.managers();
    if (list.length === 0) return undefined;
    const addr = list[this.managerIndex % list.length]!;
    const i = addr.lastIndexOf(':');
    return { host: addr.slice(0, i).replace(/^\[|\]$/g, ''), port: Number(addr.slice(i + 1)) };
  }

  private connect(): void {
    if (this.stopped) return;
    const addr = this.target();
    if (!addr) return;
    const { certs } = this.opts;
    let buffered = '';
    let served = false;
    const retry = () => {
      if (this.stopped || this.active !== req) return;
      // A stream that served assignments is replaced at once: its manager ends the session of a node whose
      // stream closed unannounced one heartbeat period later.
      this.active = undefined;
      this.streamAddr = undefined;
      this.managerIndex++;
      setTimeout(() => this.connect(), served ? 50 : 500).unref();
    };
    const req = https.request(
      {
        host: addr.host, port: addr.port, method: 'GET', path: '/session', ca: certs.ca, cert: certs.cert, key: certs.key,
        checkServerIdentity: (_h, cert) => (cert.subject?.OU === 'swarm-manager' ? undefined : new Error('not a swarm manager')),
      },
      (res) => {
        if (res.statusCode !== 200) {
          res.resume();
          retry();
          return;
        }
        this.streamAddr = addr;
        res.setEncoding('utf8');
        res.on('data', (text: string) => {
          buffered += text;
          let nl: number;
          while ((nl = buffered.indexOf('\n')) >= 0) {
            const line = buffered.slice(0, nl).trim();
            buffered = buffered.slice(nl + 1);
            if (!line) continue;
            this.apply(line);
            served = true;
          }
        });
        res.on('end', retry);
        res.on('error', retry);
      },
    );
    // A session silent for longer than 3 keepalive lines is dead.
    req.setTimeout(16_000, () => req.destroy(new Error('session timed out')));
    req.on('error', retry);
    req.end();
    this.active = req;
  }

  private apply(line: string): void {
    let msg: Obj;
    try {
      msg = JSON.parse(line) as Obj;
    } catch {
      return;
    }
    this.period = Math.max(1, Number(msg.HeartbeatPeriod) || 5);
    if (Array.isArray(msg.Managers) && msg.Managers.length) {
      this.known = msg.Managers;
      this.opts.onManagers(msg.Managers);
    }
    this.current = {
      tasks: Array.isArray(msg.Tasks) ? msg.Tasks : [],
      secrets: new Map((msg.Secrets ?? []).map((s: Obj) => [s.ID, s])),
      configs: new Map((msg.Configs ?? []).map((c: Obj) => [c.ID, c])),
      logs: Array.isArray(msg.Logs) ? msg.Logs : [],
      attachments: Array.isArray(msg.Attachments) ? msg.Attachments : [],
      ...(Array.isArray(msg.Networks) ? { networks: { DataPathPort: Number(msg.DataPathPort) || 4789, LocalAddr: String(msg.LocalAddr ?? ''), Networks: msg.Networks, ...(msg.Ingress ? { Ingress: msg.Ingress } : {}), ...(Array.isArray(msg.Keys) ? { Keys: msg.Keys, PrimaryKey: Number(msg.PrimaryKey) } : {}) } } : {}),
    };
    this.received = true;
    for (const l of this.listeners) l();
    if (typeof msg.Role === 'string') this.opts.onRole(msg.Role);
    this.renewRequested = msg.RenewCertificate === true;
    if (this.renewRequested) this.opts.onRenew?.();
    if (typeof msg.TrustRoot === 'string' && msg.TrustRoot !== this.opts.certs.ca) this.opts.onTrustRoot?.(msg.TrustRoot);
  }

  /** A new certificate for the node's request, from a manager (the current certificate proves the node). */
  async renew(csr: string): Promise<string> {
    const answer = await this.call('POST', '/renew', { csr });
    if (typeof answer.cert !== 'string') throw new Error('the manager sent no certificate');
    return answer.cert;
  }

  /** The node's renewed certificate: the requests from now on are made with it. */
  setCertificates(certs: NodeCertificates): void {
    this.opts.certs = certs;
  }

  /** Asks a manager for a certificate for the node's current role (a promotion or a demotion). */
  requestCertificate(csr: string, swarmPort: number): Promise<JoinAnswer> {
    return this.call('POST', '/certificate', { csr, swarmPort }) as Promise<JoinAnswer>;
  }

  private async call(method: string, path: string, body: unknown, opts: { addr?: { host: string; port: number }; timeoutMs?: number } = {}): Promise<Obj> {
    const addr = opts.addr ?? this.target();
    if (!addr) throw new Error('no manager known');
    const { certs } = this.opts;
    const timeoutMs = opts.timeoutMs ?? (path === '/certificate' || path === '/renew' ? 30_000 : 5000);
    const res = await request(addr, method, path, { ca: certs.ca, cert: certs.cert, key: certs.key, body, timeoutMs });
    if (res.status !== 200) throw new Error(`the manager answered ${res.status}: ${res.text}`);
    return JSON.parse(res.text || '{}') as Obj;
  }

  ready(): boolean {
    return this.received;
  }

  attachments(): Obj[] {
    return this.current.attachments;
  }

  /** An address of an attachable network for a container of this node, from a manager (its errors kept as they are). */
  async attach(body: AttachRequest): Promise<AttachAnswer> {
    return (await this.managerCall('/attach', body)) as AttachAnswer;
  }

  async detach(body: { ID: string }): Promise<void> {
    await this.managerCall('/detach', body);
  }

  private async managerCall(path: string, body: unknown): Promise<Obj> {
    const addr = this.target();
    if (!addr) throw new Error('no manager known');
    const { certs } = this.opts;
    const res = await request(addr, 'POST', path, { ca: certs.ca, cert: certs.cert, key: certs.key, body, timeoutMs: 10_000 });
    let parsed: Obj = {};
    try {
      parsed = JSON.parse(res.text || '{}') as Obj;
    } catch {
      // Reported below.
    }
    if (res.status === 200) return parsed;
    const message = String(parsed.message ?? `the manager answered ${res.status}`);
    const kind = { 400: InvalidParameter, 403: Forbidden, 404: NotFound, 409: Conflict }[res.status];
    throw kind ? new kind(message) : new Error(message);
  }

  tasks(): Obj[] {
    return this.current.tasks;
  }

  networks(): NodeNetworks | undefined {
    return this.current.networks;
  }

  secret(id: string): Obj | undefined {
    return this.current.secrets.get(id);
  }

  config(id: string): Obj | undefined {
    return this.current.configs.get(id);
  }

  logRequests(): Obj[] {
    return this.current.logs;
  }

  onChange(fn: () => void): () => void {
    this.listeners.push(fn);
    return () => {
      this.listeners = this.listeners.filter((l) => l !== fn);
    };
  }

  async report(taskId: string, status: Obj): Promise<void> {
    await this.call('POST', '/status', { TaskID: taskId, Status: status });
  }
}
