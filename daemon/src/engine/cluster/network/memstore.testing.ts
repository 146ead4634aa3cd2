/** For unit tests: the cluster store's reads and the writes the network code makes, over objects in memory. */
import type { ClusterStore } from '../store.js';
import type { Obj } from '../types.js';

export function memoryStore(objects: Record<string, Obj[]>): ClusterStore {
  const entry = (obj: Obj) => ({ obj, createRev: 1, modRev: 1, lease: '0' });
  return {
    list: (kind: string) => (objects[kind] ?? []).map(entry),
    get: (kind: string, id: string) => {
      const o = (objects[kind] ?? []).find((x) => x.ID === id);
      return o && entry(o);
    },
    create: async (kind: string, _id: string, obj: Obj) => void (objects[kind] ??= []).push(obj),
    remove: async (kind: string, id: string) => {
      objects[kind] = (objects[kind] ?? []).filter((x) => x.ID !== id);
    },
  } as unknown as ClusterStore;
}
