/**
 * Compose projects: the containers grouped by their `com.docker.compose.project` label, with start, stop and
 * remove of a whole project. Remove is `docker compose down`: the containers and the project's networks go,
 * its volumes stay.
 */
import { useQuery } from '@tanstack/react-query';
import { useMemo, useState } from 'react';
import { Confirm, ListTable, QueryState } from '../App';
import { useAction, usePending, useTransport } from '../engine';
import { nameOf, stateLabel, type ContainerSummary } from './containers';

const PROJECT = 'com.docker.compose.project';
const SERVICE = 'com.docker.compose.service';
const WORKING_DIR = 'com.docker.compose.project.working_dir';
/** Compose v2 writes a service's dependencies as `db:service_healthy:false,cache:service_started:true`. */
const DEPENDS_ON = 'com.docker.compose.depends_on';

/**
 * The order to start a project's containers in: a service after those it depends on (by the depends_on
 * label), otherwise by name. A cycle, which compose itself refuses, is broken where it is met.
 */
export function startOrder(containers: ContainerSummary[]): ContainerSummary[] {
  const sorted = [...containers].sort((a, b) => nameOf(a).localeCompare(nameOf(b)));
  const byService = new Map<string, ContainerSummary[]>();
  for (const c of sorted) {
    const service = c.Labels?.[SERVICE] ?? '';
    byService.set(service, [...(byService.get(service) ?? []), c]);
  }
  const out: ContainerSummary[] = [];
  const visited = new Set<string>();
  const visit = (service: string) => {
    if (visited.has(service)) return;
    visited.add(service);
    const members = byService.get(service) ?? [];
    for (const c of members) {
      for (const dep of (c.Labels?.[DEPENDS_ON] ?? '').split(',')) {
        const name = dep.split(':')[0]!.trim();
        if (name) visit(name);
      }
    }
    out.push(...members);
  };
  for (const c of sorted) visit(c.Labels?.[SERVICE] ?? '');
  return out;
}

export interface ComposeProject {
  name: string;
  workingDir?: string;
  containers: ContainerSummary[];
  services: string[];
  running: number;
}

/** The projects of a container list, by name; containers without the label belong to none. */
export function composeProjects(list: ContainerSummary[]): ComposeProject[] {
  const by = new Map<string, ComposeProject>();
  for (const c of list) {
    const name = c.Labels?.[PROJECT];
    if (!name) continue;
    let p = by.get(name);
    if (!p) by.set(name, (p = { name, containers: [], services: [], running: 0 }));
    p.containers.push(c);
    p.workingDir ??= c.Labels?.[WORKING_DIR];
    const service = c.Labels?.[SERVICE];
    if (service && !p.services.includes(service)) p.services.push(service);
    if (c.State === 'running') p.running++;
  }
  for (const p of by.values()) {
    p.services.sort();
    p.containers.sort((a, b) => nameOf(a).localeCompare(nameOf(b)));
  }
  return [...by.values()].sort((a, b) => a.name.localeCompare(b.name));
}

type ProjectVerb = 'start' | 'stop' | 'remove';
const PENDING: Record<ProjectVerb, string> = { start: 'Starting…', stop: 'Stopping…', remove: 'Removing…' };

export function ComposeView() {
  const t = useTransport();
  const list = useQuery({ queryKey: ['containers'], queryFn: () => t.request<ContainerSummary[]>('GET', '/containers/json?all=1') });
  const projects = useMemo(() => composeProjects(list.data ?? []), [list.data]);
  const [open, setOpen] = useState<Set<string>>(new Set());
  const [confirm, setConfirm] = useState<{ verb: 'stop' | 'remove'; project: ComposeProject } | null>(null);

  const act = useAction(
    async ({ verb, project }: { verb: ProjectVerb; project: string }) => {
      // The containers as they are now, not as the page last drew them.
      const filters = encodeURIComponent(JSON.stringify({ label: [`${PROJECT}=${project}`] }));
      const containers = await t.request<ContainerSummary[]>('GET', `/containers/json?all=1&filters=${filters}`);
      const errors: string[] = [];
      const each = async (targets: ContainerSummary[], call: (c: ContainerSummary) => Promise<unknown>) => {
        await Promise.all(targets.map((c) => call(c).catch((err: Error) => errors.push(`${nameOf(c)}: ${err.message}`))));
      };
      if (verb === 'start') {
        // One after another, each service after those it depends on, as compose starts them.
        for (const c of startOrder(containers)) {
          if (c.State === 'running') continue;
          await t.request('POST', `/containers/${c.Id}/${c.State === 'paused' ? 'unpause' : 'start'}`).catch((err: Error) => errors.push(`${nameOf(c)}: ${err.message}`));
        }
      } else if (verb === 'stop') {
        await each(
          containers.filter((c) => c.State === 'running' || c.State === 'paused' || c.State === 'restarting'),
          (c) => t.request('POST', `/containers/${c.Id}/stop`),
        );
      } else {
        await each(containers, (c) => t.request('DELETE', `/containers/${c.Id}?force=1`));
        if (!errors.length) {
          const networks = await t.request<Array<{ Id: string; Name: string }>>('GET', `/networks?filters=${filters}`);
          await Promise.all(networks.map((n) => t.request('DELETE', `/networks/${n.Id}`).catch((err: Error) => errors.push(`network ${n.Name}: ${err.message}`))));
        }
      }
      if (errors.length) throw new Error(errors.join('; '));
    },
    { mutationKey: ['compose-project'] },
  );
  const pending = new Map(usePending<{ verb: ProjectVerb; project: string }>(['compose-project']).map((v) => [v.project, v.verb]));
  const toggle = (name: string) =>
    setOpen((s) => {
      const n = new Set(s);
      if (n.has(name)) n.delete(name);
      else n.add(name);
      return n;
    });

  const button = (p: ComposeProject, verb: ProjectVerb, disabled: boolean, onClick: () => void) => {
    const busy = pending.get(p.name);
    return (
      <button
        type="button"
        className={verb === 'remove' ? 'danger' : undefined}
        disabled={disabled || !!busy}
        aria-busy={busy === verb || undefined}
        aria-label={`${verb[0]!.toUpperCase() + verb.slice(1)} ${p.name}`}
        onClick={onClick}
      >
        {busy === verb ? PENDING[verb] : verb[0]!.toUpperCase() + verb.slice(1)}
      </button>
    );
  };

  return (
    <section>
      <header className="page-head">
        <h1>Compose</h1>
      </header>
      <QueryState error={list.error} loading={list.isLoading}>
        {projects.length === 0 ? (
          <p className="empty" data-testid="compose-empty">
            No Compose projects. The containers of <code>docker compose up</code> carry the label <code>{PROJECT}</code> and are grouped here by project.
          </p>
        ) : (
          <ListTable data-testid="compose-projects" columns={['Project', 'Services', 'Containers', '']}>
            {projects.map((p) => [
              <tr key={p.name} data-project={p.name} tabIndex={0} onKeyDown={(e) => e.key === 'Enter' && e.target === e.currentTarget && toggle(p.name)}>
                <td>
                  <button type="button" className="link" aria-expanded={open.has(p.name)} onClick={() => toggle(p.name)}>
                    {open.has(p.name) ? '▾' : '▸'} {p.name}
                  </button>
                  {p.workingDir && <div className="muted small mono ellipsis" title={p.workingDir}>{p.workingDir}</div>}
                </td>
                <td className="small">{p.services.join(', ') || '—'}</td>
                <td className="nowrap" data-testid="project-counts">
                  <span className={`badge ${p.running === p.containers.length ? 'running' : p.running === 0 ? 'exited' : 'paused'}`}>
                    {p.running} of {p.containers.length} running
                  </span>
                </td>
                <td className="row-actions">
                  {button(p, 'start', p.running === p.containers.length, () => act.mutate({ verb: 'start', project: p.name }))}
                  {button(p, 'stop', p.running === 0, () => setConfirm({ verb: 'stop', project: p }))}
                  {button(p, 'remove', false, () => setConfirm({ verb: 'remove', project: p }))}
                </td>
              </tr>,
              ...(open.has(p.name)
                ? p.containers.map((c) => (
                    <tr key={c.Id} className="sub" data-name={nameOf(c)}>
                      <td>
                        <a href={`#/containers/${c.Id}`}>{nameOf(c)}</a>
                      </td>
                      <td className="small">{c.Labels?.[SERVICE] ?? ''}</td>
                      <td>
                        <span className={`badge ${c.State}`} title={c.Status}>
                          {stateLabel(c)}
                        </span>
                      </td>
                      <td />
                    </tr>
                  ))
                : []),
            ])}
          </ListTable>
        )}
      </QueryState>
      {confirm && (
        <Confirm
          title={`${confirm.verb === 'stop' ? 'Stop' : 'Remove'} the project ${confirm.project.name}?`}
          confirmLabel={confirm.verb === 'stop' ? 'Stop' : 'Remove'}
          onCancel={() => setConfirm(null)}
          onConfirm={() => {
            act.mutate({ verb: confirm.verb, project: confirm.project.name });
            setConfirm(null);
          }}
        >
          <p>
            {confirm.verb === 'stop'
              ? `Its ${confirm.project.running} running container${confirm.project.running === 1 ? '' : 's'} stop.`
              : `Its ${confirm.project.containers.length} container${confirm.project.containers.length === 1 ? '' : 's'} and its networks are removed, as docker compose down does; its volumes are kept.`}
          </p>
        </Confirm>
      )}
    </section>
  );
}
