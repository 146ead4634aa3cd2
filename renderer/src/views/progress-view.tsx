/** A pull's or a push's progress, streamed into a panel of rows: the images view and the run form show it. */
import { useEffect, useRef, useState } from 'react';
import { formatBytes, useTransport } from '../engine';
import { applyProgress, EMPTY_PROGRESS, fraction, type ProgressMessage, type ProgressState } from '../progress';
import { lineSplitter } from '../transport';

/** Docker's registry credentials header: an empty auth config (anonymous; local registries need no login). */
const ANONYMOUS = { 'X-Registry-Auth': btoa('{}') };

/**
 * Runs one JSON-lines progress stream (pull, push) into rows, redrawn at most once per frame however fast the
 * lines come. An in-band error ends it shown in its panel; an answer that is not 200 throws (the page's banner).
 */
export function useProgressStream(title: string) {
  const t = useTransport();
  const [state, setState] = useState<ProgressState & { title: string; running: boolean; cancelled?: boolean }>({ ...EMPTY_PROGRESS, title, running: false });
  const abort = useRef<AbortController | null>(null);
  useEffect(() => () => abort.current?.abort(), []);
  /** Resolves true when the stream ended without an in-band error and was not cancelled. */
  const run = async (path: string, heading: string, body?: unknown): Promise<boolean> => {
    abort.current?.abort();
    const controller = new AbortController();
    abort.current = controller;
    let current: ProgressState = EMPTY_PROGRESS;
    let scheduled = false;
    const draw = () => {
      scheduled = false;
      setState((s) => ({ ...s, ...current }));
    };
    setState({ ...EMPTY_PROGRESS, title: heading, running: true });
    try {
      await t.stream(
        'POST',
        path,
        lineSplitter((line) => {
          let m: ProgressMessage;
          try {
            m = JSON.parse(line) as ProgressMessage;
          } catch {
            m = { status: line };
          }
          current = applyProgress(current, m);
          if (!scheduled) {
            scheduled = true;
            requestAnimationFrame(draw);
          }
        }),
        { headers: ANONYMOUS, signal: controller.signal, body },
      );
    } finally {
      setState((s) => ({ ...s, ...current, running: false, cancelled: controller.signal.aborted }));
    }
    // An in-band error is shown in the panel, where the stream's rows are; errors before the stream go to the banner.
    return !current.error && !controller.signal.aborted;
  };
  const cancel = () => abort.current?.abort();
  const clear = () => setState({ ...EMPTY_PROGRESS, title, running: false });
  return { state, run, cancel, clear };
}

export function ProgressView(props: { p: ReturnType<typeof useProgressStream>; testid: string }) {
  const s = props.p.state;
  if (!s.running && !s.layers.length && !s.lines.length && !s.head?.length && !s.error) return null;
  return (
    <div className="progress" data-testid={props.testid} aria-busy={s.running}>
      <div className="progress-head">
        <strong>{s.title}</strong>
        <span className="muted">{s.running ? 'in progress…' : s.error ? 'failed' : s.cancelled ? 'cancelled' : 'done'}</span>
        {s.running ? (
          <button type="button" onClick={props.p.cancel}>
            Cancel
          </button>
        ) : (
          <button type="button" onClick={props.p.clear} aria-label="Close progress">
            Close
          </button>
        )}
      </div>
      {(s.head ?? []).map((line, i) => (
        <div key={`h${i}`} className="small muted">
          {line}
        </div>
      ))}
      {s.layers.map((l) => (
        <div key={l.id} className="layer" data-layer={l.id}>
          <code>{l.id}</code>
          <span className="layer-status">{l.status}</span>
          <progress max={1} value={fraction(l)} aria-label={`${l.id} ${l.status}`} />
          <span className="muted small">{l.total ? `${formatBytes(l.current)} / ${formatBytes(l.total)}` : ''}</span>
        </div>
      ))}
      {s.lines.map((line, i) => (
        <div key={i} className={`small ${i === s.lines.length - 1 && !s.running && !s.error && !s.cancelled ? 'final' : 'muted'}`}>
          {line}
        </div>
      ))}
      {s.error && (
        <div className="error inline" role="alert">
          {s.error}
        </div>
      )}
    </div>
  );
}

