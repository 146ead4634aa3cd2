/**
 * A sandbox's egress network policy (`GET` and `PUT /v1/sandboxes/{id}/network-policies`): the installed
 * generation in its two views, `exact` (as given) and `effective` (as the kernel enforces it now, names
 * resolved), and an editor whose errors are the engine's own. The Run form starts a sandbox with a policy
 * through the `berth.network-policy` label.
 */
import { useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { ListTable, QueryState } from '../App';
import { useTransport } from '../engine';
import { ApiError } from '../transport';

export const POLICY_LABEL = 'berth.network-policy';

interface EffectiveRule {
  action: 'allow' | 'deny';
  protocol: 'tcp' | 'udp' | 'any';
  ports?: Array<number | string>;
  cidr: string;
  domain?: string;
  expiresAt?: string;
}

export interface PolicyView {
  sandbox: string;
  generation: number;
  installedAt: string;
  exact: unknown;
  effective: { defaultAction: 'allow' | 'deny'; rules: EffectiveRule[] };
}

/** What a new policy starts from: nothing leaves but what a rule allows. */
export const POLICY_TEMPLATE = JSON.stringify(
  {
    defaultAction: 'deny',
    rules: [
      { action: 'allow', domain: '*.example.com', protocol: 'tcp', ports: [443] },
      { action: 'allow', cidr: '10.0.0.0/8' },
    ],
  },
  null,
  2,
);

/**
 * The policy the user typed, as an object; throws naming what is wrong with its JSON. Its rules are the
 * engine's to check (its answer names the rule at fault).
 */
export function parsePolicy(text: string): Record<string, unknown> {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw new Error(`the network policy is not JSON: ${(err as Error).message}`);
  }
  if (!value || typeof value !== 'object' || Array.isArray(value)) throw new Error('the network policy must be a JSON object with defaultAction and rules');
  return value as Record<string, unknown>;
}

/**
 * The policy routes want a bearer token: the app's own engine (the bundled one, or `berthd --ui`) knows the
 * app by its local session; another engine the app connects to does not, and says 401 or 403.
 */
function tokenProblem(err: unknown): Error {
  if (err instanceof ApiError && (err.status === 401 || err.status === 403))
    return new Error(`${err.message}. This engine serves sandbox policies only to API tokens with the network policy permissions; the app holds one for its bundled engine only.`);
  return err instanceof Error ? err : new Error(String(err));
}

const portsText = (ports: Array<number | string> | undefined) => (ports?.length ? ports.join(', ') : 'all');

function expiry(at: string | undefined): string {
  if (!at) return '—';
  const s = Math.round((new Date(at).getTime() - Date.now()) / 1000);
  return s > 0 ? `in ${s < 120 ? `${s} s` : `${Math.round(s / 60)} min`}` : 'now';
}

/** The policy tab of a container's page. */
export function PolicyTab(props: { id: string; running: boolean }) {
  const t = useTransport();
  const qc = useQueryClient();
  const policy = useQuery({
    queryKey: ['policy', props.id],
    // No policy is an answer of its own (404 notFound), not an error.
    queryFn: async () => {
      try {
        return await t.request<PolicyView>('GET', `/v1/sandboxes/${encodeURIComponent(props.id)}/network-policies`);
      } catch (err) {
        if (err instanceof ApiError && err.status === 404) return null;
        throw tokenProblem(err);
      }
    },
  });
  const [draft, setDraft] = useState<string | null>(null);
  const [saving, setSaving] = useState(false);
  const [problem, setProblem] = useState<string | null>(null);
  const view = policy.data;

  const save = async () => {
    if (draft === null) return;
    setProblem(null);
    setSaving(true);
    try {
      const next = await t.request<PolicyView>('PUT', `/v1/sandboxes/${encodeURIComponent(props.id)}/network-policies`, { body: parsePolicy(draft) });
      qc.setQueryData(['policy', props.id], next);
      setDraft(null);
    } catch (err) {
      setProblem(tokenProblem(err).message);
    } finally {
      setSaving(false);
    }
  };

  return (
    <QueryState error={policy.error} loading={policy.isLoading}>
      {draft === null ? (
        view ? (
          <div data-testid="policy">
            <div className="toolbar">
              <span>
                Generation <strong data-testid="policy-generation">{view.generation}</strong>
                <span className="muted">, installed {new Date(view.installedAt).toLocaleString()}</span>
              </span>
              <span className="spacer" />
              <button type="button" onClick={() => void policy.refetch()} disabled={policy.isFetching} aria-busy={policy.isFetching || undefined}>
                {policy.isFetching ? 'Refreshing…' : 'Refresh'}
              </button>
              <button type="button" className="primary" onClick={() => setDraft(JSON.stringify(view.exact, null, 2))}>
                Edit policy
              </button>
            </div>
            <div className="pairs policy-views">
              <div className="panel">
                <h2>Exact</h2>
                <p className="muted small">The policy as it was given.</p>
                <pre className="json" data-testid="policy-exact">
                  {JSON.stringify(view.exact, null, 2)}
                </pre>
              </div>
              <div className="panel">
                <h2>Effective</h2>
                <p className="muted small">
                  What the kernel enforces now{props.running ? '' : ' (the container is not running: domain rules hold no address until it runs and asks for names)'}.
                  Anything no rule matches is <strong data-testid="policy-default">{view.effective.defaultAction === 'deny' ? 'refused' : 'allowed'}</strong>.
                </p>
                <ListTable aria-label="Effective rules" columns={['Action', 'Destination', 'Protocol', 'Ports', 'Expires']}>
                  {view.effective.rules.map((r, i) => (
                    <tr key={i}>
                      <td>
                        <span className={`badge policy-${r.action}`}>{r.action}</span>
                      </td>
                      <td className="mono">
                        {r.cidr}
                        {r.domain && <div className="muted small">{r.domain}</div>}
                      </td>
                      <td>{r.protocol}</td>
                      <td className="mono">{portsText(r.ports)}</td>
                      <td className="nowrap">{expiry(r.expiresAt)}</td>
                    </tr>
                  ))}
                  {view.effective.rules.length === 0 && (
                    <tr>
                      <td colSpan={5} className="muted">
                        No rule holds an address now.
                      </td>
                    </tr>
                  )}
                </ListTable>
              </div>
            </div>
          </div>
        ) : (
          <div className="empty" data-testid="no-policy">
            <p>No network policy: this container's outbound traffic is not restricted.</p>
            <button type="button" className="primary" onClick={() => setDraft(POLICY_TEMPLATE)}>
              Add a policy
            </button>
          </div>
        )
      ) : (
        <div className="panel policy-editor">
          <h2>{view ? `Edit the policy (generation ${view.generation + 1} once saved)` : 'A new policy'}</h2>
          <p className="muted small">
            <code>defaultAction</code> is <code>allow</code> or <code>deny</code>; each rule allows or denies a <code>cidr</code> or a <code>domain</code> (exact or <code>*.</code>),
            with an optional <code>protocol</code> (<code>tcp</code>, <code>udp</code>) and <code>ports</code> (numbers or <code>first-last</code>). The first rule that matches decides.
            Saving installs it at once, on live connections too.
          </p>
          <textarea
            className="policy-text"
            aria-label="Network policy"
            spellCheck={false}
            rows={14}
            value={draft}
            onChange={(e) => {
              setDraft(e.target.value);
              setProblem(null);
            }}
          />
          {problem && (
            <div className="error inline" role="alert" data-testid="policy-error">
              {problem}
            </div>
          )}
          <div className="actions">
            <button type="button" onClick={() => (setDraft(null), setProblem(null))} disabled={saving}>
              Cancel
            </button>
            <button type="button" className="primary" onClick={() => void save()} disabled={saving} aria-busy={saving || undefined}>
              {saving ? 'Installing…' : 'Save policy'}
            </button>
          </div>
        </div>
      )}
    </QueryState>
  );
}
