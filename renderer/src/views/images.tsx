import { useQuery } from '@tanstack/react-query';
import { useState, type FormEvent } from 'react';
import { Confirm, navigate, QueryState } from '../App';
import { ago, formatBytes, shortId, useAction, useTransport } from '../engine';
import { ApiError, lineSplitter } from '../transport';

interface ImageSummary {
  Id: string;
  RepoTags: string[] | null;
  RepoDigests: string[] | null;
  Created: number;
  Size: number;
  Containers: number;
}

interface Progress {
  id?: string;
  status?: string;
  progress?: string;
  progressDetail?: { current?: number; total?: number };
  error?: string;
  errorDetail?: { message: string };
}

/** Splits `registry:5000/name:tag` into the image and the tag (a colon after the last slash is the tag). */
export function splitReference(ref: string): { image: string; tag: string } {
  const at = ref.indexOf('@');
  if (at >= 0) return { image: ref.slice(0, at), tag: ref.slice(at + 1) };
  const colon = ref.lastIndexOf(':');
  return colon > ref.lastIndexOf('/') ? { image: ref.slice(0, colon), tag: ref.slice(colon + 1) } : { image: ref, tag: 'latest' };
}

/** Reads a JSON-lines progress stream (pull, push) into per-layer rows; an `error` line fails it. */
function useProgressStream() {
  const t = useTransport();
  const [layers, setLayers] = useState<Map<string, Progress>>(new Map());
  const [status, setStatus] = useState<string[]>([]);
  const run = async (path: string, headers?: Record<string, string>) => {
    setLayers(new Map());
    setStatus([]);
    let failure: string | undefined;
    await t.stream(
      'POST',
      path,
      lineSplitter((line) => {
        const p = JSON.parse(line) as Progress;
        if (p.error) failure = p.errorDetail?.message ?? p.error;
        else if (p.id && p.progressDetail !== undefined) setLayers((m) => new Map(m).set(p.id!, p));
        else if (p.status) setStatus((s) => [...s, p.id ? `${p.id}: ${p.status}` : p.status!]);
      }),
      { headers },
    );
    if (failure) throw new ApiError(500, failure);
  };
  return { layers, status, run };
}

function ProgressView(props: { layers: Map<string, Progress>; status: string[] }) {
  if (!props.layers.size && !props.status.length) return null;
  return (
    <div className="progress" data-testid="progress">
      {[...props.layers.values()].map((p) => {
        const cur = p.progressDetail?.current ?? 0;
        const total = p.progressDetail?.total ?? 0;
        return (
          <div key={p.id} className="layer">
            <code>{p.id}</code> <span>{p.status}</span>
            <progress max={total || 1} value={total ? cur : /complete|exists/i.test(p.status ?? '') ? 1 : 0} />
            <span className="muted">{total ? `${formatBytes(cur)} / ${formatBytes(total)}` : ''}</span>
          </div>
        );
      })}
      {props.status.map((s, i) => (
        <div key={i} className="muted small">
          {s}
        </div>
      ))}
    </div>
  );
}

export function ImagesView() {
  const t = useTransport();
  const list = useQuery({ queryKey: ['images'], queryFn: () => t.request<ImageSummary[]>('GET', '/images/json') });
  const [ref, setRef] = useState('');
  const pull = useProgressStream();
  const push = useProgressStream();
  const doPull = useAction(async () => {
    const { image, tag } = splitReference(ref.trim());
    await pull.run(`/images/create?fromImage=${encodeURIComponent(image)}&tag=${encodeURIComponent(tag)}`, { 'X-Registry-Auth': btoa('{}') });
  });
  const doPush = useAction(async (name: string) => {
    const { image, tag } = splitReference(name);
    await push.run(`/images/${image}/push?tag=${encodeURIComponent(tag)}`, { 'X-Registry-Auth': btoa('{}') });
  });
  const tag = useAction(async ({ id, target }: { id: string; target: string }) => {
    const { image, tag } = splitReference(target);
    await t.request('POST', `/images/${id}/tag?repo=${encodeURIComponent(image)}&tag=${encodeURIComponent(tag)}`);
  });
  const remove = useAction((id: string) => t.request('DELETE', `/images/${id}`));
  const [history, setHistory] = useState<{ id: string; rows: Array<{ Created: number; CreatedBy: string; Size: number }> } | null>(null);
  const showHistory = useAction(async (id: string) => setHistory({ id, rows: await t.request('GET', `/images/${id}/history`) }));
  const [confirm, setConfirm] = useState<ImageSummary | null>(null);
  const [search, setSearch] = useState('');

  const submit = (e: FormEvent) => {
    e.preventDefault();
    if (ref.trim()) doPull.mutate(undefined);
  };
  const q = search.toLowerCase();
  const rows = (list.data ?? []).filter((i) => !q || (i.RepoTags ?? []).some((r) => r.toLowerCase().includes(q)) || i.Id.includes(q));

  return (
    <section>
      <header className="page-head">
        <h1>Images</h1>
        <input type="search" placeholder="Search ( / )" value={search} onChange={(e) => setSearch(e.target.value)} aria-label="Search images" />
        <form onSubmit={submit} className="inline-form">
          <input value={ref} onChange={(e) => setRef(e.target.value)} placeholder="registry/name:tag" aria-label="Image to pull" />
          <button type="submit" className="primary" disabled={doPull.isPending}>
            {doPull.isPending ? 'Pulling…' : 'Pull'}
          </button>
        </form>
      </header>
      <ProgressView layers={pull.layers} status={pull.status} />
      <ProgressView layers={push.layers} status={push.status} />
      <QueryState error={list.error} loading={list.isLoading}>
        <table className="list" data-testid="images">
          <thead>
            <tr>
              <th>Tags</th>
              <th>ID</th>
              <th>Size</th>
              <th>Created</th>
              <th>In use</th>
              <th />
            </tr>
          </thead>
          <tbody>
            {rows.map((i) => {
              const tags = (i.RepoTags ?? []).filter((r) => r !== '<none>:<none>');
              return (
                <tr key={i.Id} tabIndex={0}>
                  <td>{tags.length ? tags.map((r) => <div key={r}>{r}</div>) : <span className="badge dangling">dangling</span>}</td>
                  <td className="mono">{shortId(i.Id)}</td>
                  <td>{formatBytes(i.Size)}</td>
                  <td>{ago(i.Created)}</td>
                  <td>{i.Containers > 0 ? i.Containers : ''}</td>
                  <td className="row-actions">
                    <button type="button" onClick={() => navigate('run', tags[0] ?? i.Id)}>
                      Run
                    </button>
                    <button
                      type="button"
                      onClick={() => {
                        const target = prompt('New tag (name:tag)', tags[0] ?? '');
                        if (target) tag.mutate({ id: i.Id, target });
                      }}
                    >
                      Tag
                    </button>
                    {tags[0] && (
                      <button type="button" onClick={() => doPush.mutate(tags[0]!)}>
                        Push
                      </button>
                    )}
                    <button type="button" onClick={() => showHistory.mutate(i.Id)}>
                      History
                    </button>
                    <button type="button" className="danger" onClick={() => setConfirm(i)}>
                      Remove
                    </button>
                  </td>
                </tr>
              );
            })}
          </tbody>
        </table>
      </QueryState>
      {history && (
        <div className="panel">
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
                  <td>{ago(h.Created)}</td>
                  <td className="mono small">{h.CreatedBy}</td>
                  <td>{formatBytes(h.Size)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      {confirm && (
        <Confirm
          title={`Remove ${(confirm.RepoTags ?? [])[0] ?? shortId(confirm.Id)}?`}
          confirmLabel="Remove"
          onCancel={() => setConfirm(null)}
          onConfirm={() => {
            remove.mutate((confirm.RepoTags ?? []).length === 1 ? confirm.RepoTags![0]! : confirm.Id);
            setConfirm(null);
          }}
        />
      )}
    </section>
  );
}
