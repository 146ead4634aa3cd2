import { InvalidParameter, NotInSwarm } from '../errors.js';
import type { ApiMinor } from './version.js';

/**
 * API version differences, as data. Engine code builds every response in its newest, fullest shape;
 * `shape()` then takes away or empties what the requested version does not have. Handlers never test
 * versions for response fields themselves: they add a rule here.
 *
 * A rule's `field` is a dotted path inside the response value. `*` stands for every key of a map or every
 * item of a list; a response that is a list is shaped item by item (`[]` prefix not needed).
 */
export interface FieldRule {
  field: string;
  /** The field exists from this version on; below it the field is removed. */
  addedIn?: ApiMinor;
  /** The field is removed from this version on. */
  removedIn?: ApiMinor;
  /** From this version on, the field is removed when empty ('', null, [], {}). */
  omitEmptyFrom?: ApiMinor;
  /** Below this version the field is removed when null (its schema did not allow null yet). */
  omitNullBelow?: ApiMinor;
  /**
   * Below this version the field, an endpoint's settings, lists in Aliases its DNS names after the container's
   * name too (the short id): before 1.45 Docker showed them there, and Aliases only what the client gave after.
   */
  dnsNamesInAliasesBelow?: ApiMinor;
  /** Below this version the field holds `value` instead (only where it is an empty list, with `whenEmpty`). */
  setBelow?: { version: ApiMinor; value: unknown; whenEmpty?: boolean };
}

export type ResponseKind =
  | 'system.version'
  | 'system.info'
  | 'event'
  | 'container.summary'
  | 'container.inspect'
  | 'container.stats'
  | 'image.summary'
  | 'image.list'
  | 'image.inspect'
  | 'image.history'
  | 'network'
  | 'volume'
  | 'exec.inspect';

/** HostConfig.KernelMemory went with API 1.42: from it, a request's value is ignored and inspect has none. */
const KERNEL_MEMORY_REMOVED_IN: ApiMinor = 42;

const imageSummaryRules: FieldRule[] = [
  { field: 'VirtualSize', removedIn: 44 },
  { field: 'Descriptor', addedIn: 48 },
  { field: 'Manifests', addedIn: 47 },
];

const legacyNetworkFields = [
  'Bridge', 'HairpinMode', 'LinkLocalIPv6Address', 'LinkLocalIPv6PrefixLen', 'SecondaryIPAddresses',
  'SecondaryIPv6Addresses', 'EndpointID', 'Gateway', 'GlobalIPv6Address', 'GlobalIPv6PrefixLen', 'IPAddress',
  'IPPrefixLen', 'IPv6Gateway', 'MacAddress',
];

const imageConfigDropped150 = [
  'Hostname', 'Domainname', 'AttachStdin', 'AttachStdout', 'AttachStderr', 'Tty', 'OpenStdin', 'StdinOnce',
  'Image', 'NetworkDisabled', 'MacAddress', 'StopTimeout',
];

export const RULES: Record<ResponseKind, FieldRule[]> = {
  'system.version': [
    { field: 'MinAPIVersion', addedIn: 25 },
    { field: 'Platform', addedIn: 35 },
    { field: 'Components', addedIn: 35 },
  ],
  'system.info': [
    { field: 'CgroupVersion', addedIn: 41 },
    { field: 'DefaultAddressPools', addedIn: 41 },
    { field: 'OSVersion', addedIn: 41 },
    { field: 'Warnings', addedIn: 39 },
    { field: 'PidsLimit', addedIn: 40 },
    { field: 'CDISpecDirs', addedIn: 44 },
    { field: 'Containerd', addedIn: 46 },
    { field: 'FirewallBackend', addedIn: 49 },
    { field: 'DiscoveredDevices', addedIn: 50 },
    { field: 'BridgeNfIptables', removedIn: 50 },
    { field: 'BridgeNfIp6tables', removedIn: 50 },
    { field: 'KernelMemoryTCP', removedIn: 52 },
    { field: 'Isolation', addedIn: 25 },
  ],
  event: [
    // The legacy flat fields are gone from 1.52 on.
    { field: 'status', removedIn: 52 },
    { field: 'id', removedIn: 52 },
    { field: 'from', removedIn: 52 },
  ],
  'container.summary': [
    { field: 'Health', addedIn: 52 },
    { field: 'ImageManifestDescriptor', addedIn: 48 },
    { field: 'NetworkSettings.Networks.*.GwPriority', addedIn: 48 },
    { field: 'NetworkSettings.Networks.*.DNSNames', addedIn: 44 },
  ],
  'container.inspect': [
    // Before the DNSNames rule below, which takes them away before 1.44.
    { field: 'NetworkSettings.Networks.*', dnsNamesInAliasesBelow: 45 },
    { field: 'ImageManifestDescriptor', addedIn: 48 },
    { field: 'Config.OnBuild', omitEmptyFrom: 52 },
    { field: 'Config.MacAddress', removedIn: 52 },
    { field: 'HostConfig.KernelMemoryTCP', removedIn: 52 },
    { field: 'HostConfig.KernelMemory', removedIn: KERNEL_MEMORY_REMOVED_IN },
    { field: 'HostConfig.Annotations', addedIn: 43 },
    { field: 'HostConfig.CgroupnsMode', addedIn: 41 },
    { field: 'HostConfig.ConsoleSize', addedIn: 42 },
    { field: 'NetworkSettings.Networks.*.DNSNames', addedIn: 44 },
    { field: 'NetworkSettings.Networks.*.GwPriority', addedIn: 48 },
    { field: 'State.Health.*', addedIn: 24 },
    ...legacyNetworkFields.map((f) => ({ field: `NetworkSettings.${f}`, removedIn: 52 })),
  ],
  'container.stats': [
    { field: 'cpu_stats.online_cpus', addedIn: 27 },
    { field: 'precpu_stats.online_cpus', addedIn: 27 },
    { field: 'os_type', addedIn: 52 },
  ],
  'image.summary': imageSummaryRules,
  // GET /images/json (the summaries in /system/df keep their own values).
  'image.list': [
    // Before 1.43, untagged images list `<none>:<none>` and `<none>@<none>` rather than empty lists.
    { field: 'RepoTags', setBelow: { version: 43, value: ['<none>:<none>'], whenEmpty: true } },
    { field: 'RepoDigests', setBelow: { version: 43, value: ['<none>@<none>'], whenEmpty: true } },
    // Before 1.51, Containers is always -1.
    { field: 'Containers', setBelow: { version: 51, value: -1 } },
    ...imageSummaryRules,
  ],
  'image.inspect': [
    { field: 'VirtualSize', removedIn: 44 },
    { field: 'Container', removedIn: 45 },
    { field: 'ContainerConfig', removedIn: 45 },
    { field: 'Descriptor', addedIn: 48 },
    { field: 'Identity', addedIn: 53 },
    { field: 'OsVersion', addedIn: 25 },
    { field: 'RootFS.BaseLayer', removedIn: 25 },
    { field: 'Parent', omitEmptyFrom: 52 },
    { field: 'Comment', omitEmptyFrom: 52 },
    { field: 'EngineVersion', omitEmptyFrom: 52 },
    { field: 'Author', omitEmptyFrom: 52 },
    ...['Cmd', 'Entrypoint', 'Env', 'Labels', 'OnBuild', 'User', 'Volumes', 'WorkingDir'].map((f) => ({ field: `Config.${f}`, omitEmptyFrom: 52 })),
    ...imageConfigDropped150.map((f) => ({ field: `Config.${f}`, removedIn: 50 })),
  ],
  'image.history': [],
  network: [
    { field: 'Status', addedIn: 52 },
    { field: 'EnableIPv4', addedIn: 48 },
    { field: 'Ingress', addedIn: 29 },
  ],
  volume: [
    { field: 'CreatedAt', addedIn: 31 },
    { field: 'UsageData', omitNullBelow: 32 },
  ],
  'exec.inspect': [],
};

/** Error classes whose status was another one before an API version. */
export interface StatusRule {
  error: abstract new (...args: never[]) => Error;
  /** Below this version the error answers `status` rather than its class's own. */
  before: ApiMinor;
  status: number;
}

export const STATUS_RULES: readonly StatusRule[] = [
  // "node is not part of a swarm": 406 in API 1.24, 503 from 1.25 on.
  { error: NotInSwarm, before: 25, status: 406 },
];

/** The status an error answers at this version, given its class's own status. */
export function statusAt(err: unknown, status: number, version: ApiMinor | undefined): number {
  if (version === undefined) return status;
  for (const rule of STATUS_RULES) if (err instanceof rule.error && version < rule.before) return rule.status;
  return status;
}

/** Event actions that appear in the events stream from an API version on (older clients never see them). */
export const EVENT_ACTIONS_ADDED: Readonly<Record<string, ApiMinor>> = {
  // Prune events, with their `reclaimed` attribute, for containers, images, volumes, networks and builds.
  prune: 41,
};

/** Whether an event of this action is shown to a client of this version. */
export function eventActionShown(action: string, version: ApiMinor): boolean {
  const from = EVENT_ACTIONS_ADDED[action];
  return from === undefined || version >= from;
}

function isEmpty(v: unknown): boolean {
  if (v === null || v === undefined || v === '') return true;
  if (Array.isArray(v)) return v.length === 0;
  if (typeof v === 'object') return Object.keys(v as object).length === 0;
  return false;
}

/** An endpoint's Aliases with its DNS names after the first (the container's name), without repeats. */
function aliasesWithDnsNames(endpoint: unknown): void {
  if (endpoint === null || typeof endpoint !== 'object') return;
  const ep = endpoint as { Aliases?: unknown; DNSNames?: unknown };
  const names = Array.isArray(ep.DNSNames) ? (ep.DNSNames as string[]).slice(1) : [];
  if (names.length === 0) return;
  ep.Aliases = [...new Set([...(Array.isArray(ep.Aliases) ? (ep.Aliases as string[]) : []), ...names])];
}

/** Changes one field of an object in place (deletes it, replaces it, or edits its value). */
type Edit = (obj: Record<string, unknown>, key: string) => void;

const remove = (test: (v: unknown) => boolean): Edit => (obj, key) => {
  if (test(obj[key])) delete obj[key];
};

/** Calls `edit` on every field the dotted path reaches (`*` for every key or item). */
function applyRule(target: unknown, parts: string[], edit: Edit): void {
  if (target === null || typeof target !== 'object') return;
  const [head, ...rest] = parts;
  const obj = target as Record<string, unknown>;
  const keys = head === '*' ? Object.keys(obj) : [head];
  for (const key of keys) {
    if (!(key in obj)) continue;
    if (rest.length === 0) edit(obj, key);
    else applyRule(obj[key], rest, edit);
  }
}

/** Shapes a freshly built response value (not shared with engine state: it is changed in place). */
export function shape<T>(kind: ResponseKind, version: ApiMinor, value: T): T {
  const items = Array.isArray(value) ? value : [value];
  for (const rule of RULES[kind]) {
    let edit: Edit | undefined;
    if (rule.addedIn !== undefined && version < rule.addedIn) edit = remove(() => true);
    else if (rule.removedIn !== undefined && version >= rule.removedIn) edit = remove(() => true);
    else if (rule.omitEmptyFrom !== undefined && version >= rule.omitEmptyFrom) edit = remove(isEmpty);
    else if (rule.omitNullBelow !== undefined && version < rule.omitNullBelow) edit = remove((v) => v === null);
    else if (rule.setBelow !== undefined && version < rule.setBelow.version) {
      const { value: replacement, whenEmpty } = rule.setBelow;
      edit = (obj, key) => {
        const v = obj[key];
        if (!whenEmpty || (Array.isArray(v) && v.length === 0)) obj[key] = structuredClone(replacement);
      };
    } else if (rule.dnsNamesInAliasesBelow !== undefined && version < rule.dnsNamesInAliasesBelow) {
      edit = (obj, key) => aliasesWithDnsNames(obj[key]);
    }
    if (!edit) continue;
    const parts = rule.field.split('.');
    for (const item of items) applyRule(item, parts, edit);
  }
  return value;
}

/**
 * A field of a request body whose meaning depends on the version. Its `field` is a dotted path inside the
 * body as read (field names in their canonical case), with `*` as in response rules.
 */
export interface RequestFieldRule {
  field: string;
  /** Below this version the field did not exist: a value sent is ignored, as Docker does. */
  addedIn?: ApiMinor;
  /** From this version on the field is gone: a value sent is ignored, as Docker does. */
  removedIn?: ApiMinor;
  /** Below this version a value that is set (not empty, zero or false) is refused with this message. */
  refusedBelow?: { version: ApiMinor; message: string };
}

export type RequestKind = 'container.create' | 'container.update';

export const REQUEST_RULES: Record<RequestKind, RequestFieldRule[]> = {
  'container.create': [
    { field: 'Healthcheck.StartInterval', addedIn: 44 },
    { field: 'HostConfig.KernelMemory', removedIn: KERNEL_MEMORY_REMOVED_IN },
    // Before 1.44 only Config.MacAddress sets the address; an endpoint's value is ignored.
    { field: 'NetworkingConfig.EndpointsConfig.*.MacAddress', addedIn: 44 },
    { field: 'HostConfig.Mounts.*.VolumeOptions.Subpath', refusedBelow: { version: 45, message: 'VolumeOptions.Subpath needs API v1.45 or newer' } },
  ],
  'container.update': [{ field: 'KernelMemory', removedIn: KERNEL_MEMORY_REMOVED_IN }],
};

/**
 * Reads a request body as the requested version has it: fields the version does not have are dropped, and a
 * field it cannot ask for is refused (InvalidParameter). Changes the body in place and returns it.
 */
export function readRequest<T>(kind: RequestKind, version: ApiMinor, body: T): T {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) return body;
  for (const rule of REQUEST_RULES[kind]) {
    let edit: Edit | undefined;
    if (rule.addedIn !== undefined && version < rule.addedIn) edit = remove(() => true);
    else if (rule.removedIn !== undefined && version >= rule.removedIn) edit = remove(() => true);
    else if (rule.refusedBelow !== undefined && version < rule.refusedBelow.version) {
      const { message } = rule.refusedBelow;
      edit = (obj, key) => {
        if (obj[key]) throw new InvalidParameter(message);
      };
    }
    if (edit) applyRule(body, rule.field.split('.'), edit);
  }
  return body;
}

/** The versions a behaviour exists in: from `from` on, up to and including `until`. */
export interface VersionSpan {
  from?: ApiMinor;
  until?: ApiMinor;
}

/** Request parameters and behaviours of the API that exist only in some versions. */
export const BEHAVIOURS = {
  /** Websocket attach: messages are binary frames (text frames before). */
  'attach.ws.binaryFrames': { from: 28 },
  /** Websocket attach: the stdin, stdout and stderr parameters select the streams (all three before). */
  'attach.ws.streamSelection': { from: 42 },
  /** Build: aux messages (the image id) are sent in the stream. */
  'build.auxMessages': { from: 30 },
  /** The `platform` parameter of a pull. */
  'images.pull.platform': { from: 32 },
  /** The singular `filter` query parameter (a reference pattern) of the image list. */
  'images.list.filter': { until: 40 },
  /** Volume prune removes only anonymous volumes unless the `all` filter says otherwise. */
  'volumes.prune.anonymousOnly': { from: 42 },
  /** The `type` parameter of /system/df (limits the work to some types). */
  'system.df.type': { from: 42 },
  /** /system/df answers the lists (LayersSize, Images, Containers, Volumes, BuildCache). */
  'system.df.lists': { until: 51 },
  /** /system/df answers the lists too when not verbose. */
  'system.df.listsUnlessVerbose': { from: 52, until: 52 },
  /** /system/df answers the per-type summaries (ImageUsage...), with their Items when verbose. */
  'system.df.usage': { from: 52 },
  /** Events: the stream's content type is negotiated from Accept (x-ndjson, json-seq). */
  'events.contentTypes': { from: 52 },
  /** Events: `application/jsonl` is offered too. */
  'events.jsonl': { from: 53 },
  /** Plugins: the shape with Enabled and Settings (before: Active, Tag, Config as settings, Manifest). */
  'plugins.settingsShape': { from: 25 },
  /** Plugins: a pull installs in one call, all privileges granted, answering the privileges. */
  'plugins.pull.oneCall': { until: 24 },
} as const satisfies Record<string, VersionSpan>;

export type Behaviour = keyof typeof BEHAVIOURS;

/** Whether a behaviour exists at this version. */
export function supports(version: ApiMinor, behaviour: Behaviour): boolean {
  const span: VersionSpan = BEHAVIOURS[behaviour];
  return (span.from === undefined || version >= span.from) && (span.until === undefined || version <= span.until);
}

/**
 * A plugin object in the shape of the request's version: before 1.25 `{Id, Name, Tag, Active, Config (its
 * settings), Manifest (its config, ManifestVersion v0)}`; from it `{Id, Name, Enabled, Settings,
 * PluginReference, Config}`.
 */
export function pluginShape(version: ApiMinor, p: { Id: string; Name: string; Enabled: boolean; Settings: object; PluginReference: string; Config: object }): object {
  if (supports(version, 'plugins.settingsShape')) return p;
  const colon = p.Name.lastIndexOf(':');
  const tagged = colon > p.Name.lastIndexOf('/');
  return {
    Id: p.Id,
    Name: tagged ? p.Name.slice(0, colon) : p.Name,
    Tag: tagged ? p.Name.slice(colon + 1) : 'latest',
    Active: p.Enabled,
    Config: p.Settings,
    Manifest: { ManifestVersion: 'v0', ...p.Config },
  };
}
