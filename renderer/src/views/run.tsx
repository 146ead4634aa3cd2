/**
 * The run form: a create body from what people type (image, command, entrypoint, user, environment, ports,
 * volumes, network, restart policy, --rm, memory and CPU limits). An image the engine lacks is pulled first,
 * with its progress shown, as `docker run` does.
 */
import { useQuery, useQueryClient } from '@tanstack/react-query';
import { useMemo, useState, type FormEvent } from 'react';
import { navigate } from '../App';
import { useAction, useTransport } from '../engine';
import { ApiError } from '../transport';
import { splitReference } from './images';
import { parsePolicy, POLICY_LABEL, POLICY_TEMPLATE } from './policy';
import { ProgressView, useProgressStream } from './progress-view';

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

export interface RunForm {
  image: string;
  name: string;
  cmd: string;
  /** Empty: the image's own. */
  entrypoint?: string;
  /** `name`, `uid`, `uid:gid`; empty: the image's. */
  user?: string;
  env: string;
  ports: string;
  volumes: string;
  network: string;
  restart: string;
  tty: boolean;
  /** `--rm`: removed once it exits. */
  autoRemove?: boolean;
  /** `--memory`: `512m`, `1g`, bytes; empty: no limit. */
  memory?: string;
  /** `--cpus`: `1.5`; empty: no limit. */
  cpus?: string;
  /** A sandbox: its egress network policy (JSON), given as the `berth.network-policy` label; undefined: none. */
  policy?: string;
}

const UNITS: Record<string, number> = { '': 1, b: 1, k: 1024, m: 1024 ** 2, g: 1024 ** 3, t: 1024 ** 4 };

/** `--memory` as the docker CLI reads it: a number with an optional b, k, m, g or t (powers of 1024). */
export function parseMemory(text: string): number | undefined {
  const spec = text.trim();
  if (!spec) return undefined;
  const m = /^(\d+(?:\.\d+)?)\s*([bkmgt]?)b?$/i.exec(spec);
  if (!m) throw new Error(`invalid memory limit ${JSON.stringify(spec)}: expected a size such as 512m or 1g`);
  const bytes = Math.floor(Number(m[1]) * UNITS[m[2]!.toLowerCase()]!);
  if (bytes <= 0) throw new Error(`invalid memory limit ${JSON.stringify(spec)}: it must be more than 0`);
  return bytes;
}

/** `--cpus`: a positive number of CPUs, as NanoCpus. */
export function parseCpus(text: string): number | undefined {
  const spec = text.trim();
  if (!spec) return undefined;
  const n = Number(spec);
  if (!/^\d*\.?\d+$/.test(spec) || !(n > 0)) throw new Error(`invalid CPU limit ${JSON.stringify(spec)}: expected a positive number such as 0.5 or 2`);
  return Math.round(n * 1e9);
}

/**
 * `-p` specs as the docker CLI reads them: `[IP:][HOST_PORT:]CONTAINER_PORT[/tcp|udp|sctp]`, where HOST_PORT
 * may be empty (an ephemeral port) and IP may be an IPv6 address in brackets. Each spec exposes the port too.
 */
export function parsePorts(text: string): { ExposedPorts: Record<string, object>; PortBindings: Record<string, Array<{ HostIp: string; HostPort: string }>> } {
  const ExposedPorts: Record<string, object> = {};
  const PortBindings: Record<string, Array<{ HostIp: string; HostPort: string }>> = {};
  for (const spec of splitLines(text.replace(/,/g, '\n'))) {
    const m = /^(?:(\d{1,3}(?:\.\d{1,3}){3}|\[[0-9A-Fa-f:.]+\]):)?(?:(\d*):)?(\d+)(?:\/(tcp|udp|sctp))?$/.exec(spec);
    const containerPort = Number(m?.[3]);
    const hostPort = m?.[2] ? Number(m[2]) : 0;
    if (!m || containerPort < 1 || containerPort > 65535 || hostPort > 65535) {
      throw new Error(`invalid port mapping ${JSON.stringify(spec)}: expected [IP:][HOST_PORT:]CONTAINER_PORT[/tcp|udp], ports 1 to 65535`);
    }
    const key = `${containerPort}/${m[4] ?? 'tcp'}`;
    ExposedPorts[key] = {};
    (PortBindings[key] ??= []).push({ HostIp: (m[1] ?? '').replace(/^\[|\]$/g, ''), HostPort: m[2] ?? '' });
  }
  return { ExposedPorts, PortBindings };
}

const VOLUME_NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]*$/;

/**
 * `-v` specs: `NAME:/path[:ro]` (a named volume, created when missing), `/host/dir:/path[:ro]` (a bind mount),
 * or `/path` alone (an anonymous volume). Named volumes and binds go to HostConfig.Binds as the docker CLI
 * sends them; anonymous ones to Config.Volumes.
 */
export function parseVolumes(text: string): { Binds: string[]; Volumes: Record<string, object> } {
  const Binds: string[] = [];
  const Volumes: Record<string, object> = {};
  for (const spec of splitLines(text.replace(/,/g, '\n'))) {
    const parts = spec.split(':');
    if (parts.length === 1) {
      if (!spec.startsWith('/')) throw new Error(`invalid volume ${JSON.stringify(spec)}: an anonymous volume needs an absolute path in the container`);
      Volumes[spec] = {};
      continue;
    }
    const [source, target, mode, ...rest] = parts as [string, string, string | undefined, ...string[]];
    if (rest.length || !target) throw new Error(`invalid volume ${JSON.stringify(spec)}: expected NAME:/path[:ro] or /host/dir:/path[:ro]`);
    if (!target.startsWith('/')) throw new Error(`invalid volume ${JSON.stringify(spec)}: the path in the container must be absolute`);
    if (!source.startsWith('/') && !VOLUME_NAME.test(source)) throw new Error(`invalid volume ${JSON.stringify(spec)}: ${JSON.stringify(source)} is neither a volume name nor an absolute host path`);
    if (mode !== undefined && !/^[a-z]+(,[a-z]+)*$/.test(mode)) throw new Error(`invalid volume ${JSON.stringify(spec)}: unknown mode ${JSON.stringify(mode)}`);
    Binds.push(spec);
  }
  return { Binds, Volumes };
}

/** The body of POST /containers/create for the form. Throws with a message naming the field at fault. */
export function createBody(form: RunForm): Record<string, unknown> {
  const { ExposedPorts, PortBindings } = parsePorts(form.ports);
  const { Binds, Volumes } = parseVolumes(form.volumes);
  for (const e of splitLines(form.env)) if (!/^[^=\s]+=/.test(e) && !/^[^=\s]+$/.test(e)) throw new Error(`invalid environment line ${JSON.stringify(e)}: expected KEY=value`);
  if (form.autoRemove && form.restart !== 'no') throw new Error(`conflicting options: a container removed when it exits (--rm) cannot have the restart policy ${form.restart}`);
  const Memory = parseMemory(form.memory ?? '');
  const NanoCpus = parseCpus(form.cpus ?? '');
  const Labels = form.policy !== undefined ? { [POLICY_LABEL]: JSON.stringify(parsePolicy(form.policy)) } : undefined;
  return {
    Image: form.image.trim(),
    Cmd: form.cmd.trim() ? splitCommand(form.cmd) : undefined,
    Entrypoint: form.entrypoint?.trim() ? splitCommand(form.entrypoint) : undefined,
    User: form.user?.trim() || undefined,
    Env: splitLines(form.env),
    Tty: form.tty,
    OpenStdin: form.tty,
    AttachStdin: false,
    Labels,
    ExposedPorts,
    Volumes,
    HostConfig: {
      PortBindings,
      Binds,
      NetworkMode: form.network || undefined,
      RestartPolicy: { Name: form.restart },
      AutoRemove: form.autoRemove || undefined,
      Memory,
      NanoCpus,
    },
  };
}

export function RunView(props: { image?: string }) {
  const t = useTransport();
  const qc = useQueryClient();
  const networks = useQuery({ queryKey: ['networks'], queryFn: () => t.request<Array<{ Name: string }>>('GET', '/networks') });
  const volumes = useQuery({ queryKey: ['volumes'], queryFn: () => t.request<{ Volumes: Array<{ Name: string }> | null }>('GET', '/volumes') });
  const [form, setForm] = useState<RunForm>({
    image: props.image ?? '',
    name: '',
    cmd: '',
    entrypoint: '',
    user: '',
    env: '',
    ports: '',
    volumes: '',
    network: '',
    restart: 'no',
    tty: true,
    autoRemove: false,
    memory: '',
    cpus: '',
  });
  const pull = useProgressStream('Pull');
  const [showBody, setShowBody] = useState(false);
  const set = (k: keyof RunForm) => (e: React.ChangeEvent<HTMLInputElement | HTMLTextAreaElement | HTMLSelectElement>) =>
    setForm({ ...form, [k]: e.target.type === 'checkbox' ? (e.target as HTMLInputElement).checked : e.target.value });
  const preview = useMemo(() => {
    try {
      return JSON.stringify(createBody(form), null, 2);
    } catch (err) {
      return (err as Error).message;
    }
  }, [form]);
  const run = useAction(async () => {
    const body = createBody(form);
    const create = () => t.request<{ Id: string }>('POST', `/containers/create${form.name.trim() ? `?name=${encodeURIComponent(form.name.trim())}` : ''}`, { body });
    let created: { Id: string };
    try {
      created = await create();
    } catch (err) {
      // The engine lacks the image: pull it (its progress in the panel above the form), then create again.
      if (!(err instanceof ApiError && err.status === 404 && /no such image/i.test(err.message))) throw err;
      const { image, tag } = splitReference(form.image.trim());
      const pulled = await pull.run(`/images/create?fromImage=${encodeURIComponent(image)}&tag=${encodeURIComponent(tag)}`, `Pulling ${form.image.trim()}`);
      if (!pulled) return;
      created = await create();
    }
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
      <ProgressView p={pull} testid="run-pull" />
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
          Entrypoint <input value={form.entrypoint} onChange={set('entrypoint')} placeholder="the image's default" />
        </label>
        <label>
          User <input value={form.user} onChange={set('user')} placeholder="the image's default (name, uid or uid:gid)" />
        </label>
        <label>
          Environment <textarea value={form.env} onChange={set('env')} placeholder="KEY=value, one per line" rows={3} />
        </label>
        <label>
          Ports <input value={form.ports} onChange={set('ports')} placeholder="8080:80, 127.0.0.1:5353:53/udp" />
        </label>
        <label>
          Volumes <input value={form.volumes} onChange={set('volumes')} placeholder="data:/var/lib/data, /host/dir:/dir:ro, /scratch" list="known-volumes" />
        </label>
        <datalist id="known-volumes">
          {(volumes.data?.Volumes ?? []).map((v) => (
            <option key={v.Name} value={`${v.Name}:/`} />
          ))}
        </datalist>
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
        <label>
          Memory limit <input value={form.memory} onChange={set('memory')} placeholder="none (e.g. 512m, 1g)" />
        </label>
        <label>
          CPU limit <input value={form.cpus} onChange={set('cpus')} placeholder="none (e.g. 0.5, 2)" inputMode="decimal" />
        </label>
        <label className="inline">
          <input type="checkbox" checked={form.tty} onChange={set('tty')} /> Interactive terminal (-it)
        </label>
        <label className="inline">
          <input type="checkbox" checked={form.autoRemove} onChange={set('autoRemove')} /> Remove when it exits (--rm)
        </label>
        <label className="inline">
          <input type="checkbox" checked={form.policy !== undefined} onChange={(e) => setForm({ ...form, policy: e.target.checked ? POLICY_TEMPLATE : undefined })} /> Sandbox: hold
          its outbound traffic to a network policy
        </label>
        {form.policy !== undefined && (
          <label>
            Network policy
            <textarea className="policy-text" aria-label="Network policy" value={form.policy} onChange={set('policy')} rows={10} spellCheck={false} />
          </label>
        )}
        <div className="actions">
          <button type="button" className="link" aria-expanded={showBody} onClick={() => setShowBody(!showBody)}>
            {showBody ? 'Hide' : 'Show'} the create request
          </button>
          <button type="submit" className="primary" disabled={run.isPending} aria-busy={run.isPending || undefined}>
            {run.isPending ? (pull.state.running ? 'Pulling…' : 'Starting…') : 'Run'}
          </button>
        </div>
        {showBody && (
          <pre className="json" data-testid="create-body">
            {preview}
          </pre>
        )}
      </form>
    </section>
  );
}
