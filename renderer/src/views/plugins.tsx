/**
 * Managed plugins: the list (name, tag, enabled, interface types), enable, disable, remove, and install from
 * a reference: the privileges the plugin asks for (GET /plugins/privileges) are shown first, and only those
 * the user accepted go with the pull (POST /plugins/pull), its progress shown as it streams, and the plugin
 * is enabled once installed, as `docker plugin install` does. Plugin events refresh the list.
 */
import { useQuery } from '@tanstack/react-query';
import { useState, type FormEvent } from 'react';
import { Confirm, ListTable, PendingButton, QueryState, RemoveButton } from '../App';
import { NARROW, shortId, useAction, useMediaQuery, usePending, useTransport } from '../engine';
import { ProgressView, useProgressStream } from './progress-view';

export interface Plugin {
  Id: string;
  Name: string;
  Enabled: boolean;
  PluginReference?: string;
  Settings?: { Env?: string[] | null };
  Config: { Description?: string; Interface: { Types: string[] | null } };
}

export interface Privilege {
  Name: string;
  Description: string;
  Value: string[] | null;
}

/** A plugin's name and tag: `registry:5000/owner/name:tag` parts at the tag's colon (after the last slash). */
export function splitPluginName(name: string): { name: string; tag: string } {
  const at = name.lastIndexOf(':');
  if (at > name.lastIndexOf('/') && at > 0) return { name: name.slice(0, at), tag: name.slice(at + 1) };
  return { name, tag: 'latest' };
}

/**
 * A plugin's name in a path, as the docker CLI sends it: its `/`, `:` and `@` as they are (the engine routes
 * the whole rest of the path as the name; the desktop bridge's allow-list takes reference characters only).
 */
export const pluginPath = (name: string) => encodeURI(name);

/** `docker.volumedriver/1.0` as the list shows it: `volumedriver 1.0`. */
const typeText = (type: string) => type.replace(/^docker\./, '').replace('/', ' ');

type Verb = 'enable' | 'disable' | 'remove';
const PENDING: Record<Verb, string> = { enable: 'Enabling…', disable: 'Disabling…', remove: 'Removing…' };

export function PluginsView() {
  const t = useTransport();
  const list = useQuery({ queryKey: ['plugins'], queryFn: () => t.request<Plugin[]>('GET', '/plugins') });
  const narrow = useMediaQuery(NARROW);
  const [remote, setRemote] = useState('');
  const [alias, setAlias] = useState('');
  const [asked, setAsked] = useState<{ remote: string; alias: string; privileges: Privilege[] } | null>(null);
  const [confirm, setConfirm] = useState<{ verb: 'remove' | 'disable'; name: string; force: boolean } | null>(null);
  const [note, setNote] = useState<string | null>(null);
  const pull = useProgressStream('Install');

  const verb = useAction(
    async (v: { verb: Verb; name: string; force?: boolean }) => {
      const name = pluginPath(v.name);
      if (v.verb === 'enable') await t.request('POST', `/plugins/${name}/enable?timeout=30`);
      else if (v.verb === 'disable') await t.request('POST', `/plugins/${name}/disable${v.force ? '?force=1' : ''}`);
      else await t.request('DELETE', `/plugins/${name}${v.force ? '?force=1' : ''}`);
      setNote(`${v.verb === 'enable' ? 'Enabled' : v.verb === 'disable' ? 'Disabled' : 'Removed'} ${v.name}.`);
    },
    { mutationKey: ['plugin-verb'] },
  );
  const pending = new Map(usePending<{ verb: Verb; name: string }>(['plugin-verb']).map((v) => [v.name, v.verb]));

  // First the privileges, for the user to read; nothing is pulled until they accept them.
  const ask = useAction(async () => {
    const ref = remote.trim();
    if (!ref) throw new Error('name the plugin to install (a reference such as registry:5000/owner/plugin:tag)');
    setNote(null);
    const privileges = await t.request<Privilege[]>('GET', `/plugins/privileges?remote=${encodeURIComponent(ref)}`, { headers: { 'X-Registry-Auth': btoa('{}') } });
    setAsked({ remote: ref, alias: alias.trim(), privileges: privileges ?? [] });
  });
  const install = useAction(async (accepted: { remote: string; alias: string; privileges: Privilege[] }) => {
    setAsked(null);
    const query = `remote=${encodeURIComponent(accepted.remote)}${accepted.alias ? `&name=${encodeURIComponent(accepted.alias)}` : ''}`;
    const ok = await pull.run(`/plugins/pull?${query}`, `Installing ${accepted.remote}`, accepted.privileges);
    if (!ok) return;
    setRemote('');
    setAlias('');
    // Enabled once installed, as `docker plugin install` does.
    const installed = accepted.alias || accepted.remote;
    await t.request('POST', `/plugins/${pluginPath(installed)}/enable?timeout=30`);
    setNote(`Installed and enabled ${installed}.`);
  });

  const submit = (e: FormEvent) => {
    e.preventDefault();
    ask.mutate(undefined);
  };
  const rows = [...(list.data ?? [])].sort((a, b) => a.Name.localeCompare(b.Name));

  return (
    <section>
      <header className="page-head">
        <h1>Plugins</h1>
      </header>
      <form onSubmit={submit} className="panel create-form" aria-label="Install plugin">
        <div className="inline-form">
          <input className="wide-input" value={remote} onChange={(e) => setRemote(e.target.value)} placeholder="registry:5000/owner/plugin:tag" aria-label="Plugin reference" />
          <input value={alias} onChange={(e) => setAlias(e.target.value)} placeholder="local name (optional)" aria-label="Local name" />
          <button type="submit" className="primary" disabled={ask.isPending || install.isPending || pull.state.running} aria-busy={ask.isPending || pull.state.running || undefined}>
            {ask.isPending ? 'Asking…' : pull.state.running ? 'Installing…' : 'Install…'}
          </button>
        </div>
      </form>
      <ProgressView p={pull} testid="plugin-pull" />
      {note && (
        <p className="note" role="status">
          {note}
        </p>
      )}
      <QueryState error={list.error} loading={list.isLoading}>
        {rows.length === 0 ? (
          <p className="empty">No plugins installed. Install one from a registry above, or with docker plugin install.</p>
        ) : (
          <ListTable aria-label="Plugins" columns={['Name', 'Tag', !narrow && 'ID', 'Enabled', 'Provides', '']}>
            {rows.map((p) => {
              const { name, tag } = splitPluginName(p.Name);
              const busy = pending.get(p.Name);
              return (
                <tr key={p.Id} data-plugin={p.Name}>
                  <td>
                    <strong>{name}</strong>
                    {p.Config.Description && !narrow && <div className="muted small">{p.Config.Description}</div>}
                  </td>
                  <td className="mono">{tag}</td>
                  {!narrow && <td className="mono">{shortId(p.Id)}</td>}
                  <td>
                    <span className={`badge ${p.Enabled ? 'running' : 'exited'}`}>{p.Enabled ? 'enabled' : 'disabled'}</span>
                  </td>
                  <td className="small">{(p.Config.Interface.Types ?? []).map(typeText).join(', ') || '—'}</td>
                  <td className="row-actions">
                    {p.Enabled ? (
                      <PendingButton disabled={!!busy} running={busy === 'disable'} pendingLabel={PENDING.disable} onClick={() => verb.mutate({ verb: 'disable', name: p.Name })}>
                        Disable
                      </PendingButton>
                    ) : (
                      <PendingButton disabled={!!busy} running={busy === 'enable'} pendingLabel={PENDING.enable} onClick={() => verb.mutate({ verb: 'enable', name: p.Name })}>
                        Enable
                      </PendingButton>
                    )}
                    <RemoveButton disabled={!!busy} running={busy === 'remove'} onClick={() => setConfirm({ verb: 'remove', name: p.Name, force: p.Enabled })} />
                  </td>
                </tr>
              );
            })}
          </ListTable>
        )}
      </QueryState>
      {asked && (
        <Confirm title={`Install ${asked.remote}?`} confirmLabel="Accept and install" onCancel={() => setAsked(null)} onConfirm={() => install.mutate(asked)}>
          {asked.privileges.length ? (
            <>
              <p>The plugin asks for these privileges on this computer. Install it only if you trust it with them:</p>
              <ul className="privileges" aria-label="Privileges">
                {asked.privileges.map((p) => (
                  <li key={p.Name}>
                    <strong>{p.Name}</strong>
                    {p.Description && <span className="muted"> — {p.Description}</span>}
                    {p.Value?.length ? <div className="mono small">{p.Value.join(', ')}</div> : null}
                  </li>
                ))}
              </ul>
            </>
          ) : (
            <p>The plugin asks for no privileges.</p>
          )}
        </Confirm>
      )}
      {confirm && (
        <Confirm
          title={`Remove ${confirm.name}?`}
          confirmLabel={confirm.force ? 'Disable and remove' : 'Remove'}
          onCancel={() => setConfirm(null)}
          onConfirm={() => {
            verb.mutate({ verb: 'remove', name: confirm.name, force: confirm.force });
            setConfirm(null);
          }}
        >
          {confirm.force && <p>It is enabled: it is stopped first. Volumes of its driver stop working.</p>}
        </Confirm>
      )}
    </section>
  );
}
