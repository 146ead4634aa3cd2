/**
 * Request bodies decoded the way Docker's Go server decodes them (encoding/json into its structs): a key
 * names the field whose name equals it, or else the field whose name equals it ignoring case (`memory` is
 * `Memory`, `CPURealtimePeriod` is `CpuRealtimePeriod`); keys that name no field are dropped; `null` is the
 * same as an absent field. Maps whose keys are data (Labels, ExposedPorts, EndpointsConfig, DriverOpts...)
 * keep their keys as given. Values are not checked here: a field of the wrong type reaches the validators
 * under its canonical name, which then name the problem.
 *
 * Each body type is a table of its fields' canonical names and shapes, below.
 */

/** How a value is decoded: kept as it is, a struct, a list or a map (keys kept) of some shape. */
export type Shape = 'value' | StructShape | { list: Shape } | { map: Shape };

export interface StructShape {
  fields: Record<string, Shape>;
}

const V = 'value' as const;
const struct = (fields: Record<string, Shape>): StructShape => ({ fields });
const list = (of: Shape): Shape => ({ list: of });
const map = (of: Shape): Shape => ({ map: of });
/** Fields of one shape each, from their names. */
const values = (...names: string[]): Record<string, Shape> => Object.fromEntries(names.map((n) => [n, V]));

const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);

/**
 * Field lookup of a struct: by exact name, else by lower-cased name (Go prefers the exact match, then takes
 * a case-insensitive one).
 */
const lookups = new WeakMap<StructShape, Map<string, string>>();
function canonicalName(shape: StructShape, key: string): string | undefined {
  if (Object.prototype.hasOwnProperty.call(shape.fields, key)) return key;
  let folded = lookups.get(shape);
  if (!folded) {
    folded = new Map();
    for (const name of Object.keys(shape.fields)) if (!folded.has(name.toLowerCase())) folded.set(name.toLowerCase(), name);
    lookups.set(shape, folded);
  }
  return folded.get(key.toLowerCase());
}

/**
 * Decodes a parsed JSON value into the canonical form of `shape`. Values that do not have the shape's
 * kind (a string where a struct is expected) are returned as they are, for the validators to refuse.
 */
export function decodeAs(value: unknown, shape: Shape): unknown {
  if (shape === 'value') return value;
  if ('fields' in shape) {
    if (!isObject(value)) return value;
    const out: Record<string, unknown> = {};
    for (const [key, v] of Object.entries(value)) {
      const name = canonicalName(shape, key);
      if (name === undefined) continue;
      // As in Go, a later key for the same field wins; null leaves the field at its zero value (absent).
      if (v === null) delete out[name];
      else out[name] = decodeAs(v, shape.fields[name]);
    }
    return out;
  }
  if ('list' in shape) return Array.isArray(value) ? value.map((v) => decodeAs(v, shape.list)) : value;
  // Object.fromEntries defines each key as an own property, so that a key such as `__proto__` stays data.
  return isObject(value) ? Object.fromEntries(Object.entries(value).map(([k, v]) => [k, decodeAs(v, shape.map)])) : value;
}

// ---- the body types ----

const healthConfig = struct(values('Test', 'Interval', 'Timeout', 'Retries', 'StartPeriod', 'StartInterval'));

/** Fields of Docker's container.Config (also the top level of a create body and a commit's config). */
const configFields: Record<string, Shape> = {
  ...values(
    'Hostname', 'Domainname', 'User', 'AttachStdin', 'AttachStdout', 'AttachStderr', 'Tty', 'OpenStdin',
    'StdinOnce', 'Env', 'Cmd', 'ArgsEscaped', 'Image', 'WorkingDir', 'Entrypoint', 'NetworkDisabled',
    'MacAddress', 'OnBuild', 'Labels', 'StopSignal', 'StopTimeout', 'Shell',
  ),
  ExposedPorts: map(struct({})),
  Volumes: map(struct({})),
  Healthcheck: healthConfig,
};

const throttleDevice = struct(values('Path', 'Rate'));
const weightDevice = struct(values('Path', 'Weight'));
const ulimit = struct(values('Name', 'Soft', 'Hard'));
const restartPolicy = struct(values('Name', 'MaximumRetryCount'));

/** Fields of Docker's container.Resources (part of HostConfig, and the body of an update). */
const resourceFields: Record<string, Shape> = {
  ...values(
    'CpuShares', 'Memory', 'NanoCpus', 'CgroupParent', 'BlkioWeight', 'CpuPeriod', 'CpuQuota',
    'CpuRealtimePeriod', 'CpuRealtimeRuntime', 'CpusetCpus', 'CpusetMems', 'DeviceCgroupRules', 'KernelMemory',
    'KernelMemoryTCP', 'MemoryReservation', 'MemorySwap', 'MemorySwappiness', 'OomKillDisable', 'PidsLimit',
    'CpuCount', 'CpuPercent', 'IOMaximumIOps', 'IOMaximumBandwidth',
  ),
  BlkioWeightDevice: list(weightDevice),
  BlkioDeviceReadBps: list(throttleDevice),
  BlkioDeviceWriteBps: list(throttleDevice),
  BlkioDeviceReadIOps: list(throttleDevice),
  BlkioDeviceWriteIOps: list(throttleDevice),
  Devices: list(struct(values('PathOnHost', 'PathInContainer', 'CgroupPermissions'))),
  DeviceRequests: list(struct(values('Driver', 'Count', 'DeviceIDs', 'Capabilities', 'Options'))),
  Ulimits: list(ulimit),
};

const mount = struct({
  ...values('Type', 'Source', 'Target', 'ReadOnly', 'Consistency'),
  BindOptions: struct(values('Propagation', 'NonRecursive', 'CreateMountpoint', 'ReadOnlyNonRecursive', 'ReadOnlyForceRecursive')),
  VolumeOptions: struct({ ...values('NoCopy', 'Labels', 'Subpath'), DriverConfig: struct(values('Name', 'Options')) }),
  ImageOptions: struct(values('Subpath')),
  TmpfsOptions: struct(values('SizeBytes', 'Mode', 'Options')),
});

export const HOST_CONFIG = struct({
  ...resourceFields,
  ...values(
    'Binds', 'ContainerIDFile', 'NetworkMode', 'AutoRemove', 'VolumeDriver', 'VolumesFrom', 'ConsoleSize',
    'Annotations', 'CapAdd', 'CapDrop', 'CgroupnsMode', 'Dns', 'DnsOptions', 'DnsSearch', 'ExtraHosts',
    'GroupAdd', 'IpcMode', 'Cgroup', 'Links', 'OomScoreAdj', 'PidMode', 'Privileged', 'PublishAllPorts',
    'ReadonlyRootfs', 'SecurityOpt', 'StorageOpt', 'Tmpfs', 'UTSMode', 'UsernsMode', 'ShmSize', 'Sysctls',
    'Runtime', 'Isolation', 'MaskedPaths', 'ReadonlyPaths', 'Init',
  ),
  LogConfig: struct(values('Type', 'Config')),
  PortBindings: map(list(struct(values('HostIp', 'HostPort')))),
  RestartPolicy: restartPolicy,
  Mounts: list(mount),
});

export const ENDPOINT_SETTINGS = struct({
  IPAMConfig: struct(values('IPv4Address', 'IPv6Address', 'LinkLocalIPs')),
  ...values(
    'Links', 'MacAddress', 'Aliases', 'DriverOpts', 'GwPriority', 'NetworkID', 'EndpointID', 'Gateway',
    'IPAddress', 'IPPrefixLen', 'IPv6Gateway', 'GlobalIPv6Address', 'GlobalIPv6PrefixLen', 'DNSNames',
  ),
});

/** POST /containers/create: Config's fields at the top, with HostConfig and NetworkingConfig. */
export const CONTAINER_CREATE = struct({
  ...configFields,
  HostConfig: HOST_CONFIG,
  NetworkingConfig: struct({ EndpointsConfig: map(ENDPOINT_SETTINGS) }),
});

/** The config of POST /commit. */
export const CONTAINER_CONFIG = struct(configFields);

/** POST /containers/{id}/update: the resources and the restart policy. */
export const CONTAINER_UPDATE = struct({ ...resourceFields, RestartPolicy: restartPolicy });

export const EXEC_CREATE = struct(values(
  'User', 'Privileged', 'Tty', 'ConsoleSize', 'AttachStdin', 'AttachStderr', 'AttachStdout', 'Detach',
  'DetachKeys', 'Env', 'WorkingDir', 'Cmd',
));

export const EXEC_START = struct(values('Detach', 'Tty', 'ConsoleSize'));

export const NETWORK_CREATE = struct({
  ...values('Name', 'CheckDuplicate', 'Driver', 'Scope', 'EnableIPv4', 'EnableIPv6', 'Internal', 'Attachable', 'Ingress', 'ConfigOnly', 'Options', 'Labels'),
  IPAM: struct({ ...values('Driver', 'Options'), Config: list(struct(values('Subnet', 'IPRange', 'Gateway', 'AuxiliaryAddresses'))) }),
  ConfigFrom: struct(values('Network')),
});

export const NETWORK_CONNECT = struct({ Container: V, EndpointConfig: ENDPOINT_SETTINGS });

export const NETWORK_DISCONNECT = struct(values('Container', 'Force'));

export const VOLUME_CREATE = struct(values('Name', 'Driver', 'DriverOpts', 'Labels', 'ClusterVolumeSpec'));
