/** Images: list, pull with per-layer progress, tag, push, history, remove, run. */
import { useQuery } from '@tanstack/react-query';
import { useEffect, useState, type FormEvent } from 'react';
import { Confirm, ListTable, navigate, QueryState, RemoveButton } from '../App';
import { ago, formatBytes, NARROW, shortId, useAction, useMediaQuery, usePending, useTransport } from '../engine';
import { ProgressView, useProgressStream } from './progress-view';

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
  const [pruneAsk, setPruneAsk] = useState(false);
  const [pruneAll, setPruneAll] = useState(false);
  const [note, setNote] = useState<string | null>(null);
  const prune = useAction(async (all: boolean) => {
    const filters = encodeURIComponent(JSON.stringify({ dangling: [all ? 'false' : 'true'] }));
    const r = await t.request<{ ImagesDeleted: Array<{ Deleted?: string; Untagged?: string }> | null; SpaceReclaimed: number }>('POST', `/images/prune?filters=${filters}`);
    const n = (r?.ImagesDeleted ?? []).filter((d) => d.Deleted).length;
    setNote(`Pruned ${n} image${n === 1 ? '' : 's'}, reclaimed ${formatBytes(r?.SpaceReclaimed ?? 0)}.`);
  });

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
        <button type="button" onClick={() => navigate('images', 'build')}>
          Build…
        </button>
        <button type="button" onClick={() => (setNote(null), setPruneAsk(true))} disabled={prune.isPending} aria-busy={prune.isPending || undefined}>
          {prune.isPending ? 'Pruning…' : 'Prune…'}
        </button>
      </header>
      {note && (
        <p className="note" role="status">
          {note}
        </p>
      )}
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
          <ListTable data-testid="images" columns={['Tags', 'ID', 'Size', !narrow && 'Created', !narrow && 'Containers', '']}>
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
                    <button
                      type="button"
                      onClick={() => setDialog({ kind: 'push', img: i })}
                      aria-label={`Push ${label}`}
                      disabled={push.state.running}
                      aria-busy={(push.state.running && doPush.variables?.img.Id === i.Id) || undefined}
                    >
                      {push.state.running && doPush.variables?.img.Id === i.Id ? 'Pushing…' : 'Push…'}
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
                    <RemoveButton
                      onClick={() => {
                        setRemoveTag(tags[0] ?? '');
                        setConfirm(i);
                      }}
                      aria-label={`Remove ${label}`}
                      running={removing.has(i.Id)}
                    >
                      Remove…
                    </RemoveButton>
                  </td>
                </tr>
              );
            })}
          </ListTable>
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
      {pruneAsk && (
        <Confirm title="Remove unused images?" confirmLabel="Prune" onCancel={() => setPruneAsk(false)} onConfirm={() => (setPruneAsk(false), prune.mutate(pruneAll))}>
          <p>Removes the images no container uses{pruneAll ? '' : ' that carry no tag (dangling)'}.</p>
          <label className="inline">
            <input type="checkbox" checked={pruneAll} onChange={(e) => setPruneAll(e.target.checked)} /> Tagged ones too (every unused image)
          </label>
        </Confirm>
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
