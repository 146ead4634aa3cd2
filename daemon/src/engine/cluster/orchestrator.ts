/**
 * The leader's work, redone after every change of the store and on a short tick: node states from the
 * sessions, replicated and global services' tasks (restarts by RestartPolicy, rolling updates by UpdateConfig,
 * with pause and rollback on failure), the scheduler (scheduler.ts) that places pending tasks on nodes, and
 * the reaper that keeps TaskHistoryRetentionLimit old tasks per slot. Every write carries the leader's fence,
 * so a deposed leader's late writes fail.
 */
import { randomBytes } from 'node:crypto';
import { log } from '../../util/log.js';
import { Passes } from '../../util/passes.js';
import type { ClusterStore, Entry, Fence } from './store.js';
import { isDirty, isTerminal, newObjectId, now, stateRank, type Obj } from './types.js';
import { isJob, serviceMode } from './specs.js';
import { constraintsMatch, nodeLost, schedule } from './scheduler.js';
import { assignServiceVips, NetworkAllocator } from './network/attachments.js';
import { ensureIngressEndpoints } from './network/ingress.js';
import { maintainNetworkKeys } from './network/keys.js';
import type { Sealer } from './crypt.js';

const attachments = (list: Obj[]): Obj => (list.length ? { NetworksAttachments: list } : {});

const SECOND = 1_000_000_000;

const nanos = (v: unknown, fallback: number) => (typeof v === 'number' && v >= 0 ? v : fallback);
const time = (s: string | undefined) => (s ? Date.parse(s) : 0);

export class Orchestrator {
  private timer?: NodeJS.Timeout;
  private unsubscribe?: () => void;
  private stopped = false;
  private readonly passes = new Passes(() => this.reconcile(), () => !this.stopped);
  /** When each service's last update batch began (ms), for UpdateConfig.Delay. */
  private readonly lastBatch = new Map<string, number>();
  /** Addresses of new tasks on their services' networks. */
  private readonly addresses: NetworkAllocator;

  constructor(private readonly store: ClusterStore, private readonly fence: Fence, private readonly seal?: Sealer) {
    this.addresses = new NetworkAllocator(store);
  }

  start(): void {
    this.unsubscribe = this.store.onChange((kind) => {
      if (kind !== 'names') this.kick();
    });
    this.timer = setInterval(() => this.kick(), 500);
    this.timer.unref();
    this.kick();
  }

  stop(): void {
    this.stopped = true;
    this.unsubscribe?.();
    if (this.timer) clearInterval(this.timer);
  }

  private kick(): void {
    if (this.stopped) return;
    this.passes.kick((err) => {
      if (!this.stopped) log.warn('swarm orchestrator: a pass failed', { error: err instanceof Error ? err.message : String(err) });
    });
  }

  private async setTask(id: string, change: (t: Obj) => Obj | undefined): Promise<void> {
    await this.store.mutate('tasks', id, change, this.fence);
  }

  private async desire(t: Obj, state: string): Promise<void> {
    if (stateRank(t.DesiredState) >= stateRank(state)) return;
    await this.setTask(t.ID, (cur) => (stateRank(cur.DesiredState) >= stateRank(state) ? undefined : { ...cur, DesiredState: state, UpdatedAt: now() }));
  }

  /**
   * Jobs: tasks run to completion. A replicated job runs TotalCompletions tasks (slots from 0), at most
   * MaxConcurrent at a time; a global job one task on each eligible node. A failed task is replaced as its
   * restart policy says (any means on failure for jobs); tasks of an earlier iteration (before the job was
   * updated) stop.
   */
  private async job(e: Entry, tasks: Obj[], nodes: Map<string, Obj>): Promise<void> {
    const service = e.obj;
    const iteration = service.JobStatus?.JobIteration?.Index;
    if (iteration === undefined) return;
    const current: Obj[] = [];
    for (const t of tasks) {
      if (t.JobIteration?.Index === iteration) current.push(t);
      else if (stateRank(t.DesiredState) <= stateRank('running') || t.DesiredState === 'complete') {
        if (!isTerminal(t.Status.State)) await this.desire(t, 'shutdown');
      }
    }
    const groups = new Map<string, Obj[]>();
    const key = (t: Obj) => (service.Spec.Mode.GlobalJob ? String(t.NodeID) : String(t.Slot));
    for (const t of current) groups.set(key(t), [...(groups.get(key(t)) ?? []), t]);
    for (const list of groups.values()) list.sort((a, b) => time(a.CreatedAt) - time(b.CreatedAt));
    // What each slot (node) needs: nothing when done or running, a new task when empty or failed (after the delay).
    const wants: Array<{ slot?: number; nodeId?: string; restartKey?: string }> = [];
    let active = 0;
    const consider = (list: Obj[], slot: number | undefined, nodeId: string | undefined) => {
      if (list.some((t) => t.Status.State === 'complete')) return;
      const last = list[list.length - 1];
      if (last && !isTerminal(last.Status.State) && !(last.NodeID && nodeLost(nodes.get(last.NodeID)))) {
        active++;
        return;
      }
      const restartKey = `${service.ID}.${iteration}.${slot ?? nodeId}`;
      if (last) {
        const rp = service.Spec.TaskTemplate.RestartPolicy ?? {};
        if (rp.Condition === 'none') return;
        // A failed task is replaced up to MaxAttempts times, counted in the store (see restartAt).
        if (rp.MaxAttempts > 0 && isTerminal(last.Status.State) && this.restartsOf(service, restartKey).length >= rp.MaxAttempts) return;
        if (Date.now() < time(last.Status.Timestamp) + nanos(rp.Delay, 5 * SECOND) / 1e6) return;
      }
      wants.push({ slot, nodeId, restartKey: last && isTerminal(last.Status.State) ? restartKey : undefined });
    };
    if (service.Spec.Mode.GlobalJob) {
      for (const n of nodes.values()) {
        const list = groups.get(n.ID) ?? [];
        const eligible = n.Spec?.Availability !== 'drain' && n.Status?.State !== 'down' && constraintsMatch(service.Spec.TaskTemplate.Placement?.Constraints, n);
        if (eligible || list.length) consider(list, undefined, n.ID);
      }
    } else {
      const { MaxConcurrent: max, TotalCompletions: total } = service.Spec.Mode.ReplicatedJob;
      for (let slot = 0; slot < total; slot++) consider(groups.get(String(slot)) ?? [], slot, undefined);
      wants.splice(Math.max(0, max - active));
    }
    for (const t of current) {
      // A failed task of a slot that is to run again is done with.
      if (isTerminal(t.Status.State) && t.Status.State !== 'complete' && t.DesiredState === 'complete') await this.desire(t, 'shutdown');
    }
    for (const w of wants) {
      await this.newTask(service, w.slot, w.nodeId, { DesiredState: 'complete', JobIteration: { Index: iteration } });
      if (w.restartKey) await this.recordRestart(service, w.restartKey);
    }
  }

  private async newTask(service: Obj, slot: number | undefined, nodeId: string | undefined, extra: Obj = {}): Promise<void> {
    const id = newObjectId(randomBytes(16));
    const t = now();
    const task: Obj = {
      ID: id,
      CreatedAt: t,
      UpdatedAt: t,
      Labels: {},
      Spec: service.Spec.TaskTemplate,
      ServiceID: service.ID,
      ServiceAnnotations: { Name: service.Spec.Name },
      ...(service.Endpoint?.Ports ? { Endpoint: { Spec: service.Spec.EndpointSpec, Ports: service.Endpoint.Ports } } : {}),
      ...attachments(this.addresses.taskAttachments(service)),
      ...(slot !== undefined ? { Slot: slot } : {}),
      ...(nodeId ? { NodeID: nodeId } : {}),
      Status: { Timestamp: t, State: 'pending', Message: 'pending task scheduling' },
      DesiredState: 'running',
      SpecVersion: service.SpecVersion,
      ...extra,
    };
    await this.store.create('tasks', id, task, { fence: this.fence });
  }

  private async reconcile(): Promise<void> {
    await ensureIngressEndpoints(this.store, this.fence, (n) => this.addresses.take(n).split('/')[0]!);
    await assignServiceVips(this.store, this.fence, this.addresses);
    // The keys of encrypted networks: a failure here holds up nothing else of the pass.
    if (this.seal) {
      await maintainNetworkKeys(this.store, this.fence, this.seal).catch((err: unknown) =>
        log.warn('swarm orchestrator: the keys of encrypted networks could not be made or rotated', { error: err instanceof Error ? err.message : String(err) }));
    }
    const nodes = new Map(this.store.list('nodes').map((e) => [e.obj.ID as string, e.obj]));
    await this.nodeStates(nodes);
    const services = new Map(this.store.list('services').map((e) => [e.obj.ID as string, e]));
    const byService = new Map<string, Obj[]>();
    for (const e of this.store.list('tasks')) {
      const list = byService.get(e.obj.ServiceID) ?? [];
      list.push(e.obj);
      byService.set(e.obj.ServiceID, list);
    }
    // Tasks of removed services go away: stopped first, then deleted.
    for (const [serviceId, tasks] of byService) {
      if (services.has(serviceId)) continue;
      for (const t of tasks) {
        if (isTerminal(t.Status.State) || !t.NodeID || nodeLost(nodes.get(t.NodeID))) await this.store.remove('tasks', t.ID, { fence: this.fence });
        else await this.desire(t, 'remove');
      }
    }
    // Standalone containers' attachments (network/attachable.ts) of nodes that were removed go too.
    for (const a of this.store.list('attachments')) if (!nodes.has(a.obj.NodeID)) await this.store.remove('attachments', a.obj.ID, { fence: this.fence });
    for (const r of this.store.list('restarts')) {
      if (!services.has(r.obj.ServiceID)) await this.store.remove('restarts', r.obj.ID, { fence: this.fence });
    }
    for (const [, e] of services) {
      // A service is written twice at its creation (its SpecVersion is its first revision): wait for both.
      if (!e.obj.SpecVersion) continue;
      const tasks = byService.get(e.obj.ID) ?? [];
      if (isJob(e.obj.Spec)) await this.job(e, tasks, nodes);
      else if (serviceMode(e.obj.Spec) === 'global') await this.global(e, tasks, nodes);
      else await this.replicated(e, tasks, nodes);
    }
    await schedule(this.store, this.fence, nodes);
    await this.reap(nodes);
  }

  /** Node states follow the sessions: a node with a session is ready, one without is down. */
  private async nodeStates(nodes: Map<string, Obj>): Promise<void> {
    for (const n of nodes.values()) {
      const session = this.store.get('sessions', n.ID);
      const state = session ? 'ready' : 'down';
      const reach = session ? 'reachable' : 'unreachable';
      const addr = session?.obj.Addr ?? n.Status?.Addr;
      if (n.Status?.State === state && (!n.ManagerStatus || n.ManagerStatus.Reachability === reach) && n.Status?.Addr === addr) continue;
      await this.store.mutate(
        'nodes',
        n.ID,
        (cur) => ({
          ...cur,
          Status: { State: state, Addr: addr ?? '', ...(state === 'down' ? { Message: 'heartbeat failure' } : {}) },
          ...(cur.ManagerStatus ? { ManagerStatus: { ...cur.ManagerStatus, Reachability: reach } } : {}),
        }),
        this.fence,
      );
      n.Status = { State: state, Addr: addr };
    }
  }

  /**
   * Whether a task that ended should be replaced, and when (ms), by the service's RestartPolicy. The restarts
   * of each slot are counted in the store (`restarts/<service>.<slot or node>`, with the spec version they
   * were made under), so that MaxAttempts and Window hold across leader changes and beyond the task history
   * the reaper keeps.
   */
  private restartAt(service: Obj, ended: Obj, slotKey: string): number | undefined {
    const rp = service.Spec.TaskTemplate.RestartPolicy ?? {};
    const condition = rp.Condition ?? 'any';
    if (condition === 'none') return undefined;
    if (condition === 'on-failure' && ended.Status.State === 'complete') return undefined;
    if (rp.MaxAttempts > 0) {
      const window = nanos(rp.Window, 0) / 1e6;
      const since = window > 0 ? Date.now() - window : 0;
      if (this.restartsOf(service, slotKey).filter((at) => at >= since).length >= rp.MaxAttempts) return undefined;
    }
    return time(ended.Status.Timestamp) + nanos(rp.Delay, 5 * SECOND) / 1e6;
  }

  /** When the slot's task was restarted (ms), under the service's current spec. */
  private restartsOf(service: Obj, slotKey: string): number[] {
    const h = this.store.get('restarts', slotKey)?.obj;
    return h && JSON.stringify(h.SpecVersion ?? null) === JSON.stringify(service.SpecVersion ?? null) ? h.Attempts ?? [] : [];
  }

  private async recordRestart(service: Obj, slotKey: string): Promise<void> {
    const window = nanos(service.Spec.TaskTemplate.RestartPolicy?.Window, 0) / 1e6;
    const next = (attempts: number[]): Obj => ({
      ID: slotKey,
      ServiceID: service.ID,
      SpecVersion: service.SpecVersion,
      Attempts: [...attempts, Date.now()].filter((at) => !window || at >= Date.now() - window).slice(-100),
    });
    const written = await this.store.mutate('restarts', slotKey, () => next(this.restartsOf(service, slotKey)), this.fence);
    if (written === 0) await this.store.create('restarts', slotKey, next([]), { fence: this.fence });
  }

  private async replicated(e: Entry, tasks: Obj[], nodes: Map<string, Obj>): Promise<void> {
    const service = e.obj;
    const replicas: number = service.Spec.Mode.Replicated.Replicas;
    const slots = new Map<number, Obj[]>();
    for (const t of tasks) {
      const list = slots.get(t.Slot) ?? [];
      list.push(t);
      slots.set(t.Slot, list);
    }
    for (const list of slots.values()) list.sort((a, b) => time(a.CreatedAt) - time(b.CreatedAt));
    // Scale down: slots above the replica count are removed.
    for (const [slot, list] of slots) {
      if (slot <= replicas) continue;
      for (const t of list) if (stateRank(t.DesiredState) <= stateRank('running')) await this.desire(t, 'remove');
    }
    const update = await this.updateState(e, tasks, replicas);
    for (let slot = 1; slot <= replicas; slot++) {
      await this.slot(service, slot, slots.get(slot) ?? [], nodes, update);
    }
  }

  private async global(e: Entry, tasks: Obj[], nodes: Map<string, Obj>): Promise<void> {
    const service = e.obj;
    const byNode = new Map<string, Obj[]>();
    for (const t of tasks) {
      const list = byNode.get(t.NodeID) ?? [];
      list.push(t);
      byNode.set(t.NodeID, list);
    }
    for (const list of byNode.values()) list.sort((a, b) => time(a.CreatedAt) - time(b.CreatedAt));
    const eligible = [...nodes.values()].filter((n) => n.Spec?.Availability !== 'drain' && n.Status?.State !== 'down' && constraintsMatch(service.Spec.TaskTemplate.Placement?.Constraints, n));
    const update = await this.updateState(e, tasks, eligible.length);
    for (const n of nodes.values()) {
      const list = byNode.get(n.ID) ?? [];
      const eligible = n.Spec?.Availability !== 'drain' && n.Status?.State !== 'down' && constraintsMatch(service.Spec.TaskTemplate.Placement?.Constraints, n);
      if (!eligible) {
        for (const t of list) if (stateRank(t.DesiredState) <= stateRank('running')) await this.desire(t, 'shutdown');
        continue;
      }
      await this.slot(service, undefined, list, nodes, update, n.ID);
    }
    for (const [nodeId, list] of byNode) {
      if (nodes.has(nodeId)) continue;
      for (const t of list) if (stateRank(t.DesiredState) <= stateRank('running')) await this.desire(t, 'shutdown');
    }
  }

  /**
   * Where a rolling update stands: whether slots may be replaced now, and how many more. Also ends the update
   * (completed) or reacts to a failed new task (pause, rollback or continue).
   */
  private async updateState(e: Entry, tasks: Obj[], desired: number): Promise<{ allowed: number }> {
    const service = e.obj;
    const status = service.UpdateStatus;
    const rollingBack = status?.State === 'rollback_started';
    const cfg = (rollingBack ? service.Spec.RollbackConfig : service.Spec.UpdateConfig) ?? {};
    const live = tasks.filter((t) => stateRank(t.DesiredState) <= stateRank('running'));
    const dirty = live.filter((t) => isDirty(t, service));
    const fresh = live.filter((t) => !isDirty(t, service));
    const pending = fresh.filter((t) => stateRank(t.Status.State) < stateRank('running'));
    if (status && (status.State === 'updating' || status.State === 'rollback_started')) {
      const started = time(status.StartedAt);
      const failed = tasks.find((t) => !isDirty(t, service) && time(t.CreatedAt) >= started && ['failed', 'rejected'].includes(t.Status.State));
      const action = cfg.FailureAction ?? 'pause';
      if (failed && action !== 'continue' && !rollingBack) {
        if (action === 'rollback' && service.PreviousSpec) {
          await this.store.mutate('services', service.ID, (s) => ({
            ...s,
            Spec: s.PreviousSpec,
            PreviousSpec: s.Spec,
            SpecVersion: s.PreviousSpecVersion,
            PreviousSpecVersion: s.SpecVersion,
            UpdateStatus: { State: 'rollback_started', StartedAt: now(), Message: `update rolled back due to failure or early termination of task ${failed.ID}` },
          }), this.fence);
        } else {
          await this.store.mutate('services', service.ID, (s) => ({
            ...s,
            UpdateStatus: { ...s.UpdateStatus, State: 'paused', Message: `update paused due to failure or early termination of task ${failed.ID}` },
          }), this.fence);
        }
        return { allowed: 0 };
      }
      // Done once every task is new and running, and the last one started at least Monitor ago (clients such
      // as the CLI's progress see it converge meanwhile).
      const lastStart = Math.max(0, ...fresh.map((t) => time(t.Status.Timestamp)));
      const monitor = nanos(cfg.Monitor, 5 * SECOND) / 1e6;
      if (dirty.length === 0 && pending.length === 0 && fresh.length >= desired && Date.now() - lastStart >= monitor) {
        await this.store.mutate('services', service.ID, (s) => ({
          ...s,
          UpdateStatus: { ...s.UpdateStatus, State: rollingBack ? 'rollback_completed' : 'completed', CompletedAt: now(), Message: rollingBack ? 'rollback completed' : 'update completed' },
        }), this.fence);
        return { allowed: 0 };
      }
    }
    if (status?.State === 'paused' || status?.State === 'rollback_paused') return { allowed: 0 };
    const parallelism = Number.isInteger(cfg.Parallelism) ? cfg.Parallelism : 1;
    // Slots being replaced: a new task not yet running, or a slot whose old task was stopped for the update.
    const inFlight = pending.length + tasks.filter((t) => t.DesiredState === 'shutdown' && t.UpdateStop && !isTerminal(t.Status.State)).length;
    const delay = nanos(cfg.Delay, 0) / 1e6;
    if (inFlight === 0 && Date.now() - (this.lastBatch.get(service.ID) ?? 0) < delay) return { allowed: 0 };
    const allowed = parallelism === 0 ? Infinity : Math.max(0, parallelism - inFlight);
    return { allowed };
  }

  /** One slot (or one node's task of a global service): keep exactly one live task, current and running. */
  private async slot(service: Obj, slot: number | undefined, list: Obj[], nodes: Map<string, Obj>, update: { allowed: number }, nodeId?: string): Promise<void> {
    const live = list.filter((t) => stateRank(t.DesiredState) <= stateRank('running'));
    const current = live[live.length - 1];
    const slotKey = `${service.ID}.${slot ?? nodeId}`;
    // Older live tasks of the slot stop, once the newest runs (start-first updates start it beside them) or
    // cannot (it ended).
    if (live.length > 1 && current && (current.Status.State === 'running' || isTerminal(current.Status.State) || (current.NodeID && nodeLost(nodes.get(current.NodeID))))) {
      for (const t of live.slice(0, -1)) await this.desire(t, 'shutdown');
    }
    if (current) {
      if (isTerminal(current.Status.State)) {
        const at = this.restartAt(service, current, slotKey);
        await this.setTask(current.ID, (cur) => ({ ...cur, DesiredState: 'shutdown', ...(at === undefined ? { NoRestart: true } : {}), UpdatedAt: now() }));
        return;
      }
      if (slot !== undefined && current.NodeID && nodeLost(nodes.get(current.NodeID))) {
        await this.setTask(current.ID, (cur) => ({ ...cur, DesiredState: 'shutdown', UpdatedAt: now() }));
        await this.newTask(service, slot, undefined);
        return;
      }
      if (isDirty(current, service) && update.allowed > 0) {
        update.allowed--;
        this.lastBatch.set(service.ID, Date.now());
        const order = (service.UpdateStatus?.State === 'rollback_started' ? service.Spec.RollbackConfig : service.Spec.UpdateConfig)?.Order ?? 'stop-first';
        if (order === 'start-first') {
          await this.newTask(service, slot, nodeId);
        } else {
          await this.setTask(current.ID, (cur) => ({ ...cur, DesiredState: 'shutdown', UpdateStop: true, UpdatedAt: now() }));
        }
      }
      return;
    }
    // No live task: start one, unless the last one is not to be restarted or waits for its delay, or an old
    // task of the slot still stops (stop-first updates).
    const last = list[list.length - 1];
    if (last) {
      if (last.NoRestart) return;
      if (list.some((t) => !isTerminal(t.Status.State) && t.NodeID && !nodeLost(nodes.get(t.NodeID)) && stateRank(t.Status.State) >= stateRank('assigned'))) return;
      if (isTerminal(last.Status.State) && !last.UpdateStop && last.DesiredState === 'shutdown') {
        const at = this.restartAt(service, last, slotKey);
        if (at === undefined) return;
        if (Date.now() < at) return;
        await this.newTask(service, slot, nodeId);
        await this.recordRestart(service, slotKey);
        return;
      }
    }
    await this.newTask(service, slot, nodeId);
  }

  /** Deletes finished tasks beyond the history limit of each slot, and removed tasks once they stopped. */
  private async reap(nodes: Map<string, Obj>): Promise<void> {
    const cluster = this.store.list('cluster')[0]?.obj;
    const limit = Number(cluster?.Spec?.Orchestration?.TaskHistoryRetentionLimit ?? 5);
    const groups = new Map<string, Obj[]>();
    for (const e of this.store.list('tasks')) {
      const t = e.obj;
      const stopped = isTerminal(t.Status.State) || !t.NodeID || nodeLost(nodes.get(t.NodeID));
      if (t.DesiredState === 'remove' && stopped) {
        await this.store.remove('tasks', t.ID, { fence: this.fence });
        continue;
      }
      const k = `${t.ServiceID}/${t.Slot ?? t.NodeID}`;
      const list = groups.get(k) ?? [];
      list.push(t);
      groups.set(k, list);
    }
    for (const list of groups.values()) {
      const old = list.filter((t) => stateRank(t.DesiredState) > stateRank('running') && (isTerminal(t.Status.State) || !t.NodeID || nodeLost(nodes.get(t.NodeID))));
      old.sort((a, b) => time(a.CreatedAt) - time(b.CreatedAt));
      // The newest dead task of a slot that is not restarted stays: it tells why the slot is empty.
      const excess = old.length - Math.max(limit, 1);
      for (const t of old.slice(0, Math.max(0, excess))) await this.store.remove('tasks', t.ID, { fence: this.fence });
    }
  }
}

export { constraintsMatch };
