/**
 * Settings: the theme (everywhere), and in the desktop app the engine connection (the bundled engine, a
 * unix socket, or TCP with TLS certificates), the VM's resources where the engine runs in one, and registry logins (checked by the engine, kept in the OS
 * keychain by the main process; the password never comes back to the page). Served by `berthd --ui`, the
 * page talks to the engine that serves it and keeps no passwords: those sections say so.
 */
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useEffect, useState, type FormEvent } from 'react';
import { ListTable, QueryState } from '../App';
import { useAction } from '../engine';
import { useTheme, type ThemeChoice } from '../theme';
import type { AppSettings, BerthBridge, EngineStatus } from '../transport';

/** Electron prefixes the main process's error with the channel's name; the user needs the reason only. */
function reason(err: unknown): Error {
  const message = err instanceof Error ? err.message : String(err);
  return new Error(message.replace(/^Error invoking remote method '[^']+': (Error: )?/, ''));
}

export function SettingsView() {
  const bridge = window.berth;
  return (
    <section className="settings">
      <header className="page-head">
        <h1>Settings</h1>
      </header>
      <ThemeSettings />
      {bridge?.settings && bridge.registries ? (
        <>
          <EngineSettings bridge={bridge as Required<BerthBridge>} />
          <VmSettingsForm bridge={bridge as Required<BerthBridge>} />
          <RegistrySettings bridge={bridge as Required<BerthBridge>} />
        </>
      ) : (
        <>
          <h2>Engine connection</h2>
          <p className="note" data-testid="engine-needs-app">
            Chosen in the desktop app (its bundled engine, a unix socket, or TCP with TLS certificates). This page is served by the engine it manages
            (<code>berthd --ui</code>) and always talks to that engine.
          </p>
          <h2>Registry logins</h2>
          <p className="note" data-testid="registries-need-app">
            Kept by the desktop app, with the passwords in the system's keychain. This page keeps no passwords: its pulls and pushes are anonymous.
          </p>
        </>
      )}
    </section>
  );
}

function ThemeSettings() {
  const { choice, setChoice } = useTheme();
  const options: Array<[ThemeChoice, string]> = [
    ['system', 'As the system'],
    ['light', 'Light'],
    ['dark', 'Dark'],
  ];
  return (
    <>
      <h2>Theme</h2>
      <div className="form" role="radiogroup" aria-label="Theme">
        {options.map(([value, label]) => (
          <label key={value} className="inline">
            <input type="radio" name="theme" value={value} checked={choice === value} onChange={() => setChoice(value)} /> {label}
          </label>
        ))}
      </div>
    </>
  );
}

type EngineForm = AppSettings['engine'];

function EngineSettings(props: { bridge: Required<BerthBridge> }) {
  const { bridge } = props;
  const qc = useQueryClient();
  const settings = useQuery({ queryKey: ['app-settings'], queryFn: () => bridge.settings.get() });
  const status = useQuery({ queryKey: ['engine-status'], queryFn: () => bridge.engine.status(), refetchInterval: 3000 });
  const [form, setForm] = useState<EngineForm | null>(null);
  useEffect(() => {
    if (settings.data && !form) setForm(settings.data.engine);
  }, [settings.data, form]);
  // Its failure shows in the form (and goes with the next attempt): the connection is the form's own state.
  const save = useMutation({
    mutationFn: async () => {
      if (!form) return;
      try {
        await bridge.settings.update({ engine: form });
      } catch (err) {
        throw reason(err);
      }
    },
    onSettled: () => void qc.invalidateQueries(),
  });
  const submit = (e: FormEvent) => {
    e.preventDefault();
    save.mutate(undefined);
  };
  const tcp = (key: keyof EngineForm['tcp']) => (e: { target: HTMLInputElement }) =>
    setForm((f) => f && { ...f, tcp: { ...f.tcp, [key]: key === 'tls' ? e.target.checked : key === 'port' ? Number(e.target.value) : e.target.value } });
  return (
    <>
      <h2>Engine connection</h2>
      <QueryState error={settings.error} loading={!form}>
        {form && (
          <form className="form" onSubmit={submit} aria-label="Engine connection">
            <p className="muted small" data-testid="engine-status">
              {status.data ? `${status.data.address}: ${status.data.state}${status.data.error ? ` (${status.data.error})` : ''}` : '…'}
            </p>
            {(
              [
                ['embedded', 'The bundled engine'],
                ['socket', 'An engine on a unix socket'],
                ['tcp', 'An engine over TCP'],
              ] as const
            ).map(([mode, label]) => (
              <label key={mode} className="inline">
                <input type="radio" name="engine-mode" checked={form.mode === mode} onChange={() => setForm({ ...form, mode })} /> {label}
              </label>
            ))}
            {form.mode !== 'tcp' && (
              <label>
                Socket <input required value={form.socketPath} onChange={(e) => setForm({ ...form, socketPath: e.target.value })} />
              </label>
            )}
            {form.mode === 'tcp' && (
              <>
                <label>
                  Host <input required value={form.tcp.host} onChange={tcp('host')} />
                </label>
                <label>
                  Port <input required type="number" min={1} max={65535} value={form.tcp.port} onChange={tcp('port')} />
                </label>
                <label className="inline">
                  <input type="checkbox" checked={form.tcp.tls} onChange={tcp('tls')} /> TLS
                </label>
                {form.tcp.tls && (
                  <>
                    <label>
                      CA certificate <input value={form.tcp.ca} onChange={tcp('ca')} placeholder="/path/to/ca.pem (the system's CAs when empty)" />
                    </label>
                    <label>
                      Client certificate <input value={form.tcp.cert} onChange={tcp('cert')} placeholder="/path/to/cert.pem (for --tlsverify)" />
                    </label>
                    <label>
                      Client key <input value={form.tcp.key} onChange={tcp('key')} placeholder="/path/to/key.pem" />
                    </label>
                  </>
                )}
              </>
            )}
            {save.error && (
              <div className="error inline" role="alert" data-testid="engine-error">
                {save.error.message}
              </div>
            )}
            <div className="actions">
              <button type="submit" className="primary" disabled={save.isPending} aria-busy={save.isPending || undefined}>
                {save.isPending ? 'Connecting…' : 'Connect'}
              </button>
            </div>
          </form>
        )}
      </QueryState>
    </>
  );
}

type VmForm = { cpus: string; memoryMiB: string; diskGiB: string };

/**
 * The VM the bundled engine runs in (macOS and Windows only; the main process says whether there is one):
 * CPUs, memory and disk size, kept in the settings and given to the engine when it next starts.
 */
function VmSettingsForm(props: { bridge: Required<BerthBridge> }) {
  const { bridge } = props;
  const qc = useQueryClient();
  const settings = useQuery({ queryKey: ['app-settings'], queryFn: () => bridge.settings.get() });
  const status = useQuery({ queryKey: ['engine-status'], queryFn: () => bridge.engine.status(), refetchInterval: 3000 });
  const [form, setForm] = useState<VmForm | null>(null);
  const [saved, setSaved] = useState(false);
  useEffect(() => {
    const vm = settings.data?.vm;
    if (vm && !form) setForm({ cpus: String(vm.cpus), memoryMiB: String(vm.memoryMiB), diskGiB: String(vm.diskGiB) });
  }, [settings.data, form]);
  const save = useMutation({
    mutationFn: async () => {
      if (!form) return;
      setSaved(false);
      try {
        await bridge.settings.update({ vm: { cpus: Number(form.cpus), memoryMiB: Number(form.memoryMiB), diskGiB: Number(form.diskGiB) } });
      } catch (err) {
        throw reason(err);
      }
      setSaved(true);
    },
    onSettled: () => void qc.invalidateQueries({ queryKey: ['app-settings'] }),
  });
  if (!status.data?.vm) return null;
  const field = (key: keyof VmForm, label: string, unit: string) => (
    <label>
      {label}
      <span className="with-unit">
        <input required type="number" inputMode="numeric" step={1} value={form?.[key] ?? ''} onChange={(e) => (setForm((f) => f && { ...f, [key]: e.target.value }), setSaved(false))} aria-label={label} />
        {unit && <span className="muted">{unit}</span>}
      </span>
    </label>
  );
  return (
    <>
      <h2>Virtual machine</h2>
      <QueryState error={settings.error} loading={!form}>
        <form
          className="form"
          aria-label="Virtual machine"
          onSubmit={(e) => {
            e.preventDefault();
            save.mutate(undefined);
          }}
        >
          <p className="muted small">The bundled engine runs its containers in a small Linux VM. Changes apply when the engine next starts.</p>
          <VmState status={status.data.vmStatus} />
          {field('cpus', 'CPUs', '')}
          {field('memoryMiB', 'Memory', 'MiB')}
          {field('diskGiB', 'Disk size', 'GiB')}
          {save.error && (
            <div className="error inline" role="alert" data-testid="vm-error">
              {save.error.message}
            </div>
          )}
          {saved && <p className="muted small" role="status">Saved: the engine uses them from its next start.</p>}
          <div className="actions">
            <button type="submit" className="primary" disabled={save.isPending} aria-busy={save.isPending || undefined}>
              {save.isPending ? 'Saving…' : 'Save'}
            </button>
          </div>
        </form>
      </QueryState>
    </>
  );
}

function RegistrySettings(props: { bridge: Required<BerthBridge> }) {
  const { bridge } = props;
  const qc = useQueryClient();
  const list = useQuery({ queryKey: ['registry-logins'], queryFn: () => bridge.registries.list() });
  const [form, setForm] = useState({ serveraddress: '', username: '', password: '' });
  const [done, setDone] = useState<string | null>(null);
  const login = useAction(
    async () => {
      const answer = await bridge.registries.login(form);
      if (!answer.ok) throw new Error(answer.message);
      setDone(`${form.serveraddress}: ${answer.message}`);
      setForm({ serveraddress: '', username: '', password: '' });
    },
    { onSuccess: () => void qc.invalidateQueries({ queryKey: ['registry-logins'] }) },
  );
  const logout = useAction((serveraddress: string) => bridge.registries.logout(serveraddress), {
    onSuccess: () => void qc.invalidateQueries({ queryKey: ['registry-logins'] }),
  });
  const set = (key: keyof typeof form) => (e: { target: HTMLInputElement }) => setForm({ ...form, [key]: e.target.value });
  return (
    <>
      <h2>Registry logins</h2>
      <QueryState error={list.error} loading={list.isLoading}>
        {list.data && !list.data.keychain && (
          <p className="note">The system offers no keychain to keep passwords in: logins cannot be saved.</p>
        )}
        {list.data && list.data.logins.length > 0 && (
          <ListTable aria-label="Registry logins" columns={['Registry', 'User', '']}>
            {list.data.logins.map((l) => (
              <tr key={l.serveraddress}>
                <td className="mono">{l.serveraddress}</td>
                <td>{l.username}</td>
                <td className="row-actions">
                  <button type="button" onClick={() => logout.mutate(l.serveraddress)} disabled={logout.isPending}>
                    Log out
                  </button>
                </td>
              </tr>
            ))}
          </ListTable>
        )}
        <form
          className="form"
          aria-label="Registry login"
          onSubmit={(e) => {
            e.preventDefault();
            setDone(null);
            login.mutate(undefined);
          }}
        >
          <label>
            Registry <input required value={form.serveraddress} onChange={set('serveraddress')} placeholder="host:port, or docker.io" />
          </label>
          <label>
            User <input required value={form.username} onChange={set('username')} autoComplete="username" />
          </label>
          <label>
            Password <input required type="password" value={form.password} onChange={set('password')} autoComplete="current-password" />
          </label>
          {done && <p className="muted small">{done}</p>}
          <div className="actions">
            <button type="submit" className="primary" disabled={login.isPending || list.data?.keychain === false} aria-busy={login.isPending || undefined}>
              {login.isPending ? 'Logging in…' : 'Log in'}
            </button>
          </div>
        </form>
      </QueryState>
    </>
  );
}

const DRIVER_NAMES: Record<string, string> = { vfkit: 'vfkit (Virtualization.framework)', wsl2: 'WSL 2', qemu: 'QEMU' };

/** The VM's state and the resources it runs with (they differ from the form's after a change, until the next start). */
function VmState(props: { status?: NonNullable<EngineStatus['vmStatus']> }) {
  const vm = props.status;
  if (!vm) return <p className="small" data-testid="vm-state">State: stopped (not started yet)</p>;
  const r = vm.resources;
  return (
    <div className="small" data-testid="vm-state">
      <p>
        State: <strong>{vm.state}</strong> · {DRIVER_NAMES[vm.driver] ?? vm.driver} · {r.cpus} CPUs, {r.memoryMiB} MiB memory, {r.diskGiB} GiB disk
      </p>
      {vm.error && (
        <div className="error inline" role="alert">
          {vm.error}
          {vm.consoleLog && <span className="muted"> (the guest's console: {vm.consoleLog})</span>}
        </div>
      )}
    </div>
  );
}
