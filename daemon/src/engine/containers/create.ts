import path from 'node:path';
import { newId } from '../../util/ids.js';
import { nowNano, rfc3339Nano } from '../../util/json.js';
import { Conflict, InvalidParameter } from '../../errors.js';
import type { ImageForContainer } from '../images/types.js';
import { planOptions, type ContainerContext, type ContainerVolumeParts } from './context.js';
import { discardUnsupported } from './devices.js';
import { mergeHealthcheck } from './health.js';
import { checkLinks } from './linking.js';
import { verifyLogConfig } from './logconfig.js';
import { CONTAINER_FORMAT_VERSION, initialState, type ContainerConfig, type ContainerRecord, type HostConfig } from './model.js';
import { MASKED_PATHS, READONLY_PATHS } from './ocispec.js';
import { checkStorageOptions } from './storageopt.js';
import { parseBind, validateCreateBody, validateName } from './validate.js';
import { isAbsoluteHostPath } from '../../util/hostpath.js';

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

export async function create(ctx: ContainerContext, body: unknown, nameParam: string | undefined): Promise<{ Id: string; Warnings: string[] }> {
  validateCreateBody(body);
  const request = body as Record<string, any>;
  const name = nameParam ? validateName(nameParam) : generateName((n) => ctx.store.nameTaken(n) !== undefined);
  if (ctx.store.nameTaken(name)) {
    throw new Conflict(`Conflict. The container name "${name}" is already in use by container "${ctx.store.nameTaken(name)}". You have to remove (or rename) that container to be able to reuse that name.`);
  }
  const hc = (request.HostConfig ?? {}) as Record<string, any>;
  const warnings: string[] = [];
  checkUnsupported(ctx, request, hc);
  ctx.deps.sandboxes?.checkCreate(request.Labels, hc);
  warnings.push(...discardUnsupported(hc));
  // An unknown network is reported at start, as Docker does: a 404 from create would make the docker CLI
  // try to pull the image and hide the real error.
  const plan = ctx.networking.plan(hc.NetworkMode, request.NetworkingConfig, { ...planOptions(request, hc), deferUnknownNetwork: true });
  if (plan.mode === 'container') ctx.store.get(plan.container);
  for (const bind of (hc.Binds as string[] | null) ?? []) {
    const b = parseBind(bind);
    if (!b.volume) {
      if (!(await ctx.deps.probe.pathExists(b.source))) throw new InvalidParameter(`invalid mount config for type "bind": bind source path does not exist: ${b.source}`);
    }
  }
  for (const m of (hc.Mounts as Array<Record<string, any>> | null) ?? []) {
    if (m?.Type !== 'bind' || typeof m.Source !== 'string' || !isAbsoluteHostPath(m.Source) || m.BindOptions?.CreateMountpoint === true) continue;
    if (!(await ctx.deps.probe.pathExists(m.Source))) throw new InvalidParameter(`invalid mount config for type "bind": bind source path does not exist: ${m.Source}`);
  }
  const image = await ctx.images.resolveForContainer(request.Image);
  // After the image, as Docker: a missing image is the 404 the CLI pulls on, whatever the links say.
  const links = checkLinks(ctx, hc, name);
  const record = buildRecord(request, name, image, ctx.store.root);
  checkStorageOptions(hc.StorageOpt);
  if (!hc.Runtime) record.HostConfig.Runtime = ctx.deps.defaultRuntime;
  record.HostConfig.Links = links;
  if (record.Path === '') throw new InvalidParameter('no command specified: give Cmd or Entrypoint, or use an image that has one');
  record.Networks = ctx.networking.plannedNetworks(plan);
  let volumes: Awaited<ReturnType<ContainerVolumeParts['prepare']>> | undefined;
  if (ctx.deps.volumes) {
    volumes = await ctx.deps.volumes.prepare(request, image.config.Volumes, (ref) => ctx.store.get(ref));
    record.Mounts = volumes.mounts;
  } else {
    record.Mounts = ((hc.Binds as string[] | null) ?? []).map((bind) => {
      const b = parseBind(bind);
      return { Type: 'bind' as const, Source: b.source, Destination: b.destination, Mode: b.options.join(','), RW: !b.readOnly, Propagation: b.propagation };
    });
  }
  ctx.store.add(record);
  try {
    await ctx.store.create(record);
    // New volumes get the image's content at their place (from the container's root, mounted for the copy).
    if (volumes && volumes.copies.length > 0) {
      const rootfs = await ctx.host.mountRootfs(record.Id, ctx.images.lowerDirs(record.ImageChainIds));
      try {
        await ctx.deps.volumes!.populate(rootfs, volumes.copies);
      } finally {
        await ctx.host.unmountRootfs(record.Id);
      }
    }
  } catch (err) {
    await ctx.host.removeContainerFiles(record.Id).catch(() => undefined);
    await ctx.store.remove(record);
    await volumes?.undo();
    throw err;
  }
  ctx.publish(record, 'create');
  return { Id: record.Id, Warnings: warnings };
}

/** Features whose engine parts are not built yet answer a clear error instead of being ignored. */
function checkUnsupported(ctx: ContainerContext, request: Record<string, any>, hc: Record<string, any>): void {
  if (!ctx.deps.volumes) {
    for (const bind of (hc.Binds as string[] | null) ?? []) {
      if (parseBind(bind).volume) throw new InvalidParameter(`named volumes are not supported by this engine yet (HostConfig.Binds entry ${JSON.stringify(bind)})`);
    }
    if (request.Volumes && Object.keys(request.Volumes).length > 0) {
      throw new InvalidParameter('anonymous volumes (Config.Volumes) are not supported by this engine yet');
    }
    if ((hc.VolumesFrom ?? []).length > 0) throw new InvalidParameter('HostConfig.VolumesFrom is not supported by this engine yet');
  }
  for (const m of (hc.Mounts as Array<{ Type?: string }> | null) ?? []) {
    if (m.Type !== 'bind' && m.Type !== 'tmpfs' && !(m.Type === 'volume' && ctx.deps.volumes)) throw new InvalidParameter(`mounts of type ${JSON.stringify(m.Type)} are not supported by this engine yet`);
  }
}

