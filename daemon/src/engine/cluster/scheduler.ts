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

/** Places pending tasks on usable nodes: constraints first, then the fewest tasks of the service, then of all. */
export async function schedule(store: ClusterStore, fence: Fence, nodes: Map<string, Obj>): Promise<void> {
  const setTask = (id: string, change: (t: Obj) => Obj | undefined) => store.mutate('tasks', id, change, fence);
  const tasks = store.list('tasks').map((e) => e.obj);
  const active = tasks.filter((t) => t.NodeID && stateRank(t.DesiredState) <= stateRank('running') && !isTerminal(t.Status.State));
  for (const t of tasks) {
    if (t.Status.State !== 'pending' || (t.DesiredState !== 'running' && t.DesiredState !== 'complete')) continue;
    const service = store.get('services', t.ServiceID)?.obj;
    if (!service) continue;
    const constraints = t.Spec?.Placement?.Constraints;
    let chosen: Obj | undefined;
    let explain = '';
    if (t.NodeID) {
      const n = nodes.get(t.NodeID);
      if (nodeUsable(n) || (n && n.Status?.State === 'ready' && n.Spec?.Availability === 'pause' && false)) chosen = n;
      else explain = '1 node not available for new tasks';
    } else {
      const usable = [...nodes.values()].filter(nodeUsable);
      const fits = usable.filter((n) => constraintsMatch(constraints, n));
      const maxReplicas = t.Spec?.Placement?.MaxReplicas ?? 0;
      const room = fits.filter((n) => !maxReplicas || active.filter((a) => a.NodeID === n.ID && a.ServiceID === t.ServiceID).length < maxReplicas);
      const notReady = nodes.size - usable.length;
      const parts = [];
      if (notReady > 0) parts.push(`${notReady} node${notReady > 1 ? 's' : ''} not available for new tasks`);
      if (usable.length - fits.length > 0) parts.push(`scheduling constraints not satisfied on ${usable.length - fits.length} node${usable.length - fits.length > 1 ? 's' : ''}`);
      if (fits.length - room.length > 0) parts.push(`max replicas per node limit exceed`);
      explain = parts.join('; ');
      // Nodes where tasks of this service failed 5 times in the last 5 minutes come last (an image missing there).
      const since = Date.now() - 5 * 60_000;
      const failing = (n: Obj) =>
        tasks.filter((x) => x.NodeID === n.ID && x.ServiceID === t.ServiceID && ['failed', 'rejected'].includes(x.Status.State) && time(x.Status.Timestamp) >= since).length >= 5;
      room.sort((a, b) => {
        const fa = failing(a);
        if (fa !== failing(b)) return fa ? 1 : -1;
        const sa = active.filter((x) => x.NodeID === a.ID && x.ServiceID === t.ServiceID).length;
        const sb = active.filter((x) => x.NodeID === b.ID && x.ServiceID === t.ServiceID).length;
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
