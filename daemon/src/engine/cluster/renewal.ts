/**
 * When a node renews its certificate: as swarmkit, at a random point between 50% and 80% of its validity (so
 * that the nodes of a swarm do not all come at once), at once when told (a forced rotation), and again after
 * a failure with a growing delay. The clock is given, so that the schedule is tested without waiting. And
 * the renewal itself: a new key, its certificate from the managers, checked, and put in use.
 */
import { createPrivateKey, X509Certificate } from 'node:crypto';
import type { ClusterHost, EtcdMember, NodeState } from '../../host/cluster.js';
import { log } from '../../util/log.js';
import type { SwarmKeys } from './autolock.js';
import { renewFor } from './certs.js';
import { chainsTo } from './rootca.js';
import { sealer } from './crypt.js';
import { renewClientCertificate } from './etcd.js';
import type { ClusterStore } from './store.js';
import type { WorkerSession } from './worker.js';

export const RENEW_FROM = 0.5;
export const RENEW_UNTIL = 0.8;
/** Retries after a failed renewal: from 5 s, doubling, up to 5 minutes. */
const RETRY_FIRST_MS = 5000;
const RETRY_MAX_MS = 5 * 60_000;
/** setTimeout's longest delay (a little under 25 days): longer waits are made of several. */
const MAX_TIMER_MS = 2 ** 31 - 1;

export interface Validity {
  /** Milliseconds since the epoch. */
  from: number;
  to: number;
}

export function certValidity(pem: string): Validity {
  const x = new X509Certificate(pem);
  return { from: Date.parse(x.validFrom), to: Date.parse(x.validTo) };
}

/** Milliseconds from `now` until the renewal of a certificate of that validity (0 when already due). */
export function renewalDelay(validity: Validity, now: number, random: () => number = Math.random): number {
  const span = Math.max(0, validity.to - validity.from);
  const at = validity.from + span * (RENEW_FROM + (RENEW_UNTIL - RENEW_FROM) * random());
  return Math.max(0, Math.floor(at - now));
}

export interface Clock {
  now(): number;
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(timer: unknown): void;
}

export const systemClock: Clock = {
  now: () => Date.now(),
  setTimeout: (fn, ms) => setTimeout(fn, ms).unref(),
  clearTimeout: (t) => clearTimeout(t as NodeJS.Timeout),
};

/**
 * A node's renewal schedule. `renew` gets and installs a new certificate and answers its validity, from which
 * the next renewal is planned; a failed one is tried again later. One renewal runs at a time: asked for
 * while one runs, another follows it, unless `needed` says that the one that ran did what was asked.
 */
export class RenewalSchedule {
  private timer?: unknown;
  private running = false;
  private again = false;
  private stopped = true;
  private failures = 0;
  /** When the planned renewal is due (ms since the epoch), for tests and logs. */
  due?: number;

  constructor(
    private readonly renew: () => Promise<Validity>,
    private readonly clock: Clock = systemClock,
    private readonly random: () => number = Math.random,
    private readonly needed: () => boolean = () => true,
  ) {}

  /** Plans the renewal of a certificate of this validity (replacing any plan). */
  plan(validity: Validity): void {
    this.stopped = false;
    this.failures = 0;
    this.at(this.clock.now() + renewalDelay(validity, this.clock.now(), this.random));
  }

  /** Renews as soon as possible (after the renewal that runs, if one does). */
  now(): void {
    if (this.stopped) return;
    if (this.running) {
      this.again = true;
      return;
    }
    this.at(this.clock.now());
  }

  stop(): void {
    this.stopped = true;
    this.again = false;
    this.clear();
    this.due = undefined;
  }

  private clear(): void {
    if (this.timer !== undefined) this.clock.clearTimeout(this.timer);
    this.timer = undefined;
  }

  private at(due: number): void {
    this.clear();
    this.due = due;
    const left = due - this.clock.now();
    if (left > MAX_TIMER_MS) {
      this.timer = this.clock.setTimeout(() => this.at(due), MAX_TIMER_MS);
      return;
    }
    this.timer = this.clock.setTimeout(() => void this.fire(), Math.max(0, left));
  }

  private async fire(): Promise<void> {
    this.timer = undefined;
    if (this.stopped || this.running) return;
    this.running = true;
    this.again = false;
    let next: Validity | undefined;
    try {
      next = await this.renew();
    } catch (err) {
      this.failures++;
      const delay = Math.min(RETRY_MAX_MS, RETRY_FIRST_MS * 2 ** (this.failures - 1));
      log.warn('swarm: the node certificate could not be renewed; trying again', { error: err instanceof Error ? err.message : String(err), retryMs: delay });
      if (!this.stopped) this.at(this.clock.now() + delay);
    } finally {
      this.running = false;
    }
    if (this.stopped || !next) return;
    if (this.again && this.needed()) this.at(this.clock.now());
    else this.plan(next);
  }
}

/** What a node renews with: a manager issues its own certificate, a worker asks its managers. */
export interface RenewingNode {
  host: ClusterHost;
  state: NodeState;
  certs: SwarmKeys;
  manager?: { store: ClusterStore; etcd: EtcdMember };
  worker?: WorkerSession;
}

/** A new key and its certificate for the node's role, checked before anything uses them. */
export async function newCertificate(node: RenewingNode): Promise<SwarmKeys> {
  const { host, state, certs, manager, worker } = node;
  const { key, csr } = await host.createKeyAndRequest();
  let cert: string;
  if (manager) cert = String((await renewFor({ store: manager.store, host, seal: sealer(certs.dataKey) }, { nodeId: state.nodeId, role: state.role }, { csr })).cert);
  else if (worker) cert = await worker.renew(csr);
  else throw new Error('this node runs no swarm session');
  const x = new X509Certificate(cert);
  const subject = Object.fromEntries(x.subject.split('\n').map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]));
  const ou = state.role === 'manager' ? 'swarm-manager' : 'swarm-worker';
  if (subject.CN !== state.nodeId || subject.OU !== ou) throw new Error(`the renewed certificate names ${subject.CN}/${subject.OU}, not this node`);
  if (!x.checkPrivateKey(createPrivateKey(key))) throw new Error('the renewed certificate is not for this node\'s new key');
  if (!chainsTo(cert, certs.ca)) throw new Error('the renewed certificate does not lead to the swarm\'s root CA');
  log.info('swarm: a new certificate for this node', { serial: x.serialNumber, notAfter: new Date(x.validTo).toISOString() });
  return { ...certs, cert, key };
}

/** A manager's renewed certificate for its etcd member and its store's client. */
export async function renewOnManager(manager: { store: ClusterStore; etcd: EtcdMember }, certs: SwarmKeys): Promise<void> {
  await manager.etcd.renewCertificate(certs.cert, certs.key);
  renewClientCertificate(manager.store.client, certs);
}
