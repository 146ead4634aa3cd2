import path from 'node:path';
import { newId } from '../../util/ids.js';
import { nowNano, rfc3339Nano } from '../../util/json.js';
import type { ImageForContainer } from '../images/types.js';
import { mergeHealthcheck } from './health.js';
import { verifyLogConfig } from './logconfig.js';
import { CONTAINER_FORMAT_VERSION, initialState, type ContainerConfig, type ContainerRecord, type HostConfig } from './model.js';
import { MASKED_PATHS, READONLY_PATHS } from './ocispec.js';

const toList = (v: unknown): string[] | null => (v === undefined || v === null ? null : typeof v === 'string' ? [v] : (v as string[]));

/** Env of the image, overridden key by key by the container's own. */
export function mergeEnv(imageEnv: string[] = [], own: string[] = []): string[] {
  const out = new Map<string, string>();
  for (const e of [...imageEnv, ...own]) {
    const key = e.split('=', 1)[0];
    out.set(key, e);
  }
  return [...out.values()];
}

/**
 * Builds the container record from a validated create body and its image: the image's config fills what
 * the body leaves out, as Docker merges them (an Entrypoint given by the caller drops the image's Cmd).
 */
export function buildRecord(body: Record<string, any>, name: string, image: ImageForContainer, containersRoot: string): ContainerRecord {
  const id = newId();
  const created = nowNano();
  const img = image.config;
  const bodyEntrypoint = body.Entrypoint === undefined ? undefined : toList(body.Entrypoint);
  const bodyCmd = body.Cmd === undefined ? undefined : toList(body.Cmd);
  // An explicit empty entrypoint ([] or "") clears the image's.
  const entrypoint = bodyEntrypoint !== undefined && bodyEntrypoint !== null ? (bodyEntrypoint.length === 1 && bodyEntrypoint[0] === '' ? null : bodyEntrypoint) : (img.Entrypoint ?? null);
  const cmd = bodyCmd !== undefined && bodyCmd !== null && bodyCmd.length > 0 ? bodyCmd : bodyEntrypoint ? null : (img.Cmd ?? null);
  const hc = (body.HostConfig ?? {}) as Record<string, any>;
  const networkMode = !hc.NetworkMode || hc.NetworkMode === 'default' ? 'bridge' : hc.NetworkMode;
  const hostname = body.Hostname || (networkMode === 'host' ? '' : id.slice(0, 12));
  const config: ContainerConfig = {
    Hostname: hostname,
    Domainname: body.Domainname ?? '',
    User: body.User || img.User || '',
    AttachStdin: body.AttachStdin ?? false,
    AttachStdout: body.AttachStdout ?? false,
    AttachStderr: body.AttachStderr ?? false,
    ExposedPorts: { ...(img.ExposedPorts ?? {}), ...(body.ExposedPorts ?? {}) },
    Tty: body.Tty ?? false,
    OpenStdin: body.OpenStdin ?? false,
    StdinOnce: body.StdinOnce ?? false,
    Env: mergeEnv(img.Env, body.Env ?? []),
    Cmd: cmd,
    Healthcheck: mergeHealthcheck(body.Healthcheck, img.Healthcheck),
    Image: body.Image,
    // As Docker: the image's volumes and the body's together.
    Volumes: body.Volumes || img.Volumes ? { ...(img.Volumes ?? {}), ...(body.Volumes ?? {}) } : null,
    WorkingDir: body.WorkingDir || img.WorkingDir || '',
    Entrypoint: entrypoint,
    OnBuild: img.OnBuild ?? null,
    Labels: { ...(img.Labels ?? {}), ...(body.Labels ?? {}) },
    StopSignal: body.StopSignal !== undefined && body.StopSignal !== '' ? String(body.StopSignal) : img.StopSignal,
    StopTimeout: body.StopTimeout ?? undefined,
    Shell: body.Shell ?? img.Shell,
  };
  if (config.ExposedPorts && Object.keys(config.ExposedPorts).length === 0) delete config.ExposedPorts;
  if (!config.Healthcheck) delete config.Healthcheck;
  if (!config.StopSignal) delete config.StopSignal;
  if (config.StopTimeout === undefined) delete config.StopTimeout;
  if (!config.Shell) delete config.Shell;
  if (body.NetworkDisabled) config.NetworkDisabled = true;
  if (body.MacAddress) config.MacAddress = body.MacAddress;

  const hostConfig: HostConfig = {
    Binds: null, ContainerIDFile: '', LogConfig: { Type: 'json-file', Config: {} }, PortBindings: {},
    RestartPolicy: { Name: 'no', MaximumRetryCount: 0 }, AutoRemove: false, VolumeDriver: '', VolumesFrom: null,
    ConsoleSize: [0, 0], CapAdd: null, CapDrop: null, CgroupnsMode: 'host', Dns: [], DnsOptions: [], DnsSearch: [],
    ExtraHosts: null, GroupAdd: null, IpcMode: 'private', Cgroup: '', Links: null, OomScoreAdj: 0, PidMode: '',
    Privileged: false, PublishAllPorts: false, ReadonlyRootfs: false, SecurityOpt: null, UTSMode: '', UsernsMode: '',
    ShmSize: 64 * 1024 * 1024, Runtime: 'crun', Isolation: '', CpuShares: 0, Memory: 0, NanoCpus: 0, CgroupParent: '',
    BlkioWeight: 0, BlkioWeightDevice: [], BlkioDeviceReadBps: [], BlkioDeviceWriteBps: [], BlkioDeviceReadIOps: [],
    BlkioDeviceWriteIOps: [], CpuPeriod: 0, CpuQuota: 0, CpuRealtimePeriod: 0, CpuRealtimeRuntime: 0, CpusetCpus: '',
    CpusetMems: '', Devices: [], DeviceCgroupRules: null, DeviceRequests: null, MemoryReservation: 0, MemorySwap: 0,
    MemorySwappiness: null, OomKillDisable: null, PidsLimit: null, Ulimits: [], CpuCount: 0, CpuPercent: 0,
    IOMaximumIOps: 0, IOMaximumBandwidth: 0, MaskedPaths: undefined, ReadonlyPaths: undefined,
    ...hc,
    NetworkMode: networkMode,
  } as HostConfig;
  if (!hostConfig.RestartPolicy.Name) hostConfig.RestartPolicy = { Name: 'no', MaximumRetryCount: hostConfig.RestartPolicy.MaximumRetryCount ?? 0 };
  if (hostConfig.ShmSize === 0) hostConfig.ShmSize = 64 * 1024 * 1024;
  // As Docker: an empty Type is the default driver, with the Config given.
  hostConfig.LogConfig = verifyLogConfig(hostConfig.LogConfig);
  // As dockerd: an empty cgroup namespace mode is the daemon's default, and a container that is not privileged
  // records the default masked and read-only paths when it names none (the real CLI sends "" and null).
  if (!hostConfig.CgroupnsMode) hostConfig.CgroupnsMode = 'host';
  if (hostConfig.MaskedPaths == null) {
    if (hostConfig.Privileged) delete hostConfig.MaskedPaths;
    else hostConfig.MaskedPaths = [...MASKED_PATHS];
  }
  if (hostConfig.ReadonlyPaths == null) {
    if (hostConfig.Privileged) delete hostConfig.ReadonlyPaths;
    else hostConfig.ReadonlyPaths = [...READONLY_PATHS];
  }

  const dir = path.join(containersRoot, id);
  const args = [...(entrypoint ?? []), ...(cmd ?? [])];
  return {
    FormatVersion: CONTAINER_FORMAT_VERSION,
    Id: id,
    Name: name,
    Created: rfc3339Nano(created),
    CreatedNano: created.toString(),
    Path: args[0] ?? '',
    Args: args.slice(1),
    Config: config,
    HostConfig: hostConfig,
    Image: image.id,
    ImageChainIds: image.chainIds,
    EndpointsConfig: (body.NetworkingConfig?.EndpointsConfig ?? {}) as ContainerRecord['EndpointsConfig'],
    State: initialState(),
    RestartCount: 0,
    Networks: {},
    Ports: {},
    Mounts: [],
    LogPath: path.join(dir, 'container.log'),
    ResolvConfPath: path.join(dir, 'resolv.conf'),
    HostnamePath: path.join(dir, 'hostname'),
    HostsPath: path.join(dir, 'hosts'),
    ExecIDs: null,
    ManuallyStopped: false,
  };
}

/** Generates a name like Docker's: adjective_surname. */
const LEFT = ['admiring', 'brave', 'calm', 'clever', 'eager', 'elastic', 'focused', 'gallant', 'happy', 'jolly', 'keen', 'lucid', 'modest', 'nifty', 'quirky', 'serene', 'sharp', 'tender', 'vibrant', 'zen'];
const RIGHT = ['albattani', 'babbage', 'curie', 'darwin', 'euclid', 'fermi', 'galileo', 'hopper', 'kepler', 'lovelace', 'meitner', 'newton', 'noether', 'pascal', 'ritchie', 'shannon', 'tesla', 'turing', 'wozniak', 'yalow'];

export function generateName(taken: (name: string) => boolean): string {
  for (let i = 0; ; i++) {
    const base = `${LEFT[Math.floor(Math.random() * LEFT.length)]}_${RIGHT[Math.floor(Math.random() * RIGHT.length)]}`;
    const name = `/${i < 10 ? base : `${base}${Math.floor(Math.random() * 100)}`}`;
    if (!taken(name)) return name;
  }
}
