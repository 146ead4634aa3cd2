/**
 * A service's panel in the Swarm view: its tasks (node, state, error), its logs followed while the panel is
 * open, an update of its image and a rollback to its previous spec; and the swarm's secrets and configs, listed (their values are
 * never shown: the engine does not give a secret's).
 */
import { useQuery } from '@tanstack/react-query';
import { useEffect, useRef, useState } from 'react';
import { ListTable, QueryState } from '../App';
import { ago, shortId, useAction, useTransport } from '../engine';
import { frameDemuxer, lineSplitter } from '../transport';
import type { Node, Service, Task } from './swarm';

export const nodeName = (n: Node | undefined) => n?.Description?.Hostname ?? n?.Spec.Name ?? '';

/** The newest task of each slot first (a slot's history follows), as `docker service ps` orders them. */
function orderTasks(tasks: Task[]): Task[] {
  return [...tasks].sort((a, b) => (a.Slot ?? 0) - (b.Slot ?? 0) || String(b.CreatedAt ?? '').localeCompare(String(a.CreatedAt ?? '')));
}

export function ServiceDetail(props: { service: Service; tasks: Task[]; nodes: Map<string, Node> }) {
  const s = props.service;
  return (
    <div className="panel" aria-label={`Service ${s.Spec.Name}`} role="region">
      <div className="page-head">
        <h2>
          {s.Spec.Name} <span className="muted small">{shortId(s.ID)}</span>
        </h2>
        {s.UpdateStatus?.State && <span className="badge">{s.UpdateStatus.State.replace(/_/g, ' ')}</span>}
        {s.PreviousSpec && <RollbackButton service={s} />}
      </div>
      <ImageUpdate service={s} />
      <ListTable aria-label="Tasks" columns={['Task', 'Node', 'State', 'Desired', 'Error']}>
        {orderTasks(props.tasks).map((k) => (
          <tr key={k.ID} data-task={k.ID}>
            <td className="mono">
              {s.Spec.Name}.{k.Slot ?? shortId(k.NodeID ?? '')}
              <span className="muted small"> {shortId(k.ID)}</span>
            </td>
            <td>{nodeName(props.nodes.get(k.NodeID ?? '')) || '—'}</td>
            <td>
              <span className={`badge ${k.Status?.State === 'running' ? 'running' : k.Status?.State === 'failed' || k.Status?.State === 'rejected' ? 'paused' : 'exited'}`}>{k.Status?.State}</span>
            </td>
            <td>{k.DesiredState}</td>
            <td className="small">{k.Status?.Err ?? ''}</td>
          </tr>
        ))}
      </ListTable>
      {props.tasks.length === 0 && <p className="muted">No tasks yet.</p>}
      <h2>Logs</h2>
      <ServiceLogs id={s.ID} tty={!!s.Spec.TaskTemplate?.ContainerSpec?.TTY} />
    </div>
  );
}

const MAX_LINES = 2000;

/** The service's logs (its tasks' on this manager), followed while the panel is open. */
function ServiceLogs(props: { id: string; tty: boolean }) {
  const t = useTransport();
  const [lines, setLines] = useState<Array<{ stream: string; text: string }>>([]);
  const [error, setError] = useState<string | null>(null);
  const box = useRef<HTMLPreElement>(null);
  useEffect(() => {
    const abort = new AbortController();
    let batch: Array<{ stream: string; text: string }> = [];
    let scheduled = false;
    const flush = () => {
      scheduled = false;
      const add = batch;
      batch = [];
      setLines((old) => old.concat(add).slice(-MAX_LINES));
    };
    const push = (stream: string) =>
      lineSplitter((text) => {
        batch.push({ stream, text });
        if (!scheduled) {
          scheduled = true;
          requestAnimationFrame(flush);
        }
      });
    const out = push('stdout');
    const err = push('stderr');
    setLines([]);
    setError(null);
    const demux = props.tty ? out : frameDemuxer((stream, b) => (stream === 'stderr' ? err : out)(b));
    t.stream('GET', `/services/${encodeURIComponent(props.id)}/logs?stdout=1&stderr=1&follow=1&tail=500`, demux, { signal: abort.signal }).catch((e: Error) => {
      if (!abort.signal.aborted) setError(e.message);
    });
    return () => abort.abort();
  }, [t, props.id, props.tty]);
  useEffect(() => {
    if (box.current) box.current.scrollTop = box.current.scrollHeight;
  }, [lines]);
  return (
    <>
      {error && <div className="error inline">{error}</div>}
      <pre className="service-logs" ref={box} data-testid="service-logs" tabIndex={0}>
        {lines.length === 0 ? <span className="muted">No output yet: lines appear here as the service's tasks write them.</span> : lines.map((l, i) => <div key={i} className={l.stream}>{l.text}</div>)}
      </pre>
    </>
  );
}

/** `docker service update --image`: the tasks replaced by the service's update policy (the badge above follows it). */
function ImageUpdate(props: { service: Service }) {
  const t = useTransport();
  const s = props.service;
  const image = String(s.Spec.TaskTemplate?.ContainerSpec?.Image ?? '').split('@')[0]!;
  const [value, setValue] = useState<string | null>(null);
  const update = useAction(async (to: string) => {
    const current = await t.request<Service & { Spec: { TaskTemplate: { ContainerSpec: Record<string, unknown> } } }>('GET', `/services/${encodeURIComponent(s.ID)}`);
    const spec = { ...current.Spec, TaskTemplate: { ...current.Spec.TaskTemplate, ContainerSpec: { ...current.Spec.TaskTemplate.ContainerSpec, Image: to } } };
    await t.request('POST', `/services/${encodeURIComponent(s.ID)}/update?version=${current.Version.Index}`, { body: spec, headers: { 'X-Registry-Auth': btoa('{}') } });
    setValue(null);
  });
  const shown = value ?? image;
  return (
    <form
      className="inline-form wide"
      aria-label={`Update ${s.Spec.Name}`}
      onSubmit={(e) => {
        e.preventDefault();
        if (shown.trim() && shown.trim() !== image) update.mutate(shown.trim());
      }}
    >
      <input className="wide-input mono" value={shown} onChange={(e) => setValue(e.target.value)} aria-label="Image of the service" />
      <button type="submit" disabled={update.isPending || !shown.trim() || shown.trim() === image} aria-busy={update.isPending || undefined}>
        {update.isPending ? 'Updating…' : 'Update image'}
      </button>
    </form>
  );
}

/** `docker service rollback`: the previous spec back, through an update that names it (`rollback=previous`). */
function RollbackButton(props: { service: Service }) {
  const t = useTransport();
  const s = props.service;
  const rollback = useAction(async () => {
    const current = await t.request<Service>('GET', `/services/${encodeURIComponent(s.ID)}`);
    await t.request('POST', `/services/${encodeURIComponent(s.ID)}/update?version=${current.Version.Index}&rollback=previous`, { body: current.Spec });
  });
  return (
    <button type="button" disabled={rollback.isPending} aria-busy={rollback.isPending || undefined} onClick={() => rollback.mutate(undefined)}>
      {rollback.isPending ? 'Rolling back…' : 'Roll back'}
    </button>
  );
}

interface SwarmObject {
  ID: string;
  CreatedAt?: string;
  UpdatedAt?: string;
  Spec: { Name: string; Labels?: Record<string, string> };
}

const since = (at?: string) => (at ? ago(Date.parse(at) / 1000) : '—');

/** The swarm's secrets and configs: name, id, when made and changed, labels (secret and config events refresh them). */
export function SwarmObjects() {
  const t = useTransport();
  const secrets = useQuery({ queryKey: ['swarm', 'secrets'], queryFn: () => t.request<SwarmObject[]>('GET', '/secrets') });
  const configs = useQuery({ queryKey: ['swarm', 'configs'], queryFn: () => t.request<SwarmObject[]>('GET', '/configs') });
  const table = (label: string, q: typeof secrets) => (
    <QueryState error={q.error} loading={q.isLoading}>
      {(q.data ?? []).length === 0 ? (
        <p className="muted">No {label.toLowerCase()}. Create one with docker {label.toLowerCase().replace(/s$/, '')} create.</p>
      ) : (
        <ListTable aria-label={label} columns={['Name', 'ID', 'Created', 'Updated', 'Labels']}>
          {[...(q.data ?? [])]
            .sort((a, b) => a.Spec.Name.localeCompare(b.Spec.Name))
            .map((o) => (
              <tr key={o.ID} data-name={o.Spec.Name}>
                <td>
                  <strong>{o.Spec.Name}</strong>
                </td>
                <td className="mono">{shortId(o.ID)}</td>
                <td className="nowrap">{since(o.CreatedAt)}</td>
                <td className="nowrap">{since(o.UpdatedAt)}</td>
                <td className="mono small">{Object.entries(o.Spec.Labels ?? {}).map(([k, v]) => `${k}=${v}`).join(', ') || '—'}</td>
              </tr>
            ))}
        </ListTable>
      )}
    </QueryState>
  );
  return (
    <>
      <h2>Secrets</h2>
      {table('Secrets', secrets)}
      <h2>Configs</h2>
      {table('Configs', configs)}
    </>
  );
}
