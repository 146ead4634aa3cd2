import { lazy, Suspense, useCallback, useEffect, useState, type ButtonHTMLAttributes, type ReactNode, type TableHTMLAttributes } from 'react';
import { ErrorContext, useEventSubscription } from './engine';
import { ThemeContext, useThemeState } from './theme';
import { ContainersView } from './views/containers';

// The list is the first view and comes with the app; every other view is fetched when first opened.
const ContainerPage = lazy(() => import('./views/container').then((m) => ({ default: m.ContainerPage })));
const ComposeView = lazy(() => import('./views/compose').then((m) => ({ default: m.ComposeView })));
const RunView = lazy(() => import('./views/run').then((m) => ({ default: m.RunView })));
const ImagesView = lazy(() => import('./views/images').then((m) => ({ default: m.ImagesView })));
const VolumesView = lazy(() => import('./views/volumes').then((m) => ({ default: m.VolumesView })));
const PluginsView = lazy(() => import('./views/plugins').then((m) => ({ default: m.PluginsView })));
const NetworksView = lazy(() => import('./views/resources').then((m) => ({ default: m.NetworksView })));
const SwarmView = lazy(() => import('./views/swarm').then((m) => ({ default: m.SwarmView })));
const EventsView = lazy(() => import('./views/resources').then((m) => ({ default: m.EventsView })));
const SystemView = lazy(() => import('./views/resources').then((m) => ({ default: m.SystemView })));
const BuildView = lazy(() => import('./views/build').then((m) => ({ default: m.BuildView })));
const SettingsView = lazy(() => import('./views/settings').then((m) => ({ default: m.SettingsView })));

/** Hash routes (`#/containers/<id>/logs`): they work from file:// in Electron and behind `berthd --ui`. */
export function useRoute(): string[] {
  const read = () => (location.hash.replace(/^#\/?/, '') || 'containers').split('/').map(decodeURIComponent);
  const [route, setRoute] = useState(read);
  useEffect(() => {
    const on = () => setRoute(read());
    window.addEventListener('hashchange', on);
    return () => window.removeEventListener('hashchange', on);
  }, []);
  return route;
}

export function navigate(...parts: string[]): void {
  location.hash = '#/' + parts.map(encodeURIComponent).join('/');
}

const SECTIONS: Array<[string, string]> = [
  ['containers', 'Containers'],
  ['compose', 'Compose'],
  ['run', 'Run'],
  ['images', 'Images'],
  ['volumes', 'Volumes'],
  ['networks', 'Networks'],
  ['plugins', 'Plugins'],
  ['swarm', 'Swarm'],
  ['events', 'Events'],
  ['system', 'System'],
  ['settings', 'Settings'],
];

export function App(props: { since?: number }) {
  const route = useRoute();
  const themeState = useThemeState();
  const theme = themeState.theme;
  const [errors, setErrors] = useState<Array<{ id: number; message: string }>>([]);
  const report = useCallback((message: string) => setErrors((e) => [...e.slice(-2), { id: Date.now() + Math.random(), message }]), []);

  // Keyboard: Alt+1..9 switch sections, "/" focuses search.
  useEffect(() => {
    const onKey = (e: KeyboardEvent) => {
      const target = e.target as HTMLElement;
      const typing = target.closest('input, textarea, select, .xterm');
      if (e.altKey && /^[1-9]$/.test(e.key) && SECTIONS[Number(e.key) - 1]) {
        e.preventDefault();
        navigate(SECTIONS[Number(e.key) - 1]![0]);
      } else if (e.key === '/' && !typing) {
        const search = document.querySelector<HTMLInputElement>('input[type=search]');
        if (search) {
          e.preventDefault();
          search.focus();
        }
      } else if (e.key === 'Escape' && errors.length) {
        setErrors([]);
      }
    };
    window.addEventListener('keydown', onKey);
    return () => window.removeEventListener('keydown', onKey);
  }, [errors.length]);

  // Errors belong to the page they happened on.
  const routeKey = route.join('/');
  useEffect(() => setErrors([]), [routeKey]);

  const [section, ...rest] = route;
  let view: ReactNode;
  switch (section) {
    case 'containers':
      view = rest[0] ? <ContainerPage id={rest[0]} tab={rest[1] ?? 'overview'} /> : <ContainersView />;
      break;
    case 'compose':
      view = <ComposeView />;
      break;
    case 'run':
      view = <RunView image={rest[0]} />;
      break;
    case 'images':
      view = rest[0] === 'build' ? <BuildView /> : <ImagesView />;
      break;
    case 'volumes':
      view = <VolumesView />;
      break;
    case 'networks':
      view = <NetworksView selected={rest[0]} />;
      break;
    case 'plugins':
      view = <PluginsView />;
      break;
    case 'swarm':
      view = <SwarmView selected={rest[0]} />;
      break;
    case 'events':
      view = <EventsView />;
      break;
    case 'system':
      view = <SystemView />;
      break;
    case 'settings':
      view = <SettingsView />;
      break;
    default:
      view = <p className="empty">Nothing here.</p>;
  }

  return (
    <ErrorContext.Provider value={report}>
      <ThemeContext.Provider value={themeState}>
        <div className="app">
          <nav className="sidebar" aria-label="Sections">
            <div className="brand">Berth</div>
            <ul>
              {SECTIONS.map(([key, label], i) => (
                <li key={key}>
                  <a href={`#/${key}`} className={section === key ? 'active' : ''} aria-current={section === key ? 'page' : undefined} title={i < 9 ? `Alt+${i + 1}` : undefined}>
                    {label}
                  </a>
                </li>
              ))}
            </ul>
            <div className="sidebar-foot">
              <EventStream since={props.since} />
              <button type="button" className="theme" onClick={() => themeState.setChoice(theme === 'dark' ? 'light' : 'dark')} aria-label="Toggle theme">
                {theme === 'dark' ? 'Light theme' : 'Dark theme'}
              </button>
            </div>
          </nav>
          <main className="content">
            {errors.length > 0 && (
              <div className="errors" role="alert">
                {errors.map((e) => (
                  <div key={e.id} className="error">
                    <span>{e.message}</span>
                    <button type="button" aria-label="Dismiss" onClick={() => setErrors((all) => all.filter((x) => x.id !== e.id))}>
                      ×
                    </button>
                  </div>
                ))}
              </div>
            )}
            <Suspense fallback={<p className="muted">Loading…</p>}>{view}</Suspense>
          </main>
        </div>
      </ThemeContext.Provider>
    </ErrorContext.Provider>
  );
}

/**
 * The app's one event subscription, and its state in the sidebar: a component of its own, so that the
 * stream going live re-renders this line only, not the page.
 */
function EventStream(props: { since?: number }) {
  const live = useEventSubscription(props.since);
  return (
    <span>
      <span className={`dot ${live}`} aria-label={`events ${live}`} /> {live === 'live' ? 'Live' : live === 'lost' ? 'Reconnecting…' : 'Connecting…'}
    </span>
  );
}

/** A modal confirmation: focus lands on Cancel; Enter on the danger button confirms; Escape cancels. */
export function Confirm(props: { title: string; children?: ReactNode; confirmLabel: string; onConfirm: () => void; onCancel: () => void }) {
  useEffect(() => {
    const onKey = (e: KeyboardEvent) => {
      if (e.key === 'Escape') props.onCancel();
    };
    window.addEventListener('keydown', onKey);
    return () => window.removeEventListener('keydown', onKey);
  }, [props]);
  return (
    <div className="modal-backdrop">
      <div className="modal" role="dialog" aria-modal="true" aria-label={props.title}>
        <h2>{props.title}</h2>
        {props.children}
        <div className="actions">
          <button type="button" autoFocus onClick={props.onCancel}>
            Cancel
          </button>
          <button type="button" className="danger" onClick={props.onConfirm}>
            {props.confirmLabel}
          </button>
        </div>
      </div>
    </div>
  );
}

/**
 * A button whose action takes a while: while `running`, it shows `pendingLabel`, is marked aria-busy and is
 * disabled (or as `disabled` says, when another action of the same row also holds it).
 */
type PendingButtonProps = ButtonHTMLAttributes<HTMLButtonElement> & { running: boolean; pendingLabel: ReactNode };
export function PendingButton({ running, pendingLabel, disabled, children, ...rest }: PendingButtonProps) {
  return (
    <button type="button" {...rest} disabled={disabled ?? running} aria-busy={running || undefined}>
      {running ? pendingLabel : children}
    </button>
  );
}

/** A row's Remove button (it usually asks for a confirmation first), labelled Removing… while it runs. */
export function RemoveButton({ children = 'Remove', ...rest }: Omit<PendingButtonProps, 'pendingLabel'>) {
  return (
    <PendingButton className="danger" pendingLabel="Removing…" {...rest}>
      {children}
    </PendingButton>
  );
}

/** A list table: a header cell per column (`false` leaves one out, '' is a column without a title), the rows as children. */
export function ListTable({ columns, children, ...rest }: TableHTMLAttributes<HTMLTableElement> & { columns: (string | false)[] }) {
  return (
    <table className="list" {...rest}>
      <thead>
        <tr>
          {columns.map((title, i) => (title === false ? null : <th key={i}>{title}</th>))}
        </tr>
      </thead>
      <tbody>{children}</tbody>
    </table>
  );
}

export function QueryState(props: { error: unknown; loading: boolean; children: ReactNode }) {
  if (props.error) return <div className="error inline" role="alert">{(props.error as Error).message}</div>;
  if (props.loading) return <p className="muted">Loading…</p>;
  return <>{props.children}</>;
}
