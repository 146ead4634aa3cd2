/**
 * A new service from the Swarm view, as `docker service create` makes one: a name, an image, replicated with a
 * count or global, a command, and ports published on the node that runs each task (`mode=host`: the engine has
 * no routing mesh yet).
 */
import { useState, type FormEvent } from 'react';
import { useAction, useTransport } from '../engine';

interface Draft {
  name: string;
  image: string;
  mode: 'replicated' | 'global';
  replicas: string;
  ports: string;
  command: string;
}

const EMPTY: Draft = { name: '', image: '', mode: 'replicated', replicas: '1', ports: '', command: '' };

/** `8080:80`, `53:53/udp`, comma-separated: the endpoint's ports, published in host mode. */
export function parsePorts(text: string): Array<{ Protocol: string; PublishedPort: number; TargetPort: number; PublishMode: 'host' }> {
  return text
    .split(/[\s,]+/)
    .filter(Boolean)
    .map((p) => {
      const m = /^(\d+):(\d+)(?:\/(tcp|udp))?$/.exec(p);
      if (!m) throw new Error(`a port is published as PUBLISHED:TARGET[/tcp|udp], not ${JSON.stringify(p)}`);
      return { Protocol: m[3] ?? 'tcp', PublishedPort: Number(m[1]), TargetPort: Number(m[2]), PublishMode: 'host' };
    });
}

/** The command as words (whitespace-separated; quotes group words). */
export function splitCommand(text: string): string[] {
  return [...text.matchAll(/"([^"]*)"|'([^']*)'|(\S+)/g)].map((m) => m[1] ?? m[2] ?? m[3]!);
}

export function CreateService(props: { onCreated(id: string): void }) {
  const t = useTransport();
  const [draft, setDraft] = useState<Draft>(EMPTY);
  const [open, setOpen] = useState(false);
  const create = useAction(async (d: Draft) => {
    if (!d.image.trim()) throw new Error('a service needs an image');
    const args = splitCommand(d.command);
    const ports = parsePorts(d.ports);
    const spec = {
      ...(d.name.trim() ? { Name: d.name.trim() } : {}),
      TaskTemplate: { ContainerSpec: { Image: d.image.trim(), ...(args.length ? { Args: args } : {}) } },
      Mode: d.mode === 'global' ? { Global: {} } : { Replicated: { Replicas: Math.max(0, Number(d.replicas) || 0) } },
      ...(ports.length ? { EndpointSpec: { Ports: ports } } : {}),
    };
    const made = await t.request<{ ID: string }>('POST', '/services/create', { body: spec, headers: { 'X-Registry-Auth': btoa('{}') } });
    setDraft(EMPTY);
    setOpen(false);
    props.onCreated(made.ID);
  });
  if (!open) {
    return (
      <button type="button" className="primary" onClick={() => setOpen(true)}>
        New service…
      </button>
    );
  }
  const field = (key: keyof Draft, label: string, placeholder: string) => (
    <label className="stacked">
      {label}
      <input value={draft[key]} placeholder={placeholder} onChange={(e) => setDraft({ ...draft, [key]: e.target.value })} aria-label={label} />
    </label>
  );
  const submit = (e: FormEvent) => {
    e.preventDefault();
    create.mutate(draft);
  };
  return (
    <form className="panel create-service" onSubmit={submit} aria-label="New service">
      <div className="pairs">
        {field('name', 'Name', 'web')}
        {field('image', 'Image', 'busybox:latest')}
        <label className="stacked">
          Mode
          <select value={draft.mode} onChange={(e) => setDraft({ ...draft, mode: e.target.value as Draft['mode'] })} aria-label="Mode">
            <option value="replicated">replicated</option>
            <option value="global">global (one task per node)</option>
          </select>
        </label>
        {draft.mode === 'replicated' ? field('replicas', 'Replicas', '1') : <span />}
        {field('ports', 'Published ports', '8080:80, 53:53/udp (on the node of each task)')}
        {field('command', 'Command', 'httpd -f -p 80')}
      </div>
      <div className="toolbar">
        <button type="submit" className="primary" disabled={create.isPending} aria-busy={create.isPending || undefined}>
          {create.isPending ? 'Creating…' : 'Create'}
        </button>
        <button type="button" onClick={() => setOpen(false)}>
          Cancel
        </button>
      </div>
    </form>
  );
}
