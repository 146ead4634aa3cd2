/**
 * The manager's API over the store: nodes, services, tasks, secrets and configs (create, inspect, list with
 * their filters, update with the version rule, remove), in the Engine API's shapes.
 */
import { randomBytes } from 'node:crypto';
import { Conflict, InvalidParameter } from '../../errors.js';
import { exactMatch, matchLabels, prefixMatch } from '../filters.js';
import type { EventBus } from '../events.js';
import type { ClusterStore, Entry } from './store.js';
import type { Sealer } from './crypt.js';
import { nodeTLSInfo } from './certs.js';
import { isDirty, isTerminal, newObjectId, now, stateRank, type Obj } from './types.js';
import { checkLabels, checkName, isJob, isObject, lookup, parseVersion, serviceMode, validateNodeSpec, validateServiceSpec } from './specs.js';
import { addressPools, keptVips } from './network/attachments.js';
import { assignIngressPorts, ensureIngress, ingressPorts } from './network/ingress.js';
import { resolveServiceNetworks } from './network/networks.js';

export type Filters = Map<string, string[]>;

export class ClusterObjects {
  /** Ports published through the routing mesh: numbered where they were not, and the ingress network made. */
  private async mesh(service: Obj): Promise<void> {
    assignIngressPorts(this.store, service);
    if (ingressPorts(service).length > 0) await ensureIngress(this.store, addressPools(this.store));
  }

  constructor(
    private readonly store: ClusterStore,
    private readonly events: EventBus,
    /** The node id of the leader, for ManagerStatus.Leader. */
    private readonly leaderId: () => string | undefined,
    /** Seals secret values in the store. */
    private readonly seal: Sealer,
  ) {}

  // -- nodes --
  nodeView(e: Entry): Obj {
    const v = this.store.view(e);
    // The node's data path address stays inside the engine (Docker's node object has no such field).
    delete v.DataPathAddr;
    // The swarm's root, and the issuer of the node's last certificate (see rootca.ts).
    if (v.Description) v.Description = { ...v.Description, TLSInfo: nodeTLSInfo(this.store, v) };
    if (v.ManagerStatus) v.ManagerStatus = { ...v.ManagerStatus, Leader: this.leaderId() === v.ID || undefined };
    if (v.ManagerStatus && !v.ManagerStatus.Leader) delete v.ManagerStatus.Leader;
    return v;
  }

  node(ref: string): Entry {
    return lookup(this.store, 'nodes', ref, (o) => o.Description?.Hostname, 'node');
  }

  listNodes(filters: Filters): Obj[] {
    return this.store
      .list('nodes')
      .filter((e) => {
        const n = e.obj;
        if (!prefixMatch(filters.get('id'), n.ID)) return false;
        if (filters.get('name') && !filters.get('name')!.some((v) => String(n.Description?.Hostname ?? '').startsWith(v))) return false;
        if (!exactMatch(filters.get('role'), n.Spec.Role)) return false;
        if (!exactMatch(filters.get('membership'), n.Spec.Membership)) return false;
        if (!matchLabels(filters.get('label'), n.Description?.Engine?.Labels ?? {})) return false;
        if (!matchLabels(filters.get('node.label'), n.Spec.Labels ?? {})) return false;
        return true;
      })
      .map((e) => this.nodeView(e));
  }

  async updateNode(ref: string, version: string | undefined, body: unknown, roleChanged: (node: Obj, role: string) => Promise<void>): Promise<void> {
    const v = parseVersion(version);
    const e = this.node(ref);
    const spec = validateNodeSpec(body);
    const node = structuredClone(e.obj);
    const newRole = spec.Role !== node.Spec.Role;
    if (newRole && spec.Role === 'worker') {
      const managers = this.store.list('nodes').filter((n) => n.obj.Spec.Role === 'manager');
      if (managers.length <= 1) throw new InvalidParameter('rpc error: code = FailedPrecondition desc = attempting to demote the last manager of the swarm');
      // Without the demoted member, the others must still be a majority of the members left.
      const reachable = managers.filter((n) => n.obj.ID !== node.ID && this.store.get('sessions', n.obj.ID)).length;
      if (reachable < Math.floor((managers.length - 1) / 2) + 1) {
        throw new InvalidParameter('rpc error: code = FailedPrecondition desc = can\'t remove member from the raft: this would result in a loss of quorum');
      }
      delete node.ManagerStatus;
    }
    node.Spec = { ...spec, Membership: node.Spec.Membership ?? 'accepted' };
    node.UpdatedAt = now();
    await this.store.update('nodes', e.obj.ID, v, node);
    if (newRole) await roleChanged(node, spec.Role);
    this.events.publish('node', 'update', e.obj.ID, { name: node.Description?.Hostname ?? '' });
  }

  async removeNode(ref: string, force: boolean, self: string): Promise<Obj> {
    const e = this.node(ref);
    const n = e.obj;
    if (n.ID === self) throw new Conflict('rpc error: code = FailedPrecondition desc = node ' + n.ID + ' is a cluster manager and is a member of the raft cluster. It must be demoted to worker before removal');
    if (n.Spec.Role === 'manager') throw new Conflict(`rpc error: code = FailedPrecondition desc = node ${n.ID} is a cluster manager and is a member of the raft cluster. It must be demoted to worker before removal`);
    if (!force && n.Status?.State !== 'down') {
      throw new Conflict(`rpc error: code = FailedPrecondition desc = node ${n.ID} is not down and can't be removed`);
    }
    await this.store.remove('nodes', n.ID);
    await this.store.remove('certs', n.ID).catch(() => undefined);
    this.events.publish('node', 'remove', n.ID, { name: n.Description?.Hostname ?? '' });
    return n;
  }

  // -- services --
  service(ref: string): Entry {
    return lookup(this.store, 'services', ref, (o) => o.Spec?.Name, 'service');
  }

  serviceView(e: Entry, withStatus: boolean): Obj {
    const v = this.store.view(e);
    delete v.Internal;
    if (withStatus) {
      const tasks = this.store.list('tasks').filter((t) => t.obj.ServiceID === v.ID);
      const mode = serviceMode(v.Spec);
      const iteration = v.JobStatus?.JobIteration?.Index;
      const current = isJob(v.Spec) ? tasks.filter((t) => t.obj.JobIteration?.Index === iteration) : tasks;
      const running = current.filter((t) => t.obj.Status?.State === 'running' && (t.obj.DesiredState === 'running' || t.obj.DesiredState === 'complete')).length;
      const completed = isJob(v.Spec) ? current.filter((t) => t.obj.Status?.State === 'complete').length : 0;
      let desired = 0;
      if (mode === 'replicated') desired = v.Spec.Mode.Replicated.Replicas;
      else if (mode === 'replicated-job') desired = Math.min(v.Spec.Mode.ReplicatedJob.MaxConcurrent, Math.max(0, v.Spec.Mode.ReplicatedJob.TotalCompletions - completed));
      else desired = new Set(current.filter((t) => t.obj.DesiredState === 'running' || t.obj.DesiredState === 'complete').map((t) => t.obj.NodeID)).size;
      v.ServiceStatus = { RunningTasks: running, DesiredTasks: desired, CompletedTasks: completed };
    }
    return v;
  }

  listServices(filters: Filters, withStatus: boolean): Obj[] {
    return this.store
      .list('services')
      .filter((e) => {
        const s = e.obj;
        if (!prefixMatch(filters.get('id'), s.ID)) return false;
        if (filters.get('name') && !filters.get('name')!.some((n) => String(s.Spec.Name).startsWith(n))) return false;
        if (!exactMatch(filters.get('mode'), serviceMode(s.Spec))) return false;
        if (!matchLabels(filters.get('label'), s.Spec.Labels ?? {})) return false;
        return true;
      })
      .map((e) => this.serviceView(e, withStatus));
  }

  private checkReferences(spec: Obj): void {
    resolveServiceNetworks(this.store, spec);
    const cs = spec.TaskTemplate.ContainerSpec;
    for (const [field, kind] of [['Secrets', 'secrets'], ['Configs', 'configs']] as const) {
      for (const ref of cs[field] ?? []) {
        const id = ref[field === 'Secrets' ? 'SecretID' : 'ConfigID'];
        const name = ref[field === 'Secrets' ? 'SecretName' : 'ConfigName'];
        const found = this.store.get(kind, id) ?? this.store.list(kind).find((e) => e.obj.Spec.Name === name);
        if (!found) throw new InvalidParameter(`rpc error: code = InvalidArgument desc = ${kind.slice(0, -1)} not found: ${name ?? id}`);
        ref[field === 'Secrets' ? 'SecretID' : 'ConfigID'] = found.obj.ID;
        ref[field === 'Secrets' ? 'SecretName' : 'ConfigName'] = found.obj.Spec.Name;
      }
    }
  }

  async createService(body: unknown): Promise<{ ID: string; Warnings?: string[] }> {
    const spec = validateServiceSpec(body);
    this.checkReferences(spec);
    const id = newObjectId(randomBytes(16));
    const t = now();
    const service: Obj = {
      ID: id,
      CreatedAt: t,
      UpdatedAt: t,
      Spec: spec,
      Endpoint: { Spec: { Mode: spec.EndpointSpec?.Mode ?? 'vip', ...(spec.EndpointSpec?.Ports ? { Ports: spec.EndpointSpec.Ports } : {}) } },
    };
    if (spec.EndpointSpec?.Ports) service.Endpoint.Ports = spec.EndpointSpec.Ports.map((p: Obj) => ({ Protocol: 'tcp', ...p, PublishMode: p.PublishMode ?? 'ingress' }));
    await this.mesh(service);
    const rev = await this.store.create('services', id, service, { name: spec.Name });
    const jobStatus = isJob(spec) ? { JobStatus: { JobIteration: { Index: rev }, LastExecution: now() } } : {};
    await this.store.mutate('services', id, (s) => ({ ...s, SpecVersion: { Index: rev }, ...jobStatus }));
    this.events.publish('service', 'create', id, { name: spec.Name });
    return { ID: id };
  }

  async updateService(ref: string, version: string | undefined, body: unknown, rollback: boolean): Promise<{ Warnings: string[] }> {
    const v = parseVersion(version);
    const e = this.service(ref);
    const old = e.obj;
    let spec: Obj;
    if (rollback) {
      if (!old.PreviousSpec) throw new InvalidParameter(`rpc error: code = FailedPrecondition desc = service ${old.ID} does not have a previous spec`);
      spec = old.PreviousSpec;
    } else {
      spec = validateServiceSpec(body);
      this.checkReferences(spec);
    }
    if (spec.Name !== old.Spec.Name) throw new InvalidParameter('rpc error: code = Unimplemented desc = renaming services is not supported');
    if (serviceMode(spec) !== serviceMode(old.Spec)) throw new InvalidParameter('rpc error: code = Unimplemented desc = service mode change is not allowed');
    const service: Obj = structuredClone(old);
    service.PreviousSpec = old.Spec;
    service.PreviousSpecVersion = old.SpecVersion;
    service.Spec = spec;
    service.SpecVersion = { Index: e.modRev };
    service.UpdatedAt = now();
    // Updating a job runs it again.
    if (isJob(spec)) service.JobStatus = { JobIteration: { Index: e.modRev }, LastExecution: now() };
    service.Endpoint = { Spec: { Mode: spec.EndpointSpec?.Mode ?? 'vip', ...(spec.EndpointSpec?.Ports ? { Ports: spec.EndpointSpec.Ports } : {}) } };
    if (spec.EndpointSpec?.Ports) service.Endpoint.Ports = spec.EndpointSpec.Ports.map((p: Obj) => ({ Protocol: 'tcp', ...p, PublishMode: p.PublishMode ?? 'ingress' }));
    await this.mesh(service);
    // The VIPs it keeps; the leader gives those of networks it joins (one allocator for all addresses).
    const vips = keptVips(service, old.Endpoint?.VirtualIPs);
    if (vips.length) service.Endpoint.VirtualIPs = vips;
    const changesTasks = JSON.stringify(spec.TaskTemplate) !== JSON.stringify(old.Spec.TaskTemplate) || JSON.stringify(spec.EndpointSpec ?? {}) !== JSON.stringify(old.Spec.EndpointSpec ?? {});
    if (changesTasks && !isJob(spec)) {
      service.UpdateStatus = rollback
        ? { State: 'rollback_started', StartedAt: now(), Message: 'manually requested rollback' }
        : { State: 'updating', StartedAt: now(), Message: 'update in progress' };
    }
    await this.store.update('services', old.ID, v, service);
    this.events.publish('service', 'update', old.ID, { name: spec.Name });
    return { Warnings: [] };
  }

  async removeService(ref: string): Promise<void> {
    const e = this.service(ref);
    await this.store.remove('services', e.obj.ID, { name: e.obj.Spec.Name });
    this.events.publish('service', 'remove', e.obj.ID, { name: e.obj.Spec.Name });
  }

  // -- tasks --
  task(ref: string): Entry {
    return lookup(this.store, 'tasks', ref, () => undefined, 'task');
  }

  taskView(e: Entry): Obj {
    const v = this.store.view(e);
    delete v.NoRestart;
    delete v.UpdateStop;
    delete v.ServiceAnnotations;
    return v;
  }

  listTasks(filters: Filters): Obj[] {
    const services = this.store.list('services');
    const nodes = this.store.list('nodes');
    const serviceIds = filters.get('service')?.flatMap((ref) => services.filter((s) => s.obj.ID === ref || s.obj.Spec.Name === ref || s.obj.ID.startsWith(ref)).map((s) => s.obj.ID));
    const nodeIds = filters.get('node')?.flatMap((ref) => nodes.filter((n) => n.obj.ID === ref || n.obj.Description?.Hostname === ref || n.obj.ID.startsWith(ref)).map((n) => n.obj.ID));
    const upToDate = filters.get('_up-to-date');
    return this.store
      .list('tasks')
      .filter((e) => {
        const t = e.obj;
        if (!prefixMatch(filters.get('id'), t.ID)) return false;
        if (serviceIds && !serviceIds.includes(t.ServiceID)) return false;
        if (nodeIds && !nodeIds.includes(t.NodeID)) return false;
        // As swarmkit's: a task's labels are its service's (`docker stack ps` lists by the stack's label).
        if (!matchLabels(filters.get('label'), { ...(this.store.get('services', t.ServiceID)?.obj.Spec?.Labels ?? {}), ...(t.Labels ?? {}) })) return false;
        if (filters.get('desired-state') && !filters.get('desired-state')!.includes(t.DesiredState)) return false;
        if (filters.get('name')) {
          const svc = this.store.get('services', t.ServiceID)?.obj;
          const name = svc ? `${svc.Spec.Name}.${t.Slot ?? t.NodeID}` : '';
          if (!filters.get('name')!.some((n) => name.startsWith(n))) return false;
        }
        if (upToDate && upToDate.some((x) => x === 'true' || x === '1')) {
          const svc = this.store.get('services', t.ServiceID)?.obj;
          if (!svc || isDirty(t, svc)) return false;
        }
        return true;
      })
      .map((e) => this.taskView(e));
  }

  // -- secrets and configs --
  private payloadObject(kind: 'secrets' | 'configs', ref: string): Entry {
    return lookup(this.store, kind, ref, (o) => o.Spec?.Name, kind.slice(0, -1));
  }

  payloadView(kind: 'secrets' | 'configs', e: Entry): Obj {
    const v = this.store.view(e);
    v.Spec = { ...v.Spec };
    // A secret's value never leaves the store; a config's is part of its spec.
    if (kind === 'secrets') delete v.Spec.Data;
    return v;
  }

  listPayloads(kind: 'secrets' | 'configs', filters: Filters): Obj[] {
    return this.store
      .list(kind)
      .filter((e) => {
        const o = e.obj;
        if (!prefixMatch(filters.get('id'), o.ID)) return false;
        if (filters.get('name') && !filters.get('name')!.some((n) => String(o.Spec.Name).startsWith(n))) return false;
        if (!exactMatch(filters.get('names'), o.Spec.Name)) return false;
        if (!matchLabels(filters.get('label'), o.Spec.Labels ?? {})) return false;
        return true;
      })
      .map((e) => this.payloadView(kind, e));
  }

  inspectPayload(kind: 'secrets' | 'configs', ref: string): Obj {
    return this.payloadView(kind, this.payloadObject(kind, ref));
  }

  async createPayload(kind: 'secrets' | 'configs', body: unknown): Promise<{ ID: string }> {
    const what = kind.slice(0, -1);
    if (!isObject(body)) throw new InvalidParameter(`${what} spec must be a JSON object`);
    const name = checkName(body.Name ?? '', what);
    const labels = checkLabels(body.Labels, what);
    if (body.Driver !== undefined && body.Driver !== null && isObject(body.Driver) && body.Driver.Name) throw new InvalidParameter(`${what} drivers are not supported by this engine`);
    if (body.Data === undefined || typeof body.Data !== 'string') throw new InvalidParameter(`rpc error: code = InvalidArgument desc = ${what} data must be provided`);
    const data = Buffer.from(body.Data, 'base64');
    const limit = kind === 'secrets' ? 500 * 1024 : 1000 * 1024;
    if (data.length === 0 && kind === 'secrets') throw new InvalidParameter(`rpc error: code = InvalidArgument desc = secret data must be larger than 0 and less than ${limit} bytes`);
    if (data.length > limit) throw new InvalidParameter(`rpc error: code = InvalidArgument desc = ${what} data must be larger than 0 and less than ${limit} bytes`);
    const id = newObjectId(randomBytes(16));
    const t = now();
    const spec: Obj = { Name: name, Labels: labels, Data: kind === 'secrets' ? this.seal.seal(data) : data.toString('base64') };
    if (isObject(body.Templating)) spec.Templating = body.Templating;
    await this.store.create(kind, id, { ID: id, CreatedAt: t, UpdatedAt: t, Spec: spec }, { name });
    this.events.publish(what as 'secret' | 'config', 'create', id, { name });
    return { ID: id };
  }

  async updatePayload(kind: 'secrets' | 'configs', ref: string, version: string | undefined, body: unknown): Promise<void> {
    const what = kind.slice(0, -1);
    const v = parseVersion(version);
    const e = this.payloadObject(kind, ref);
    if (!isObject(body)) throw new InvalidParameter(`${what} spec must be a JSON object`);
    const o = structuredClone(e.obj);
    if (body.Name !== undefined && body.Name !== o.Spec.Name) throw new InvalidParameter(`rpc error: code = InvalidArgument desc = only updates to Labels are allowed`);
    if (body.Data !== undefined && body.Data !== '' && body.Data !== o.Spec.Data) throw new InvalidParameter(`rpc error: code = InvalidArgument desc = only updates to Labels are allowed`);
    o.Spec.Labels = checkLabels(body.Labels, what);
    o.UpdatedAt = now();
    await this.store.update(kind, o.ID, v, o);
    this.events.publish(what as 'secret' | 'config', 'update', o.ID, { name: o.Spec.Name });
  }

  async removePayload(kind: 'secrets' | 'configs', ref: string): Promise<void> {
    const what = kind.slice(0, -1);
    const e = this.payloadObject(kind, ref);
    const field = kind === 'secrets' ? 'Secrets' : 'Configs';
    const idField = kind === 'secrets' ? 'SecretID' : 'ConfigID';
    const users = this.store
      .list('services')
      .filter((s) => (s.obj.Spec.TaskTemplate?.ContainerSpec?.[field] ?? []).some((r: Obj) => r[idField] === e.obj.ID))
      .map((s) => s.obj.Spec.Name);
    if (users.length > 0) throw new Conflict(`rpc error: code = InvalidArgument desc = ${what} '${e.obj.Spec.Name}' is in use by the following service: ${users.join(', ')}`);
    await this.store.remove(kind, e.obj.ID, { name: e.obj.Spec.Name });
    this.events.publish(what as 'secret' | 'config', 'remove', e.obj.ID, { name: e.obj.Spec.Name });
  }
}

export { isTerminal, stateRank, isJob, lookup, serviceMode, validateNodeSpec, validateServiceSpec };
