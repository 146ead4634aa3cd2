/**
 * Build an image from a folder: the folder is sent as the build context (a tar made as it uploads, with its
 * progress), the engine's build log shows as it comes, and the image gets the tags given (`docker build -t`).
 */
import { useMutation, useQueryClient } from '@tanstack/react-query';
import { useEffect, useRef, useState, type FormEvent } from 'react';
import { navigate } from '../App';
import { contextTar, filesOfFolder, type ContextFile } from '../buildcontext';
import { formatBytes, useTransport } from '../engine';
import { lineSplitter } from '../transport';

interface BuildMessage {
  stream?: string;
  status?: string;
  error?: string;
  errorDetail?: { message?: string };
  aux?: { ID?: string };
}

/** Tags as typed: separated by commas or spaces; each needs a name (`:latest` is the engine's default). */
export function parseTags(text: string): string[] {
  return text
    .split(/[\s,]+/)
    .map((t) => t.trim())
    .filter(Boolean);
}

export function BuildView() {
  const t = useTransport();
  const qc = useQueryClient();
  const [files, setFiles] = useState<ContextFile[]>([]);
  const [form, setForm] = useState({ dockerfile: 'Dockerfile', tags: '', nocache: false });
  const [uploaded, setUploaded] = useState<{ sent: number; total: number } | null>(null);
  const [log, setLog] = useState<string[]>([]);
  const [result, setResult] = useState<{ id?: string; error?: string } | null>(null);
  const abort = useRef<AbortController | null>(null);
  const logBox = useRef<HTMLPreElement | null>(null);
  useEffect(() => () => abort.current?.abort(), []);
  // The log follows its last line as it grows.
  useEffect(() => {
    if (logBox.current) logBox.current.scrollTop = logBox.current.scrollHeight;
  }, [log.length]);

  const total = files.reduce((n, f) => n + f.file.size, 0);
  // A refusal shows in the form, and goes with the next attempt; the build's own failure shows under its log.
  const build = useMutation({
    mutationFn: async () => {
      if (!t.upload) throw new Error('this connection to the engine cannot send a build context');
      if (!files.length) throw new Error('choose the folder to build first');
      const dockerfile = form.dockerfile.trim() || 'Dockerfile';
      if (!files.some((f) => f.path === dockerfile)) throw new Error(`the folder has no ${dockerfile}`);
      const params = new URLSearchParams({ dockerfile });
      for (const tag of parseTags(form.tags)) params.append('t', tag);
      if (form.nocache) params.set('nocache', '1');
      const controller = new AbortController();
      abort.current = controller;
      setLog([]);
      setResult(null);
      setUploaded({ sent: 0, total: 0 });
      let id: string | undefined;
      let error: string | undefined;
      const lines: string[] = [];
      let scheduled = false;
      const draw = () => {
        scheduled = false;
        setLog([...lines]);
      };
      try {
        await t.upload('POST', `/build?${params}`, contextTar(files), {
          contentType: 'application/x-tar',
          signal: controller.signal,
          onUploaded: (sent, size) => setUploaded({ sent, total: size }),
          onChunk: lineSplitter((line) => {
            let m: BuildMessage;
            try {
              m = JSON.parse(line) as BuildMessage;
            } catch {
              m = { stream: line + '\n' };
            }
            if (m.error || m.errorDetail?.message) error = m.error ?? m.errorDetail?.message;
            if (m.aux?.ID) id = m.aux.ID;
            const text = m.stream ?? m.status ?? '';
            if (text) lines.push(...text.replace(/\n$/, '').split('\n'));
            if (!scheduled) {
              scheduled = true;
              requestAnimationFrame(draw);
            }
          }),
        });
      } finally {
        draw();
        setResult(controller.signal.aborted ? { error: 'cancelled' } : { id, error });
        void qc.invalidateQueries({ queryKey: ['images'] });
      }
    },
  });
  const submit = (e: FormEvent) => {
    e.preventDefault();
    build.mutate(undefined);
  };
  const percent = uploaded && uploaded.total ? Math.round((uploaded.sent / uploaded.total) * 100) : 0;
  const tags = parseTags(form.tags);
  return (
    <section>
      <header className="page-head">
        <h1>Build an image</h1>
        <div className="actions">
          <button type="button" onClick={() => navigate('images')}>
            Images
          </button>
        </div>
      </header>
      <form className="form" onSubmit={submit} aria-label="Build">
        <label>
          Folder
          <input
            type="file"
            aria-label="Folder"
            {...({ webkitdirectory: '', directory: '' } as Record<string, string>)}
            multiple
            onChange={(e) => setFiles(e.target.files ? filesOfFolder(e.target.files) : [])}
          />
        </label>
        {files.length > 0 && (
          <p className="muted small" data-testid="build-context">
            {files.length} {files.length === 1 ? 'file' : 'files'}, {formatBytes(total)}; the engine leaves out what the folder's .dockerignore names
          </p>
        )}
        <label>
          Dockerfile <input value={form.dockerfile} onChange={(e) => setForm({ ...form, dockerfile: e.target.value })} placeholder="Dockerfile" />
        </label>
        <label>
          Tags <input value={form.tags} onChange={(e) => setForm({ ...form, tags: e.target.value })} placeholder="name:tag, registry:5000/name:tag" />
        </label>
        <label className="inline">
          <input type="checkbox" checked={form.nocache} onChange={(e) => setForm({ ...form, nocache: e.target.checked })} /> Without the layer cache
        </label>
        {build.error && (
          <div className="error inline" role="alert" data-testid="build-problem">
            {build.error.message}
          </div>
        )}
        <div className="actions">
          {build.isPending && (
            <button type="button" onClick={() => abort.current?.abort()}>
              Cancel
            </button>
          )}
          <button type="submit" className="primary" disabled={build.isPending} aria-busy={build.isPending || undefined}>
            {build.isPending ? (uploaded && uploaded.sent < uploaded.total ? 'Sending…' : 'Building…') : 'Build'}
          </button>
        </div>
      </form>
      {uploaded && (
        <div className="build-output">
          <p className="small">
            <label>
              Context sent <progress max={100} value={percent} aria-label="Context upload" /> {percent}% ({formatBytes(uploaded.sent)} of {formatBytes(uploaded.total)})
            </label>
          </p>
          <pre className="build-log" data-testid="build-log" aria-label="Build log" ref={logBox}>
            {log.join('\n')}
          </pre>
          {result?.error && (
            <div className="error inline" role="alert" data-testid="build-error">
              {result.error}
            </div>
          )}
          {result && !result.error && result.id && (
            <p className="note" data-testid="build-result">
              Built <code>{result.id.replace(/^sha256:/, '').slice(0, 12)}</code>
              {tags.length ? `, tagged ${tags.join(', ')}` : ''}.{' '}
              <a href="#/images">Images</a>
            </p>
          )}
        </div>
      )}
    </section>
  );
}
