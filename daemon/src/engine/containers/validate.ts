/**
 * Validation of the create body (`Config` with `HostConfig` and `NetworkingConfig`). Every check answers
 * InvalidParameter with a message that names the field and says what is wrong, so that clients can show it.
 */
import { InvalidParameter } from '../../errors.js';
import { HOST_PATH_STYLE, isAbsoluteHostPath, splitBind, type PathStyle } from '../../util/hostpath.js';
import { validateDeviceFields } from './devices.js';
import { parseSecurityOptions } from './seccomp.js';
import { hostRlimits } from '../machine.js';

type Kind = 'string' | 'bool' | 'int' | 'strings' | 'stringMap' | 'object' | 'array' | 'cmd' | 'intOrNull' | 'stringOrInt' | 'objectMap' | 'boolOrNull';

const CONFIG_FIELDS: Record<string, Kind> = {
  Hostname: 'string', Domainname: 'string', User: 'string', AttachStdin: 'bool', AttachStdout: 'bool',
  AttachStderr: 'bool', Tty: 'bool', OpenStdin: 'bool', StdinOnce: 'bool', Env: 'strings', Cmd: 'cmd',
  Entrypoint: 'cmd', Image: 'string', Labels: 'stringMap', Volumes: 'objectMap', WorkingDir: 'string',
  NetworkDisabled: 'bool', MacAddress: 'string', ExposedPorts: 'objectMap', StopSignal: 'stringOrInt',
  StopTimeout: 'intOrNull', Healthcheck: 'object', Shell: 'strings', OnBuild: 'strings', ArgsEscaped: 'bool',
};

const HOST_CONFIG_FIELDS: Record<string, Kind> = {
  Binds: 'strings', Tmpfs: 'stringMap', Links: 'strings', Memory: 'int', MemorySwap: 'int',
  MemoryReservation: 'int', KernelMemory: 'int', KernelMemoryTCP: 'int', NanoCpus: 'int', CpuPercent: 'int',
  CpuShares: 'int', CpuPeriod: 'int', CpuQuota: 'int', CpuRealtimePeriod: 'int', CpuRealtimeRuntime: 'int',
  CpuCount: 'int', CpusetCpus: 'string', CpusetMems: 'string', IOMaximumBandwidth: 'int', IOMaximumIOps: 'int',
  BlkioWeight: 'int', BlkioWeightDevice: 'array', BlkioDeviceReadBps: 'array', BlkioDeviceWriteBps: 'array',
  BlkioDeviceReadIOps: 'array', BlkioDeviceWriteIOps: 'array', MemorySwappiness: 'intOrNull',
  OomKillDisable: 'boolOrNull', OomScoreAdj: 'int', PidMode: 'string', PidsLimit: 'intOrNull',
  PortBindings: 'object', PublishAllPorts: 'bool', Privileged: 'bool', ReadonlyRootfs: 'bool', Dns: 'strings',
  DnsOptions: 'strings', DnsSearch: 'strings', ExtraHosts: 'strings', VolumesFrom: 'strings', CapAdd: 'strings',
  CapDrop: 'strings', GroupAdd: 'strings', RestartPolicy: 'object', UsernsMode: 'string', NetworkMode: 'string',
  Devices: 'array', DeviceRequests: 'array', DeviceCgroupRules: 'strings', Ulimits: 'array', Sysctls: 'stringMap',
  SecurityOpt: 'strings', StorageOpt: 'stringMap', LogConfig: 'object', CgroupParent: 'string',
  VolumeDriver: 'string', ShmSize: 'int', AutoRemove: 'bool', Mounts: 'array', IpcMode: 'string', UTSMode: 'string',
  Cgroup: 'string', Init: 'boolOrNull', ConsoleSize: 'array', Runtime: 'string', Isolation: 'string',
  CgroupnsMode: 'string', Annotations: 'stringMap', MaskedPaths: 'strings', ReadonlyPaths: 'strings',
  ContainerIDFile: 'string', ReadonlyPaths2: 'strings',
};

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'a list';
  return typeof value === 'object' ? 'an object' : `${typeof value} ${JSON.stringify(value)}`;
}

function fail(field: string, expected: string, value: unknown): never {
  throw new InvalidParameter(`invalid value for ${field}: expected ${expected}, got ${describe(value)}`);
}

function checkKind(field: string, kind: Kind, value: unknown): void {
  if (value === undefined) return;
  switch (kind) {
    case 'string':
      if (typeof value !== 'string') fail(field, 'a string', value);
      return;
    case 'bool':
      if (typeof value !== 'boolean') fail(field, 'a boolean', value);
      return;
    case 'boolOrNull':
      if (value !== null && typeof value !== 'boolean') fail(field, 'a boolean', value);
      return;
    case 'int':
      if (value === null) return;
      if (typeof value !== 'number' || !Number.isInteger(value)) fail(field, 'an integer', value);
      return;
    case 'intOrNull':
      if (value !== null && (typeof value !== 'number' || !Number.isInteger(value))) fail(field, 'an integer', value);
      return;
    case 'stringOrInt':
      if (typeof value !== 'string' && !(typeof value === 'number' && Number.isInteger(value))) fail(field, 'a string or an integer', value);
      return;
    case 'strings':
      if (value === null) return;
      if (!Array.isArray(value)) fail(field, 'a list of strings', value);
      value.forEach((v, i) => typeof v !== 'string' && fail(`${field}[${i}]`, 'a string', v));
      return;
    case 'cmd':
      if (value === null || typeof value === 'string') return;
      if (!Array.isArray(value)) fail(field, 'a string or a list of strings', value);
      value.forEach((v, i) => typeof v !== 'string' && fail(`${field}[${i}]`, 'a string', v));
      return;
    case 'stringMap':
      if (value === null) return;
      if (typeof value !== 'object' || Array.isArray(value)) fail(field, 'a map of strings', value);
      for (const [k, v] of Object.entries(value as object)) if (typeof v !== 'string') fail(`${field}.${k}`, 'a string', v);
      return;
    case 'objectMap':
      if (value === null) return;
      if (typeof value !== 'object' || Array.isArray(value)) fail(field, 'a map', value);
      for (const [k, v] of Object.entries(value as object)) if (v !== null && (typeof v !== 'object' || Array.isArray(v))) fail(`${field}.${k}`, 'an object', v);
      return;
    case 'object':
      if (value === null) return;
      if (typeof value !== 'object' || Array.isArray(value)) fail(field, 'an object', value);
      return;
    case 'array':
      if (value === null) return;
      if (!Array.isArray(value)) fail(field, 'a list', value);
      return;
  }
}

function checkFields(prefix: string, obj: Record<string, unknown>, table: Record<string, Kind>): void {
  for (const [key, kind] of Object.entries(table)) checkKind(`${prefix}${key}`, kind, obj[key]);
}

export const CONTAINER_NAME = /^\/?[a-zA-Z0-9][a-zA-Z0-9_.-]*$/;

export function validateName(name: string): string {
  if (!CONTAINER_NAME.test(name)) {
    throw new InvalidParameter(`Invalid container name (${name}), only [a-zA-Z0-9][a-zA-Z0-9_.-] are allowed`);
  }
  return name.startsWith('/') ? name : `/${name}`;
}

const HOSTNAME = /^[a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?(\.[a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?)*$/;

export const CAPABILITIES = [
  'CHOWN', 'DAC_OVERRIDE', 'DAC_READ_SEARCH', 'FOWNER', 'FSETID', 'KILL', 'SETGID', 'SETUID', 'SETPCAP',
  'LINUX_IMMUTABLE', 'NET_BIND_SERVICE', 'NET_BROADCAST', 'NET_ADMIN', 'NET_RAW', 'IPC_LOCK', 'IPC_OWNER',
  'SYS_MODULE', 'SYS_RAWIO', 'SYS_CHROOT', 'SYS_PTRACE', 'SYS_PACCT', 'SYS_ADMIN', 'SYS_BOOT', 'SYS_NICE',
  'SYS_RESOURCE', 'SYS_TIME', 'SYS_TTY_CONFIG', 'MKNOD', 'LEASE', 'AUDIT_WRITE', 'AUDIT_CONTROL', 'SETFCAP',
  'MAC_OVERRIDE', 'MAC_ADMIN', 'SYSLOG', 'WAKE_ALARM', 'BLOCK_SUSPEND', 'AUDIT_READ', 'PERFMON', 'BPF',
  'CHECKPOINT_RESTORE',
];

/** Normalises a capability name (`net_admin`, `CAP_NET_ADMIN`) to `CAP_NET_ADMIN`, or `ALL`. */
export function normaliseCapability(field: string, name: string): string {
  const upper = name.toUpperCase().replace(/^CAP_/, '');
  if (upper === 'ALL') return 'ALL';
  if (!CAPABILITIES.includes(upper)) throw new InvalidParameter(`invalid ${field}: unknown capability: "${name}"`);
  return `CAP_${upper}`;
}

const ULIMIT_NAMES: Record<string, string> = {
  core: 'RLIMIT_CORE', cpu: 'RLIMIT_CPU', data: 'RLIMIT_DATA', fsize: 'RLIMIT_FSIZE', locks: 'RLIMIT_LOCKS',
  memlock: 'RLIMIT_MEMLOCK', msgqueue: 'RLIMIT_MSGQUEUE', nice: 'RLIMIT_NICE', nofile: 'RLIMIT_NOFILE',
  nproc: 'RLIMIT_NPROC', rss: 'RLIMIT_RSS', rtprio: 'RLIMIT_RTPRIO', rttime: 'RLIMIT_RTTIME',
  sigpending: 'RLIMIT_SIGPENDING', stack: 'RLIMIT_STACK', as: 'RLIMIT_AS',
};

export interface Ulimit {
  type: string;
  soft: number;
  hard: number;
}

export function validateUlimits(raw: unknown[] | null | undefined): Ulimit[] {
  const host = hostRlimits();
  return (raw ?? []).map((u, i) => {
    const field = `HostConfig.Ulimits[${i}]`;
    if (!u || typeof u !== 'object') fail(field, 'an object {Name, Soft, Hard}', u);
    const { Name, Soft, Hard } = u as { Name?: unknown; Soft?: unknown; Hard?: unknown };
    if (typeof Name !== 'string' || !(Name in ULIMIT_NAMES)) throw new InvalidParameter(`invalid ${field}.Name: unknown ulimit ${JSON.stringify(Name)}`);
    checkKind(`${field}.Soft`, 'int', Soft);
    checkKind(`${field}.Hard`, 'int', Hard);
    const soft = Number(Soft ?? 0);
    const hard = Number(Hard ?? 0);
    if (soft < 0 || hard < 0) throw new InvalidParameter(`invalid ulimit ${Name}: values must not be negative`);
    if (soft > hard) throw new InvalidParameter(`invalid ulimit ${Name}: soft limit ${soft} is larger than hard limit ${hard}`);
    const type = ULIMIT_NAMES[Name];
    const limit = host.get(type);
    if (limit && hard > limit.hard) {
      throw new InvalidParameter(`ulimit ${Name}=${soft}:${hard} exceeds what this host allows (hard limit ${limit.hard})`);
    }
    return { type, soft, hard };
  });
}

const SIGNALS: Record<string, number> = {
  HUP: 1, INT: 2, QUIT: 3, ILL: 4, TRAP: 5, ABRT: 6, IOT: 6, BUS: 7, FPE: 8, KILL: 9, USR1: 10, SEGV: 11,
  USR2: 12, PIPE: 13, ALRM: 14, TERM: 15, STKFLT: 16, CHLD: 17, CONT: 18, STOP: 19, TSTP: 20, TTIN: 21,
  TTOU: 22, URG: 23, XCPU: 24, XFSZ: 25, VTALRM: 26, PROF: 27, WINCH: 28, IO: 29, POLL: 29, PWR: 30, SYS: 31,
};

/** Parses a signal as the API gives it: a number, `KILL`, `SIGKILL`, or `SIGRTMIN+3`. */
export function parseSignal(text: string | number, field = 'signal'): number {
  if (typeof text === 'number' || /^\d+$/.test(text)) {
    const n = Number(text);
    if (n < 1 || n > 64) throw new InvalidParameter(`invalid ${field}: signal number ${n} is out of range`);
    return n;
  }
  const name = text.toUpperCase().replace(/^SIG/, '');
  if (name in SIGNALS) return SIGNALS[name];
  const rt = /^RTMIN(?:\+(\d+))?$/.exec(name) ?? /^RTMAX(?:-(\d+))?$/.exec(name);
  if (rt) {
    const n = name.startsWith('RTMIN') ? 34 + Number(rt[1] ?? 0) : 64 - Number(rt[1] ?? 0);
    if (n >= 34 && n <= 64) return n;
  }
  throw new InvalidParameter(`invalid ${field}: ${JSON.stringify(text)} is not a signal`);
}

export function signalName(n: number): string {
  const name = Object.entries(SIGNALS).find(([, v]) => v === n)?.[0];
  return name ? `SIG${name}` : String(n);
}

const MIN_MEMORY = 6 * 1024 * 1024;
const PORT_KEY = /^(\d{1,5})(?:-(\d{1,5}))?(?:\/(tcp|udp|sctp))?$/;

function checkPortKey(field: string, key: string): void {
  const m = PORT_KEY.exec(key);
  if (!m) throw new InvalidParameter(`invalid ${field}: ${JSON.stringify(key)} is not a port, expected <port>[/tcp|udp|sctp]`);
  for (const p of [m[1], m[2]]) {
    if (p !== undefined && (Number(p) < 1 || Number(p) > 65535)) throw new InvalidParameter(`invalid ${field}: port ${p} is out of range 1-65535`);
  }
}

const DURATION_FIELDS = ['Interval', 'Timeout', 'StartPeriod', 'StartInterval'] as const;

export function validateHealthcheck(hc: Record<string, unknown>, field = 'Healthcheck'): void {
  checkKind(`${field}.Test`, 'strings', hc.Test);
  for (const key of DURATION_FIELDS) {
    const v = hc[key];
    checkKind(`${field}.${key}`, 'int', v);
    if (typeof v === 'number' && v !== 0 && v < 1_000_000) {
      throw new InvalidParameter(`${field}.${key} in healthcheck cannot be less than 1ms`);
    }
    if (typeof v === 'number' && v < 0) throw new InvalidParameter(`${field}.${key} in healthcheck cannot be negative`);
  }
  checkKind(`${field}.Retries`, 'int', hc.Retries);
  if (typeof hc.Retries === 'number' && hc.Retries < 0) throw new InvalidParameter(`${field}.Retries in healthcheck cannot be negative`);
  const test = hc.Test as string[] | undefined;
  if (test && test.length > 0 && !['NONE', 'CMD', 'CMD-SHELL'].includes(test[0])) {
    throw new InvalidParameter(`${field}.Test must start with NONE, CMD or CMD-SHELL, got ${JSON.stringify(test[0])}`);
  }
}

// Control characters (a newline above all) in a value written into a file of the container (resolv.conf,
// hosts, hostname) would add lines of the client's choosing to it.
const CONTROL_CHARACTER = /[\u0000-\u001f\u007f]/;

/** Refuses a value bound for one of the container's files when it holds a control character. */
export function checkFileValue(field: string, value: unknown): void {
  if (typeof value === 'string' && CONTROL_CHARACTER.test(value)) {
    throw new InvalidParameter(`invalid ${field} ${JSON.stringify(value)}: control characters such as newlines are not allowed`);
  }
}

/** The same for each string of a list. */
function checkFileValues(field: string, values: unknown): void {
  if (Array.isArray(values)) values.forEach((v, i) => checkFileValue(`${field}[${i}]`, v));
}

/**
 * Checks the fields of a network endpoint's settings that reach the container's hosts file or the
 * embedded DNS (create's EndpointsConfig entries, network connect's EndpointConfig).
 */
export function validateEndpointNames(field: string, endpoint: unknown): void {
  if (endpoint === null || typeof endpoint !== 'object' || Array.isArray(endpoint)) return;
  const e = endpoint as Record<string, unknown>;
  for (const key of ['Aliases', 'Links', 'DNSNames']) checkFileValues(`${field}.${key}`, e[key]);
}

/** Checks every field of the create body; throws InvalidParameter naming the first bad one. */
export function validateCreateBody(body: unknown, style: PathStyle = HOST_PATH_STYLE): void {
  if (body === undefined || body === null) throw new InvalidParameter('the create request needs a JSON body with at least Image');
  if (typeof body !== 'object' || Array.isArray(body)) fail('the request body', 'a JSON object', body);
  const config = body as Record<string, unknown>;
  checkFields('', config, CONFIG_FIELDS);
  checkKind('HostConfig', 'object', config.HostConfig);
  checkKind('NetworkingConfig', 'object', config.NetworkingConfig);
  if (typeof config.Image !== 'string' || config.Image === '') throw new InvalidParameter('Config.Image is required: name the image to create the container from');
  checkFileValue('Hostname', config.Hostname);
  checkFileValue('Domainname', config.Domainname);
  if (typeof config.Hostname === 'string' && config.Hostname !== '' && (config.Hostname.length > 255 || !HOSTNAME.test(config.Hostname))) {
    throw new InvalidParameter(`invalid Hostname ${JSON.stringify(config.Hostname)}: not a valid RFC 1123 hostname`);
  }
  if (typeof config.WorkingDir === 'string' && config.WorkingDir !== '' && !config.WorkingDir.startsWith('/')) {
    throw new InvalidParameter(`the working directory '${config.WorkingDir}' is invalid, it needs to be an absolute path`);
  }
  if (config.StopSignal !== undefined && config.StopSignal !== '') parseSignal(config.StopSignal as string | number, 'StopSignal');
  for (const key of Object.keys((config.ExposedPorts as object | null) ?? {})) checkPortKey('ExposedPorts', key);
  if (config.Healthcheck) validateHealthcheck(config.Healthcheck as Record<string, unknown>);
  if (Array.isArray(config.Env)) {
    for (const e of config.Env as string[]) if (e === '' || e.startsWith('=')) throw new InvalidParameter(`invalid environment variable: ${JSON.stringify(e)}`);
  }

  const hc = (config.HostConfig ?? {}) as Record<string, unknown>;
  checkFields('HostConfig.', hc, HOST_CONFIG_FIELDS);
  const num = (k: string) => (typeof hc[k] === 'number' ? (hc[k] as number) : undefined);
  const memory = num('Memory') ?? 0;
  if (memory < 0) throw new InvalidParameter('invalid HostConfig.Memory: must not be negative');
  if (memory > 0 && memory < MIN_MEMORY) throw new InvalidParameter('Minimum memory limit allowed is 6MB');
  const swap = num('MemorySwap') ?? 0;
  if (swap > 0 && memory === 0) throw new InvalidParameter('You should always set the Memory limit when using Memoryswap limit');
  if (swap > 0 && swap < memory) throw new InvalidParameter('Minimum memoryswap limit should be larger than memory limit, see usage');
  if (swap < -1) throw new InvalidParameter('invalid HostConfig.MemorySwap: must be -1 (unlimited) or at least Memory');
  const reservation = num('MemoryReservation') ?? 0;
  if (reservation < 0) throw new InvalidParameter('invalid HostConfig.MemoryReservation: must not be negative');
  if (memory > 0 && reservation > memory) throw new InvalidParameter('Minimum memory limit can not be less than memory reservation limit, see usage');
  const swappiness = num('MemorySwappiness');
  if (swappiness !== undefined && swappiness !== -1 && (swappiness < 0 || swappiness > 100)) {
    throw new InvalidParameter(`Invalid value: ${swappiness}, valid memory swappiness range is 0-100`);
  }
  const blkio = num('BlkioWeight') ?? 0;
  if (blkio !== 0 && (blkio < 10 || blkio > 1000)) throw new InvalidParameter('Range of blkio weight is from 10 to 1000');
  const oom = num('OomScoreAdj') ?? 0;
  if (oom < -1000 || oom > 1000) throw new InvalidParameter(`Invalid value ${oom}, range for oom score adj is [-1000, 1000]`);
  const shm = num('ShmSize') ?? 0;
  if (shm < 0) throw new InvalidParameter('SHM size can not be less than 0');
  const shares = num('CpuShares') ?? 0;
  if (shares < 0) throw new InvalidParameter('invalid HostConfig.CpuShares: must not be negative');
  const period = num('CpuPeriod') ?? 0;
  if (period !== 0 && (period < 1000 || period > 1_000_000)) throw new InvalidParameter('CPU cfs period can not be less than 1ms (i.e. 1000) or larger than 1s (i.e. 1000000)');
  const quota = num('CpuQuota') ?? 0;
  if (quota > 0 && quota < 1000) throw new InvalidParameter('CPU cfs quota can not be less than 1ms (i.e. 1000)');
  const nano = num('NanoCpus') ?? 0;
  if (nano < 0) throw new InvalidParameter('invalid HostConfig.NanoCpus: must not be negative');
  if (nano > 0 && (period > 0 || quota > 0)) throw new InvalidParameter('Conflicting options: Nano CPUs and CPU Period cannot both be set');
  const pids = num('PidsLimit');
  if (pids !== undefined && pids < -1) throw new InvalidParameter('invalid HostConfig.PidsLimit: must be -1 (unlimited), 0 or positive');
  for (const key of ['CpusetCpus', 'CpusetMems']) {
    const v = hc[key];
    if (typeof v === 'string' && v !== '' && !/^\d+(-\d+)?(,\d+(-\d+)?)*$/.test(v)) {
      throw new InvalidParameter(`invalid HostConfig.${key}: ${JSON.stringify(v)} is not a list of CPUs or nodes such as 0-2,4`);
    }
  }
  for (const key of ['CapAdd', 'CapDrop']) for (const cap of (hc[key] as string[] | null) ?? []) normaliseCapability(`HostConfig.${key}`, cap);
  validateUlimits(hc.Ulimits as unknown[] | null);
  validateDeviceFields(hc);
  parseSecurityOptions(hc.SecurityOpt as string[] | null);

  const policy = (hc.RestartPolicy ?? {}) as { Name?: unknown; MaximumRetryCount?: unknown };
  checkKind('HostConfig.RestartPolicy.Name', 'string', policy.Name);
  checkKind('HostConfig.RestartPolicy.MaximumRetryCount', 'int', policy.MaximumRetryCount);
  const policyName = (policy.Name as string | undefined) ?? '';
  if (!['', 'no', 'always', 'unless-stopped', 'on-failure'].includes(policyName)) {
    throw new InvalidParameter(`invalid restart policy: unknown policy '${policyName}'; use one of 'no', 'always', 'unless-stopped', or 'on-failure'`);
  }
  const retries = (policy.MaximumRetryCount as number | undefined) ?? 0;
  if (retries < 0) throw new InvalidParameter('invalid restart policy: maximum retry count cannot be negative');
  if (retries > 0 && policyName !== 'on-failure') throw new InvalidParameter(`invalid restart policy: maximum retry count can only be used with 'on-failure'`);
  if (hc.AutoRemove === true && policyName !== '' && policyName !== 'no') {
    throw new InvalidParameter(`can't create 'AutoRemove' container with restart policy`);
  }

  for (const key of Object.keys((hc.PortBindings as object | null) ?? {})) {
    checkPortKey('HostConfig.PortBindings', key);
    const bindings = (hc.PortBindings as Record<string, unknown>)[key];
    if (bindings !== null && !Array.isArray(bindings)) fail(`HostConfig.PortBindings.${key}`, 'a list of {HostIp, HostPort}', bindings);
    for (const b of (bindings as Array<Record<string, unknown>> | null) ?? []) {
      const hostPort = b?.HostPort;
      if (hostPort !== undefined && hostPort !== '' && (typeof hostPort !== 'string' || !/^\d{1,5}(-\d{1,5})?$/.test(hostPort) || hostPort.split('-').some((p) => Number(p) > 65535))) {
        throw new InvalidParameter(`invalid HostConfig.PortBindings.${key}: host port ${JSON.stringify(hostPort)} is not a port number between 0 and 65535`);
      }
    }
  }
  for (const bind of (hc.Binds as string[] | null) ?? []) parseBind(bind, style);
  for (const [i, m] of ((hc.Mounts as unknown[] | null) ?? []).entries()) {
    if (m === null || typeof m !== 'object' || Array.isArray(m)) fail(`HostConfig.Mounts[${i}]`, 'an object with Type, Source and Target', m);
    const { Type: type, Source: source } = m as { Type?: unknown; Source?: unknown };
    checkKind(`HostConfig.Mounts[${i}].Type`, 'string', type);
    if (type === 'bind' && (typeof source !== 'string' || !isAbsoluteHostPath(source, style))) {
      // Docker's words, naming the source as given.
      throw new InvalidParameter(`invalid mount config for type "bind": invalid mount path: '${typeof source === 'string' ? source : ''}' mount path must be absolute`);
    }
  }
  for (const [dest] of Object.entries((hc.Tmpfs as Record<string, string> | null) ?? {})) {
    if (!dest.startsWith('/')) throw new InvalidParameter(`invalid HostConfig.Tmpfs: mount path ${JSON.stringify(dest)} must be absolute`);
  }
  for (const key of ['Dns', 'DnsSearch', 'DnsOptions', 'ExtraHosts', 'Links']) checkFileValues(`HostConfig.${key}`, hc[key]);
  for (const host of (hc.ExtraHosts as string[] | null) ?? []) {
    if (!/^[^:\s]+[:=]\S+$/.test(host)) throw new InvalidParameter(`invalid HostConfig.ExtraHosts entry ${JSON.stringify(host)}: expected host:ip`);
  }
  // LogConfig is checked after the image is found, as Docker does (logconfig.ts).
  if (typeof hc.Runtime === 'string' && hc.Runtime !== '' && !['crun', 'runc'].includes(hc.Runtime)) {
    throw new InvalidParameter(`unknown or invalid runtime name: ${hc.Runtime}`);
  }
  const net = config.NetworkingConfig as { EndpointsConfig?: unknown } | undefined;
  if (net?.EndpointsConfig !== undefined) checkKind('NetworkingConfig.EndpointsConfig', 'objectMap', net.EndpointsConfig);
  for (const [name, endpoint] of Object.entries((net?.EndpointsConfig as object | null) ?? {})) validateEndpointNames(`NetworkingConfig.EndpointsConfig.${name}`, endpoint);
}

export interface BindSpec {
  source: string;
  destination: string;
  readOnly: boolean;
  /** Named volume rather than a host path. */
  volume: boolean;
  propagation: string;
  options: string[];
}

/**
 * Parses a Binds entry: `src:dest[:options]`; src is an absolute path of the daemon's machine (on Windows
 * also `C:\src`, `//c/src`: util/hostpath.ts) or a volume name.
 */
export function parseBind(bind: string, style: PathStyle = HOST_PATH_STYLE): BindSpec {
  const parts = splitBind(bind, style);
  if (parts.length < 2 || parts.length > 3 || parts[0] === '' || parts[1] === '') {
    throw new InvalidParameter(`invalid HostConfig.Binds entry ${JSON.stringify(bind)}: expected host-src:container-dest[:options]`);
  }
  const [source, destination, opts = ''] = parts;
  if (!destination.startsWith('/')) throw new InvalidParameter(`invalid HostConfig.Binds entry ${JSON.stringify(bind)}: the container path must be absolute`);
  if (destination === '/') throw new InvalidParameter(`invalid HostConfig.Binds entry ${JSON.stringify(bind)}: cannot mount over /`);
  const options = opts === '' ? [] : opts.split(',');
  let readOnly = false;
  let propagation = 'rprivate';
  for (const o of options) {
    if (o === 'ro') readOnly = true;
    else if (o === 'rw') readOnly = false;
    else if (['private', 'rprivate', 'shared', 'rshared', 'slave', 'rslave'].includes(o)) propagation = o;
    else if (!['z', 'Z', 'nocopy', 'consistent', 'cached', 'delegated'].includes(o)) {
      throw new InvalidParameter(`invalid HostConfig.Binds entry ${JSON.stringify(bind)}: unknown option ${JSON.stringify(o)}`);
    }
  }
  const volume = !isAbsoluteHostPath(source, style);
  if (volume && !/^[a-zA-Z0-9][a-zA-Z0-9_.-]+$/.test(source)) {
    throw new InvalidParameter(`invalid HostConfig.Binds entry ${JSON.stringify(bind)}: ${JSON.stringify(source)} is neither an absolute path nor a valid volume name`);
  }
  return { source, destination, readOnly, volume, propagation, options };
}

/** A ConsoleSize value ([height, width], each 0 to 65535); null when absent. */
export function parseConsoleSize(value: unknown): [number, number] | null {
  if (value === undefined || value === null) return null;
  if (!Array.isArray(value) || value.length !== 2 || !value.every((n) => Number.isInteger(n) && n >= 0 && n <= 65535)) {
    throw new InvalidParameter('invalid value for ConsoleSize: expected [height, width] with whole numbers from 0 to 65535');
  }
  return [value[0] as number, value[1] as number];
}
