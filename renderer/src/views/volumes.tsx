/** Volumes: list with who uses each, create (driver, options, labels), inspect, remove, prune. */
import { useQuery } from '@tanstack/react-query';
import { useMemo, useState, type FormEvent } from 'react';
import { Confirm, ListTable, QueryState, RemoveButton } from '../App';
import { formatBytes, NARROW, useAction, useMediaQuery, usePending, useTransport } from '../engine';
import { nameOf, type ContainerSummary } from './containers';

export interface Volume {
  Name: string;
  Driver: string;
  Mountpoint: string;
  CreatedAt?: string;
  Labels: Record<string, string> | null;
  Options?: Record<string, string> | null;
  Scope?: string;
  Status?: Record<string, unknown>;
  UsageData?: { Size: number; RefCount: number } | null;
}

/** `key=value` lines (or comma-separated) into an object; a line without `=` is an error naming it. */
export function parsePairs(text: string, what: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const raw of text.split(/[\n,]/)) {
    const line = raw.trim();
    if (!line) continue;
    const eq = line.indexOf('=');
    if (eq <= 0) throw new Error(`invalid ${what} ${JSON.stringify(line)}: expected key=value`);
    out[line.slice(0, eq).trim()] = line.slice(eq + 1).trim();
  }
  return out;
}

/** Docker's CreatedAt is RFC 3339; shown as the local date and time, to the second. */
function created(at: string | undefined): string {
  if (!at) return '—';
  const d = new Date(at);
  return Number.isNaN(d.getTime()) ? at : d.toLocaleString();
}

export function VolumesView() {
  const t = useTransport();
  const list = useQuery({ queryKey: ['volumes'], queryFn: () => t.request<{ Volumes: Volume[] | null }>('GET', '/volumes') });
  // Which containers use each volume: one list call with the mounts, not one call per volume.
  const containers = useQuery({ queryKey: ['containers'], queryFn: () => t.request<ContainerSummary[]>('GET', '/containers/json?all=1') });
  const [form, setForm] = useState({ name: '', driver: 'local', opts: '', labels: '' });
  const [more, setMore] = useState(false);
  const [search, setSearch] = useState('');
  const [inspected, setInspected] = useState<Volume | null>(null);
  const [confirm, setConfirm] = useState<{ kind: 'remove'; name: string } | { kind: 'prune' } | null>(null);
  const [pruneAll, setPruneAll] = useState(false);
  const [note, setNote] = useState<string | null>(null);
  // Narrow windows leave out the mountpoint and the date (Inspect shows them).
  const narrow = useMediaQuery(NARROW);

  const create = useAction(async () => {
    const body = {
      Name: form.name.trim() || undefined,
      Driver: form.driver.trim() || 'local',
      DriverOpts: parsePairs(form.opts, 'driver option'),
      Labels: parsePairs(form.labels, 'label'),
    };
    const v = await t.request<Volume>('POST', '/volumes/create', { body });
    setForm({ name: '', driver: 'local', opts: '', labels: '' });
    setNote(`Created volume ${v?.Name ?? body.Name ?? ''}.`);
  });
  const remove = useAction(async (name: string) => {
    await t.request('DELETE', `/volumes/${encodeURIComponent(name)}`);
    if (inspected?.Name === name) setInspected(null);
    setNote(`Removed volume ${name}.`);
  }, { mutationKey: ['volume-remove'] });
  const removing = new Set(usePending<string>(['volume-remove']));
  const prune = useAction(async (all: boolean) => {
    const filters = all ? `?filters=${encodeURIComponent(JSON.stringify({ all: ['true'] }))}` : '';
    const r = await t.request<{ VolumesDeleted: string[] | null; SpaceReclaimed: number }>('POST', `/volumes/prune${filters}`);
    const n = r?.VolumesDeleted?.length ?? 0;
    setNote(`Pruned ${n} volume${n === 1 ? '' : 's'}, reclaimed ${formatBytes(r?.SpaceReclaimed ?? 0)}.`);
  });
  const show = useAction(async (name: string) => setInspected(await t.request<Volume>('GET', `/volumes/${encodeURIComponent(name)}`)));

  const users = useMemo(() => {
    const by = new Map<string, ContainerSummary[]>();
    for (const c of containers.data ?? []) for (const m of c.Mounts ?? []) if (m.Type === 'volume' && m.Name) by.set(m.Name, [...(by.get(m.Name) ?? []), c]);
    return by;
  }, [containers.data]);

  const q = search.trim().toLowerCase();
  const rows = (list.data?.Volumes ?? [])
    .filter((v) => !q || v.Name.toLowerCase().includes(q) || v.Driver.toLowerCase().includes(q))
    .sort((a, b) => (b.CreatedAt ?? '').localeCompare(a.CreatedAt ?? '') || a.Name.localeCompare(b.Name));

  const submit = (e: FormEvent) => {
    e.preventDefault();
    setNote(null);
    create.mutate(undefined);
  };
  const confirmUsers = confirm?.kind === 'remove' ? (users.get(confirm.name) ?? []) : [];

  return (
    <section>
      <header className="page-head">
        <h1>Volumes</h1>
        <input type="search" placeholder="Search ( / )" value={search} onChange={(e) => setSearch(e.target.value)} aria-label="Search volumes" />
        <button type="button" onClick={() => setConfirm({ kind: 'prune' })} disabled={prune.isPending} aria-busy={prune.isPending || undefined}>
          {prune.isPending ? 'Pruning…' : 'Prune…'}
        </button>
      </header>
      <form onSubmit={submit} className="panel create-form" aria-label="Create volume">
        <div className="inline-form">
          <input value={form.name} onChange={(e) => setForm({ ...form, name: e.target.value })} placeholder="name (empty: a random one)" aria-label="Volume name" />
          <input value={form.driver} onChange={(e) => setForm({ ...form, driver: e.target.value })} placeholder="driver" aria-label="Driver" className="narrow" />
          <button type="button" className="link" aria-expanded={more} onClick={() => setMore(!more)}>
            {more ? 'Fewer options' : 'Options and labels…'}
          </button>
          <button type="submit" className="primary" disabled={create.isPending} aria-busy={create.isPending || undefined}>
            {create.isPending ? 'Creating…' : 'Create volume'}
          </button>
        </div>
        {more && (
          <div className="pairs">
            <label>
              Driver options
              <textarea value={form.opts} onChange={(e) => setForm({ ...form, opts: e.target.value })} rows={3} placeholder={'type=tmpfs\ndevice=tmpfs\no=size=64m'} aria-label="Driver options" />
            </label>
            <label>
              Labels
              <textarea value={form.labels} onChange={(e) => setForm({ ...form, labels: e.target.value })} rows={3} placeholder="key=value, one per line" aria-label="Labels" />
            </label>
          </div>
        )}
      </form>
      {note && (
        <p className="note" role="status">
          {note}
        </p>
      )}
      <QueryState error={list.error} loading={list.isLoading}>
        {rows.length === 0 ? (
          q ? (
            <div className="empty" data-testid="volumes-no-match">
              <p>No volume matches “{search.trim()}”.</p>
              <button type="button" onClick={() => setSearch('')}>
                Clear the search
              </button>
            </div>
          ) : (
            <p className="empty">No volumes yet. Create one above, or with docker volume create; containers started with -v name:/path make them too.</p>
          )
        ) : (
          <ListTable data-testid="volumes" columns={['Name', 'Driver', !narrow && 'Mountpoint', !narrow && 'Created', 'Used by', '']}>
            {rows.map((v) => {
              const by = users.get(v.Name) ?? [];
              return (
                <tr key={v.Name} tabIndex={0} data-volume={v.Name} className={inspected?.Name === v.Name ? 'selected' : ''} onKeyDown={(e) => e.key === 'Enter' && e.target === e.currentTarget && show.mutate(v.Name)}>
                  <td className="mono ellipsis" title={v.Name}>
                    {v.Name}
                    {v.Labels?.['com.docker.volume.anonymous'] !== undefined && <span className="badge">anonymous</span>}
                  </td>
                  <td>{v.Driver}</td>
                  {!narrow && (
                    <td className="mono small ellipsis" title={v.Mountpoint}>
                      {v.Mountpoint}
                    </td>
                  )}
                  {!narrow && <td className="nowrap">{created(v.CreatedAt)}</td>}
                  <td data-testid="volume-users">
                    {by.length === 0 ? (
                      <span className="muted">—</span>
                    ) : (
                      by.map((c, i) => (
                        <span key={c.Id}>
                          {i > 0 && ', '}
                          <a href={`#/containers/${c.Id}`}>{nameOf(c)}</a>
                        </span>
                      ))
                    )}
                  </td>
                  <td className="row-actions">
                    <button type="button" onClick={() => show.mutate(v.Name)} aria-label={`Inspect ${v.Name}`} disabled={show.isPending && show.variables === v.Name} aria-busy={(show.isPending && show.variables === v.Name) || undefined}>
                      Inspect
                    </button>
                    <RemoveButton onClick={() => setConfirm({ kind: 'remove', name: v.Name })} aria-label={`Remove ${v.Name}`} running={removing.has(v.Name)} />
                  </td>
                </tr>
              );
            })}
          </ListTable>
        )}
      </QueryState>
      {inspected && (
        <div className="panel" data-testid="volume-inspect">
          <h2>
            {inspected.Name}{' '}
            <button type="button" onClick={() => setInspected(null)}>
              Close
            </button>
          </h2>
          <dl className="fields">
            {(
              [
                ['Driver', inspected.Driver],
                ['Mountpoint', <code>{inspected.Mountpoint}</code>],
                ['Created', created(inspected.CreatedAt)],
                ['Scope', inspected.Scope ?? 'local'],
                ['Options', Object.entries(inspected.Options ?? {}).map(([k, v]) => `${k}=${v}`).join(', ') || '—'],
                ['Labels', Object.entries(inspected.Labels ?? {}).map(([k, v]) => `${k}=${v}`).join(', ') || '—'],
                ['Used by', (users.get(inspected.Name) ?? []).map(nameOf).join(', ') || '—'],
              ] as Array<[string, React.ReactNode]>
            ).map(([k, v]) => (
              <div key={k}>
                <dt>{k}</dt>
                <dd>{v}</dd>
              </div>
            ))}
          </dl>
          <pre className="json">{JSON.stringify(inspected, null, 2)}</pre>
        </div>
      )}
      {confirm && (
        <Confirm
          title={confirm.kind === 'prune' ? 'Remove unused volumes?' : `Remove volume ${confirm.name}?`}
          confirmLabel={confirm.kind === 'prune' ? 'Prune' : 'Remove'}
          onCancel={() => setConfirm(null)}
          onConfirm={() => {
            setNote(null);
            if (confirm.kind === 'prune') prune.mutate(pruneAll);
            else remove.mutate(confirm.name);
            setConfirm(null);
          }}
        >
          {confirm.kind === 'prune' ? (
            <>
              <p>Removes the volumes no container uses, with their data.</p>
              <label className="inline">
                <input type="checkbox" checked={pruneAll} onChange={(e) => setPruneAll(e.target.checked)} /> Named volumes too (otherwise only anonymous ones)
              </label>
            </>
          ) : (
            <p>
              Its data is deleted.
              {confirmUsers.length > 0 && ` It is used by ${confirmUsers.map(nameOf).join(', ')}: the engine refuses to remove it while they exist.`}
            </p>
          )}
        </Confirm>
      )}
    </section>
  );
}
