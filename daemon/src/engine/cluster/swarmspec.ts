/** The swarm object's spec after an update, its TLS information, and a new node's object. */
import { InvalidParameter } from '../../errors.js';
import type { NodeState } from '../../host/cluster.js';
import { joinHostPort } from './addresses.js';
import { checkCAConfig, tlsInfo } from './certs.js';
import type { NodeDescription } from './node.js';
import { now, type Obj } from './types.js';

const isObject = (v: unknown): v is Obj => v !== null && typeof v === 'object' && !Array.isArray(v);

/** A node's object as the store keeps it when it joins (or makes) the swarm. */
export function nodeObject(d: NodeDescription, ca: string | undefined, nodeId: string, role: 'manager' | 'worker', state: NodeState, availability: unknown): Obj {
  const t = now();
  const node: Obj = {
    ID: nodeId,
    CreatedAt: t,
    UpdatedAt: t,
    Spec: { Labels: {}, Role: role, Availability: availability === 'drain' || availability === 'pause' ? availability : 'active', Membership: 'accepted' },
    Description: {
      Hostname: d.hostname,
      Platform: { Architecture: d.arch, OS: d.os },
      Resources: { NanoCPUs: d.ncpu * 1e9, MemoryBytes: d.memTotal },
      Engine: { EngineVersion: d.engineVersion, Labels: d.engineLabels, Plugins: [{ Type: 'Log', Name: 'json-file' }, { Type: 'Network', Name: 'bridge' }, { Type: 'Network', Name: 'host' }, { Type: 'Network', Name: 'null' }, { Type: 'Volume', Name: 'local' }] },
      TLSInfo: ca ? tlsInfo(ca) : undefined,
    },
    Status: { State: 'ready', Addr: state.advertiseAddr },
    ...(state.dataPathAddr ? { DataPathAddr: state.dataPathAddr } : {}),
  };
  if (role === 'manager') node.ManagerStatus = { Reachability: 'reachable', Addr: joinHostPort(state.advertiseAddr, state.swarmPort) };
  return node;
}

export { tlsInfo };

/** The swarm spec after an update: the fields given replace the old ones (the CLI sends the whole spec). */
export function mergeSwarmSpec(old: Obj, given: Obj): Obj {
  const spec = structuredClone(old);
  for (const k of ['Name', 'Labels', 'Orchestration', 'Raft', 'Dispatcher', 'CAConfig', 'EncryptionConfig', 'TaskDefaults']) {
    if (given[k] === undefined || given[k] === null) continue;
    if (k === 'Labels' && (!isObject(given[k]) || Object.values(given[k]).some((v) => typeof v !== 'string'))) throw new InvalidParameter('swarm spec: Labels must be a map of strings');
    if (k === 'Name' && typeof given[k] !== 'string') throw new InvalidParameter('swarm spec: Name must be a string');
    if (k === 'Name' || k === 'Labels') spec[k] = given[k];
    else if (isObject(given[k])) spec[k] = { ...spec[k], ...given[k] };
    else throw new InvalidParameter(`swarm spec: ${k} must be an object`);
  }
  if (spec.Dispatcher.HeartbeatPeriod !== undefined && (typeof spec.Dispatcher.HeartbeatPeriod !== 'number' || spec.Dispatcher.HeartbeatPeriod < 0)) {
    throw new InvalidParameter('Dispatcher.HeartbeatPeriod must be a duration of at least 0');
  }
  if (spec.Orchestration.TaskHistoryRetentionLimit !== undefined && (!Number.isInteger(spec.Orchestration.TaskHistoryRetentionLimit) || spec.Orchestration.TaskHistoryRetentionLimit < 0)) {
    throw new InvalidParameter('Orchestration.TaskHistoryRetentionLimit must be a number of at least 0');
  }
  checkCAConfig(spec.CAConfig);
  return spec;
}
