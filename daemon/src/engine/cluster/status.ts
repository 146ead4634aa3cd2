/** Task states reported by the nodes' agents, and the dispatcher's heartbeat period, as the store holds them. */
import { InvalidParameter } from '../../errors.js';
import type { ClusterStore } from './store.js';
import { now, stateRank, type Obj } from './types.js';

const isObject = (v: unknown): v is Obj => v !== null && typeof v === 'object' && !Array.isArray(v);

/** A task's reported status, applied when it does not go back in the order of states. */
export async function applyTaskStatus(store: ClusterStore, taskId: string, status: Obj): Promise<void> {
  if (!isObject(status) || typeof status.State !== 'string' || stateRank(status.State) < 0) throw new InvalidParameter('invalid task status');
  await store.mutate('tasks', taskId, (t) => {
    const cur = t.Status?.State ?? 'new';
    if (stateRank(status.State) < stateRank(cur)) return undefined;
    if (stateRank(status.State) === stateRank(cur) && JSON.stringify(status.ContainerStatus ?? null) === JSON.stringify(t.Status?.ContainerStatus ?? null)) return undefined;
    return { ...t, Status: { ...t.Status, ...status, ...(status.Err ? {} : { Err: undefined }), ContainerStatus: { ...(t.Status?.ContainerStatus ?? {}), ...(status.ContainerStatus ?? {}) } }, UpdatedAt: now() };
  });
}

export function heartbeatSeconds(store: ClusterStore): number {
  const period = Number(store.get('cluster', 'default')?.obj?.Spec?.Dispatcher?.HeartbeatPeriod ?? 5e9);
  return Math.max(1, Math.round(period / 1e9));
}
