/**
 * Sandboxes: containers given an egress network policy (engine/sandbox/policy.ts), at create through the
 * `berth.network-policy` label or afterwards through `install`. Each installation is a new generation. The
 * engine compiles the policy and the host enforces it in the kernel, on the host ends of the container's
 * veths; the embedded DNS server's answers for names of domain rules add their addresses for their TTL.
 *
 * Format (version 1): `<data-root>/containers/<id>/network-policy.json` holds
 *   {"version": 1, "generation": N, "installedAt": RFC 3339, "policy": <the policy as given>}
 * once a policy was installed through `install`; before that, a container whose label holds a policy is at
 * generation 1, installed when the container was created. The file goes with the container's folder.
 */
import path from 'node:path';
import { readJSONIfExists, writeJSONAtomic } from '../../util/atomic.js';
import { log } from '../../util/log.js';
import type { ContainerRecord } from '../containers/model.js';
import { errorMessage, InvalidParameter, NotFound } from '../../errors.js';
import type { SandboxHost } from '../../host/host.js';
import { compilePolicy, domainMatches, domainSets, type EffectiveRule, type NetworkPolicy, POLICY_LABEL, ruleRuns, validatePolicy } from './policy.js';

export interface PolicyView {
  sandbox: string;
  generation: number;
  installedAt: string;
  exact: unknown;
  effective: { defaultAction: NetworkPolicy['defaultAction']; rules: EffectiveRule[] };
}

/** What the service reads of the containers. */
export interface SandboxContainers {
  find(ref: string): ContainerRecord | undefined;
  dir(id: string): string;
  all(): ContainerRecord[];
  /** Points the running container's resolv.conf at the embedded DNS server. */
  useEmbeddedDns?(id: string): Promise<void>;
}

/** What the service asks the networks: the host ends of a container's veths. */
export interface SandboxNetworking {
  hostInterfaces(containerId: string): string[];
  /** The other containers' interfaces its allowed frames may be handed to directly (skipping the bridge). */
  directPeers?(containerId: string): Array<{ mac: string; hostInterface: string }>;
  /** Serves the embedded DNS server to the running container if it has none (true: it does from now on). */
  serveDns?(containerId: string, dns?: readonly string[]): Promise<boolean>;
}

interface PolicyFile {
  version: 1;
  generation: number;
  installedAt: string;
  policy: unknown;
}

interface Installed {
  generation: number;
  installedAt: string;
  exact: unknown;
  policy: NetworkPolicy;
}

const FILE = 'network-policy.json';

/** Why a container cannot be a sandbox (undefined when it can). */
function unfit(hostConfig: Record<string, any> | undefined): string | undefined {
  const hc = hostConfig ?? {};
  if (hc.Privileged === true) return 'a privileged container cannot have a network policy (it could remove it)';
  const caps = ((hc.CapAdd as string[] | null) ?? []).map((c) => String(c).toUpperCase().replace(/^CAP_/, ''));
  if (caps.includes('NET_ADMIN') || caps.includes('ALL')) return 'a container with NET_ADMIN cannot have a network policy (it could step around it)';
  const mode = String(hc.NetworkMode ?? '');
  if (mode === 'host') return 'a container on the host network cannot have a network policy';
  if (mode.startsWith('container:')) return 'a container sharing the network of another cannot have a network policy (give it to that container)';
  return undefined;
}

export class SandboxService {
  private readonly locks = new Map<string, Promise<unknown>>();
  /** Containers whose table this daemon put in the kernel (others have nothing to remove at their exit). */
  private readonly enforced = new Set<string>();
  /** Per enforced sandbox, the direct peers its table holds (as a key, to skip an update that changes nothing). */
  private readonly peers = new Map<string, string>();

  constructor(
    private readonly containers: SandboxContainers,
    private readonly networking: SandboxNetworking,
    private readonly host: SandboxHost,
  ) {}

  private withLock<T>(id: string, fn: () => Promise<T>): Promise<T> {
    const next = (this.locks.get(id) ?? Promise.resolve()).then(fn, fn);
    const settled = next.catch(() => undefined);
    this.locks.set(id, settled);
    void settled.then(() => {
      if (this.locks.get(id) === settled) this.locks.delete(id);
    });
    return next;
  }

  /** At create: the label's policy must be valid and the container fit for one (InvalidParameter). */
  checkCreate(labels: Record<string, unknown> | null | undefined, hostConfig: Record<string, any> | undefined): void {
    const text = labels?.[POLICY_LABEL];
    if (text === undefined) return;
    let parsed: unknown;
    try {
      parsed = JSON.parse(String(text));
    } catch (err) {
      throw new InvalidParameter(`invalid network policy: the label ${POLICY_LABEL} is not JSON (${errorMessage(err)})`);
    }
    validatePolicy(parsed);
    const why = unfit(hostConfig);
    if (why) throw new InvalidParameter(why);
  }

  /** The container's installed policy, from its file or its label (undefined: none). */
  private async installed(record: ContainerRecord): Promise<Installed | undefined> {
    const file = await readJSONIfExists<PolicyFile>(path.join(this.containers.dir(record.Id), FILE));
    if (file && file.version === 1) return { generation: file.generation, installedAt: file.installedAt, exact: file.policy, policy: validatePolicy(file.policy) };
    const text = record.Config.Labels?.[POLICY_LABEL];
    if (text === undefined) return undefined;
    let exact: unknown;
    try {
      exact = JSON.parse(text);
    } catch (err) {
      throw new InvalidParameter(`invalid network policy: the label ${POLICY_LABEL} is not JSON (${errorMessage(err)})`);
    }
    return { generation: 1, installedAt: record.Created, exact, policy: validatePolicy(exact) };
  }

  /** Whether the container has a policy (its label, or one installed since); a policy file that cannot be read counts. */
  async hasPolicy(record: ContainerRecord): Promise<boolean> {
    if (record.Config.Labels?.[POLICY_LABEL] !== undefined) return true;
    return this.installed(record).then((i) => i !== undefined, () => true);
  }

  private record(ref: string): ContainerRecord {
    const record = this.containers.find(ref);
    if (!record) throw new NotFound(`No such container: ${ref}`);
    return record;
  }

  async view(ref: string): Promise<PolicyView> {
    const record = this.record(ref);
    const installed = await this.installed(record);
    if (!installed) throw new NotFound(`container ${record.Id} has no network policy`);
    return this.viewOf(record, installed);
  }

  async install(ref: string, policy: unknown): Promise<PolicyView> {
    const record = this.record(ref);
    const checked = validatePolicy(policy);
    const why = unfit(record.HostConfig as Record<string, any>);
    if (why) throw new InvalidParameter(why);
    return this.withLock(record.Id, async () => {
      const previous = await this.installed(record).catch(() => undefined);
      const next: Installed = { generation: (previous?.generation ?? 0) + 1, installedAt: new Date().toISOString(), exact: policy, policy: checked };
      const file: PolicyFile = { version: 1, generation: next.generation, installedAt: next.installedAt, policy };
      await writeJSONAtomic(path.join(this.containers.dir(record.Id), FILE), file);
      if (record.State.Running) {
        await this.enforce(record.Id, checked);
        // A container of the default bridge alone had no embedded DNS server: its domain rules need one.
        const dns = (record.HostConfig as { Dns?: string[] | null }).Dns ?? undefined;
        if (await this.networking.serveDns?.(record.Id, dns)) await this.containers.useEmbeddedDns?.(record.Id);
      }
      return this.viewOf(record, next);
    });
  }

  /**
   * Puts the policy in the kernel for the container's current interfaces. The addresses the domain rules
   * allowed until now stay allowed for what is left of their TTL when their name matches a rule of the new one.
   */
  private async enforce(id: string, policy: NetworkPolicy): Promise<void> {
    const before = await this.host.allowedAddresses(id).catch(() => []);
    const interfaces = this.networking.hostInterfaces(id);
    await this.host.applyPolicy(id, interfaces, compilePolicy(policy));
    this.peers.delete(id);
    if (interfaces.length > 0) {
      this.enforced.add(id);
      await this.updatePeers(id);
    }
    const kept = new Map<string, string[]>();
    for (const e of before) {
      if (!e.name || e.expiresInSeconds < 1) continue;
      const key = `${e.name}\n${e.expiresInSeconds}`;
      if (!(kept.get(key) ?? []).includes(e.address)) kept.set(key, [...(kept.get(key) ?? []), e.address]);
    }
    for (const [key, addresses] of kept) {
      const [name, ttl] = key.split('\n');
      await this.allowFor(id, policy, name, addresses, Number(ttl));
    }
  }

  /**
   * Gives the sandbox's table the containers of its bridges its allowed frames go to directly, when they
   * changed. A failure leaves those frames to the bridge (logged).
   */
  private async updatePeers(id: string): Promise<void> {
    if (!this.host.setDirectPeers || !this.networking.directPeers) return;
    const peers = this.networking.directPeers(id);
    const key = JSON.stringify(peers);
    if (this.peers.get(id) === key) return;
    try {
      await this.host.setDirectPeers(id, peers);
      this.peers.set(id, key);
    } catch (err) {
      this.peers.delete(id);
      log.warn('the frames of a sandbox to the containers of its bridges go through the bridge', { id, error: errorMessage(err) });
    }
  }

  /** A container joined or left a network: the sandboxes' tables follow (their direct peers). */
  async peersChanged(): Promise<void> {
    for (const id of this.enforced) await this.withLock(id, () => (this.enforced.has(id) ? this.updatePeers(id) : Promise.resolve()));
  }

  /** Adds addresses of `name` to the sets of the runs of domain rules that match it. */
  private async allowFor(id: string, policy: NetworkPolicy, name: string, addresses: string[], ttl: number): Promise<void> {
    const runs = ruleRuns(policy);
    const matched = new Set<number>();
    for (const [index, rule] of policy.rules.entries()) {
      if (rule.domain !== undefined && domainMatches(rule.domain, name)) matched.add(runs[index]);
    }
    for (const start of matched) {
      const sets = domainSets(start);
      const v4 = addresses.filter((a) => !a.includes(':'));
      const v6 = addresses.filter((a) => a.includes(':'));
      if (v4.length > 0) await this.host.allowAddresses(id, sets.v4, name, v4, ttl);
      if (v6.length > 0) await this.host.allowAddresses(id, sets.v6, name, v6, ttl);
    }
  }

  /** The container was given its network (before its process runs): its policy is enforced, or the start fails. */
  async connected(record: ContainerRecord): Promise<void> {
    await this.withLock(record.Id, async () => {
      const installed = await this.installed(record);
      if (!installed) return;
      await this.enforce(record.Id, installed.policy);
    });
  }

  /** The running container joined one more network: its new interface gets the policy too. */
  async networkChanged(containerId: string): Promise<void> {
    const record = this.containers.find(containerId);
    if (record?.State.Running) await this.connected(record);
  }

  /** The container's network is gone: so is its table. */
  async disconnected(id: string): Promise<void> {
    this.peers.delete(id);
    if (!this.enforced.delete(id)) return;
    await this.withLock(id, () => this.host.removePolicy(id));
  }

  /**
   * At daemon start: the running sandboxes get their policy again; the tables of this engine's containers
   * that stopped while it was down are removed (those of other engines on the host are left alone).
   */
  async recover(): Promise<void> {
    const inKernel = new Set(await this.host.installedPolicies());
    for (const record of this.containers.all()) {
      if (!record.State.Running) {
        if (inKernel.has(record.Id.slice(0, 12))) await this.host.removePolicyByShortId(record.Id.slice(0, 12));
        continue;
      }
      const installed = await this.installed(record).catch(() => undefined);
      if (!installed) continue;
      await this.withLock(record.Id, () => this.enforce(record.Id, installed.policy)).catch((err) => {
        log.warn('a sandbox policy could not be enforced again', { id: record.Id, error: errorMessage(err) });
      });
    }
  }

  /** An answer of the embedded DNS server to a container, before the container has it. */
  async dnsAnswer(containerId: string, name: string, records: Array<{ address: string; ttl: number }>): Promise<void> {
    const record = this.containers.find(containerId);
    // Only a container whose table this daemon put in the kernel has a set to add to: the answers of every
    // other container go out without a look at its files.
    if (!record || !this.enforced.has(record.Id)) return;
    const installed = await this.installed(record);
    if (!installed || !installed.policy.rules.some((r) => r.domain !== undefined && domainMatches(r.domain, name))) return;
    const key = name.toLowerCase().replace(/\.$/, '');
    await this.withLock(containerId, async () => {
      const byTtl = new Map<number, string[]>();
      for (const r of records) {
        const ttl = Math.max(1, r.ttl);
        byTtl.set(ttl, [...(byTtl.get(ttl) ?? []), r.address]);
      }
      for (const [ttl, list] of byTtl) await this.allowFor(containerId, installed.policy, key, list, ttl);
    });
  }

  /** The view of an installation; the effective addresses of domain rules are read from the kernel. */
  private async viewOf(record: ContainerRecord, installed: Installed): Promise<PolicyView> {
    const now = Date.now();
    const allowed = record.State.Running ? await this.host.allowedAddresses(record.Id).catch(() => []) : [];
    const rules: EffectiveRule[] = [];
    const runs = ruleRuns(installed.policy);
    for (const [index, rule] of installed.policy.rules.entries()) {
      const base = { action: rule.action, protocol: rule.protocol, ...(rule.ports ? { ports: rule.ports } : {}) };
      if (rule.cidr !== undefined) {
        rules.push({ ...base, cidr: rule.cidr });
        continue;
      }
      // The run's sets hold the addresses of all its names: the rule shows those of its own.
      const sets = domainSets(runs[index]);
      for (const e of allowed) {
        if ((e.set !== sets.v4 && e.set !== sets.v6) || !domainMatches(rule.domain!, e.name)) continue;
        rules.push({
          ...base,
          cidr: `${e.address}/${e.address.includes(':') ? 128 : 32}`,
          domain: e.name,
          expiresAt: new Date(now + e.expiresInSeconds * 1000).toISOString(),
        });
      }
    }
    return {
      sandbox: record.Id,
      generation: installed.generation,
      installedAt: installed.installedAt,
      exact: installed.exact,
      effective: { defaultAction: installed.policy.defaultAction, rules },
    };
  }
}
