/** The run form: a create body from what people type (image, command, environment, ports, volumes...). */
import { useQuery, useQueryClient } from '@tanstack/react-query';
import { useState, type FormEvent } from 'react';
import { navigate } from '../App';
import { useAction, useTransport } from '../engine';

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
