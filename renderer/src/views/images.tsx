/** Images: list, pull with per-layer progress, tag, push, history, remove, run. */
import { useQuery } from '@tanstack/react-query';
import { useEffect, useRef, useState, type FormEvent } from 'react';
import { Confirm, navigate, QueryState } from '../App';
import { ago, formatBytes, NARROW, shortId, useAction, useMediaQuery, usePending, useTransport } from '../engine';
import { applyProgress, EMPTY_PROGRESS, fraction, type ProgressMessage, type ProgressState } from '../progress';
import { lineSplitter } from '../transport';

interface ImageSummary {
  Id: string;
  RepoTags: string[] | null;
  RepoDigests: string[] | null;
  Created: number;
  Size: number;
  Containers: number;
}

/** Splits `registry:5000/name:tag` into the image and the tag (a colon after the last slash is the tag). */
export function splitReference(ref: string): { image: string; tag: string } {
  const at = ref.indexOf('@');
  if (at >= 0) return { image: ref.slice(0, at), tag: ref.slice(at + 1) };
  const colon = ref.lastIndexOf(':');
  return colon > ref.lastIndexOf('/') ? { image: ref.slice(0, colon), tag: ref.slice(colon + 1) } : { image: ref, tag: 'latest' };
}

/** Docker's registry credentials header: an empty auth config (anonymous; local registries need no login). */
const ANONYMOUS = { 'X-Registry-Auth': btoa('{}') };

/**
 * Runs one JSON-lines progress stream (pull, push) into rows, redrawn at most once per frame however fast the
 * lines come. An in-band error ends it shown in its panel; an answer that is not 200 throws (the page's banner).
 */
function useProgressStream(title: string) {
  const t = useTransport();
  const [state, setState] = useState<ProgressState & { title: string; running: boolean; cancelled?: boolean }>({ ...EMPTY_PROGRESS, title, running: false });
  const abort = useRef<AbortController | null>(null);
  useEffect(() => () => abort.current?.abort(), []);
  const run = async (path: string, heading: string) => {
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
        { headers: ANONYMOUS, signal: controller.signal },
      );
    } finally {
      setState((s) => ({ ...s, ...current, running: false, cancelled: controller.signal.aborted }));
    }
    // An in-band error is shown in the panel, where the stream's rows are; errors before the stream go to the banner.
  };
  const cancel = () => abort.current?.abort();
  const clear = () => setState({ ...EMPTY_PROGRESS, title, running: false });
  return { state, run, cancel, clear };
}

function ProgressView(props: { p: ReturnType<typeof useProgressStream>; testid: string }) {
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

/** A small modal form: one reference to type, Enter submits, Escape cancels. */
function ReferenceDialog(props: { title: string; label: string; initial: string; submitLabel: string; note?: string; onSubmit: (ref: string) => void; onCancel: () => void }) {
  const [value, setValue] = useState(props.initial);
  useEffect(() => {
    const onKey = (e: KeyboardEvent) => e.key === 'Escape' && props.onCancel();
    window.addEventListener('keydown', onKey);
    return () => window.removeEventListener('keydown', onKey);
  }, [props]);
  return (
    <div className="modal-backdrop">
      <form
        className="modal"
        role="dialog"
        aria-modal="true"
        aria-label={props.title}
        onSubmit={(e) => {
          e.preventDefault();
          if (value.trim()) props.onSubmit(value.trim());
        }}
      >
        <h2>{props.title}</h2>
        <label className="stacked">
          {props.label}
          <input autoFocus value={value} onChange={(e) => setValue(e.target.value)} aria-label={props.label} placeholder="registry:5000/name:tag" />
        </label>
        {props.note && <p className="muted small">{props.note}</p>}
        <div className="actions">
          <button type="button" onClick={props.onCancel}>
            Cancel
          </button>
          <button type="submit" className="primary">
            {props.submitLabel}
          </button>
        </div>
      </form>
    </div>
  );
}

export function ImagesView() {
  const t = useTransport();
  const list = useQuery({ queryKey: ['images'], queryFn: () => t.request<ImageSummary[]>('GET', '/images/json') });
  const [ref, setRef] = useState('');
  const pull = useProgressStream('Pull');
  const push = useProgressStream('Push');
  const doPull = useAction(async (reference: string) => {
    const { image, tag } = splitReference(reference);
    await pull.run(`/images/create?fromImage=${encodeURIComponent(image)}&tag=${encodeURIComponent(tag)}`, `Pulling ${reference}`);
  });
  const tagImage = async (id: string, target: string) => {
    const { image, tag } = splitReference(target);
    await t.request('POST', `/images/${id}/tag?repo=${encodeURIComponent(image)}&tag=${encodeURIComponent(tag)}`);
  };
  const tag = useAction(({ id, target }: { id: string; target: string }) => tagImage(id, target), { mutationKey: ['image-tag'] });
  // Push as any reference: tagged first when the image does not carry it yet.
  const doPush = useAction(async ({ img, target }: { img: ImageSummary; target: string }) => {
    if (!(img.RepoTags ?? []).includes(target)) await tagImage(img.Id, target);
    const { image, tag } = splitReference(target);
    await push.run(`/images/${image}/push?tag=${encodeURIComponent(tag)}`, `Pushing ${target}`);
  });
  // One reference after another (a tag, or the id of an untagged image): the last tag takes the image with it.
  const remove = useAction(
    async ({ refs }: { id: string; refs: string[] }) => {
      for (const r of refs) await t.request('DELETE', `/images/${r}`);
    },
    { mutationKey: ['image-remove'] },
  );
  const removing = new Set(usePending<{ id: string }>(['image-remove']).map((v) => v.id));
  const tagging = new Set(usePending<{ id: string }>(['image-tag']).map((v) => v.id));
  const narrow = useMediaQuery(NARROW);
  const [history, setHistory] = useState<{ id: string; rows: Array<{ Created: number; CreatedBy: string; Size: number; Tags: string[] | null }> } | null>(null);
  const showHistory = useAction(async (id: string) => setHistory({ id, rows: await t.request('GET', `/images/${id}/history`) }));
  const [confirm, setConfirm] = useState<ImageSummary | null>(null);
  /** The tag the removal dialog removes, or '*' for all of them. */
  const [removeTag, setRemoveTag] = useState('');
  const [dialog, setDialog] = useState<{ kind: 'tag' | 'push'; img: ImageSummary } | null>(null);
  const [search, setSearch] = useState('');

  const submit = (e: FormEvent) => {
    e.preventDefault();
    if (ref.trim()) doPull.mutate(ref.trim());
  };
  const q = search.toLowerCase();
  const rows = (list.data ?? []).filter((i) => !q || (i.RepoTags ?? []).some((r) => r.toLowerCase().includes(q)) || i.Id.includes(q));
  const tagsOf = (i: ImageSummary) => (i.RepoTags ?? []).filter((r) => r !== '<none>:<none>');

  return (
    <section>
      <header className="page-head">
        <h1>Images</h1>
        <input type="search" placeholder="Search ( / )" value={search} onChange={(e) => setSearch(e.target.value)} aria-label="Search images" />
        <form onSubmit={submit} className="inline-form">
          <input value={ref} onChange={(e) => setRef(e.target.value)} placeholder="registry/name:tag" aria-label="Image to pull" className="wide-input" />
          <button type="submit" className="primary" disabled={doPull.isPending} aria-busy={doPull.isPending || undefined}>
            {doPull.isPending ? 'Pulling…' : 'Pull'}
          </button>
        </form>
      </header>
      <ProgressView p={pull} testid="progress" />
      <ProgressView p={push} testid="push-progress" />
      <QueryState error={list.error} loading={list.isLoading}>
        {rows.length === 0 ? (
          q ? (
            <div className="empty" data-testid="images-no-match">
              <p>No image matches “{search.trim()}”.</p>
              <button type="button" onClick={() => setSearch('')}>
                Clear the search
              </button>
            </div>
          ) : (
            <p className="empty">No images yet. Pull one above, or load an archive with docker load.</p>
          )
        ) : (
          <table className="list" data-testid="images">
            <thead>
              <tr>
                <th>Tags</th>
                <th>ID</th>
                <th>Size</th>
                {!narrow && <th>Created</th>}
                {!narrow && <th>Containers</th>}
                <th />
              </tr>
            </thead>
            <tbody>
              {rows.map((i) => {
                const tags = tagsOf(i);
                const label = tags[0] ?? shortId(i.Id);
                return (
                  <tr key={i.Id} tabIndex={0} data-image={label}>
                    <td>{tags.length ? tags.map((r) => <div key={r}>{r}</div>) : <span className="badge dangling">dangling</span>}</td>
                    <td className="mono">{shortId(i.Id)}</td>
                    <td className="nowrap">{formatBytes(i.Size)}</td>
                    {!narrow && <td className="nowrap">{ago(i.Created)}</td>}
                    {!narrow && <td>{i.Containers > 0 ? i.Containers : ''}</td>}
                    <td className="row-actions">
                      <button type="button" onClick={() => navigate('run', tags[0] ?? i.Id)} aria-label={`Run ${label}`}>
                        Run
                      </button>
                      <button type="button" onClick={() => setDialog({ kind: 'tag', img: i })} aria-label={`Tag ${label}`} disabled={tagging.has(i.Id)} aria-busy={tagging.has(i.Id) || undefined}>
                        {tagging.has(i.Id) ? 'Tagging…' : 'Tag…'}
                      </button>
                      <button type="button" onClick={() => setDialog({ kind: 'push', img: i })} aria-label={`Push ${label}`} disabled={push.state.running}>
                        Push…
                      </button>
                      <button
                        type="button"
                        onClick={() => showHistory.mutate(i.Id)}
                        aria-label={`History of ${label}`}
                        disabled={showHistory.isPending && showHistory.variables === i.Id}
                        aria-busy={(showHistory.isPending && showHistory.variables === i.Id) || undefined}
                      >
                        History
                      </button>
                      <button
                        type="button"
                        className="danger"
                        onClick={() => {
                          setRemoveTag(tags[0] ?? '');
                          setConfirm(i);
                        }}
                        aria-label={`Remove ${label}`}
                        disabled={removing.has(i.Id)}
                        aria-busy={removing.has(i.Id) || undefined}
                      >
                        {removing.has(i.Id) ? 'Removing…' : 'Remove…'}
                      </button>
                    </td>
                  </tr>
                );
              })}
            </tbody>
          </table>
        )}
      </QueryState>
      {history && (
        <div className="panel" data-testid="history">
          <h2>
            History of {shortId(history.id)}{' '}
            <button type="button" onClick={() => setHistory(null)}>
              Close
            </button>
          </h2>
          <table className="list">
            <tbody>
              {history.rows.map((h, n) => (
                <tr key={n}>
                  <td className="nowrap">{ago(h.Created)}</td>
                  <td className="mono small">{h.CreatedBy}</td>
                  <td className="nowrap">{formatBytes(h.Size)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      {dialog && (
        <ReferenceDialog
          key={`${dialog.kind}-${dialog.img.Id}`}
          title={dialog.kind === 'tag' ? `Tag ${tagsOf(dialog.img)[0] ?? shortId(dialog.img.Id)}` : `Push ${tagsOf(dialog.img)[0] ?? shortId(dialog.img.Id)}`}
          label={dialog.kind === 'tag' ? 'New reference' : 'Push as'}
          initial={tagsOf(dialog.img)[0] ?? ''}
          submitLabel={dialog.kind === 'tag' ? 'Tag' : 'Push'}
          note={dialog.kind === 'push' ? 'A reference the image does not carry yet is tagged first. The registry is the part before the first slash (host:port).' : undefined}
          onCancel={() => setDialog(null)}
          onSubmit={(target) => {
            if (dialog.kind === 'tag') tag.mutate({ id: dialog.img.Id, target });
            else doPush.mutate({ img: dialog.img, target });
            setDialog(null);
          }}
        />
      )}
      {confirm && (
        <Confirm
          title={tagsOf(confirm).length > 1 ? `Remove a tag of ${shortId(confirm.Id)}?` : `Remove ${tagsOf(confirm)[0] ?? shortId(confirm.Id)}?`}
          confirmLabel="Remove"
          onCancel={() => setConfirm(null)}
          onConfirm={() => {
            // A tag only untags it (as `docker rmi name`) unless it is the last; all tags remove the image.
            const tags = tagsOf(confirm);
            remove.mutate({ id: confirm.Id, refs: tags.length === 0 ? [confirm.Id] : removeTag === '*' ? tags : [removeTag] });
            setConfirm(null);
          }}
        >
          {tagsOf(confirm).length > 1 ? (
            <fieldset className="choices" aria-label="Tag to remove">
              <legend>It carries {tagsOf(confirm).length} tags. Remove:</legend>
              {tagsOf(confirm).map((r) => (
                <label key={r} className="inline">
                  <input type="radio" name="remove-tag" value={r} checked={removeTag === r} onChange={() => setRemoveTag(r)} /> <code>{r}</code> only
                </label>
              ))}
              <label className="inline">
                <input type="radio" name="remove-tag" value="*" checked={removeTag === '*'} onChange={() => setRemoveTag('*')} /> all its tags, and the image
              </label>
            </fieldset>
          ) : (
            <p>{tagsOf(confirm).length === 1 ? 'Its only tag goes, and the image with it.' : 'The untagged image is removed.'}</p>
          )}
        </Confirm>
      )}
    </section>
  );
}
