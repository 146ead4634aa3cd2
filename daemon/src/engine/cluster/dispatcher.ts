/**
 * The swarm port (2377 by default) on managers, HTTPS with the swarm's certificates:
 *
 * - `GET /ca`: the root CA certificate, which a joining node checks against the digest in its token before it
 *   sends anything;
 * - `POST /join`: a join token and a certificate request; answers the new node's id and certificate (signed
 *   for the role the token gives), and for a manager the etcd member list it starts its own member with (the
 *   member is added as a learner and promoted once it runs);
 * - with a node certificate only: `GET /session`, a stream of the node's assignments (one JSON line with its
 *   tasks and only those tasks' secrets and configs, again after every change), `POST /heartbeat` (keeps
 *   the node's session, see sessions.ts; `{"Stopping": true}` announces a daemon that stops or restarts),
 *   `POST /status` (a task's state, for tasks of that node only), `POST /logs/<id>` (a task log this
 *   manager asked the node for, see remotelogs.ts) and `POST /renew` (a new certificate for the node's
 *   request, for the role it holds: see certs.ts).
 *
 * The joining node's requests and the worker's side (WorkerSession) are in worker.ts.
 */
import net from 'node:net';
import https from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { TLSSocket } from 'node:tls';
import { randomBytes } from 'node:crypto';
import { Conflict, Forbidden, InvalidParameter, NotFound } from '../../errors.js';
import { log } from '../../util/log.js';
import { NetworkAllocator, nodeNetworks } from './network/attachments.js';
import { attachContainer, attachmentsOf, detachContainer, managerAttachments, type AttachmentSource } from './network/attachable.js';
import { withNetworkKeys } from './network/keys.js';
import type { ClusterHost, ManagerKeys, NodeCertificates } from '../../host/cluster.js';
import type { Sealer } from './crypt.js';
import { issueNodeCertificate, needsRenewal, renewFor, tlsInfo } from './certs.js';
import type { NodeDescription } from './cluster.js';
import type { LogRequests } from './remotelogs.js';
import { applyTaskStatus } from './status.js';
import { NodeSessions } from './sessions.js';
import type { ClusterStore } from './store.js';
import { caDigest, parseJoinToken, sameToken } from './tokens.js';
import { newObjectId, now, type Obj } from './types.js';

export { WorkerSession, fetchRemoteCA, requestCertificate, requestJoin, type JoinAnswer, type WorkerSessionOptions } from './worker.js';

const MAX_BODY = 1024 * 1024;

function readBody(req: IncomingMessage): Promise<Obj> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > MAX_BODY) {
        req.destroy();
        reject(new Error('body too large'));
      } else chunks.push(c);
    });
    req.on('end', () => {
      try {
        resolve(JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}') as Obj);
      } catch {
        reject(new InvalidParameter('invalid JSON'));
      }
    });
    req.on('error', reject);
  });
}

function send(res: ServerResponse, status: number, body: unknown): void {
  const text = typeof body === 'string' ? body : JSON.stringify(body);
  res.writeHead(status, { 'Content-Type': typeof body === 'string' ? 'text/plain' : 'application/json', 'Content-Length': Buffer.byteLength(text) });
  res.end(text);
}

/** The node id and role of a client's certificate, or undefined without a valid one. */
function peerNode(req: IncomingMessage): { nodeId: string; role: string } | undefined {
  const socket = req.socket as TLSSocket;
  if (!socket.authorized) return undefined;
  const cert = socket.getPeerCertificate();
  if (!cert || !cert.subject) return undefined;
  const role = cert.subject.OU === 'swarm-manager' ? 'manager' : cert.subject.OU === 'swarm-worker' ? 'worker' : undefined;
  return role ? { nodeId: String(cert.subject.CN), role } : undefined;
}

export interface DispatcherOptions {
  store: ClusterStore;
  certs: NodeCertificates & ManagerKeys;
  /** Opens secret values (and the root CA's key) sealed in the store. */
  seal: Sealer;
  listen: { host: string; port: number };
  host: ClusterHost;
  heartbeatSeconds(): number;
  /** Log requests this manager made (nodes stream their answers here). */
  logs?: LogRequests;
  managerJoined(nodeId: string): Promise<void>;
}

export class DispatcherServer {
  private server?: https.Server;
  private readonly sessions: NodeSessions;
  private joining: Promise<unknown> = Promise.resolve();

  /** Gives standalone containers' attachments their addresses: those of the nodes and this manager's own. */
  private readonly allocator: NetworkAllocator;

  constructor(private readonly opts: DispatcherOptions) {
    this.sessions = new NodeSessions(opts.store, opts.heartbeatSeconds);
    this.allocator = new NetworkAllocator(opts.store);
  }

  /** The attachment part of this manager's own agent source (network/attachable.ts), with the same allocator. */
  localAttachments(nodeId: string): AttachmentSource {
    return managerAttachments(this.opts.store, this.allocator, nodeId);
  }

  async listen(): Promise<void> {
    const { certs } = this.opts;
    const server = https.createServer({ key: certs.key, cert: certs.cert, ca: certs.ca, requestCert: true, rejectUnauthorized: false }, (req, res) => {
      this.handle(req, res).catch((err: unknown) => {
        const status = err instanceof InvalidParameter ? 400 : err instanceof Forbidden ? 403 : err instanceof NotFound ? 404 : err instanceof Conflict ? 409 : 500;
        if (!res.headersSent) send(res, status, { message: err instanceof Error ? err.message : String(err) });
        else res.destroy();
      });
    });
    server.on('tlsClientError', () => undefined);
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.opts.listen.port, this.opts.listen.host, () => {
        server.off('error', reject);
        server.on('error', (err) => log.warn('swarm: the dispatcher\'s listener failed', { error: err.message }));
        resolve();
      });
    });
    this.server = server;
  }

  /** A renewed certificate of this manager: new connections are served with it. */
  setCertificates(certs: NodeCertificates & ManagerKeys): void {
    this.opts.certs = certs;
    this.server?.setSecureContext({ key: certs.key, cert: certs.cert, ca: certs.ca });
  }

  async close(): Promise<void> {
    this.sessions.close();
    const server = this.server;
    this.server = undefined;
    if (server) {
      server.close();
      server.closeAllConnections();
    }
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'https://swarm');
    if (req.method === 'GET' && url.pathname === '/ca') {
      send(res, 200, this.opts.certs.ca);
      return;
    }
    if (req.method === 'POST' && url.pathname === '/join') {
      const body = await readBody(req);
      const run = this.joining.then(() => this.join(body));
      this.joining = run.catch(() => undefined);
      send(res, 200, await run);
      return;
    }
    const peer = peerNode(req);
    if (!peer) {
      send(res, 401, { message: 'a swarm node certificate is required' });
      return;
    }
    const node = this.opts.store.get('nodes', peer.nodeId);
    if (!node) {
      send(res, 403, { message: 'this node is not part of the swarm (it was removed)' });
      return;
    }
    if (req.method === 'GET' && url.pathname === '/session') return this.session(peer.nodeId, req, res);
    if (req.method === 'POST' && url.pathname === '/heartbeat') {
      if ((await readBody(req)).Stopping === true) this.sessions.announceStop(peer.nodeId);
      await this.sessions.heartbeat(peer.nodeId, req.socket.remoteAddress ?? '');
      send(res, 200, { Period: this.opts.heartbeatSeconds() * 1e9 });
      return;
    }
    if (req.method === 'POST' && url.pathname === '/certificate') {
      const body = await readBody(req);
      const run = this.joining.then(() => this.certificate(peer.nodeId, body));
      this.joining = run.catch(() => undefined);
      send(res, 200, await run);
      return;
    }
    if (req.method === 'POST' && url.pathname === '/renew') {
      send(res, 200, await renewFor(this.opts, peer, await readBody(req)));
      return;
    }
    if (req.method === 'POST' && url.pathname === '/status') {
      const body = await readBody(req);
      const task = this.opts.store.get('tasks', String(body.TaskID ?? ''));
      if (!task || task.obj.NodeID !== peer.nodeId) {
        send(res, 404, { message: 'no such task on this node' });
        return;
      }
      await applyTaskStatus(this.opts.store, task.obj.ID, body.Status);
      send(res, 200, {});
      return;
    }
    if (req.method === 'POST' && (url.pathname === '/attach' || url.pathname === '/detach')) {
      // A standalone container of the node on an attachable network (network/attachable.ts).
      const body = await readBody(req);
      if (url.pathname === '/attach') send(res, 200, await attachContainer(this.opts.store, this.allocator, peer.nodeId, body));
      else send(res, 200, await detachContainer(this.opts.store, peer.nodeId, body).then(() => ({})));
      return;
    }
    if (req.method === 'POST' && url.pathname.startsWith('/logs/')) {
      // A node's stream of a task log this manager asked for (remotelogs.ts): read by the request's reader.
      if (!this.opts.logs?.accept(decodeURIComponent(url.pathname.slice('/logs/'.length)), peer.nodeId, req)) {
        req.resume();
        send(res, 404, { message: 'no such log request' });
        return;
      }
      await new Promise<void>((resolve) => req.once('close', () => resolve()));
      if (!res.destroyed) send(res, 200, {});
      return;
    }
    send(res, 404, { message: 'not found' });
  }

  private async session(nodeId: string, req: IncomingMessage, res: ServerResponse): Promise<void> {
    const stream = this.sessions.streamOpened(nodeId);
    const closed = new Promise<void>((resolve) => res.once('close', () => resolve()));
    try {
      res.writeHead(200, { 'Content-Type': 'application/x-ndjson' });
      await this.sessions.heartbeat(nodeId, req.socket.remoteAddress ?? '');
      let timer: NodeJS.Timeout | undefined;
      let last = '';
      const push = () => {
        timer = undefined;
        const message = JSON.stringify(this.assignments(nodeId));
        if (message === last) return;
        last = message;
        res.write(message + '\n');
      };
      const unsubscribe = this.opts.store.onChange((kind, id) => {
        if (kind === 'names' || (kind === 'sessions' && id !== nodeId)) return;
        timer ??= setTimeout(push, 50);
      });
      // A line now and then keeps the connection known to be alive on both sides.
      const keepalive = setInterval(() => res.write('\n'), 5000);
      push();
      await closed;
      unsubscribe();
      clearInterval(keepalive);
      if (timer) clearTimeout(timer);
    } finally {
      this.sessions.streamClosed(nodeId, stream);
    }
  }

  /** What a node gets: its tasks, and the secrets and configs those tasks use (and nothing else). */
  private assignments(nodeId: string): Obj {
    const store = this.opts.store;
    const tasks = store.list('tasks').map((e) => store.view(e)).filter((t) => t.NodeID === nodeId);
    const secrets: Obj[] = [];
    const configs: Obj[] = [];
    const seen = new Set<string>();
    for (const t of tasks) {
      if (t.DesiredState !== 'running' && t.DesiredState !== 'ready' && t.DesiredState !== 'complete') continue;
      for (const ref of t.Spec?.ContainerSpec?.Secrets ?? []) {
        const s = store.get('secrets', ref.SecretID)?.obj;
        if (s && !seen.has(s.ID)) (seen.add(s.ID), secrets.push({ ...s, Spec: { ...s.Spec, Data: this.opts.seal.open(s.Spec.Data ?? '').toString('base64') } }));
      }
      for (const ref of t.Spec?.ContainerSpec?.Configs ?? []) {
        const c = store.get('configs', ref.ConfigID)?.obj;
        if (c && !seen.has(c.ID)) (seen.add(c.ID), configs.push(c));
      }
    }
    const managers = store.list('nodes').filter((n) => n.obj.ManagerStatus).map((n) => n.obj.ManagerStatus.Addr as string);
    const role = store.get('nodes', nodeId)?.obj.Spec?.Role;
    const logs = store.list('logs').map((e) => e.obj).filter((r) => r.NodeID === nodeId);
    return {
      HeartbeatPeriod: this.opts.heartbeatSeconds(), Managers: managers, Role: role, RenewCertificate: needsRenewal(store, nodeId),
      TrustRoot: store.get('cluster', 'default')?.obj.TLSInfo?.TrustRoot, Tasks: tasks, Secrets: secrets, Configs: configs, Logs: logs,
      Attachments: attachmentsOf(store, nodeId), ...withNetworkKeys(nodeNetworks(store, nodeId), store, this.opts.seal),
    };
  }

  private async join(body: Obj): Promise<Obj> {
    const store = this.opts.store;
    const cluster = store.get('cluster', 'default')?.obj;
    if (!cluster) throw new Error('the swarm has no cluster object');
    if (typeof body.token !== 'string') throw new InvalidParameter('invalid join token');
    const { digest } = parseJoinToken(body.token);
    if (digest !== caDigest(cluster.TLSInfo.TrustRoot)) throw new InvalidParameter('remote CA does not match fingerprint');
    let role: 'manager' | 'worker';
    if (sameToken(body.token, cluster.JoinTokens.Worker)) role = 'worker';
    else if (sameToken(body.token, cluster.JoinTokens.Manager)) role = 'manager';
    else throw new InvalidParameter('rpc error: code = InvalidArgument desc = A valid join token is necessary to join this cluster');
    const advertise = String(body.advertiseAddr ?? '');
    const dataPathAddr = typeof body.dataPathAddr === 'string' && net.isIPv4(body.dataPathAddr) ? body.dataPathAddr : undefined;
    const swarmPort = Number(body.swarmPort) || 2377;
    const nodeId = newObjectId(randomBytes(16));
    const cert = await issueNodeCertificate(this.opts, String(body.csr ?? ''), { nodeId, role, ips: [advertise] });
    const d: Partial<NodeDescription> = body.description ?? {};
    const t = now();
    const managerAddr = advertise.includes(':') ? `[${advertise}]:${swarmPort}` : `${advertise}:${swarmPort}`;
    const node: Obj = {
      ID: nodeId,
      CreatedAt: t,
      UpdatedAt: t,
      Spec: { Labels: {}, Role: role, Availability: ['drain', 'pause'].includes(body.availability) ? body.availability : 'active', Membership: 'accepted' },
      Description: {
        Hostname: String(d.hostname ?? ''),
        Platform: { Architecture: String(d.arch ?? ''), OS: String(d.os ?? 'linux') },
        Resources: { NanoCPUs: Number(d.ncpu ?? 0) * 1e9, MemoryBytes: Number(d.memTotal ?? 0) },
        Engine: { EngineVersion: String(d.engineVersion ?? ''), Labels: d.engineLabels ?? {}, Plugins: [] },
        TLSInfo: tlsInfo(cluster.TLSInfo.TrustRoot),
      },
      Status: { State: 'down', Addr: advertise },
      ...(dataPathAddr ? { DataPathAddr: dataPathAddr } : {}),
      ...(role === 'manager' ? { ManagerStatus: { Reachability: 'unreachable', Addr: managerAddr } } : {}),
    };
    const managers = this.managerAddrs(nodeId);
    const etcdEndpoints = this.etcdEndpoints(nodeId);
    const initialCluster = role === 'manager' ? await this.addMember(nodeId, advertise) : undefined;
    await store.create('nodes', nodeId, node);
    log.info('swarm: a node joined', { node: nodeId, role });
    return { nodeId, clusterId: cluster.ID, role, cert, managers, etcdEndpoints, initialCluster, ...(role === 'manager' ? { dataKey: this.opts.certs.dataKey } : {}) };
  }

  private managerAddrs(except: string): string[] {
    return this.opts.store.list('nodes').filter((n) => n.obj.ManagerStatus && n.obj.ID !== except).map((n) => n.obj.ManagerStatus.Addr as string);
  }

  private etcdEndpoints(except: string): string[] {
    return this.managerAddrs(except).map((addr) => `https://${addr.replace(/:\d+$/, '')}:2379`);
  }

  /** Adds a node's etcd member as a learner (promoted once it runs); answers the member list it starts with. */
  private async addMember(nodeId: string, advertise: string): Promise<string> {
    const client = this.opts.store.client;
    const peerUrl = `https://${advertise.includes(':') ? `[${advertise}]` : advertise}:2380`;
    const existing = (await client.cluster.memberList({})).members ?? [];
    const stale = existing.find((m) => (m.peerURLs ?? []).includes(peerUrl));
    if (stale) await client.cluster.memberRemove({ ID: stale.ID });
    // etcd refuses a new member while a recent one has not been connected for long ("unhealthy cluster").
    let added: Awaited<ReturnType<typeof client.cluster.memberAdd>> | undefined;
    for (let attempt = 0; !added; attempt++) {
      try {
        added = await client.cluster.memberAdd({ peerURLs: [peerUrl], isLearner: true });
      } catch (err) {
        if (attempt >= 30 || !/unhealthy cluster/.test(String(err))) throw err;
        await new Promise((r) => setTimeout(r, 500));
      }
    }
    void this.promoteWhenReady(added.member!.ID as unknown as string);
    return (added.members ?? []).map((m) => `${m.name || nodeId}=${(m.peerURLs ?? [])[0]}`).join(',');
  }

  /**
   * A new certificate for a node of the swarm, for the role its spec now names: a node promoted to manager
   * gets an etcd member too (and its ManagerStatus); a demoted one a worker certificate.
   */
  private async certificate(nodeId: string, body: Obj): Promise<Obj> {
    const store = this.opts.store;
    const cluster = store.get('cluster', 'default')!.obj;
    const node = store.get('nodes', nodeId)!.obj;
    const role: 'manager' | 'worker' = node.Spec.Role === 'manager' ? 'manager' : 'worker';
    const advertise = String(node.Status?.Addr ?? '');
    const swarmPort = Number(body.swarmPort) || 2377;
    const cert = await issueNodeCertificate(this.opts, String(body.csr ?? ''), { nodeId, role, ips: [advertise] });
    let initialCluster: string | undefined;
    if (role === 'manager') {
      const managers = this.managerAddrs(nodeId);
      const etcdEndpoints = this.etcdEndpoints(nodeId);
      initialCluster = await this.addMember(nodeId, advertise);
      const addr = advertise.includes(':') ? `[${advertise}]:${swarmPort}` : `${advertise}:${swarmPort}`;
      await store.mutate('nodes', nodeId, (n) => ({ ...n, ManagerStatus: { Reachability: 'reachable', Addr: addr }, UpdatedAt: now() }));
      log.info('swarm: a node becomes a manager', { node: nodeId });
      return { nodeId, clusterId: cluster.ID, role, cert, managers, etcdEndpoints, initialCluster, dataKey: this.opts.certs.dataKey };
    }
    return { nodeId, clusterId: cluster.ID, role, cert, managers: this.managerAddrs(''), etcdEndpoints: [] };
  }

  /** Promotes a learner once it runs and has caught up (etcd refuses earlier promotions). */
  private async promoteWhenReady(memberId: string): Promise<void> {
    const deadline = Date.now() + 60_000;
    while (Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 500));
      try {
        const list = await this.opts.store.client.cluster.memberList({});
        const m = (list.members ?? []).find((x) => String(x.ID) === String(memberId));
        if (!m) return;
        if (!m.isLearner) return;
        if (!m.name || (m.clientURLs ?? []).length === 0) continue;
        await this.opts.store.client.cluster.memberPromote({ ID: memberId });
        log.info('swarm: a new manager\'s etcd member was promoted', { member: String(memberId) });
        return;
      } catch {
        // Not in sync yet: try again.
      }
    }
    log.warn('swarm: a new manager\'s etcd member could not be promoted in time', { member: String(memberId) });
  }
}
