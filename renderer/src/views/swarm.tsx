/**
 * Swarm mode as a manager sees it: services (mode, replicas running of desired, image, published ports) with
 * create (swarm-create.tsx), scale and remove; a service's tasks (node, state, error) and its logs; nodes (role, availability, state,
 * leader) with drain and activate, promote and demote; secrets and configs (swarm-service.tsx). Outside a swarm, an empty state that offers `swarm init` on this node.
 * Everything is refreshed by events: service, node (a node's state and the leader changing too), secret and
 * config events, and the container events of this node's tasks (the engine emits no task events, as Docker
 * does not: the state of tasks on other nodes shows when one of those events, or a reload, refreshes the list).
 */
import { useQuery, useQueryClient } from '@tanstack/react-query';
import { useEffect, useState, type FormEvent } from 'react';
import { Confirm, ListTable, navigate, PendingButton, QueryState, RemoveButton } from '../App';
import { NARROW, onEngineEvent, useAction, useMediaQuery, usePending, useTransport } from '../engine';
import { CreateService } from './swarm-create';
import { nodeName, ServiceDetail, SwarmObjects } from './swarm-service';

interface SwarmInfo {
  Swarm?: { LocalNodeState?: string; ControlAvailable?: boolean; NodeID?: string; Error?: string };
}
export interface Service {
  ID: string;
  Version: { Index: number };
  Spec: {
    Name: string;
    Mode?: { Replicated?: { Replicas?: number }; Global?: object; ReplicatedJob?: { TotalCompletions?: number }; GlobalJob?: object };
    TaskTemplate?: { ContainerSpec?: { Image?: string; TTY?: boolean } };
  };
  Endpoint?: { Ports?: Array<{ PublishedPort?: number; TargetPort?: number; Protocol?: string; PublishMode?: string }> };
  ServiceStatus?: { RunningTasks?: number; DesiredTasks?: number; CompletedTasks?: number };
  PreviousSpec?: object;
  UpdateStatus?: { State?: string; Message?: string };
}
export interface Node {
  ID: string;
  Version: { Index: number };
  Spec: { Role?: string; Availability?: string; Name?: string; Labels?: Record<string, string> };
  Description?: { Hostname?: string };
  Status?: { State?: string; Addr?: string };
  ManagerStatus?: { Leader?: boolean; Reachability?: string };
}
export interface Task {
  ID: string;
  Slot?: number;
  NodeID?: string;
  ServiceID: string;
  DesiredState?: string;
  CreatedAt?: string;
  Status?: { State?: string; Err?: string; Message?: string };
}

/** A service's mode as `docker service ls` names it. */
export function serviceMode(s: Service): string {
  const m = s.Spec.Mode ?? {};
  if (m.Global) return 'global';
  if (m.ReplicatedJob) return 'replicated job';
  if (m.GlobalJob) return 'global job';
  return 'replicated';
}

/** Published ports as `docker service ls` shows them: `*:8080->80/tcp`. */
export function servicePorts(s: Service): string {
  return (s.Endpoint?.Ports ?? []).filter((p) => p.PublishedPort).map((p) => `*:${p.PublishedPort}->${p.TargetPort}/${p.Protocol ?? 'tcp'}`).join(', ');
}

const imageOf = (s: Service) => String(s.Spec.TaskTemplate?.ContainerSpec?.Image ?? '').split('@')[0];

export function SwarmView(props: { selected?: string }) {
  const t = useTransport();
  const info = useQuery({ queryKey: ['swarm', 'info'], queryFn: () => t.request<SwarmInfo>('GET', '/info') });
  const swarm = info.data?.Swarm;
  const manager = swarm?.LocalNodeState === 'active' && !!swarm.ControlAvailable;
  return (
    <section>
      <header className="page-head">
        <h1>Swarm</h1>
      </header>
      <QueryState error={info.error} loading={info.isLoading}>
        {manager ? <SwarmManager selected={props.selected} self={swarm?.NodeID} /> : <NotInSwarm state={swarm?.LocalNodeState} worker={swarm?.LocalNodeState === 'active'} error={swarm?.Error} />}
      </QueryState>
    </section>
  );
}

function NotInSwarm(props: { state?: string; worker: boolean; error?: string }) {
  const t = useTransport();
  const [advertise, setAdvertise] = useState('');
  const init = useAction(async (addr: string) => {
    const body: Record<string, unknown> = { ListenAddr: addr ? `${addr}:2377` : '0.0.0.0:2377' };
    if (addr) body.AdvertiseAddr = addr;
    await t.request('POST', '/swarm/init', { body });
  });
  if (props.worker) {
    return (
      <div className="empty" data-testid="swarm-empty">
        <p>This engine is a worker of a swarm: services and nodes are managed on its managers.</p>
      </div>
    );
  }
  const submit = (e: FormEvent) => {
    e.preventDefault();
    init.mutate(advertise.trim());
  };
  return (
    <div className="empty" data-testid="swarm-empty">
      <p>This engine is not in a swarm{props.state && props.state !== 'inactive' ? ` (state: ${props.state})` : ''}.</p>
      {props.error && <p className="error inline">{props.error}</p>}
      <p className="muted">Make this node the first manager of a new swarm, or join an existing one with docker swarm join.</p>
      <form className="inline-form swarm-init" onSubmit={submit} aria-label="Initialize a swarm">
        <input value={advertise} onChange={(e) => setAdvertise(e.target.value)} placeholder="advertise address" aria-label="Advertise address" />
        <button type="submit" className="primary" disabled={init.isPending} aria-busy={init.isPending || undefined}>
          {init.isPending ? 'Initializing…' : 'Initialize swarm'}
        </button>
      </form>
    </div>
  );
}

/**
 * A task's container event comes before the node's agent has reported the task's new state to the managers:
 * the list that the event refreshes may still show the old one. Each such event is followed by two more looks
 * (bounded, and only after an event: nothing is asked while nothing happens).
 */
function useTaskSettle(): void {
  const qc = useQueryClient();
  useEffect(() => {
    const timers = new Set<ReturnType<typeof setTimeout>>();
    const off = onEngineEvent((ev) => {
      if (ev.Type !== 'container' || !ev.Actor.Attributes?.['com.docker.swarm.task.id']) return;
      for (const ms of [400, 1500]) {
        const timer = setTimeout(() => {
          timers.delete(timer);
          void qc.invalidateQueries({ queryKey: ['swarm'] });
        }, ms);
        timers.add(timer);
      }
    });
    return () => {
      off();
      for (const timer of timers) clearTimeout(timer);
    };
  }, [qc]);
}

/**
 * An update sends the version it read just before; when the object changed in between (a node's status, an
 * orchestrator's write), the engine refuses it as out of sequence: read it again and send the change again.
 */
async function withFreshVersion(update: () => Promise<void>): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await update();
    } catch (err) {
      if (attempt >= 3 || !/update out of sequence/.test((err as Error).message)) throw err;
    }
  }
}

type ServiceVerb = { verb: 'scale'; id: string; replicas: number } | { verb: 'remove'; id: string };
type NodeVerb = { id: string; availability?: 'active' | 'drain' | 'pause'; role?: 'manager' | 'worker' };

function SwarmManager(props: { selected?: string; self?: string }) {
  const t = useTransport();
  const narrow = useMediaQuery(NARROW);
  const services = useQuery({ queryKey: ['swarm', 'services'], queryFn: () => t.request<Service[]>('GET', '/services?status=true') });
  const nodes = useQuery({ queryKey: ['swarm', 'nodes'], queryFn: () => t.request<Node[]>('GET', '/nodes') });
  const tasks = useQuery({ queryKey: ['swarm', 'tasks'], queryFn: () => t.request<Task[]>('GET', '/tasks') });
  const [confirm, setConfirm] = useState<Service | null>(null);
  useTaskSettle();
  const [scaleTo, setScaleTo] = useState<Record<string, string>>({});

  const serviceVerb = useAction(
    async (v: ServiceVerb) => {
      if (v.verb === 'remove') {
        await t.request('DELETE', `/services/${encodeURIComponent(v.id)}`);
        if (props.selected === v.id) navigate('swarm');
        return;
      }
      await withFreshVersion(async () => {
        const current = await t.request<Service>('GET', `/services/${encodeURIComponent(v.id)}`);
        const spec = { ...current.Spec, Mode: { Replicated: { Replicas: v.replicas } } };
        await t.request('POST', `/services/${encodeURIComponent(v.id)}/update?version=${current.Version.Index}`, { body: spec });
      });
    },
    { mutationKey: ['service-verb'] },
  );
  const nodeVerb = useAction(
    async (v: NodeVerb) => {
      await withFreshVersion(async () => {
        const current = await t.request<Node>('GET', `/nodes/${encodeURIComponent(v.id)}`);
        const spec = { ...current.Spec, ...(v.availability ? { Availability: v.availability } : {}), ...(v.role ? { Role: v.role } : {}) };
        await t.request('POST', `/nodes/${encodeURIComponent(v.id)}/update?version=${current.Version.Index}`, { body: spec });
      });
    },
    { mutationKey: ['node-verb'] },
  );
  const pendingServices = new Map(usePending<ServiceVerb>(['service-verb']).map((v) => [v.id, v.verb]));
  const pendingNodes = new Map(usePending<NodeVerb>(['node-verb']).map((v) => [v.id, v]));
  const nodesById = new Map((nodes.data ?? []).map((n) => [n.ID, n]));
  const rows = [...(services.data ?? [])].sort((a, b) => a.Spec.Name.localeCompare(b.Spec.Name));
  const selected = rows.find((s) => s.ID === props.selected);

  return (
    <>
      <div className="page-head">
        <h2>Services</h2>
        <CreateService onCreated={(id) => navigate('swarm', id)} />
      </div>
      <QueryState error={services.error} loading={services.isLoading}>
        {rows.length === 0 ? (
          <p className="empty">No services. Create one here, or with docker service create.</p>
        ) : (
          <ListTable aria-label="Services" columns={['Name', !narrow && 'Mode', 'Replicas', 'Image', 'Ports', '']}>
            {rows.map((s) => {
              const busy = pendingServices.get(s.ID);
              const replicated = !!s.Spec.Mode?.Replicated;
              const desired = s.ServiceStatus?.DesiredTasks ?? s.Spec.Mode?.Replicated?.Replicas ?? 0;
              const value = scaleTo[s.ID] ?? String(s.Spec.Mode?.Replicated?.Replicas ?? '');
              return (
                <tr key={s.ID} data-service={s.Spec.Name} className={s.ID === props.selected ? 'selected' : undefined}>
                  <td>
                    <a href={`#/swarm/${encodeURIComponent(s.ID)}`}>
                      <strong>{s.Spec.Name}</strong>
                    </a>
                  </td>
                  {!narrow && <td>{serviceMode(s)}</td>}
                  <td className="nowrap" data-testid="replicas">
                    {s.ServiceStatus?.RunningTasks ?? 0}/{desired}
                  </td>
                  <td className="mono ellipsis">{imageOf(s)}</td>
                  <td className="mono small">{servicePorts(s) || '—'}</td>
                  <td className="row-actions">
                    {replicated && (
                      <form
                        className="scale"
                        aria-label={`Scale ${s.Spec.Name}`}
                        onSubmit={(e) => {
                          e.preventDefault();
                          // Once done, the field shows the service's own count again (changes made elsewhere included).
                          const done = () => setScaleTo(({ [s.ID]: _, ...others }) => others);
                          serviceVerb.mutate({ verb: 'scale', id: s.ID, replicas: Math.max(0, Number(value) || 0) }, { onSuccess: done });
                        }}
                      >
                        <input type="number" min={0} className="replicas" value={value} aria-label={`Replicas of ${s.Spec.Name}`} onChange={(e) => setScaleTo({ ...scaleTo, [s.ID]: e.target.value })} />
                        <PendingButton type="submit" disabled={!!busy} running={busy === 'scale'} pendingLabel="Scaling…">
                          Scale
                        </PendingButton>
                      </form>
                    )}
                    <RemoveButton disabled={!!busy} running={busy === 'remove'} onClick={() => setConfirm(s)} />
                  </td>
                </tr>
              );
            })}
          </ListTable>
        )}
      </QueryState>
      {selected && <ServiceDetail service={selected} tasks={(tasks.data ?? []).filter((k) => k.ServiceID === selected.ID)} nodes={nodesById} />}
      <h2>Nodes</h2>
      <QueryState error={nodes.error} loading={nodes.isLoading}>
        <ListTable aria-label="Nodes" columns={['Name', 'Role', 'Availability', 'State', !narrow && 'Manager', '']}>
          {(nodes.data ?? []).map((n) => {
            const busy = pendingNodes.get(n.ID);
            const draining = n.Spec.Availability === 'drain';
            const manager = n.Spec.Role === 'manager';
            return (
              <tr key={n.ID} data-node={nodeName(n)}>
                <td>
                  <strong>{nodeName(n)}</strong>
                  {n.ID === props.self && <span className="badge">this node</span>}
                  {narrow && n.ManagerStatus?.Leader && <span className="badge">Leader</span>}
                </td>
                <td>{n.Spec.Role}</td>
                <td>
                  <span className={`badge ${n.Spec.Availability === 'active' ? 'running' : 'paused'}`}>{n.Spec.Availability}</span>
                </td>
                <td>
                  <span className={`badge ${n.Status?.State === 'ready' ? 'running' : 'exited'}`}>{n.Status?.State}</span>
                </td>
                {!narrow && <td>{n.ManagerStatus ? (n.ManagerStatus.Leader ? 'Leader' : n.ManagerStatus.Reachability ?? '') : '—'}</td>}
                <td className="row-actions">
                  <PendingButton disabled={!!busy} running={!!busy?.availability} pendingLabel="Updating…" onClick={() => nodeVerb.mutate({ id: n.ID, availability: draining ? 'active' : 'drain' })}>
                    {draining ? 'Activate' : 'Drain'}
                  </PendingButton>
                  <PendingButton disabled={!!busy} running={!!busy?.role} pendingLabel={manager ? 'Demoting…' : 'Promoting…'} onClick={() => nodeVerb.mutate({ id: n.ID, role: manager ? 'worker' : 'manager' })}>
                    {manager ? 'Demote' : 'Promote'}
                  </PendingButton>
                </td>
              </tr>
            );
          })}
        </ListTable>
      </QueryState>
      <SwarmObjects />
      {confirm && (
        <Confirm
          title={`Remove ${confirm.Spec.Name}?`}
          confirmLabel="Remove"
          onCancel={() => setConfirm(null)}
          onConfirm={() => {
            serviceVerb.mutate({ verb: 'remove', id: confirm.ID });
            setConfirm(null);
          }}
        >
          <p>Its tasks are stopped on every node.</p>
        </Confirm>
      )}
    </>
  );
}
