import { useQuery, useQueryClient } from '@tanstack/react-query';
import { lazy, Suspense, useEffect, useMemo, useRef, useState, type FormEvent } from 'react';
import { Confirm, navigate, QueryState } from '../App';
import { ago, formatBytes, onEngineEvent, shortId, useAction, useTransport } from '../engine';
import { frameDemuxer, lineSplitter } from '../transport';

// xterm.js is loaded with the first terminal, not with the app: the list paints sooner.
const TerminalView = lazy(() => import('../terminal').then((m) => ({ default: m.TerminalView })));

export interface ContainerSummary {
  Id: string;
  Names: string[];
  Image: string;
  State: string;
  Status: string;
  Created: number;
  Ports: Array<{ IP?: string; PrivatePort: number; PublicPort?: number; Type: string }>;
  Labels: Record<string, string> | null;
}

const nameOf = (c: ContainerSummary) => (c.Names?.[0] ?? '').replace(/^\//, '') || shortId(c.Id);
const portsOf = (c: ContainerSummary) =>
  [...new Set((c.Ports ?? []).map((p) => (p.PublicPort ? `${p.IP && p.IP !== '0.0.0.0' ? p.IP + ':' : ''}${p.PublicPort}→${p.PrivatePort}/${p.Type}` : `${p.PrivatePort}/${p.Type}`)))].join(', ');

const ROW_HEIGHT = 38;
/** The list's scroller: `max-height: calc(100vh - 130px)` in styles.css. */
const scrollerHeight = () => Math.max(ROW_HEIGHT, window.innerHeight - 130);

type Verb = 'start' | 'stop' | 'restart' | 'pause' | 'unpause' | 'kill' | 'remove';

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
  });
}

export function ContainersView() {
  const t = useTransport();
  const list = useQuery({ queryKey: ['containers'], queryFn: () => t.request<ContainerSummary[]>('GET', '/containers/json?all=1') });
  const [search, setSearch] = useState('');
  const [stateFilter, setStateFilter] = useState('all');
  const [selected, setSelected] = useState<Set<string>>(new Set());
  const [confirm, setConfirm] = useState<{ verb: 'stop' | 'remove' | 'kill'; ids: string[] } | null>(null);
  const verb = useContainerVerb();

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
    start: Math.max(0, Math.floor(view.top / ROW_HEIGHT) - 15),
    end: Math.min(items.length, Math.floor(view.top / ROW_HEIGHT) + Math.ceil(view.height / ROW_HEIGHT) + 15),
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
        <button type="button" className="primary" onClick={() => navigate('run')}>
          Run…
        </button>
      </header>
      <div className="toolbar" aria-label="Actions on the selected containers">
        <span className="muted">{ids.length} selected</span>
        {(['start', 'stop', 'restart', 'pause', 'unpause', 'kill', 'remove'] as Verb[]).map((v) => (
          <button key={v} type="button" disabled={!ids.length || verb.isPending} onClick={() => act(v, ids)} className={v === 'remove' ? 'danger' : ''}>
            {v[0]!.toUpperCase() + v.slice(1)}
          </button>
        ))}
      </div>
      <QueryState error={list.error} loading={list.isLoading}>
        {list.data && list.data.length === 0 ? (
          <p className="empty">No containers yet. Run one from an image, or with <code>docker run</code>: it appears here at once.</p>
        ) : (
          <div className="table-scroll" onScroll={(e) => setView({ top: e.currentTarget.scrollTop, height: e.currentTarget.clientHeight })}>
          <table className="list fixed-rows" data-testid="containers" data-total={list.data?.length ?? 0}>
            {/* Fixed column widths: the layout does not depend on the rows, which change as the list scrolls. */}
            <colgroup>
              <col style={{ width: 40 }} />
              <col />
              <col />
              <col style={{ width: 160 }} />
              <col />
              <col style={{ width: 110 }} />
              <col style={{ width: 150 }} />
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
                <th>Ports</th>
                <th>Created</th>
                <th />
              </tr>
            </thead>
            <tbody>
              {visible.start > 0 && <tr aria-hidden="true" className="spacer" style={{ height: visible.start * ROW_HEIGHT }} />}
              {items.slice(visible.start, visible.end).map((item) =>
                item.kind === 'group' ? (
                  <tr key={`g-${item.project}`} className="group">
                    <td colSpan={7}>
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
                      <span className={`badge ${item.c.State}`} title={item.c.Status}>
                        {item.c.State}
                      </span>
                    </td>
                    <td className="mono">{portsOf(item.c)}</td>
                    <td>{ago(item.c.Created)}</td>
                    <td className="row-actions">
                      {item.c.State === 'running' ? (
                        <button type="button" onClick={() => act('stop', [item.c.Id])} aria-label={`Stop ${nameOf(item.c)}`}>
                          Stop
                        </button>
                      ) : (
                        <button type="button" onClick={() => act('start', [item.c.Id])} aria-label={`Start ${nameOf(item.c)}`}>
                          Start
                        </button>
                      )}
                      <button type="button" className="danger" onClick={() => act('remove', [item.c.Id])} aria-label={`Remove ${nameOf(item.c)}`}>
                        Remove
                      </button>
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

// ---------------------------------------------------------------------------------------------------------

interface ContainerInspect {
  Id: string;
  Name: string;
  Created: string;
  Path: string;
  Args: string[];
  State: { Status: string; Running: boolean; Paused: boolean; ExitCode: number; StartedAt: string; FinishedAt: string; Pid: number; Error?: string };
  Image: string;
  RestartCount: number;
  Config: { Image: string; Cmd: string[] | null; Entrypoint: string[] | null; Env: string[] | null; Tty: boolean; WorkingDir: string; User: string; Labels: Record<string, string> | null; OpenStdin: boolean };
  HostConfig: { RestartPolicy?: { Name: string }; Binds?: string[] | null; NetworkMode?: string; AutoRemove?: boolean };
  NetworkSettings: { Ports?: Record<string, Array<{ HostIp: string; HostPort: string }> | null> | null; Networks?: Record<string, { IPAddress: string; Gateway: string; MacAddress: string }> };
  Mounts: Array<{ Type: string; Source: string; Destination: string; Name?: string; RW: boolean }>;
}

const TABS = ['overview', 'logs', 'stats', 'terminal', 'attach'] as const;

export function ContainerPage(props: { id: string; tab: string }) {
  const t = useTransport();
  const info = useQuery({ queryKey: ['container', props.id], queryFn: () => t.request<ContainerInspect>('GET', `/containers/${props.id}/json`) });
  const verb = useContainerVerb();
  const [confirm, setConfirm] = useState<'stop' | 'remove' | null>(null);
  const c = info.data;
  const name = c?.Name.replace(/^\//, '') ?? shortId(props.id);
  return (
    <section>
      <header className="page-head">
        <h1>
          <a href="#/containers">Containers</a> / {name}
        </h1>
        {c && <span className={`badge ${c.State.Status}`}>{c.State.Status}</span>}
        {c && (
          <div className="actions">
            {c.State.Running ? (
              <>
                <button type="button" onClick={() => setConfirm('stop')}>
                  Stop
                </button>
                <button type="button" onClick={() => verb.mutate({ verb: 'restart', ids: [c.Id] })}>
                  Restart
                </button>
                <button type="button" onClick={() => verb.mutate({ verb: c.State.Paused ? 'unpause' : 'pause', ids: [c.Id] })}>
                  {c.State.Paused ? 'Unpause' : 'Pause'}
                </button>
              </>
            ) : (
              <button type="button" onClick={() => verb.mutate({ verb: 'start', ids: [c.Id] })}>
                Start
              </button>
            )}
            <button type="button" className="danger" onClick={() => setConfirm('remove')}>
              Remove
            </button>
          </div>
        )}
      </header>
      <div className="tabs" role="tablist">
        {TABS.map((tab) => (
          <a key={tab} role="tab" aria-selected={props.tab === tab} className={props.tab === tab ? 'active' : ''} href={`#/containers/${props.id}/${tab}`}>
            {tab[0]!.toUpperCase() + tab.slice(1)}
          </a>
        ))}
      </div>
      <QueryState error={info.error} loading={info.isLoading}>
        <Suspense fallback={<p className="muted">Loading the terminal…</p>}>
        {c && props.tab === 'overview' && <Overview c={c} />}
        {c && props.tab === 'logs' && <LogsView id={c.Id} tty={c.Config.Tty} running={c.State.Running} />}
        {c && props.tab === 'stats' && <StatsView id={c.Id} running={c.State.Running} />}
        {c && props.tab === 'terminal' &&
          (c.State.Running ? (
            <TerminalView
              key={`exec-${c.Id}-${c.State.StartedAt}`}
              label="sh (exec)"
              prepare={async () => {
                // bash where the image has it, sh otherwise.
                const cmd = ['/bin/sh', '-c', 'if command -v bash >/dev/null 2>&1; then exec bash; else exec sh; fi'];
                const exec = await t.request<{ Id: string }>('POST', `/containers/${c.Id}/exec`, {
                  body: { AttachStdin: true, AttachStdout: true, AttachStderr: true, Tty: true, Cmd: cmd, Env: ['TERM=xterm-256color'] },
                });
                return { target: { kind: 'exec', execId: exec.Id }, resize: (h, w) => t.request('POST', `/exec/${exec.Id}/resize?h=${h}&w=${w}`) };
              }}
            />
          ) : (
            <p className="empty">The container is not running: start it to open a shell.</p>
          ))}
        {c && props.tab === 'attach' &&
          (c.State.Running ? (
            <TerminalView
              key={`attach-${c.Id}-${c.State.StartedAt}`}
              label={`attached to ${c.Path} ${c.Args.join(' ')}`}
              prepare={async () => ({ target: { kind: 'attach', containerId: c.Id }, resize: (h, w) => t.request('POST', `/containers/${c.Id}/resize?h=${h}&w=${w}`) })}
            />
          ) : (
            <p className="empty">The container is not running.</p>
          ))}
        </Suspense>
      </QueryState>
      {confirm && c && (
        <Confirm
          title={`${confirm === 'stop' ? 'Stop' : 'Remove'} ${name}?`}
          confirmLabel={confirm === 'stop' ? 'Stop' : 'Remove'}
          onCancel={() => setConfirm(null)}
          onConfirm={() => {
            verb.mutate({ verb: confirm, ids: [c.Id] }, { onSuccess: () => confirm === 'remove' && navigate('containers') });
            setConfirm(null);
          }}
        />
      )}
    </section>
  );
}

/** Docker's zero time (0001-01-01...) means "never". */
const when = (t: string | undefined) => (!t || t.startsWith('0001-') ? '—' : t);

function Overview({ c }: { c: ContainerInspect }) {
  const [raw, setRaw] = useState(false);
  const ports = Object.entries(c.NetworkSettings.Ports ?? {}).map(([p, b]) => (b?.length ? `${b.map((x) => `${x.HostIp || '0.0.0.0'}:${x.HostPort}`).join(', ')} → ${p}` : p));
  const fields: Array<[string, React.ReactNode]> = [
    ['ID', <code>{c.Id}</code>],
    ['Image', <code>{c.Config.Image}</code>],
    ['Command', <code>{[c.Path, ...c.Args].join(' ')}</code>],
    ['State', `${c.State.Status}${c.State.Running ? ` (pid ${c.State.Pid})` : ` (exit ${c.State.ExitCode})`}${c.State.Error ? ` — ${c.State.Error}` : ''}`],
    ['Created', when(c.Created)],
    ['Started', when(c.State.StartedAt)],
    ['Finished', when(c.State.FinishedAt)],
    ['Restart policy', `${c.HostConfig.RestartPolicy?.Name || 'no'} (restarted ${c.RestartCount}×)`],
    ['Ports', ports.join('; ') || '—'],
    ['Networks', Object.entries(c.NetworkSettings.Networks ?? {}).map(([n, v]) => `${n} ${v.IPAddress || ''}`).join('; ') || '—'],
    ['Mounts', c.Mounts.map((m) => `${m.Name ?? m.Source} → ${m.Destination}${m.RW ? '' : ' (ro)'}`).join('; ') || '—'],
    ['Environment', <div className="mono small">{(c.Config.Env ?? []).map((e) => <div key={e}>{e}</div>)}</div>],
    ['Labels', <div className="mono small">{Object.entries(c.Config.Labels ?? {}).map(([k, v]) => <div key={k}>{k}={v}</div>)}</div>],
  ];
  return (
    <div>
      <dl className="fields">
        {fields.map(([k, v]) => (
          <div key={k}>
            <dt>{k}</dt>
            <dd>{v}</dd>
          </div>
        ))}
      </dl>
      <button type="button" onClick={() => setRaw(!raw)} aria-expanded={raw}>
        {raw ? 'Hide' : 'Show'} raw JSON
      </button>
      {raw && <pre className="json">{JSON.stringify(c, null, 2)}</pre>}
    </div>
  );
}

interface LogLine {
  stream: 'stdout' | 'stderr';
  time: string;
  text: string;
}

const MAX_LOG_LINES = 20_000;

/** Logs: one follow stream; lines rendered in a windowed list so large logs stay fast. */
function LogsView(props: { id: string; tty: boolean; running: boolean }) {
  const t = useTransport();
  const [lines, setLines] = useState<LogLine[]>([]);
  const [follow, setFollow] = useState(true);
  const [timestamps, setTimestamps] = useState(false);
  const [search, setSearch] = useState('');
  const [error, setError] = useState<string | null>(null);
  const box = useRef<HTMLDivElement>(null);
  const [scroll, setScroll] = useState({ top: 0, height: 400 });

  useEffect(() => {
    const abort = new AbortController();
    let batch: LogLine[] = [];
    let scheduled = false;
    const flush = () => {
      scheduled = false;
      const add = batch;
      batch = [];
      setLines((old) => {
        const next = old.concat(add);
        return next.length > MAX_LOG_LINES ? next.slice(next.length - MAX_LOG_LINES) : next;
      });
    };
    const push = (stream: 'stdout' | 'stderr') =>
      lineSplitter((line) => {
        const sp = line.indexOf(' ');
        batch.push({ stream, time: line.slice(0, sp), text: line.slice(sp + 1) });
        if (!scheduled) {
          scheduled = true;
          requestAnimationFrame(flush);
        }
      });
    // Lines are split per stream: a partial stdout line is never glued to a stderr one.
    const out = push('stdout');
    const err = push('stderr');
    const enc = new TextEncoder();
    const nl = enc.encode('\n');
    const demux = props.tty ? (b: Uint8Array) => out(b) : frameDemuxer((s, b) => (s === 'stderr' ? err : out)(b));
    setLines([]);
    setError(null);
    t.stream('GET', `/containers/${props.id}/logs?stdout=1&stderr=1&timestamps=1&tail=5000${props.running ? '&follow=1' : ''}`, demux, { signal: abort.signal })
      .then(() => {
        out(nl);
        err(nl);
      })
      .catch((e: Error) => setError(e.message));
    return () => abort.abort();
  }, [t, props.id, props.tty, props.running]);

  const q = search.toLowerCase();
  const shown = useMemo(() => (q ? lines.filter((l) => l.text.toLowerCase().includes(q)) : lines), [lines, q]);
  const ROW = 18;
  useEffect(() => {
    if (follow && box.current) box.current.scrollTop = box.current.scrollHeight;
  }, [shown, follow]);
  const first = Math.max(0, Math.floor(scroll.top / ROW) - 20);
  const last = Math.min(shown.length, first + Math.ceil(scroll.height / ROW) + 40);

  return (
    <div className="logs">
      <div className="toolbar">
        <input type="search" placeholder="Search logs" value={search} onChange={(e) => setSearch(e.target.value)} aria-label="Search logs" />
        <label>
          <input type="checkbox" checked={follow} onChange={(e) => setFollow(e.target.checked)} /> Follow
        </label>
        <label>
          <input type="checkbox" checked={timestamps} onChange={(e) => setTimestamps(e.target.checked)} /> Timestamps
        </label>
        <span className="muted">{shown.length} lines</span>
      </div>
      {error && <div className="error inline">{error}</div>}
      <div
        className="log-box"
        ref={box}
        data-testid="logs"
        tabIndex={0}
        onScroll={(e) => {
          const el = e.currentTarget;
          setScroll({ top: el.scrollTop, height: el.clientHeight });
          if (el.scrollTop + el.clientHeight < el.scrollHeight - ROW * 2 && follow) setFollow(false);
        }}
      >
        <div style={{ height: shown.length * ROW, position: 'relative' }}>
          {shown.slice(first, last).map((l, i) => (
            <div key={first + i} className={`log-line ${l.stream}`} style={{ top: (first + i) * ROW }}>
              {timestamps && <span className="ts">{l.time} </span>}
              {l.text}
            </div>
          ))}
        </div>
      </div>
    </div>
  );
}

interface StatsSample {
  cpu: number;
  mem: number;
  memLimit: number;
  rx: number;
  tx: number;
  read: number;
  write: number;
}

function Chart(props: { label: string; values: number[]; format: (n: number) => string }) {
  const w = 280;
  const h = 70;
  const max = Math.max(1e-9, ...props.values);
  const pts = props.values.map((v, i) => `${(i / Math.max(1, props.values.length - 1)) * w},${h - (v / max) * (h - 4) - 2}`).join(' ');
  return (
    <figure className="chart">
      <figcaption>
        {props.label} <strong>{props.values.length ? props.format(props.values.at(-1)!) : '—'}</strong>
      </figcaption>
      <svg viewBox={`0 0 ${w} ${h}`} width="100%" height={h} preserveAspectRatio="none" role="img" aria-label={props.label}>
        <polyline points={pts} fill="none" stroke="currentColor" strokeWidth="1.5" vectorEffect="non-scaling-stroke" />
      </svg>
    </figure>
  );
}

function StatsView(props: { id: string; running: boolean }) {
  const t = useTransport();
  const [samples, setSamples] = useState<StatsSample[]>([]);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    if (!props.running) return;
    const abort = new AbortController();
    t.stream(
      'GET',
      `/containers/${props.id}/stats?stream=1`,
      lineSplitter((line) => {
        const s = JSON.parse(line);
        const cpuDelta = (s.cpu_stats?.cpu_usage?.total_usage ?? 0) - (s.precpu_stats?.cpu_usage?.total_usage ?? 0);
        const sysDelta = (s.cpu_stats?.system_cpu_usage ?? 0) - (s.precpu_stats?.system_cpu_usage ?? 0);
        const cpus = s.cpu_stats?.online_cpus ?? 1;
        const nets = Object.values((s.networks ?? {}) as Record<string, { rx_bytes: number; tx_bytes: number }>);
        const io = (s.blkio_stats?.io_service_bytes_recursive ?? []) as Array<{ op: string; value: number }>;
        const sample: StatsSample = {
          cpu: sysDelta > 0 ? (cpuDelta / sysDelta) * cpus * 100 : 0,
          mem: s.memory_stats?.usage ?? 0,
          memLimit: s.memory_stats?.limit ?? 0,
          rx: nets.reduce((a, n) => a + n.rx_bytes, 0),
          tx: nets.reduce((a, n) => a + n.tx_bytes, 0),
          read: io.filter((x) => /read/i.test(x.op)).reduce((a, x) => a + x.value, 0),
          write: io.filter((x) => /write/i.test(x.op)).reduce((a, x) => a + x.value, 0),
        };
        setSamples((old) => [...old.slice(-59), sample]);
      }),
      { signal: abort.signal },
    ).catch((e: Error) => setError(e.message));
    return () => abort.abort();
  }, [t, props.id, props.running]);
  if (!props.running) return <p className="empty">Statistics are shown while the container runs.</p>;
  const pct = (n: number) => `${n.toFixed(1)} %`;
  return (
    <div>
      {error && <div className="error inline">{error}</div>}
      <div className="charts">
        <Chart label="CPU" values={samples.map((s) => s.cpu)} format={pct} />
        <Chart label="Memory" values={samples.map((s) => s.mem)} format={formatBytes} />
        <Chart label="Network received" values={samples.map((s) => s.rx)} format={formatBytes} />
        <Chart label="Network sent" values={samples.map((s) => s.tx)} format={formatBytes} />
        <Chart label="Block read" values={samples.map((s) => s.read)} format={formatBytes} />
        <Chart label="Block written" values={samples.map((s) => s.write)} format={formatBytes} />
      </div>
    </div>
  );
}

// ---------------------------------------------------------------------------------------------------------

function splitLines(text: string): string[] {
  return text
    .split('\n')
    .map((s) => s.trim())
    .filter(Boolean);
}

/** Splits a command line on spaces, keeping "quoted parts" together. */
export function splitCommand(text: string): string[] {
  return (text.match(/"[^"]*"|'[^']*'|\S+/g) ?? []).map((a) => a.replace(/^(["'])(.*)\1$/, '$2'));
}

export function RunView(props: { image?: string }) {
  const t = useTransport();
  const qc = useQueryClient();
  const networks = useQuery({ queryKey: ['networks'], queryFn: () => t.request<Array<{ Name: string }>>('GET', '/networks') });
  const [form, setForm] = useState({ image: props.image ?? '', name: '', cmd: '', env: '', ports: '', volumes: '', network: '', restart: 'no', tty: true });
  const set = (k: keyof typeof form) => (e: React.ChangeEvent<HTMLInputElement | HTMLTextAreaElement | HTMLSelectElement>) =>
    setForm({ ...form, [k]: e.target.type === 'checkbox' ? (e.target as HTMLInputElement).checked : e.target.value });
  const run = useAction(async () => {
    const exposed: Record<string, object> = {};
    const bindings: Record<string, Array<{ HostIp: string; HostPort: string }>> = {};
    for (const spec of splitLines(form.ports.replace(/,/g, '\n'))) {
      const m = /^(?:(\d+\.\d+\.\d+\.\d+):)?(?:(\d*):)?(\d+)(?:\/(tcp|udp))?$/.exec(spec);
      if (!m) throw new Error(`invalid port mapping ${JSON.stringify(spec)}: expected [IP:][HOST:]CONTAINER[/tcp|udp]`);
      const key = `${m[3]}/${m[4] ?? 'tcp'}`;
      exposed[key] = {};
      (bindings[key] ??= []).push({ HostIp: m[1] ?? '', HostPort: m[2] ?? '' });
    }
    const body = {
      Image: form.image.trim(),
      Cmd: form.cmd.trim() ? splitCommand(form.cmd) : undefined,
      Env: splitLines(form.env),
      Tty: form.tty,
      OpenStdin: form.tty,
      AttachStdin: false,
      ExposedPorts: exposed,
      HostConfig: {
        PortBindings: bindings,
        Binds: splitLines(form.volumes.replace(/,/g, '\n')),
        NetworkMode: form.network || undefined,
        RestartPolicy: { Name: form.restart },
      },
    };
    const created = await t.request<{ Id: string }>('POST', `/containers/create${form.name.trim() ? `?name=${encodeURIComponent(form.name.trim())}` : ''}`, { body });
    await t.request('POST', `/containers/${created.Id}/start`);
    void qc.invalidateQueries({ queryKey: ['containers'] });
    navigate('containers', created.Id);
  });
  const submit = (e: FormEvent) => {
    e.preventDefault();
    run.mutate(undefined);
  };
  return (
    <section>
      <header className="page-head">
        <h1>Run a container</h1>
      </header>
      <form className="form" onSubmit={submit}>
        <label>
          Image <input required value={form.image} onChange={set('image')} placeholder="busybox:latest" autoFocus />
        </label>
        <label>
          Name <input value={form.name} onChange={set('name')} placeholder="optional" />
        </label>
        <label>
          Command <input value={form.cmd} onChange={set('cmd')} placeholder="the image's default" />
        </label>
        <label>
          Environment <textarea value={form.env} onChange={set('env')} placeholder="KEY=value, one per line" rows={3} />
        </label>
        <label>
          Ports <input value={form.ports} onChange={set('ports')} placeholder="8080:80, 127.0.0.1:5353:53/udp" />
        </label>
        <label>
          Volumes <input value={form.volumes} onChange={set('volumes')} placeholder="data:/var/lib/data, /host/dir:/dir:ro" />
        </label>
        <label>
          Network
          <select value={form.network} onChange={set('network')}>
            <option value="">default (bridge)</option>
            {(networks.data ?? []).map((n) => (
              <option key={n.Name}>{n.Name}</option>
            ))}
          </select>
        </label>
        <label>
          Restart policy
          <select value={form.restart} onChange={set('restart')}>
            {['no', 'always', 'unless-stopped', 'on-failure'].map((r) => (
              <option key={r}>{r}</option>
            ))}
          </select>
        </label>
        <label className="inline">
          <input type="checkbox" checked={form.tty} onChange={set('tty')} /> Interactive terminal (-it)
        </label>
        <div className="actions">
          <button type="submit" className="primary" disabled={run.isPending}>
            {run.isPending ? 'Starting…' : 'Run'}
          </button>
        </div>
      </form>
    </section>
  );
}

/** Re-exported for other views that want to react to single events (pull progress, feed). */
export { onEngineEvent };
