/**
 * The checks of the specs the manager's API receives (services, nodes, and the names and labels of secrets and
 * configs), with swarmkit's defaults and messages, and the lookup of an object by id, name or id prefix.
 */
import { randomBytes } from 'node:crypto';
import { InvalidParameter, NotFound } from '../../errors.js';
import type { ClusterStore, Entry } from './store.js';
import type { Kind, Obj } from './types.js';

export const isObject = (v: unknown): v is Obj => v !== null && typeof v === 'object' && !Array.isArray(v);

export function checkLabels(labels: unknown, what: string): Record<string, string> {
  if (labels === undefined || labels === null) return {};
  if (!isObject(labels) || Object.values(labels).some((v) => typeof v !== 'string')) throw new InvalidParameter(`${what}: labels must be a map of strings`);
  return labels as Record<string, string>;
}

/** Names of services, secrets and configs: as swarmkit's (letters, digits, -, _ and . inside; at most 63). */
export function checkName(name: unknown, what: string): string {
  if (typeof name !== 'string' || name === '') throw new InvalidParameter(`rpc error: code = InvalidArgument desc = ${what}: name must be provided`);
  if (name.length > 63 || !/^[a-zA-Z0-9](?:[-_.a-zA-Z0-9]*[a-zA-Z0-9])?$/.test(name)) {
    throw new InvalidParameter(`rpc error: code = InvalidArgument desc = ${what}: invalid name "${name}": names must be at most 63 characters of letters, digits, '-', '_' and '.', beginning and ending with a letter or digit`);
  }
  return name;
}

export function parseVersion(version: string | undefined): number {
  if (version === undefined || !/^\d+$/.test(version)) throw new InvalidParameter(`invalid version: ${JSON.stringify(version ?? '')}`);
  return Number(version);
}

/** Finds an object by full id, then by name, then by unique id prefix (as swarmkit's lookups). */
export function lookup(store: ClusterStore, kind: Kind, ref: string, nameOf: (o: Obj) => string | undefined, what: string): Entry {
  const direct = store.get(kind, ref);
  if (direct) return direct;
  const all = store.list(kind);
  const byName = all.filter((e) => nameOf(e.obj) === ref);
  if (byName.length === 1) return byName[0]!;
  const byPrefix = all.filter((e) => String(e.obj.ID).startsWith(ref));
  if (byPrefix.length === 1 && ref !== '') return byPrefix[0]!;
  if (byPrefix.length > 1) throw new NotFound(`${what} ${ref} is ambiguous (${byPrefix.length} matches found)`);
  throw new NotFound(`${what} ${ref} not found`);
}

// -- services -------------------------------------------------------------------------------------------------

const DURATION_FIELDS = ['Delay', 'Window'];

/** Checks a service spec and fills swarmkit's defaults; throws a 400 naming the first problem. */
export function validateServiceSpec(spec: unknown): Obj {
  if (!isObject(spec)) throw new InvalidParameter('service spec must be a JSON object');
  const s: Obj = structuredClone(spec);
  // As swarmkit: a service created without a name gets a generated one.
  s.Name = checkName(s.Name === undefined || s.Name === '' ? generatedName() : s.Name, 'service');
  s.Labels = checkLabels(s.Labels, 'service');
  const tt = s.TaskTemplate;
  if (!isObject(tt)) throw new InvalidParameter('rpc error: code = InvalidArgument desc = TaskSpec: missing runtime');
  if (tt.PluginSpec !== undefined || tt.NetworkAttachmentSpec !== undefined) throw new InvalidParameter('only container tasks are supported by this engine');
  const cs = tt.ContainerSpec;
  if (!isObject(cs)) throw new InvalidParameter('rpc error: code = InvalidArgument desc = TaskSpec: missing runtime');
  if (typeof cs.Image !== 'string' || cs.Image === '') throw new InvalidParameter('rpc error: code = InvalidArgument desc = ContainerSpec: image reference must be provided');
  for (const f of ['Command', 'Args', 'Env']) {
    if (cs[f] !== undefined && (!Array.isArray(cs[f]) || cs[f].some((x: unknown) => typeof x !== 'string'))) throw new InvalidParameter(`ContainerSpec.${f} must be a list of strings`);
  }
  if (cs.Labels !== undefined) cs.Labels = checkLabels(cs.Labels, 'ContainerSpec');
  for (const ref of [...(cs.Secrets ?? []), ...(cs.Configs ?? [])]) {
    if (!isObject(ref)) throw new InvalidParameter('secret and config references must be objects');
  }
  if (tt.Networks !== undefined && tt.Networks !== null && !Array.isArray(tt.Networks)) throw new InvalidParameter('TaskTemplate.Networks must be a list');
  if (s.Networks !== undefined && s.Networks !== null && !Array.isArray(s.Networks)) throw new InvalidParameter('Networks must be a list');
  const constraints = tt.Placement?.Constraints;
  if (constraints !== undefined) {
    if (!Array.isArray(constraints)) throw new InvalidParameter('Placement.Constraints must be a list of strings');
    for (const c of constraints) {
      const m = typeof c === 'string' ? /^\s*([^=!\s]+)\s*(==|!=)\s*(\S.*?)\s*$/.exec(c) : null;
      const key = m?.[1]?.toLowerCase() ?? '';
      const known = ['node.id', 'node.hostname', 'node.role', 'node.platform.os', 'node.platform.arch'].includes(key) || key.startsWith('node.labels.') || key.startsWith('engine.labels.');
      if (!m || !known) throw new InvalidParameter(`rpc error: code = InvalidArgument desc = invalid constraint ${JSON.stringify(c)}: expected node.id, node.hostname, node.role, node.platform.os, node.platform.arch, node.labels.<key> or engine.labels.<key>, then == or !=, then a value`);
    }
  }
  const prefs = tt.Placement?.Preferences;
  if (prefs !== undefined && prefs !== null) {
    if (!Array.isArray(prefs) || prefs.some((p: unknown) => !isObject(p) || !isObject(p.Spread) || typeof p.Spread.SpreadDescriptor !== 'string' || p.Spread.SpreadDescriptor === '')) {
      throw new InvalidParameter('rpc error: code = InvalidArgument desc = Placement.Preferences must be a list of {"Spread": {"SpreadDescriptor": "node.labels.<key>"}}');
    }
  }
  for (const kind of ['Reservations', 'Limits']) {
    const r = tt.Resources?.[kind];
    if (r === undefined || r === null) continue;
    if (!isObject(r)) throw new InvalidParameter(`Resources.${kind} must be an object`);
    for (const f of ['NanoCPUs', 'MemoryBytes']) {
      if (r[f] !== undefined && (!Number.isInteger(r[f]) || r[f] < 0)) throw new InvalidParameter(`rpc error: code = InvalidArgument desc = Resources.${kind}.${f} must be a whole number of at least 0`);
    }
  }
  const rp = tt.RestartPolicy;
  if (rp !== undefined) {
    if (!isObject(rp)) throw new InvalidParameter('RestartPolicy must be an object');
    if (rp.Condition !== undefined && !['none', 'on-failure', 'any'].includes(rp.Condition)) throw new InvalidParameter(`invalid RestartPolicy.Condition ${JSON.stringify(rp.Condition)}: must be none, on-failure or any`);
    for (const f of [...DURATION_FIELDS, 'MaxAttempts']) if (rp[f] !== undefined && (typeof rp[f] !== 'number' || rp[f] < 0)) throw new InvalidParameter(`RestartPolicy.${f} must be a number of at least 0`);
  }
  tt.ForceUpdate = Number.isInteger(tt.ForceUpdate) ? tt.ForceUpdate : 0;
  const mode = s.Mode ?? { Replicated: { Replicas: 1 } };
  if (!isObject(mode)) throw new InvalidParameter('Mode must be an object');
  const kinds = Object.keys(mode).filter((k) => mode[k] !== undefined && mode[k] !== null);
  if (kinds.length > 1) throw new InvalidParameter('a service has one mode: Replicated, Global, ReplicatedJob or GlobalJob');
  const kind = kinds[0] ?? 'Replicated';
  if (kind === 'Replicated') {
    const r = mode.Replicated ?? {};
    const replicas = r.Replicas ?? 1;
    if (!Number.isInteger(replicas) || replicas < 0) throw new InvalidParameter('Mode.Replicated.Replicas must be a number of at least 0');
    s.Mode = { Replicated: { Replicas: replicas } };
  } else if (kind === 'Global') {
    s.Mode = { Global: {} };
  } else if (kind === 'ReplicatedJob') {
    const j = mode.ReplicatedJob ?? {};
    const max = j.MaxConcurrent ?? 1;
    const total = j.TotalCompletions ?? max;
    if (!Number.isInteger(max) || max < 1) throw new InvalidParameter('Mode.ReplicatedJob.MaxConcurrent must be a number of at least 1');
    if (!Number.isInteger(total) || total < 0) throw new InvalidParameter('Mode.ReplicatedJob.TotalCompletions must be a number of at least 0');
    s.Mode = { ReplicatedJob: { MaxConcurrent: max, TotalCompletions: total } };
  } else if (kind === 'GlobalJob') {
    s.Mode = { GlobalJob: {} };
  } else {
    throw new InvalidParameter(`unknown service mode ${JSON.stringify(kind)}`);
  }
  for (const cfg of ['UpdateConfig', 'RollbackConfig']) {
    const u = s[cfg];
    if (u === undefined) continue;
    if (!isObject(u)) throw new InvalidParameter(`${cfg} must be an object`);
    if (u.Parallelism !== undefined && (!Number.isInteger(u.Parallelism) || u.Parallelism < 0)) throw new InvalidParameter(`${cfg}.Parallelism must be a number of at least 0`);
    if (u.Delay !== undefined && (typeof u.Delay !== 'number' || u.Delay < 0)) throw new InvalidParameter(`${cfg}.Delay must be a number of at least 0`);
    if (u.FailureAction !== undefined && !['pause', 'continue', 'rollback'].includes(u.FailureAction)) throw new InvalidParameter(`invalid ${cfg}.FailureAction ${JSON.stringify(u.FailureAction)}`);
    if (u.Order !== undefined && !['stop-first', 'start-first'].includes(u.Order)) throw new InvalidParameter(`invalid ${cfg}.Order ${JSON.stringify(u.Order)}`);
  }
  const ep = s.EndpointSpec;
  if (ep !== undefined) {
    if (!isObject(ep)) throw new InvalidParameter('EndpointSpec must be an object');
    if (ep.Mode !== undefined && ep.Mode !== 'vip' && ep.Mode !== 'dnsrr') throw new InvalidParameter(`invalid EndpointSpec.Mode ${JSON.stringify(ep.Mode)}`);
    for (const p of ep.Ports ?? []) {
      if (!isObject(p)) throw new InvalidParameter('EndpointSpec.Ports must be a list of objects');
      if (p.PublishMode !== undefined && p.PublishMode !== 'ingress' && p.PublishMode !== 'host') throw new InvalidParameter(`invalid PublishMode ${JSON.stringify(p.PublishMode)}: expected ingress or host`);
      if (p.PublishedPort !== undefined && (!Number.isInteger(p.PublishedPort) || p.PublishedPort < 0 || p.PublishedPort > 65535)) throw new InvalidParameter('EndpointSpec.Ports: PublishedPort must be a port number');
      if (!Number.isInteger(p.TargetPort) || p.TargetPort < 1 || p.TargetPort > 65535) throw new InvalidParameter('EndpointSpec.Ports: TargetPort must be a port number');
    }
  }
  return s;
}

const NAME_FIRST = ['amber', 'brisk', 'calm', 'dapper', 'eager', 'fond', 'gentle', 'hardy', 'keen', 'lucid', 'merry', 'nimble', 'placid', 'quiet', 'ready', 'sturdy', 'tidy', 'vivid', 'witty', 'zesty'];
const NAME_SECOND = ['anchor', 'buoy', 'cutter', 'dinghy', 'ferry', 'galley', 'harbor', 'jetty', 'keel', 'lagoon', 'mooring', 'pier', 'quay', 'rudder', 'schooner', 'tiller', 'wharf', 'yawl'];

function generatedName(): string {
  const pick = (list: string[]) => list[randomBytes(1)[0]! % list.length]!;
  return `${pick(NAME_FIRST)}_${pick(NAME_SECOND)}`;
}

export function serviceMode(spec: Obj): 'replicated' | 'global' | 'replicated-job' | 'global-job' {
  if (spec.Mode?.Global) return 'global';
  if (spec.Mode?.ReplicatedJob) return 'replicated-job';
  if (spec.Mode?.GlobalJob) return 'global-job';
  return 'replicated';
}

export const isJob = (spec: Obj) => !!(spec.Mode?.ReplicatedJob || spec.Mode?.GlobalJob);

// -- nodes ----------------------------------------------------------------------------------------------------

export function validateNodeSpec(spec: unknown): Obj {
  if (!isObject(spec)) throw new InvalidParameter('node spec must be a JSON object');
  const s: Obj = { ...spec };
  s.Labels = checkLabels(s.Labels, 'node');
  if (s.Role !== 'manager' && s.Role !== 'worker') throw new InvalidParameter(`invalid role ${JSON.stringify(s.Role ?? '')}: must be manager or worker`);
  if (!['active', 'pause', 'drain'].includes(s.Availability)) throw new InvalidParameter(`invalid availability ${JSON.stringify(s.Availability ?? '')}: must be active, pause or drain`);
  if (s.Name !== undefined && typeof s.Name !== 'string') throw new InvalidParameter('node name must be a string');
  return s;
}
