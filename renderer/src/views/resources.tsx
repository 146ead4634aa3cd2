import { useQuery } from '@tanstack/react-query';
import { useEffect, useState, type FormEvent } from 'react';
import { Confirm, ListTable, navigate, QueryState, RemoveButton } from '../App';
import { ago, formatBytes, onEngineEvent, shortId, useAction, usePending, useTransport, type EngineEvent } from '../engine';
import { ApiError } from '../transport';
import type { ContainerSummary } from './containers';

function useContainers() {
  const t = useTransport();
  return useQuery({ queryKey: ['containers'], queryFn: () => t.request<ContainerSummary[]>('GET', '/containers/json?all=1') });
}

interface Network {
  Id: string;
  Name: string;
  Driver: string;
  Scope: string;
  Internal: boolean;
  IPAM: { Config: Array<{ Subnet?: string; Gateway?: string }> | null };
  Containers?: Record<string, { Name: string; IPv4Address: string }>;
}

const BUILTIN = new Set(['bridge', 'host', 'none']);

export function NetworksView(props: { selected?: string }) {
  const t = useTransport();
  const list = useQuery({ queryKey: ['networks'], queryFn: () => t.request<Network[]>('GET', '/networks') });
  const detail = useQuery({
    queryKey: ['network', props.selected],
    enabled: !!props.selected,
    queryFn: () => t.request<Network>('GET', `/networks/${props.selected}`),
  });
  const containers = useContainers();
  const [form, setForm] = useState({ name: '', subnet: '', gateway: '', internal: false });
  const [confirm, setConfirm] = useState<Network | null>(null);
  const [connectTo, setConnectTo] = useState('');
  const create = useAction(async () => {
    await t.request('POST', '/networks/create', {
      body: {
        Name: form.name.trim(),
        Driver: 'bridge',
        Internal: form.internal,
        IPAM: form.subnet.trim() ? { Config: [{ Subnet: form.subnet.trim(), Gateway: form.gateway.trim() || undefined }] } : undefined,
      },
    });
    setForm({ name: '', subnet: '', gateway: '', internal: false });
  });
  const remove = useAction((id: string) => t.request('DELETE', `/networks/${id}`), { mutationKey: ['network-remove'] });
  const removing = new Set(usePending<string>(['network-remove']));
  const connect = useAction(({ net, container }: { net: string; container: string }) => t.request('POST', `/networks/${net}/connect`, { body: { Container: container } }));
  const disconnect = useAction(({ net, container }: { net: string; container: string }) => t.request('POST', `/networks/${net}/disconnect`, { body: { Container: container } }), {
    mutationKey: ['network-disconnect'],
  });
  const disconnecting = new Set(usePending<{ container: string }>(['network-disconnect']).map((v) => v.container));
  const submit = (e: FormEvent) => {
    e.preventDefault();
    create.mutate(undefined);
  };
  return (
    <section>
      <header className="page-head">
        <h1>Networks</h1>
      </header>
      <form onSubmit={submit} className="panel create-form inline-form" aria-label="Create network">
        <input required value={form.name} onChange={(e) => setForm({ ...form, name: e.target.value })} placeholder="name" aria-label="Network name" />
        <input value={form.subnet} onChange={(e) => setForm({ ...form, subnet: e.target.value })} placeholder="subnet, e.g. 10.10.0.0/24" aria-label="Subnet" />
        <input value={form.gateway} onChange={(e) => setForm({ ...form, gateway: e.target.value })} placeholder="gateway" aria-label="Gateway" />
        <label>
          <input type="checkbox" checked={form.internal} onChange={(e) => setForm({ ...form, internal: e.target.checked })} /> Internal
        </label>
        <button type="submit" className="primary" disabled={create.isPending} aria-busy={create.isPending || undefined}>
          {create.isPending ? 'Creating…' : 'Create network'}
        </button>
      </form>
      <QueryState error={list.error} loading={list.isLoading}>
        <ListTable data-testid="networks" columns={['Name', 'ID', 'Driver', 'Subnet', 'Internal', '']}>
          {(list.data ?? []).map((n) => (
            <tr key={n.Id} tabIndex={0} className={props.selected === n.Id ? 'selected' : ''} onKeyDown={(e) => e.key === 'Enter' && navigate('networks', n.Id)}>
              <td>
                <a href={`#/networks/${n.Id}`}>{n.Name}</a>
              </td>
              <td className="mono">{shortId(n.Id)}</td>
              <td>{n.Driver ?? '—'}</td>
              <td className="mono">{(n.IPAM?.Config ?? []).map((c) => c.Subnet).join(', ')}</td>
              <td>{n.Internal ? 'yes' : ''}</td>
              <td className="row-actions">
                {!BUILTIN.has(n.Name) && (
                  <RemoveButton onClick={() => setConfirm(n)} aria-label={`Remove ${n.Name}`} running={removing.has(n.Id)} />
                )}
              </td>
            </tr>
          ))}
        </ListTable>
      </QueryState>
      {props.selected && detail.data && (
        <div className="panel">
          <h2>
            {detail.data.Name} <span className="muted small">{detail.data.Driver}</span>
          </h2>
          <ListTable columns={['Attached container', 'Address', '']}>
            {Object.keys(detail.data.Containers ?? {}).length === 0 && (
              <tr>
                <td colSpan={3} className="muted">
                  No containers attached.
                </td>
              </tr>
            )}
            {Object.entries(detail.data.Containers ?? {}).map(([id, c]) => (
              <tr key={id}>
                <td>{c.Name}</td>
                <td className="mono">{c.IPv4Address}</td>
                <td className="row-actions">
                  <button type="button" aria-label={`Disconnect ${c.Name}`} onClick={() => disconnect.mutate({ net: detail.data!.Id, container: id })} disabled={disconnecting.has(id)} aria-busy={disconnecting.has(id) || undefined}>
                    {disconnecting.has(id) ? 'Disconnecting…' : 'Disconnect'}
                  </button>
                </td>
              </tr>
            ))}
          </ListTable>
          <div className="inline-form">
            <select value={connectTo} onChange={(e) => setConnectTo(e.target.value)} aria-label="Container to connect">
              <option value="">container…</option>
              {(containers.data ?? []).map((c) => (
                <option key={c.Id} value={c.Id}>
                  {c.Names[0]?.replace(/^\//, '')}
                </option>
              ))}
            </select>
            <button type="button" disabled={!connectTo || connect.isPending} aria-busy={connect.isPending || undefined} onClick={() => connect.mutate({ net: detail.data!.Id, container: connectTo })}>
              {connect.isPending ? 'Connecting…' : 'Connect'}
            </button>
          </div>
          <pre className="json">{JSON.stringify(detail.data, null, 2)}</pre>
        </div>
      )}
      {confirm && (
        <Confirm
          title={`Remove network ${confirm.Name}?`}
          confirmLabel="Remove"
          onCancel={() => setConfirm(null)}
          onConfirm={() => {
            remove.mutate(confirm.Id);
            setConfirm(null);
          }}
        />
      )}
    </section>
  );
}

/** Events: the shared /events subscription feeds this list; kept while the view is open. */
export function EventsView() {
  const [events, setEvents] = useState<EngineEvent[]>([]);
  const [type, setType] = useState('all');
  const [search, setSearch] = useState('');
  useEffect(() => onEngineEvent((ev) => setEvents((old) => [ev, ...old].slice(0, 1000))), []);
  const q = search.toLowerCase();
  const shown = events.filter(
    (e) => (type === 'all' || e.Type === type) && (!q || e.Action.includes(q) || e.Actor.ID.includes(q) || Object.values(e.Actor.Attributes ?? {}).some((v) => v.toLowerCase().includes(q))),
  );
  return (
    <section>
      <header className="page-head">
        <h1>Events</h1>
        <select value={type} onChange={(e) => setType(e.target.value)} aria-label="Event type">
          {['all', 'container', 'image', 'volume', 'network', 'daemon', 'service', 'node'].map((x) => (
            <option key={x}>{x}</option>
          ))}
        </select>
        <input type="search" value={search} onChange={(e) => setSearch(e.target.value)} placeholder="Filter ( / )" aria-label="Filter events" />
      </header>
      {shown.length === 0 ? (
        <p className="empty">Waiting for events… (they appear live as the engine reports them)</p>
      ) : (
        <table className="list" data-testid="events">
          <tbody>
            {shown.map((e, i) => (
              <tr key={`${e.timeNano ?? e.time}-${i}`}>
                <td>{new Date(e.time * 1000).toLocaleTimeString()}</td>
                <td>{e.Type}</td>
                <td>{e.Action}</td>
                <td>{e.Actor.Attributes?.name ?? shortId(e.Actor.ID)}</td>
                <td className="mono small">{e.Actor.Attributes?.image ?? ''}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}

export function SystemView() {
  const t = useTransport();
  const version = useQuery({ queryKey: ['version'], queryFn: () => t.request<Record<string, any>>('GET', '/version') });
  const info = useQuery({ queryKey: ['info'], queryFn: () => t.request<Record<string, any>>('GET', '/info') });
  const df = useQuery({ queryKey: ['df'], queryFn: () => t.request<Record<string, any>>('GET', '/system/df') });
  const [confirm, setConfirm] = useState(false);
  const [pruned, setPruned] = useState<string | null>(null);
  const prune = useAction(async () => {
    let reclaimed = 0;
    const notes: string[] = [];
    for (const path of ['/containers/prune', '/images/prune', '/networks/prune', '/volumes/prune']) {
      try {
        const r = await t.request<{ SpaceReclaimed?: number }>('POST', path);
        reclaimed += r?.SpaceReclaimed ?? 0;
      } catch (err) {
        if (!(err instanceof ApiError && err.status === 404)) throw err;
        notes.push(`${path}: not available`);
      }
    }
    setPruned(`Reclaimed ${formatBytes(reclaimed)}${notes.length ? ` (${notes.join(', ')})` : ''}`);
  });
  const v = version.data;
  const i = info.data;
  return (
    <section>
      <header className="page-head">
        <h1>System</h1>
        <button type="button" className="danger" onClick={() => setConfirm(true)} disabled={prune.isPending} aria-busy={prune.isPending || undefined}>
          {prune.isPending ? 'Pruning…' : 'Prune…'}
        </button>
      </header>
      {pruned && <p className="note">{pruned}</p>}
      <div className="cards">
        <QueryState error={version.error} loading={version.isLoading}>
          <dl className="fields card">
            <h2>Version</h2>
            {[
              ['Engine', v?.Version],
              ['API', `${v?.ApiVersion} (min ${v?.MinAPIVersion})`],
              ['OS/Arch', `${v?.Os}/${v?.Arch}`],
              ['Kernel', v?.KernelVersion],
              ...((v?.Components ?? []) as Array<{ Name: string; Version: string }>).filter((c) => c.Name !== 'Engine').map((c) => [c.Name, c.Version]),
            ].map(([k, val]) => (
              <div key={k}>
                <dt>{k}</dt>
                <dd>{val}</dd>
              </div>
            ))}
          </dl>
        </QueryState>
        <QueryState error={info.error} loading={info.isLoading}>
          <dl className="fields card">
            <h2>Info</h2>
            {[
              ['Name', i?.Name],
              ['Containers', `${i?.Containers} (${i?.ContainersRunning} running, ${i?.ContainersPaused} paused, ${i?.ContainersStopped} stopped)`],
              ['Images', i?.Images],
              ['Storage driver', i?.Driver],
              ['Runtime', i?.DefaultRuntime],
              ['CPUs / memory', `${i?.NCPU} / ${formatBytes(i?.MemTotal)}`],
              ['Data root', i?.DockerRootDir],
              ['OS', i?.OperatingSystem],
            ].map(([k, val]) => (
              <div key={k}>
                <dt>{k}</dt>
                <dd>{val}</dd>
              </div>
            ))}
          </dl>
        </QueryState>
        <QueryState error={df.error} loading={df.isLoading}>
          <dl className="fields card" data-testid="disk-usage">
            <h2>Disk usage</h2>
            {(
              [
                ['Images', df.data?.ImageUsage],
                ['Containers', df.data?.ContainerUsage],
                ['Volumes', df.data?.VolumeUsage],
                ['Build cache', df.data?.BuildCacheUsage],
              ] as Array<[string, { ActiveCount: number; TotalCount: number; TotalSize: number; Reclaimable: number } | undefined]>
            ).map(([k, u]) => (
              <div key={k}>
                <dt>{k}</dt>
                <dd>{u ? `${u.TotalCount} (${u.ActiveCount} in use) · ${formatBytes(u.TotalSize)}, ${formatBytes(u.Reclaimable)} reclaimable` : '—'}</dd>
              </div>
            ))}
          </dl>
        </QueryState>
      </div>
      {confirm && (
        <Confirm title="Prune the engine?" confirmLabel="Prune" onCancel={() => setConfirm(false)} onConfirm={() => (setConfirm(false), prune.mutate(undefined))}>
          <p>Removes stopped containers, dangling images, unused networks and unused anonymous volumes.</p>
        </Confirm>
      )}
    </section>
  );
}

export { ago };
