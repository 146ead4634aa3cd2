/** A container's page: overview, logs, stats, the exec and attach terminals, and its network policy. */
import { useQuery } from '@tanstack/react-query';
import { lazy, Suspense, useEffect, useMemo, useRef, useState } from 'react';
import { Confirm, navigate, QueryState } from '../App';
import { formatBytes, shortId, useTransport } from '../engine';
import { frameDemuxer, lineSplitter } from '../transport';
import { PolicyTab } from './policy';
import { HealthBadge, PENDING_LABEL, PortLinks, publishedPorts, useContainerVerb, usePendingVerbs, type ContainerSummary, type Verb } from './containers';

// xterm.js is loaded with the first terminal, not with the app: the list paints sooner.
const TerminalView = lazy(() => import('../terminal').then((m) => ({ default: m.TerminalView })));

interface ContainerInspect {
  Id: string;
  Name: string;
  Created: string;
  Path: string;
  Args: string[];
  State: {
    Status: string;
    Running: boolean;
    Paused: boolean;
    ExitCode: number;
    StartedAt: string;
    FinishedAt: string;
    Pid: number;
    Error?: string;
    Health?: { Status: string; FailingStreak: number; Log: Array<{ Start: string; End: string; ExitCode: number; Output: string }> | null };
  };
  Image: string;
  RestartCount: number;
  Config: { Image: string; Cmd: string[] | null; Entrypoint: string[] | null; Env: string[] | null; Tty: boolean; WorkingDir: string; User: string; Labels: Record<string, string> | null; OpenStdin: boolean };
  HostConfig: { RestartPolicy?: { Name: string }; Binds?: string[] | null; NetworkMode?: string; AutoRemove?: boolean };
  NetworkSettings: { Ports?: Record<string, Array<{ HostIp: string; HostPort: string }> | null> | null; Networks?: Record<string, { IPAddress: string; Gateway: string; MacAddress: string }> };
  Mounts: Array<{ Type: string; Source: string; Destination: string; Name?: string; RW: boolean }>;
}

const TABS = ['overview', 'logs', 'stats', 'terminal', 'attach', 'policy'] as const;

export function ContainerPage(props: { id: string; tab: string }) {
  const t = useTransport();
  const info = useQuery({ queryKey: ['container', props.id], queryFn: () => t.request<ContainerInspect>('GET', `/containers/${props.id}/json`) });
  const verb = useContainerVerb();
  const [confirm, setConfirm] = useState<'stop' | 'remove' | null>(null);
  const c = info.data;
  const name = c?.Name.replace(/^\//, '') ?? shortId(props.id);
  const pending = usePendingVerbs().get(c?.Id ?? props.id);
  /** A header button: disabled while any verb runs on the container, and saying which one does. */
  const verbButton = (v: Verb, onClick: () => void, danger = false) => (
    <button type="button" className={danger ? 'danger' : undefined} disabled={!!pending} aria-busy={pending === v || undefined} onClick={onClick}>
      {pending === v ? PENDING_LABEL[v] : v[0]!.toUpperCase() + v.slice(1)}
    </button>
  );
  return (
    <section>
      <header className="page-head">
        <h1>
          <a href="#/containers">Containers</a> / {name}
        </h1>
        {c && <span className={`badge ${c.State.Status}`}>{c.State.Status === 'exited' ? `exited (${c.State.ExitCode})` : c.State.Status}</span>}
        {c && <HealthBadge health={c.State.Health?.Status} />}
        {c && (
          <div className="actions">
            {c.State.Running ? (
              <>
                {verbButton('stop', () => setConfirm('stop'))}
                {verbButton('restart', () => verb.mutate({ verb: 'restart', ids: [c.Id] }))}
                {c.State.Paused ? verbButton('unpause', () => verb.mutate({ verb: 'unpause', ids: [c.Id] })) : verbButton('pause', () => verb.mutate({ verb: 'pause', ids: [c.Id] }))}
              </>
            ) : (
              verbButton('start', () => verb.mutate({ verb: 'start', ids: [c.Id] }))
            )}
            {verbButton('remove', () => setConfirm('remove'), true)}
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
        {c && props.tab === 'policy' && <PolicyTab id={c.Id} running={c.State.Running} />}
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

/** NetworkSettings.Ports (`{"80/tcp": [{HostIp, HostPort}]}`) in the list's shape. */
function inspectPorts(ports: ContainerInspect['NetworkSettings']['Ports']): ContainerSummary['Ports'] {
  const out: ContainerSummary['Ports'] = [];
  for (const [key, bindings] of Object.entries(ports ?? {})) {
    const [port, type = 'tcp'] = key.split('/');
    const PrivatePort = Number(port);
    if (!bindings?.length) out.push({ PrivatePort, Type: type });
    for (const b of bindings ?? []) out.push({ IP: b.HostIp || '0.0.0.0', PrivatePort, PublicPort: Number(b.HostPort) || undefined, Type: type });
  }
  return out;
}

/** Docker's zero time (0001-01-01...) means "never". */
const when = (t: string | undefined) => {
  if (!t || t.startsWith('0001-')) return '—';
  const d = new Date(t);
  return Number.isNaN(d.getTime()) ? t : <time dateTime={t} title={t}>{d.toLocaleString()}</time>;
};

function Overview({ c }: { c: ContainerInspect }) {
  const [raw, setRaw] = useState(false);
  const ports = publishedPorts(inspectPorts(c.NetworkSettings.Ports));
  const health = c.State.Health;
  const lastProbe = health?.Log?.at(-1);
  const fields: Array<[string, React.ReactNode]> = [
    ['ID', <code>{c.Id}</code>],
    ['Image', <code>{c.Config.Image}</code>],
    ['Command', <code>{[c.Path, ...c.Args].join(' ')}</code>],
    ['State', `${c.State.Status}${c.State.Running ? ` (pid ${c.State.Pid})` : ` (exit ${c.State.ExitCode})`}${c.State.Error ? ` — ${c.State.Error}` : ''}`],
    ['Created', when(c.Created)],
    ['Started', when(c.State.StartedAt)],
    ['Finished', when(c.State.FinishedAt)],
    ['Restart policy', `${c.HostConfig.RestartPolicy?.Name || 'no'} (restarted ${c.RestartCount}×)`],
    ['Ports', ports.length ? <span className="mono" data-testid="ports"><PortLinks ports={ports} /></span> : '—'],
    ...(health && health.Status !== 'none'
      ? ([
          [
            'Health',
            <span>
              <HealthBadge health={health.Status} />
              {health.FailingStreak > 0 && <span className="muted"> failing streak {health.FailingStreak}</span>}
              {lastProbe && (
                <div className="mono small">
                  last probe: exit {lastProbe.ExitCode} at {when(lastProbe.End)}
                  {lastProbe.Output.trim() && <pre className="probe-output">{lastProbe.Output.trim()}</pre>}
                </div>
              )}
            </span>,
          ],
        ] as Array<[string, React.ReactNode]>)
      : []),
    ['Networks', Object.entries(c.NetworkSettings.Networks ?? {}).map(([n, v]) => `${n} ${v.IPAddress || ''}`).join('; ') || '—'],
    ['Mounts', c.Mounts.map((m) => `${m.Name ?? m.Source} → ${m.Destination}${m.RW ? '' : ' (ro)'}`).join('; ') || '—'],
    ['Environment', (c.Config.Env ?? []).length ? <div className="mono small">{(c.Config.Env ?? []).map((e) => <div key={e}>{e}</div>)}</div> : '—'],
    ['Labels', Object.keys(c.Config.Labels ?? {}).length ? <div className="mono small">{Object.entries(c.Config.Labels ?? {}).map(([k, v]) => <div key={k}>{k}={v}</div>)}</div> : '—'],
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
        {shown.length === 0 && (
          <p className="log-empty" data-testid="logs-empty">
            {q && lines.length ? `No line matches “${search}”.` : props.running ? 'No output yet: lines appear here as the container writes them.' : 'The container wrote nothing.'}
          </p>
        )}
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
  // From zero, with headroom: a steady value draws as a steady line below the top, not along the border.
  const max = Math.max(1e-9, ...props.values) * 1.25;
  const pts = props.values.map((v, i) => `${(i / Math.max(1, props.values.length - 1)) * w},${h - (v / max) * (h - 4) - 2}`).join(' ');
  const area = props.values.length > 1 ? `0,${h} ${pts} ${w},${h}` : '';
  return (
    <figure className="chart">
      <figcaption>
        {props.label} <strong>{props.values.length ? props.format(props.values.at(-1)!) : '—'}</strong>
      </figcaption>
      <svg viewBox={`0 0 ${w} ${h}`} width="100%" height={h} preserveAspectRatio="none" role="img" aria-label={props.label}>
        {area && <polygon points={area} fill="currentColor" opacity="0.12" />}
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
