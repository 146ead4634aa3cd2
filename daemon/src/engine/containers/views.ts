/**
 * What list and inspect show of a container, in the newest API shape (api/compat trims per version).
 */
import { InvalidParameter } from '../../errors.js';
import { compileLinear } from '../regexp.js';
import type { ContainerRecord } from './model.js';
import { humanStatus } from './model.js';

type Filters = Map<string, string[]>;

export const LIST_FILTERS = [
  'id', 'name', 'label', 'status', 'exited', 'ancestor', 'before', 'since', 'volume', 'network', 'health',
  'publish', 'expose', 'is-task', 'isolation',
] as const;

const STATUSES = ['created', 'restarting', 'running', 'removing', 'paused', 'exited', 'dead'];
const HEALTH = ['starting', 'healthy', 'unhealthy', 'none'];

export interface ListOptions {
  all: boolean;
  limit: number;
  size: boolean;
  filters: Filters;
  /** Resolves a container reference for before/since (NotFound when absent). */
  lookup(ref: string): ContainerRecord;
  /** Whether the image reference names the container's image (by name, tag or id). */
  matchesAncestor(record: ContainerRecord, ancestor: string): boolean;
}

function labelMatches(labels: Record<string, string>, filter: string): boolean {
  const eq = filter.indexOf('=');
  if (eq < 0) return filter in labels;
  const key = filter.slice(0, eq);
  const value = filter.slice(eq + 1);
  if (key.endsWith('!')) return labels[key.slice(0, -1)] !== value;
  return labels[key] === value;
}

export function listContainers(records: ContainerRecord[], opts: ListOptions): ContainerRecord[] {
  const f = opts.filters;
  for (const s of f.get('status') ?? []) if (!STATUSES.includes(s)) throw new InvalidParameter(`invalid filter 'status=${s}'`);
  for (const h of f.get('health') ?? []) if (!HEALTH.includes(h)) throw new InvalidParameter(`Unrecognised filter value for health: ${h} (expected starting, healthy, unhealthy or none)`);
  for (const e of f.get('exited') ?? []) if (!/^-?\d+$/.test(e)) throw new InvalidParameter(`invalid filter 'exited=${e}'`);
  const before = (f.get('before') ?? []).map((r) => BigInt(opts.lookup(r).CreatedNano));
  const since = (f.get('since') ?? []).map((r) => BigInt(opts.lookup(r).CreatedNano));
  // Names match as Go regular expressions (linear time), with or without their leading slash.
  const namePatterns = f.get('name')?.map((n) => compileLinear(n, "filter 'name'"));
  // Filters on status or exit code, limit, before and since imply all.
  const all = opts.all || f.has('status') || f.has('exited') || opts.limit > 0 || before.length > 0 || since.length > 0;
  const createdOf = new Map(records.map((c) => [c, BigInt(c.CreatedNano)]));
  let out = [...records].sort((a, b) => (createdOf.get(b)! > createdOf.get(a)! ? 1 : -1));
  out = out.filter((c) => {
    if (!all && !c.State.Running && !c.State.Paused && !c.State.Restarting) return false;
    const ids = f.get('id');
    if (ids && !ids.some((id) => c.Id.startsWith(id))) return false;
    if (namePatterns && !namePatterns.some((n) => n.test(c.Name.slice(1)) || n.test(c.Name))) return false;
    const labels = f.get('label');
    if (labels && !labels.every((l) => labelMatches(c.Config.Labels ?? {}, l))) return false;
    const statuses = f.get('status');
    if (statuses && !statuses.includes(c.State.Status)) return false;
    const exited = f.get('exited');
    if (exited && (c.State.Status !== 'exited' || !exited.includes(String(c.State.ExitCode)))) return false;
    const ancestors = f.get('ancestor');
    if (ancestors && !ancestors.some((a) => opts.matchesAncestor(c, a))) return false;
    const created = createdOf.get(c)!;
    if (before.some((b) => created >= b)) return false;
    if (since.some((s) => created <= s)) return false;
    const networks = f.get('network');
    if (networks && !networks.some((n) => Object.entries(c.Networks).some(([name, ep]) => name === n || ep.NetworkID.startsWith(n)))) return false;
    const health = f.get('health');
    if (health && !health.includes(c.State.Health?.Status ?? 'none')) return false;
    const volumes = f.get('volume');
    if (volumes && !volumes.some((v) => c.Mounts.some((m) => m.Name === v || m.Destination === v || m.Source === v))) return false;
    const expose = f.get('expose');
    if (expose && !expose.some((p) => Object.keys(c.Config.ExposedPorts ?? {}).includes(p.includes('/') ? p : `${p}/tcp`))) return false;
    const publish = f.get('publish');
    if (publish && !publish.some((p) => Object.entries(c.Ports).some(([k, b]) => b && (k === p || k === `${p}/tcp` || b.some((x) => x.HostPort === p))))) return false;
    if (f.has('is-task') && (f.get('is-task')![0] === 'true') !== ('com.docker.swarm.task' in (c.Config.Labels ?? {}))) return false;
    return true;
  });
  if (opts.limit > 0) out = out.slice(0, opts.limit);
  return out;
}

/**
 * Endpoint settings: what the client gave (Links, Aliases, DriverOpts) is null when it gave nothing, as Docker
 * shows it; IPAMConfig and DNSNames are empty rather than null.
 */
function endpointsView(networks: ContainerRecord['Networks']): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [name, ep] of Object.entries(networks)) {
    out[name] = { ...ep, IPAMConfig: ep.IPAMConfig ?? {}, Links: ep.Links ?? null, Aliases: ep.Aliases ?? null, DriverOpts: ep.DriverOpts ?? null, DNSNames: ep.DNSNames ?? [] };
  }
  return out;
}

const HOST_CONFIG_LISTS = ['Binds', 'VolumesFrom', 'CapAdd', 'CapDrop', 'ExtraHosts', 'GroupAdd', 'Links', 'SecurityOpt', 'DeviceCgroupRules', 'DeviceRequests', 'Dns', 'DnsOptions', 'DnsSearch', 'Ulimits', 'Devices'];

/** HostConfig with unset lists as [] and unset tunables at their neutral value, as the schemas type them. */
function hostConfigView(record: ContainerRecord): Record<string, unknown> {
  const hc = structuredClone(record.HostConfig) as Record<string, unknown>;
  for (const key of HOST_CONFIG_LISTS) if (hc[key] === null || hc[key] === undefined) hc[key] = [];
  // Unset swappiness has no value in the schema's 0-100 range: it is left out.
  if (hc.MemorySwappiness === null || hc.MemorySwappiness === undefined || hc.MemorySwappiness === -1) delete hc.MemorySwappiness;
  if (hc.OomKillDisable === null || hc.OomKillDisable === undefined) hc.OomKillDisable = false;
  if (hc.PidsLimit === null || hc.PidsLimit === undefined) hc.PidsLimit = 0;
  return hc;
}

/** Config with null lists and maps left out (the schemas allow absence, not null). */
function configView(record: ContainerRecord): Record<string, unknown> {
  const config = structuredClone(record.Config) as unknown as Record<string, unknown>;
  for (const key of ['Entrypoint', 'Cmd', 'Volumes', 'OnBuild', 'Labels']) if (config[key] === null) delete config[key];
  return config;
}

function commandLine(record: ContainerRecord): string {
  const quote = (a: string) => (/[\s"'\\]/.test(a) ? JSON.stringify(a) : a);
  return [record.Path, ...record.Args].map(quote).join(' ');
}

function portsList(record: ContainerRecord): Array<{ IP?: string; PrivatePort: number; PublicPort?: number; Type: string }> {
  const out: Array<{ IP?: string; PrivatePort: number; PublicPort?: number; Type: string }> = [];
  const keys = new Set([...Object.keys(record.Config.ExposedPorts ?? {}), ...Object.keys(record.Ports)]);
  for (const key of keys) {
    const [port, proto = 'tcp'] = key.split('/');
    const bindings = record.State.Running ? record.Ports[key] : null;
    if (!bindings || bindings.length === 0) out.push({ PrivatePort: Number(port), Type: proto });
    else for (const b of bindings) out.push({ IP: b.HostIp || '0.0.0.0', PrivatePort: Number(port), PublicPort: Number(b.HostPort), Type: proto });
  }
  return out;
}

/** The list's health summary: `none` for a container without a check or not running. */
function healthSummary(record: ContainerRecord): { Status: string; FailingStreak: number } {
  const health = record.State.Health;
  if (!health || !record.State.Running) return { Status: 'none', FailingStreak: 0 };
  return { Status: health.Status, FailingStreak: health.FailingStreak };
}

export function containerSummary(record: ContainerRecord, imageName: string, sizes?: { rw: number; rootFs: number }): Record<string, unknown> {
  const summary: Record<string, unknown> = {
    Id: record.Id,
    Names: [record.Name],
    Image: imageName,
    ImageID: record.Image,
    Command: commandLine(record),
    Created: Math.floor(Number(BigInt(record.CreatedNano) / 1_000_000_000n)),
    Ports: portsList(record),
    Labels: record.Config.Labels ?? {},
    State: record.State.Status,
    Status: humanStatus(record.State),
    Health: healthSummary(record),
    HostConfig: { NetworkMode: record.HostConfig.NetworkMode },
    NetworkSettings: { Networks: endpointsView(record.Networks) },
    Mounts: record.Mounts.map((m) => ({ ...m })),
  };
  if (record.HostConfig.Annotations) (summary.HostConfig as Record<string, unknown>).Annotations = record.HostConfig.Annotations;
  if (sizes) {
    summary.SizeRw = sizes.rw;
    summary.SizeRootFs = sizes.rootFs;
  }
  return summary;
}

export function containerInspect(record: ContainerRecord, sizes?: { rw: number; rootFs: number }): Record<string, unknown> {
  const primary = Object.values(record.Networks)[0];
  const hc = hostConfigView(record);
  const ports: Record<string, unknown> = {};
  for (const key of Object.keys(record.Config.ExposedPorts ?? {})) ports[key] = null;
  if (record.State.Running) Object.assign(ports, record.Ports);
  const inspect: Record<string, unknown> = {
    Id: record.Id,
    Created: record.Created,
    Path: record.Path,
    Args: record.Args,
    State: structuredClone(record.State),
    Image: record.Image,
    ResolvConfPath: record.ResolvConfPath,
    HostnamePath: record.HostnamePath,
    HostsPath: record.HostsPath,
    LogPath: record.LogPath,
    Name: record.Name,
    RestartCount: record.RestartCount,
    Driver: 'overlay2',
    Platform: 'linux',
    MountLabel: '',
    ProcessLabel: '',
    AppArmorProfile: '',
    ExecIDs: record.ExecIDs,
    HostConfig: hc,
    GraphDriver: { Name: 'overlay2', Data: {} },
    Mounts: record.Mounts.map((m) => ({ ...m })),
    Config: configView(record),
    NetworkSettings: {
      Bridge: '',
      SandboxID: record.State.Running ? record.Id : '',
      SandboxKey: (record as ContainerRecord & { SandboxKey?: string }).SandboxKey ?? '',
      HairpinMode: false,
      LinkLocalIPv6Address: '',
      LinkLocalIPv6PrefixLen: 0,
      Ports: ports,
      SecondaryIPAddresses: null,
      SecondaryIPv6Addresses: null,
      EndpointID: primary?.EndpointID ?? '',
      Gateway: primary?.Gateway ?? '',
      GlobalIPv6Address: primary?.GlobalIPv6Address ?? '',
      GlobalIPv6PrefixLen: primary?.GlobalIPv6PrefixLen ?? 0,
      IPAddress: primary?.IPAddress ?? '',
      IPPrefixLen: primary?.IPPrefixLen ?? 0,
      IPv6Gateway: primary?.IPv6Gateway ?? '',
      MacAddress: primary?.MacAddress ?? '',
      Networks: endpointsView(record.Networks),
    },
  };
  if (!(inspect.State as Record<string, unknown>).Health) delete (inspect.State as Record<string, unknown>).Health;
  if (sizes) {
    inspect.SizeRw = sizes.rw;
    inspect.SizeRootFs = sizes.rootFs;
  }
  return inspect;
}
