/**
 * The engine as React sees it: the transport in a context, query keys, and the single event subscription
 * that keeps every query fresh. Nothing here polls: queries have no refetch interval and no stale timer;
 * they are invalidated when `/events` says that something of their kind changed.
 */
import { QueryClient, useMutation, useMutationState, useQueryClient } from '@tanstack/react-query';
import { createContext, useContext, useEffect, useRef, useState } from 'react';
import { ApiError, lineSplitter, type Transport } from './transport';

export const TransportContext = createContext<Transport | null>(null);

export function useTransport(): Transport {
  const t = useContext(TransportContext);
  if (!t) throw new Error('no transport');
  return t;
}

export function createQueryClient(): QueryClient {
  return new QueryClient({
    defaultOptions: {
      queries: {
        staleTime: Infinity,
        refetchOnWindowFocus: false,
        refetchOnReconnect: false,
        retry: (count, err) => !(err instanceof ApiError && err.status < 500) && count < 1,
      },
    },
  });
}

export interface EngineEvent {
  Type: string;
  Action: string;
  Actor: { ID: string; Attributes?: Record<string, string> };
  time: number;
  timeNano?: number;
  scope?: string;
}

/** Which queries an event makes stale. */
export function keysFor(ev: EngineEvent): string[][] {
  switch (ev.Type) {
    case 'container':
      // exec_* and top events do not change the list.
      if (ev.Action.startsWith('exec_') || ev.Action === 'top' || ev.Action === 'resize' || ev.Action === 'attach') return [];
      // A swarm task's container on this node: the task's state changed with it.
      if (ev.Actor.Attributes?.['com.docker.swarm.task.id']) return [['containers'], ['container', ev.Actor.ID], ['swarm']];
      return [['containers'], ['container', ev.Actor.ID], ['policy', ev.Actor.ID], ['volumes'], ['networks'], ['images'], ['df']];
    case 'image':
      return [['images'], ['image'], ['df']];
    case 'volume':
      return [['volumes'], ['df']];
    case 'plugin':
      return [['plugins']];
    case 'network':
      return [['networks'], ['network', ev.Actor.ID], ['containers']];
    case 'service':
    case 'node':
    case 'task':
    case 'secret':
    case 'config':
      return [['swarm']];
    default:
      return [];
  }
}

interface ListedContainer {
  Id: string;
  Names: string[];
  Image: string;
  State: string;
  Status: string;
  Created: number;
  Ports: unknown[];
  Labels: Record<string, string> | null;
}

const STATE_AFTER: Record<string, string> = { start: 'running', restart: 'running', unpause: 'running', pause: 'paused', die: 'exited', stop: 'exited', kill: 'running' };

/**
 * The container list as the event says it now is, until the refetch that follows brings the engine's own
 * answer: a new row at `create`, a state at `start`/`die`/`pause`..., no row after `destroy`.
 */
export function applyContainerEvent<T extends ListedContainer>(list: T[] | undefined, ev: EngineEvent): T[] | undefined {
  if (!list || ev.Type !== 'container') return list;
  const id = ev.Actor.ID;
  const attrs = ev.Actor.Attributes ?? {};
  if (ev.Action === 'create') {
    if (list.some((c) => c.Id === id)) return list;
    const { name, image, ...labels } = attrs;
    const row: ListedContainer = { Id: id, Names: [`/${name ?? id.slice(0, 12)}`], Image: image ?? '', State: 'created', Status: 'Created', Created: ev.time, Ports: [], Labels: labels };
    return [row as T, ...list];
  }
  if (ev.Action === 'destroy') return list.filter((c) => c.Id !== id);
  const state = STATE_AFTER[ev.Action];
  if (!state || ev.Action === 'kill') return list;
  // `die` carries the exit code: the row says it at once, as the list's Status will (`Exited (137) ...`).
  const status = ev.Action === 'die' && attrs.exitCode !== undefined ? `Exited (${attrs.exitCode}) Less than a second ago` : undefined;
  return list.map((c) => (c.Id === id ? { ...c, State: state, ...(status ? { Status: status } : {}) } : c));
}

type Listener = (ev: EngineEvent) => void;
const listeners = new Set<Listener>();
export function onEngineEvent(cb: Listener): () => void {
  listeners.add(cb);
  return () => void listeners.delete(cb);
}

/**
 * Subscribes once to /events; invalidations are batched per animation frame. Reconnects after a failure.
 * The stream opens after the first paint, so that it never delays it: `since` (ms since the epoch, when the
 * app first asked the engine for anything) makes the engine replay what happened in between, so nothing
 * is missed.
 */
export function useEventSubscription(since?: number): 'connecting' | 'live' | 'lost' {
  const transport = useTransport();
  const qc = useQueryClient();
  const [state, setState] = useState<'connecting' | 'live' | 'lost'>('connecting');
  useEffect(() => {
    const abort = new AbortController();
    let pending = new Map<string, string[]>();
    let scheduled = false;
    const flush = () => {
      scheduled = false;
      const keys = [...pending.values()];
      pending = new Map();
      for (const queryKey of keys) void qc.invalidateQueries({ queryKey });
    };
    const run = async () => {
      for (let attempt = 0; !abort.signal.aborted; attempt++) {
        try {
          const onLine = lineSplitter((line) => {
            const ev = JSON.parse(line) as EngineEvent;
            for (const cb of listeners) cb(ev);
            if (ev.Type === 'container') qc.setQueryData<ListedContainer[]>(['containers'], (old) => applyContainerEvent(old, ev));
            for (const key of keysFor(ev)) pending.set(key.join('\0'), key);
            if (!scheduled) {
              scheduled = true;
              requestAnimationFrame(flush);
            }
          });
          // The stream is open once headers arrived: everything that happened before may be missed, so refresh.
          setState('live');
          if (attempt > 0) void qc.invalidateQueries();
          // Two seconds of margin: replaying an event twice is harmless, missing one is not.
          const replay = attempt === 0 && since !== undefined ? `?since=${Math.max(0, Math.floor(since / 1000) - 2)}` : '';
          await transport.stream('GET', `/events${replay}`, onLine, { signal: abort.signal });
        } catch {
          /* shown as lost below */
        }
        if (abort.signal.aborted) return;
        setState('lost');
        // A back-off, not a poll: the stream ended (engine restart); try to open it again.
        await new Promise((r) => setTimeout(r, Math.min(500 * 2 ** attempt, 10_000)));
      }
    };
    // After the next frame (the first paint), in a task of its own.
    let timer: ReturnType<typeof setTimeout> | undefined;
    const frame = requestAnimationFrame(() => (timer = setTimeout(() => void run(), 0)));
    return () => {
      cancelAnimationFrame(frame);
      if (timer !== undefined) clearTimeout(timer);
      abort.abort();
    };
  }, [transport, qc, since]);
  return state;
}

/**
 * A mutation whose errors are shown with the engine's message in the page's error banner. With a
 * `mutationKey`, every view can see which of its kind are still running (useMutationState), not only the last.
 */
export function useAction<V>(fn: (vars: V) => Promise<unknown>, opts: { onSuccess?: () => void; mutationKey?: string[] } = {}) {
  const report = useContext(ErrorContext);
  return useMutation({
    mutationKey: opts.mutationKey,
    mutationFn: fn,
    onError: (err) => report(err instanceof Error ? err.message : String(err)),
    onSuccess: opts.onSuccess,
  });
}

/** The variables of the mutations of one key still running: which rows show a pending action. */
export function usePending<V>(mutationKey: string[]): V[] {
  return useMutationState({ filters: { mutationKey, status: 'pending' }, select: (m) => m.state.variables as V });
}

/** Whether a media query holds, kept current by its change events (the layout at narrow widths). */
export function useMediaQuery(query: string): boolean {
  const [matches, setMatches] = useState(() => matchMedia(query).matches);
  useEffect(() => {
    const list = matchMedia(query);
    const on = () => setMatches(list.matches);
    on();
    list.addEventListener('change', on);
    return () => list.removeEventListener('change', on);
  }, [query]);
  return matches;
}

/** The width below which lists drop their least needed columns and the sidebar narrows (styles.css agrees). */
export const NARROW = '(max-width: 1000px)';

export const ErrorContext = createContext<(message: string) => void>(() => undefined);

export function useLatest<T>(value: T) {
  const ref = useRef(value);
  ref.current = value;
  return ref;
}

export function shortId(id: string): string {
  return id.replace(/^sha256:/, '').slice(0, 12);
}

export function formatBytes(n: number | undefined): string {
  if (n === undefined || n < 0 || Number.isNaN(n)) return '—';
  const units = ['B', 'kB', 'MB', 'GB', 'TB'];
  let i = 0;
  while (n >= 1000 && i < units.length - 1) {
    n /= 1000;
    i++;
  }
  // A no-break space: a number is never parted from its unit at a line's end.
  return `${n < 10 && i > 0 ? n.toFixed(1) : Math.round(n)}\u00a0${units[i]}`;
}

export function ago(seconds: number | undefined): string {
  if (!seconds) return '—';
  const d = Date.now() / 1000 - seconds;
  if (d < 60) return `${Math.max(0, Math.floor(d))} s ago`;
  if (d < 3600) return `${Math.floor(d / 60)} min ago`;
  if (d < 86400) return `${Math.floor(d / 3600)} h ago`;
  return `${Math.floor(d / 86400)} days ago`;
}
