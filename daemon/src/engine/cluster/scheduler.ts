/**
 * The scheduler: which nodes may take tasks, placement constraints, and the placing of pending tasks on nodes
 * (with the reason a task stays pending, as swarmkit words it). Its writes carry the leader's fence.
 */
import type { ClusterStore, Fence } from './store.js';
import { isTerminal, now, stateRank, type Obj } from './types.js';

const time = (s: string | undefined) => (s ? Date.parse(s) : 0);

/** A node that may receive new tasks. */
export function nodeUsable(n: Obj | undefined): boolean {
  return !!n && n.Status?.State === 'ready' && n.Spec?.Availability === 'active';
}

/** A node whose tasks must move elsewhere (gone, down or drained). */
export function nodeLost(n: Obj | undefined): boolean {
  return !n || n.Status?.State === 'down' || n.Spec?.Availability === 'drain';
}

/** Whether node `n` satisfies placement constraints such as `node.role==manager` or `node.labels.x!=y`. */
export function constraintsMatch(constraints: unknown, n: Obj): boolean {
  if (!Array.isArray(constraints)) return true;
  for (const c of constraints) {
    if (typeof c !== 'string') return false;
    const m = /^\s*([^=!]+?)\s*(==|!=)\s*(.*?)\s*$/.exec(c);
    if (!m) return false;
    const [, lhs, op, rhs] = m as unknown as [string, string, string, string];
    const k = lhs.toLowerCase();
    let value: string | undefined;
    if (k === 'node.id') value = n.ID;
    else if (k === 'node.hostname') value = n.Description?.Hostname;
    else if (k === 'node.role') value = n.Spec?.Role;
    else if (k === 'node.platform.os') value = n.Description?.Platform?.OS;
    else if (k === 'node.platform.arch') value = n.Description?.Platform?.Architecture;
    else if (lhs.startsWith('node.labels.')) value = n.Spec?.Labels?.[lhs.slice('node.labels.'.length)];
    else if (lhs.startsWith('engine.labels.')) value = n.Description?.Engine?.Labels?.[lhs.slice('engine.labels.'.length)];
    else return false;
    const equal = value !== undefined && (k.startsWith('node.labels.') || k.startsWith('engine.labels.') ? value === rhs : value.toLowerCase() === rhs.toLowerCase());
    if ((op === '==') !== equal) return false;
  }
  return true;
}

/** A task's reservations: NanoCPUs and MemoryBytes (0 when none). */
function reservations(t: Obj): { cpu: number; memory: number } {
  const r = t.Spec?.Resources?.Reservations ?? {};
  return { cpu: Number(r.NanoCPUs) || 0, memory: Number(r.MemoryBytes) || 0 };
}

/** Whether node `n` has room left for `t`'s reservations beside those of the tasks it runs. */
function hasResources(n: Obj, t: Obj, active: Obj[]): boolean {
  const want = reservations(t);
  if (want.cpu === 0 && want.memory === 0) return true;
  let cpu = Number(n.Description?.Resources?.NanoCPUs) || 0;
  let memory = Number(n.Description?.Resources?.MemoryBytes) || 0;
  for (const a of active) {
    if (a.NodeID !== n.ID) continue;
    const used = reservations(a);
    cpu -= used.cpu;
    memory -= used.memory;
  }
  return want.cpu <= cpu && want.memory <= memory;
}

/** The value a spread preference groups node `n` by (nodes without the label make a group of their own). */
function spreadValue(descriptor: string, n: Obj): string {
  const d = descriptor.trim();
  const lower = d.toLowerCase();
  if (lower.startsWith('node.labels.')) return n.Spec?.Labels?.[d.slice('node.labels.'.length)] ?? '';
  if (lower.startsWith('engine.labels.')) return n.Description?.Engine?.Labels?.[d.slice('engine.labels.'.length)] ?? '';
  if (lower === 'node.id') return n.ID;
  if (lower === 'node.hostname') return n.Description?.Hostname ?? '';
  if (lower === 'node.role') return n.Spec?.Role ?? '';
  return '';
}

/** Why no node took a task, as swarmkit words it: each filter's count, the most failures first. */
function explainFailures(counts: Array<[number, (n: number) => string]>): string {
  return counts
    .filter(([n]) => n > 0)
    .sort((a, b) => b[0] - a[0])
    .map(([n, say]) => say(n))
    .join('; ');
}

const nodes_ = (n: number) => `${n} node${n > 1 ? 's' : ''}`;

/**
 * Places pending tasks on usable nodes: the filters (ready and active, resources left for the task's
 * reservations, constraints, max replicas per node), then the spread preferences (the group of nodes with the
 * fewest tasks of the service at each level), then the fewest tasks of the service, then of all.
 */
export async function schedule(store: ClusterStore, fence: Fence, nodes: Map<string, Obj>): Promise<void> {
  const setTask = (id: string, change: (t: Obj) => Obj | undefined) => store.mutate('tasks', id, change, fence);
  const tasks = store.list('tasks').map((e) => e.obj);
  const active = tasks.filter((t) => t.NodeID && stateRank(t.DesiredState) <= stateRank('running') && !isTerminal(t.Status.State));
  for (const t of tasks) {
    if (t.Status.State !== 'pending' || (t.DesiredState !== 'running' && t.DesiredState !== 'complete')) continue;
    const service = store.get('services', t.ServiceID)?.obj;
    if (!service) continue;
    const constraints = t.Spec?.Placement?.Constraints;
    const ofService = (nodeId: string) => active.filter((a) => a.NodeID === nodeId && a.ServiceID === t.ServiceID).length;
    let chosen: Obj | undefined;
    let explain = '';
    if (t.NodeID) {
      const n = nodes.get(t.NodeID);
      if (!nodeUsable(n)) explain = '1 node not available for new tasks';
      else if (!hasResources(n!, t, active)) explain = 'insufficient resources on 1 node';
      else chosen = n;
    } else {
      const usable = [...nodes.values()].filter(nodeUsable);
      const sized = usable.filter((n) => hasResources(n, t, active));
      const fits = sized.filter((n) => constraintsMatch(constraints, n));
      const maxReplicas = t.Spec?.Placement?.MaxReplicas ?? 0;
      const room = fits.filter((n) => !maxReplicas || ofService(n.ID) < maxReplicas);
      explain = explainFailures([
        [nodes.size - usable.length, (n) => `${nodes_(n)} not available for new tasks`],
        [usable.length - sized.length, (n) => `insufficient resources on ${nodes_(n)}`],
        [sized.length - fits.length, (n) => `scheduling constraints not satisfied on ${nodes_(n)}`],
        [fits.length - room.length, () => 'max replicas per node limit exceed'],
      ]);
      // Spread preferences: at each level, the group (of all usable nodes) with the fewest tasks of the service.
      const spreads: string[] = (t.Spec?.Placement?.Preferences ?? []).map((p: Obj) => p?.Spread?.SpreadDescriptor).filter((d: unknown) => typeof d === 'string');
      const groupCount = new Map<string, number>();
      const groupKey = (n: Obj, level: number) => JSON.stringify(spreads.slice(0, level + 1).map((d) => spreadValue(d, n)));
      for (const n of usable) {
        for (let level = 0; level < spreads.length; level++) {
          const k = groupKey(n, level);
          groupCount.set(k, (groupCount.get(k) ?? 0) + ofService(n.ID));
        }
      }
      // Nodes where tasks of this service failed 5 times in the last 5 minutes come last (an image missing there).
      const since = Date.now() - 5 * 60_000;
      const failing = (n: Obj) =>
        tasks.filter((x) => x.NodeID === n.ID && x.ServiceID === t.ServiceID && ['failed', 'rejected'].includes(x.Status.State) && time(x.Status.Timestamp) >= since).length >= 5;
      room.sort((a, b) => {
        for (let level = 0; level < spreads.length; level++) {
          const d = (groupCount.get(groupKey(a, level)) ?? 0) - (groupCount.get(groupKey(b, level)) ?? 0);
          if (d !== 0) return d;
        }
        const fa = failing(a);
        if (fa !== failing(b)) return fa ? 1 : -1;
        const sa = ofService(a.ID);
        const sb = ofService(b.ID);
        if (sa !== sb) return sa - sb;
        return active.filter((x) => x.NodeID === a.ID).length - active.filter((x) => x.NodeID === b.ID).length;
      });
      chosen = room[0];
    }
    if (!chosen) {
      const err = `no suitable node (${explain || 'no nodes'})`;
      if (t.Status.Err !== err) await setTask(t.ID, (cur) => (cur.Status.State !== 'pending' ? undefined : { ...cur, Status: { ...cur.Status, Err: err, Message: 'pending task scheduling', Timestamp: now() } }));
      continue;
    }
    const nodeId = chosen.ID;
    await setTask(t.ID, (cur) =>
      cur.Status.State !== 'pending' ? undefined : { ...cur, NodeID: nodeId, Status: { Timestamp: now(), State: 'assigned', Message: 'scheduler assigned task to node' }, UpdatedAt: now() },
    );
    active.push({ ...t, NodeID: nodeId });
  }
}
