/** The container list: the app's first view, in the first bundle; a container's page and the run form load on demand. */
import { useMutationState, useQuery } from '@tanstack/react-query';
import { useEffect, useMemo, useState } from 'react';
import { Confirm, navigate, QueryState } from '../App';
import { ago, NARROW, shortId, useAction, useMediaQuery, useTransport } from '../engine';
import { ApiError } from '../transport';

export interface ContainerSummary {
  Id: string;
  Names: string[];
  Image: string;
  State: string;
  Status: string;
  Created: number;
  Ports: Array<{ IP?: string; PrivatePort: number; PublicPort?: number; Type: string }>;
  Labels: Record<string, string> | null;
  Mounts?: Array<{ Type: string; Name?: string; Source: string; Destination: string; RW: boolean }>;
  /** From API 1.52; older engines only say it in Status. */
  Health?: { Status: string; FailingStreak?: number };
}

export const nameOf = (c: ContainerSummary) => (c.Names?.[0] ?? '').replace(/^\//, '') || shortId(c.Id);
export interface PublishedPort {
  text: string;
  /** Where a browser reaches it (TCP ports published on the host), or none. */
  url?: string;
}

/**
 * Ports as `docker ps` writes them (`0.0.0.0:8080->80/tcp`, `80/tcp` when not published). A port published on
 * both IPv4 and IPv6 wildcards is shown once.
 */
export function publishedPorts(ports: ContainerSummary['Ports'] | undefined): PublishedPort[] {
  const out: PublishedPort[] = [];
  const seen = new Set<string>();
  const sorted = [...(ports ?? [])].sort((a, b) => (a.PublicPort ?? 0) - (b.PublicPort ?? 0) || a.PrivatePort - b.PrivatePort || (a.IP ?? '').localeCompare(b.IP ?? ''));
  for (const p of sorted) {
    const wildcard = !p.IP || p.IP === '0.0.0.0' || p.IP === '::';
    const key = p.PublicPort ? `${wildcard ? '*' : p.IP}:${p.PublicPort}->${p.PrivatePort}/${p.Type}` : `${p.PrivatePort}/${p.Type}`;
    if (seen.has(key)) continue;
    seen.add(key);
    if (!p.PublicPort) {
      out.push({ text: key });
      continue;
    }
    const ip = wildcard ? '0.0.0.0' : p.IP!;
    const host = wildcard ? '127.0.0.1' : ip.includes(':') ? `[${ip}]` : ip;
    out.push({ text: `${ip.includes(':') && !wildcard ? `[${ip}]` : ip}:${p.PublicPort}->${p.PrivatePort}/${p.Type}`, url: p.Type === 'tcp' ? `http://${host}:${p.PublicPort}` : undefined });
  }
  return out;
}

export function PortLinks(props: { ports: PublishedPort[] }) {
  if (!props.ports.length) return <span className="muted">—</span>;
  return (
    <>
      {props.ports.map((p, i) => (
        <span key={p.text}>
          {i > 0 && ', '}
          {p.url ? (
            <a href={p.url} target="_blank" rel="noreferrer noopener" title={`Open ${p.url}`}>
              {p.text}
            </a>
          ) : (
            p.text
          )}
        </span>
      ))}
    </>
  );
}

/** A list row's health: its Health summary, else what its Status says (`Up 3 minutes (healthy)`), or none. */
export function healthOf(c: Pick<ContainerSummary, 'Status' | 'Health'>): string | undefined {
  if (c.Health?.Status && c.Health.Status !== 'none') return c.Health.Status;
  const m = /\((healthy|unhealthy|health: starting)\)/.exec(c.Status ?? '');
  if (!m) return undefined;
  return m[1] === 'health: starting' ? 'starting' : m[1];
}

/** The exit code of an exited container, from its Status (`Exited (137) 2 minutes ago`), as `docker ps` shows it. */
export function exitCodeOf(c: Pick<ContainerSummary, 'State' | 'Status'>): number | undefined {
  if (c.State !== 'exited') return undefined;
  const m = /^Exited \((-?\d+)\)/.exec(c.Status ?? '');
  return m ? Number(m[1]) : undefined;
}

/** The state as the list shows it: `exited (137)` with the code, the state alone otherwise. */
export function stateLabel(c: Pick<ContainerSummary, 'State' | 'Status'>): string {
  const code = exitCodeOf(c);
  return code === undefined ? c.State : `${c.State} (${code})`;
}

export function HealthBadge(props: { health: string | undefined }) {
  if (!props.health || props.health === 'none') return null;
  return (
    <span className={`badge health-${props.health}`} data-health={props.health} title={`health check: ${props.health}`}>
      {props.health}
    </span>
  );
}

const ROW_HEIGHT = 38;
/** The list's scroller: `max-height: calc(100vh - 130px)` in styles.css. */
const scrollerHeight = () => Math.max(ROW_HEIGHT, window.innerHeight - 130);

export type Verb = 'start' | 'stop' | 'restart' | 'pause' | 'unpause' | 'kill' | 'remove';

/** What a pending verb reads as on its button. */
export const PENDING_LABEL: Record<Verb, string> = {
  start: 'Starting…',
  stop: 'Stopping…',
  restart: 'Restarting…',
  pause: 'Pausing…',
  unpause: 'Unpausing…',
  kill: 'Killing…',
  remove: 'Removing…',
};

const VERB_KEY = ['container-verb'];

/** The verbs still running, by container id, wherever they were asked (the list, a container's page). */
export function usePendingVerbs(): Map<string, Verb> {
  const pending = useMutationState({ filters: { mutationKey: VERB_KEY, status: 'pending' }, select: (m) => m.state.variables as { verb: Verb; ids: string[] } | undefined });
  return useMemo(() => {
    const byId = new Map<string, Verb>();
    for (const v of pending) for (const id of v?.ids ?? []) byId.set(id, v!.verb);
    return byId;
  }, [pending]);
}

export function useContainerVerb() {
  const t = useTransport();
  return useAction(async ({ verb, ids }: { verb: Verb; ids: string[] }) => {
    // One after another is kinder to the engine than 50 parallel stops; all are tried, the first error is shown.
    const errors: string[] = [];
    await Promise.all(
      ids.map(async (id) => {
        try {
          if (verb === 'remove') await t.request('DELETE', `/containers/${id}?force=1`);
          else await t.request('POST', `/containers/${id}/${verb}`);
        } catch (err) {
          errors.push((err as Error).message);
        }
      }),
    );
    if (errors.length) throw new Error(errors.join('; '));
  }, { mutationKey: VERB_KEY });
}

/** A row's two buttons; while a verb runs on the row, its button says so and neither can be pressed. */
function RowActions(props: { c: ContainerSummary; pending: Verb | undefined; act: (v: Verb, ids: string[]) => void }) {
  const { c, pending } = props;
  const name = nameOf(c);
  const main: Verb = c.State === 'running' ? 'stop' : 'start';
  // The verb shown is the one running, when it is a start or stop (a stop keeps its place while it runs).
  const shown: Verb = pending === 'start' || pending === 'stop' ? pending : main;
  const label = (v: Verb) => v[0]!.toUpperCase() + v.slice(1);
  return (
    <>
      <button type="button" disabled={!!pending} aria-busy={pending === shown || undefined} onClick={() => props.act(shown, [c.Id])} aria-label={`${label(shown)} ${name}`}>
        {pending === shown ? PENDING_LABEL[shown] : label(shown)}
      </button>
      <button type="button" className="danger" disabled={!!pending} aria-busy={pending === 'remove' || undefined} onClick={() => props.act('remove', [c.Id])} aria-label={`Remove ${name}`}>
        {pending === 'remove' ? PENDING_LABEL.remove : 'Remove'}
      </button>
    </>
  );
}

export function ContainersView() {
  const t = useTransport();
  const list = useQuery({ queryKey: ['containers'], queryFn: () => t.request<ContainerSummary[]>('GET', '/containers/json?all=1') });
  const [search, setSearch] = useState('');
  const [stateFilter, setStateFilter] = useState('all');
  const [selected, setSelected] = useState<Set<string>>(new Set());
  const [confirm, setConfirm] = useState<{ verb: 'stop' | 'remove' | 'kill'; ids: string[] } | null>(null);
  const verb = useContainerVerb();
  const pending = usePendingVerbs();
  const [pruneAsk, setPruneAsk] = useState(false);
  const [note, setNote] = useState<string | null>(null);
  const prune = useAction(async () => {
    let n: number;
    try {
      const r = await t.request<{ ContainersDeleted: string[] | null; SpaceReclaimed: number }>('POST', '/containers/prune');
      n = r?.ContainersDeleted?.length ?? 0;
    } catch (err) {
      // An engine without the route: the same, one container at a time (without force: one started meanwhile stays).
      if (!(err instanceof ApiError && err.status === 404)) throw err;
      const filters = encodeURIComponent(JSON.stringify({ status: ['exited', 'created', 'dead'] }));
      const stopped = await t.request<ContainerSummary[]>('GET', `/containers/json?all=1&filters=${filters}`);
      const removed = await Promise.all(stopped.map((c) => t.request('DELETE', `/containers/${c.Id}`).then(() => 1, () => 0)));
      n = removed.reduce<number>((a, b) => a + b, 0);
    }
    setNote(`Removed ${n} stopped container${n === 1 ? '' : 's'}.`);
  });
  const narrow = useMediaQuery(NARROW);
  const columns = narrow ? 5 : 7;
  const filtered = search.trim() !== '' || stateFilter !== 'all';

  const groups = useMemo(() => {
    const q = search.trim().toLowerCase();
    const rows = (list.data ?? []).filter(
      (c) =>
        (stateFilter === 'all' || c.State === stateFilter) &&
        (!q || nameOf(c).toLowerCase().includes(q) || c.Image.toLowerCase().includes(q) || c.Id.startsWith(q)),
    );
    const byProject = new Map<string, ContainerSummary[]>();
    for (const c of rows) {
      const project = c.Labels?.['com.docker.compose.project'] ?? '';
      byProject.set(project, [...(byProject.get(project) ?? []), c]);
    }
    return [...byProject.entries()].sort(([a], [b]) => (a === '' ? 1 : b === '' ? -1 : a.localeCompare(b)));
  }, [list.data, search, stateFilter]);

  // Windowed rows: only what the scroller shows (plus a margin) is in the DOM, so 500 containers paint fast.
  const items = useMemo(() => {
    const out: Array<{ kind: 'group'; project: string; count: number } | { kind: 'row'; c: ContainerSummary }> = [];
    for (const [project, rows] of groups) {
      if (project || groups.length > 1) out.push({ kind: 'group', project, count: rows.length });
      for (const c of rows) out.push({ kind: 'row', c });
    }
    return out;
  }, [groups]);
  // The scroller's height is known from the window's (its max-height is the window's less the header): reading
  // the element's own size after the first render would force a layout and a second render before the paint.
  const [view, setView] = useState(() => ({ top: 0, height: scrollerHeight() }));
  useEffect(() => {
    const onResize = () => setView((v) => ({ ...v, height: scrollerHeight() }));
    window.addEventListener('resize', onResize);
    return () => window.removeEventListener('resize', onResize);
  }, []);
  const visible = {
    start: Math.max(0, Math.floor(view.top / ROW_HEIGHT) - 8),
    end: Math.min(items.length, Math.floor(view.top / ROW_HEIGHT) + Math.ceil(view.height / ROW_HEIGHT) + 8),
  };
  const dataIds = useMemo(() => new Set(list.data?.map((c) => c.Id)), [list.data]);
  const ids = [...selected].filter((id) => dataIds.has(id));
  const act = (v: Verb, targets: string[]) => {
    if (v === 'stop' || v === 'remove' || v === 'kill') setConfirm({ verb: v, ids: targets });
    else verb.mutate({ verb: v, ids: targets });
  };
  const toggle = (id: string) =>
    setSelected((s) => {
      const n = new Set(s);
      if (n.has(id)) n.delete(id);
      else n.add(id);
      return n;
    });

  const onRowKey = (e: React.KeyboardEvent<HTMLTableRowElement>, c: ContainerSummary) => {
    const row = e.currentTarget;
    if (e.key === 'ArrowDown') (row.nextElementSibling as HTMLElement | null)?.focus();
    else if (e.key === 'ArrowUp') (row.previousElementSibling as HTMLElement | null)?.focus();
    else if (e.key === 'Enter') navigate('containers', c.Id);
    else if (e.key === ' ') toggle(c.Id);
    else if (e.key === 'Delete') act('remove', [c.Id]);
    else return;
    e.preventDefault();
  };

  return (
    <section>
      <header className="page-head">
        <h1>Containers</h1>
        <input type="search" placeholder="Search name, image, id  ( / )" value={search} onChange={(e) => setSearch(e.target.value)} aria-label="Search containers" />
        <select value={stateFilter} onChange={(e) => setStateFilter(e.target.value)} aria-label="State filter">
          {['all', 'running', 'exited', 'paused', 'created', 'restarting', 'dead'].map((s) => (
            <option key={s}>{s}</option>
          ))}
        </select>
        <button type="button" onClick={() => (setNote(null), setPruneAsk(true))} disabled={prune.isPending} aria-busy={prune.isPending || undefined}>
          {prune.isPending ? 'Pruning…' : 'Prune…'}
        </button>
        <button type="button" className="primary" onClick={() => navigate('run')}>
          Run…
        </button>
      </header>
      <div className="toolbar" aria-label="Actions on the selected containers">
        <span className="muted">{ids.length} selected</span>
        {(['start', 'stop', 'restart', 'pause', 'unpause', 'kill', 'remove'] as Verb[]).map((v) => (
          <button
            key={v}
            type="button"
            disabled={!ids.length || ids.some((id) => pending.has(id))}
            aria-busy={ids.some((id) => pending.get(id) === v) || undefined}
            onClick={() => act(v, ids)}
            className={v === 'remove' ? 'danger' : ''}
          >
            {ids.length && ids.every((id) => pending.get(id) === v) ? PENDING_LABEL[v] : v[0]!.toUpperCase() + v.slice(1)}
          </button>
        ))}
      </div>
      {note && (
        <p className="note" role="status">
          {note}
        </p>
      )}
      <QueryState error={list.error} loading={list.isLoading}>
        {list.data && list.data.length === 0 ? (
          <p className="empty">No containers yet. Run one from an image, or with <code>docker run</code>: it appears here at once.</p>
        ) : items.length === 0 && filtered ? (
          <div className="empty" data-testid="containers-no-match">
            <p>
              No container matches{search.trim() ? <> “{search.trim()}”</> : null}
              {stateFilter !== 'all' ? ` among the ${stateFilter} ones` : ''}.
            </p>
            <button
              type="button"
              onClick={() => {
                setSearch('');
                setStateFilter('all');
              }}
            >
              Clear the filters
            </button>
          </div>
        ) : (
          <div className="table-scroll" onScroll={(e) => setView({ top: e.currentTarget.scrollTop, height: e.currentTarget.clientHeight })}>
          <table className="list fixed-rows" data-testid="containers" data-total={list.data?.length ?? 0}>
            {/* Fixed column widths: the layout does not depend on the rows, which change as the list scrolls. */}
            {/* Narrow windows drop Ports and Created (a container's page has them), so that names stay readable. */}
            <colgroup>
              <col style={{ width: 40 }} />
              <col />
              <col />
              <col style={{ width: narrow ? 130 : 150 }} />
              {!narrow && <col />}
              {!narrow && <col style={{ width: 110 }} />}
              {/* Room for a pending verb beside Remove (`Stopping…  Remove`). */}
              <col style={{ width: narrow ? 176 : 184 }} />
            </colgroup>
            <thead>
              <tr>
                <th>
                  <input
                    type="checkbox"
                    aria-label="Select all"
                    checked={ids.length > 0 && ids.length === (list.data?.length ?? 0)}
                    onChange={(e) => setSelected(e.target.checked ? new Set(list.data?.map((c) => c.Id)) : new Set())}
                  />
                </th>
                <th>Name</th>
                <th>Image</th>
                <th>State</th>
                {!narrow && <th>Ports</th>}
                {!narrow && <th>Created</th>}
                <th />
              </tr>
            </thead>
            <tbody>
              {visible.start > 0 && <tr aria-hidden="true" className="spacer" style={{ height: visible.start * ROW_HEIGHT }} />}
              {items.slice(visible.start, visible.end).map((item) =>
                item.kind === 'group' ? (
                  <tr key={`g-${item.project}`} className="group">
                    <td colSpan={columns}>
                      {item.project || 'Other containers'} <span className="muted">({item.count})</span>
                    </td>
                  </tr>
                ) : (
                  <tr key={item.c.Id} tabIndex={0} data-name={nameOf(item.c)} onKeyDown={(e) => onRowKey(e, item.c)} className={selected.has(item.c.Id) ? 'selected' : ''}>
                    <td>
                      <input type="checkbox" aria-label={`Select ${nameOf(item.c)}`} checked={selected.has(item.c.Id)} onChange={() => toggle(item.c.Id)} />
                    </td>
                    <td>
                      <a href={`#/containers/${item.c.Id}`}>{nameOf(item.c)}</a>
                    </td>
                    <td className="mono">{item.c.Image.replace(/^sha256:/, '').slice(0, 40)}</td>
                    <td>
                      <span className={`badge ${item.c.State}`} title={item.c.Status} data-exit-code={exitCodeOf(item.c)}>
                        {stateLabel(item.c)}
                      </span>
                      <HealthBadge health={healthOf(item.c)} />
                    </td>
                    {!narrow && (
                      <td className="mono small" title={publishedPorts(item.c.Ports).map((p) => p.text).join(', ')}>
                        <PortLinks ports={publishedPorts(item.c.Ports)} />
                      </td>
                    )}
                    {!narrow && <td>{ago(item.c.Created)}</td>}
                    <td className="row-actions">
                      <RowActions c={item.c} pending={pending.get(item.c.Id)} act={act} />
                    </td>
                  </tr>
                ),
              )}
              {visible.end < items.length && <tr aria-hidden="true" className="spacer" style={{ height: (items.length - visible.end) * ROW_HEIGHT }} />}
            </tbody>
          </table>
          </div>
        )}
      </QueryState>
      {pruneAsk && (
        <Confirm title="Remove every stopped container?" confirmLabel="Prune" onCancel={() => setPruneAsk(false)} onConfirm={() => (setPruneAsk(false), prune.mutate(undefined))}>
          <p>
            {(() => {
              const stopped = (list.data ?? []).filter((c) => c.State === 'exited' || c.State === 'created' || c.State === 'dead');
              const names = stopped.slice(0, 10).map(nameOf).join(', ') + (stopped.length > 10 ? ` and ${stopped.length - 10} more` : '');
              return stopped.length ? `${names}: removed; their volumes are kept.` : 'No container is stopped now.';
            })()}
          </p>
        </Confirm>
      )}
      {confirm && (
        <Confirm
          title={`${confirm.verb[0]!.toUpperCase() + confirm.verb.slice(1)} ${confirm.ids.length === 1 ? 'container' : `${confirm.ids.length} containers`}?`}
          confirmLabel={confirm.verb[0]!.toUpperCase() + confirm.verb.slice(1)}
          onCancel={() => setConfirm(null)}
          onConfirm={() => {
            verb.mutate(confirm);
            setSelected(new Set());
            setConfirm(null);
          }}
        >
          <p>
            {confirm.ids.map((id) => nameOf(list.data?.find((c) => c.Id === id) ?? ({ Id: id, Names: [] } as unknown as ContainerSummary))).join(', ')}
            {confirm.verb === 'remove' && ' will be removed with their anonymous state. Running ones are killed first.'}
          </p>
        </Confirm>
      )}
    </section>
  );
}
