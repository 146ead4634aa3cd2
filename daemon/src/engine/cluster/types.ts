/**
 * The cluster's objects as the store keeps them: the Engine API's shapes (Node, Service, Task, Secret,
 * Config, Swarm), without Version (which is the key's mod_revision in etcd, added when read).
 */

export type Obj = Record<string, any>;

/** The kinds of objects, each under its own prefix of the store. */
export type Kind = 'cluster' | 'nodes' | 'services' | 'tasks' | 'secrets' | 'configs' | 'sessions' | 'leader' | 'networks' | 'logs' | 'restarts' | 'netkeys' | 'certs' | 'attachments';

/** Task states in swarmkit's order: a task's observed state only moves up this list. */
export const TASK_STATES = [
  'new', 'pending', 'assigned', 'accepted', 'preparing', 'ready', 'starting', 'running',
  'complete', 'shutdown', 'failed', 'rejected', 'remove', 'orphaned',
] as const;
export type TaskState = (typeof TASK_STATES)[number];

export function stateRank(state: string): number {
  const i = TASK_STATES.indexOf(state as TaskState);
  return i < 0 ? -1 : i;
}

/** Observed states after which the task's container no longer runs. */
export function isTerminal(state: string): boolean {
  return stateRank(state) > stateRank('running');
}

/** Defaults of a new swarm's spec, as swarmkit gives them. */
export function defaultSwarmSpec(): Obj {
  return {
    Name: 'default',
    Labels: {},
    Orchestration: { TaskHistoryRetentionLimit: 5 },
    Raft: { SnapshotInterval: 10000, KeepOldSnapshots: 0, LogEntriesForSlowFollowers: 500, ElectionTick: 10, HeartbeatTick: 1 },
    Dispatcher: { HeartbeatPeriod: 5_000_000_000 },
    CAConfig: { NodeCertExpiry: 7_776_000_000_000_000 },
    TaskDefaults: {},
    EncryptionConfig: { AutoLockManagers: false },
  };
}

/** Fills the zero values a client sends (the CLI's init sends zeros for what it leaves unset) with the defaults. */
export function swarmSpecDefaults(spec: Obj): Obj {
  const d = defaultSwarmSpec();
  for (const section of ['Raft', 'Dispatcher', 'CAConfig', 'Orchestration'] as const) {
    spec[section] ??= {};
    for (const [k, v] of Object.entries(d[section] as Obj)) if (!spec[section][k]) spec[section][k] = v;
  }
  return spec;
}

/** The time as the API writes it (RFC 3339 with nanoseconds). */
export function now(): string {
  return new Date().toISOString().replace(/\.(\d{3})Z$/, (_, ms: string) => `.${ms}000000Z`);
}

/** A 25-character id of letters and digits, as swarmkit's (base 36 of 128 random bits). */
export function newObjectId(random: Buffer): string {
  let n = 0n;
  for (const b of random.subarray(0, 16)) n = (n << 8n) | BigInt(b);
  return n.toString(36).padStart(25, '0');
}

/** Whether a task no longer matches its service (its spec or published ports changed): a rolling update replaces it. */
export function isDirty(task: Obj, service: Obj): boolean {
  if (JSON.stringify(task.Spec) !== JSON.stringify(service.Spec?.TaskTemplate)) return true;
  return JSON.stringify(task.Endpoint?.Ports ?? []) !== JSON.stringify(service.Endpoint?.Ports ?? []);
}
