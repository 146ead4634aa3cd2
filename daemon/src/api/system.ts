/**
 * System endpoints: GET/HEAD /_ping, GET /version, GET /info, GET /system/df.
 *
 * The handlers declare what they need of the engine and the host (SystemDeps) and shape the answer for
 * the requested API version through api/compat.
 */
import type { LocalSwarmStatus } from '../engine/cluster/cluster.js';
import type { HostInfo } from '../engine/system/facts.js';
import { nowNano, rfc3339Nano } from '../util/json.js';
import { ENGINE_VERSION, GIT_COMMIT } from '../version.js';
import { InvalidParameter } from '../errors.js';
import { shape, supports } from './compat.js';
import { boolParam } from './params.js';
import type { ApiRequest, ApiResponse } from './http.js';
import type { Router } from './router.js';
import { MAX_API_VERSION, MIN_API_VERSION } from './version.js';

export interface ContainerCounts {
  running: number;
  paused: number;
  /** Every container that is neither running nor paused (created, exited, dead...). */
  stopped: number;
}

/** What /info needs of the engine: counts of its objects. */
export interface SystemBackend {
  containerCounts(): ContainerCounts | Promise<ContainerCounts>;
  imageCount(): number | Promise<number>;
}

/** A component the engine runs on (an OCI runtime, conmon), as /version lists it. */
export interface ComponentVersion {
  name: string;
  version: string;
  commit?: string;
}

/** The local node's swarm state, as /info and /_ping report it. */
export type SwarmStatus = LocalSwarmStatus;

/** Disk use of images: every image summary (with Size and Containers), and the layers' total. */
export interface ImageDiskUsage {
  /** Bytes of all layers on disk, each counted once. */
  layersSize: number;
  /** Bytes of layers that no image in use by a container holds. */
  reclaimable: number;
  items: Array<Record<string, unknown> & { Size: number; Containers: number }>;
}

/** Disk use of containers: summaries with SizeRw and SizeRootFs. */
export interface ContainerDiskUsage {
  items: Array<Record<string, unknown> & { State: string; SizeRw?: number; SizeRootFs?: number }>;
}

/** Disk use of volumes: volumes with UsageData {Size, RefCount}. */
export interface VolumeDiskUsage {
  items: Array<Record<string, unknown> & { UsageData?: { Size: number; RefCount: number } | null }>;
}

/**
 * What GET /system/df asks of the engine. A resource whose service the engine does not run holds
 * nothing, and counts as empty.
 */
export interface DiskUsageBackend {
  images?(): Promise<ImageDiskUsage>;
  containers?(): Promise<ContainerDiskUsage>;
  volumes?(): Promise<VolumeDiskUsage>;
}

export interface SystemDeps {
  backend: SystemBackend;
  hostInfo(): Promise<HostInfo>;
  /** The OCI runtimes and conmon with their versions (cached by the caller: they do not change). */
  components(): Promise<ComponentVersion[]>;
  engineId: string;
  dataRoot: string;
  debug: boolean;
  /** RFC 3339 time the engine was built. */
  buildTime: string;
  /** Number of clients subscribed to /events right now. */
  eventListeners(): number;
  /** Open file descriptors of the daemon process. */
  openFds(): Promise<number>;
  /** The storage driver's status as label/value pairs. */
  driverStatus(): Promise<Array<[string, string]>>;
  /** Name of the firewall backend, or undefined when the engine does not touch the firewall. */
  firewallBackend?: string;
  defaultAddressPools?: Array<{ Base: string; Size: number }>;
  labels?: string[];
  swarm?(): SwarmStatus;
  diskUsage?: DiskUsageBackend;
  /** The RegistryConfig section of /info (insecure registries, mirrors). */
  registryConfig?(): Record<string, unknown>;
  /** What /info shows as InitBinary (its version is the `docker-init` component). */
  initBinary?: string;
  /** Volume drivers of enabled managed plugins, after `local` in Plugins.Volume. */
  volumePlugins?(): string[];
}

const INACTIVE_SWARM: SwarmStatus = {
  NodeID: '',
  NodeAddr: '',
  LocalNodeState: 'inactive',
  ControlAvailable: false,
  Error: '',
  RemoteManagers: null,
};

/** Node's process.arch as Go's GOARCH, which clients expect in /version. */
export function goArch(arch: string = process.arch): string {
  const map: Record<string, string> = { x64: 'amd64', ia32: '386', arm64: 'arm64', arm: 'arm', ppc64: 'ppc64le', s390x: 's390x', riscv64: 'riscv64', loong64: 'loong64', mips: 'mips', mipsel: 'mipsle' };
  return map[arch] ?? arch;
}

function swarmHeader(status: SwarmStatus): string {
  if (status.LocalNodeState !== 'active') return status.LocalNodeState;
  return status.ControlAvailable ? 'active/manager' : 'active/worker';
}

/** The swarm state the ping routes of each router report: the engine's, once registerSystemRoutes has it. */
const pingSwarm = new WeakMap<Router, () => SwarmStatus>();

/**
 * GET and HEAD /_ping. They need nothing of the engine's state, and are served while it is being restored
 * (a client's first request answers as soon as the daemon listens); their Swarm header follows the swarm
 * state given to registerSystemRoutes later (inactive until then).
 */
export function registerPingRoutes(router: Router): void {
  const ping = (req: ApiRequest, res: ApiResponse) => {
    const swarm = pingSwarm.get(router);
    const headers: Record<string, string | number> = {
      'Api-Version': MAX_API_VERSION,
      'Builder-Version': '1',
      'Docker-Experimental': 'false',
      Swarm: swarmHeader(swarm ? swarm() : INACTIVE_SWARM),
      'Cache-Control': 'no-cache, no-store, must-revalidate',
      Pragma: 'no-cache',
    };
    if (req.method === 'HEAD') {
      res.status(200, { ...headers, 'Content-Type': 'text/plain; charset=utf-8', 'Content-Length': 0 });
      return;
    }
    for (const [k, v] of Object.entries(headers)) res.raw.setHeader(k, v);
    res.text(200, 'OK');
  };
  router.get('/_ping', ping, { beforeReady: true });
  router.head('/_ping', ping, { beforeReady: true });
}

/** GET /version, GET /info and GET /system/df (the ping routes are registered apart: registerPingRoutes). */
export function registerSystemRoutes(router: Router, deps: SystemDeps): void {
  const swarm = () => (deps.swarm ? deps.swarm() : INACTIVE_SWARM);
  pingSwarm.set(router, swarm);

  // The version needs nothing of the state the engine restores at start: it is served meanwhile.
  router.get(
    '/version',
    async (req, res) => {
      res.json(200, shape('system.version', req.version, await buildVersion(deps)));
    },
    { beforeReady: true },
  );

  router.get('/info', async (req, res) => {
    res.json(200, shape('system.info', req.version, await buildInfo(deps, swarm())));
  });

  router.get('/system/df', async (req, res) => {
    res.json(200, await buildDiskUsage(deps.diskUsage ?? {}, req));
  });
}

const DF_TYPES = ['container', 'image', 'volume', 'build-cache'] as const;

/**
 * GET /system/df. Up to 1.51 the answer holds the lists (LayersSize, Images, Containers, Volumes,
 * BuildCache); 1.52 adds the per-type summaries (ImageUsage...) with their Items when verbose, and leaves
 * the lists out when verbose; 1.53 has only the summaries. `type` (from 1.42) limits the work to some
 * types.
 */
export async function buildDiskUsage(backend: DiskUsageBackend, req: ApiRequest): Promise<Record<string, unknown>> {
  const asked = supports(req.version, 'system.df.type') ? req.query.getAll('type').filter((t) => t !== '') : [];
  for (const t of asked) {
    if (!(DF_TYPES as readonly string[]).includes(t)) throw new InvalidParameter(`invalid type ${JSON.stringify(t)}: expected one of ${DF_TYPES.join(', ')}`);
  }
  const wants = (t: (typeof DF_TYPES)[number]) => asked.length === 0 || asked.includes(t);
  const verbose = boolParam(req, 'verbose');
  const [images, containers, volumes] = await Promise.all([
    wants('image') ? (backend.images?.() ?? { layersSize: 0, reclaimable: 0, items: [] }) : undefined,
    wants('container') ? (backend.containers?.() ?? { items: [] }) : undefined,
    wants('volume') ? (backend.volumes?.() ?? { items: [] }) : undefined,
  ]);
  const out: Record<string, unknown> = {};
  const legacy = supports(req.version, 'system.df.lists') || (supports(req.version, 'system.df.listsUnlessVerbose') && !verbose);
  if (legacy) {
    if (images) {
      out.LayersSize = images.layersSize;
      out.Images = shape('image.summary', req.version, images.items.map((i) => ({ ...i })));
    }
    if (containers) out.Containers = shape('container.summary', req.version, containers.items.map((c) => ({ ...c })));
    if (volumes) out.Volumes = shape('volume', req.version, volumes.items.map((v) => ({ ...v })));
    if (wants('build-cache')) out.BuildCache = [];
  }
  if (supports(req.version, 'system.df.usage')) {
    if (images) {
      out.ImageUsage = {
        ActiveCount: images.items.filter((i) => i.Containers > 0).length,
        TotalCount: images.items.length,
        Reclaimable: images.reclaimable,
        TotalSize: images.layersSize,
        ...(verbose ? { Items: shape('image.summary', req.version, images.items.map((i) => ({ ...i }))) } : {}),
      };
    }
    if (containers) {
      const active = containers.items.filter((c) => c.State === 'running' || c.State === 'paused');
      const total = containers.items.reduce((sum, c) => sum + (c.SizeRw ?? 0), 0);
      out.ContainerUsage = {
        ActiveCount: active.length,
        TotalCount: containers.items.length,
        Reclaimable: total - active.reduce((sum, c) => sum + (c.SizeRw ?? 0), 0),
        TotalSize: total,
        ...(verbose ? { Items: shape('container.summary', req.version, containers.items.map((c) => ({ ...c }))) } : {}),
      };
    }
    if (volumes) {
      const size = (v: VolumeDiskUsage['items'][number]) => Math.max(0, v.UsageData?.Size ?? 0);
      const unused = volumes.items.filter((v) => (v.UsageData?.RefCount ?? 0) === 0);
      out.VolumeUsage = {
        ActiveCount: volumes.items.length - unused.length,
        TotalCount: volumes.items.length,
        Reclaimable: unused.reduce((sum, v) => sum + size(v), 0),
        TotalSize: volumes.items.reduce((sum, v) => sum + size(v), 0),
        ...(verbose ? { Items: shape('volume', req.version, volumes.items.map((v) => ({ ...v }))) } : {}),
      };
    }
    if (wants('build-cache')) out.BuildCacheUsage = { ActiveCount: 0, TotalCount: 0, Reclaimable: 0, TotalSize: 0, ...(verbose ? { Items: [] } : {}) };
  }
  return out;
}

export async function buildVersion(deps: SystemDeps): Promise<Record<string, unknown>> {
  const host = await deps.hostInfo();
  const goVersion = `node ${process.version}`;
  const arch = goArch();
  const components: Array<{ Name: string; Version: string; Details: Record<string, string> }> = [
    {
      Name: 'Engine',
      Version: ENGINE_VERSION,
      Details: {
        ApiVersion: MAX_API_VERSION,
        Arch: arch,
        BuildTime: deps.buildTime,
        Experimental: 'false',
        GitCommit: GIT_COMMIT,
        GoVersion: goVersion,
        KernelVersion: host.kernelVersion,
        MinAPIVersion: MIN_API_VERSION,
        Os: 'linux',
      },
    },
  ];
  for (const c of await deps.components()) {
    components.push({ Name: c.name, Version: c.version, Details: { GitCommit: c.commit ?? '' } });
  }
  return {
    Platform: { Name: 'Berth Engine' },
    Components: components,
    Version: ENGINE_VERSION,
    ApiVersion: MAX_API_VERSION,
    MinAPIVersion: MIN_API_VERSION,
    GitCommit: GIT_COMMIT,
    GoVersion: goVersion,
    Os: 'linux',
    Arch: arch,
    KernelVersion: host.kernelVersion,
    BuildTime: deps.buildTime,
  };
}

function proxyEnv(name: string): string {
  return process.env[name] ?? process.env[name.toLowerCase()] ?? '';
}

export async function buildInfo(deps: SystemDeps, swarm: SwarmStatus): Promise<Record<string, unknown>> {
  const [host, counts, images, components, fds, driverStatus] = await Promise.all([
    deps.hostInfo(),
    deps.backend.containerCounts(),
    deps.backend.imageCount(),
    deps.components(),
    deps.openFds(),
    deps.driverStatus(),
  ]);
  const caps = host.capabilities;
  const defaultRuntime = components.find((c) => c.name === host.defaultRuntime);
  const init = components.find((c) => c.name === 'docker-init');
  const runtimes: Record<string, { path: string }> = {};
  for (const name of host.runtimes) runtimes[name] = { path: name };
  const warnings: string[] = [];
  if (caps && !caps.ipv4Forwarding) warnings.push('WARNING: IPv4 forwarding is disabled');
  if (caps && !caps.swapLimit) warnings.push('WARNING: No swap limit support');
  const info: Record<string, unknown> = {
    ID: deps.engineId,
    Containers: counts.running + counts.paused + counts.stopped,
    ContainersRunning: counts.running,
    ContainersPaused: counts.paused,
    ContainersStopped: counts.stopped,
    Images: images,
    Driver: host.storageDriver,
    DriverStatus: driverStatus,
    Plugins: {
      Volume: ['local', ...(deps.volumePlugins?.() ?? [])],
      Network: ['bridge', 'host', 'null'],
      Authorization: [],
      Log: ['json-file', 'none'],
    },
    MemoryLimit: caps?.memoryLimit ?? false,
    SwapLimit: caps?.swapLimit ?? false,
    CpuCfsPeriod: caps?.cpuCfsPeriod ?? false,
    CpuCfsQuota: caps?.cpuCfsQuota ?? false,
    CPUShares: caps?.cpuShares ?? false,
    CPUSet: caps?.cpuSet ?? false,
    PidsLimit: caps?.pidsLimit ?? false,
    OomKillDisable: caps?.oomKillDisable ?? false,
    IPv4Forwarding: caps?.ipv4Forwarding ?? false,
    BridgeNfIptables: false,
    BridgeNfIp6tables: false,
    Debug: deps.debug,
    NFd: fds,
    // No goroutines here: the count of the event loop's active handles and requests is the analogue.
    NGoroutines: process.getActiveResourcesInfo().length,
    SystemTime: rfc3339Nano(nowNano()),
    LoggingDriver: 'json-file',
    CgroupDriver: host.cgroupDriver,
    CgroupVersion: host.cgroupVersion,
    NEventsListener: deps.eventListeners(),
    KernelVersion: host.kernelVersion,
    OperatingSystem: host.operatingSystem,
    OSVersion: host.osVersion,
    OSType: host.osType,
    Architecture: host.architecture,
    IndexServerAddress: 'https://index.docker.io/v1/',
    RegistryConfig: deps.registryConfig?.() ?? {
      InsecureRegistryCIDRs: ['::1/128', '127.0.0.0/8'],
      IndexConfigs: { 'docker.io': { Name: 'docker.io', Mirrors: [], Secure: true, Official: true } },
      Mirrors: [],
    },
    NCPU: host.ncpu,
    MemTotal: host.memTotal,
    DockerRootDir: deps.dataRoot,
    HttpProxy: proxyEnv('HTTP_PROXY'),
    HttpsProxy: proxyEnv('HTTPS_PROXY'),
    NoProxy: proxyEnv('NO_PROXY'),
    Name: host.hostname,
    Labels: deps.labels ?? [],
    ExperimentalBuild: false,
    ServerVersion: ENGINE_VERSION,
    Runtimes: runtimes,
    DefaultRuntime: host.defaultRuntime,
    Swarm: swarm,
    // Containers run under conmon and survive a daemon restart.
    LiveRestoreEnabled: true,
    Isolation: '',
    InitBinary: deps.initBinary ?? '',
    ContainerdCommit: { ID: '' },
    RuncCommit: { ID: defaultRuntime?.commit ?? '' },
    // As dockerd: the git commit of tini's version line ("" for a build that has none), N/A when it cannot run.
    InitCommit: { ID: init ? init.commit ?? '' : deps.initBinary ? 'N/A' : '' },
    SecurityOptions: ['name=seccomp,profile=builtin', ...(host.cgroupVersion === '2' ? ['name=cgroupns'] : [])],
    DefaultAddressPools: deps.defaultAddressPools ?? [
      { Base: '172.17.0.0/16', Size: 16 },
      { Base: '172.18.0.0/16', Size: 16 },
      { Base: '172.19.0.0/16', Size: 16 },
      { Base: '172.20.0.0/14', Size: 16 },
      { Base: '172.24.0.0/14', Size: 16 },
      { Base: '172.28.0.0/14', Size: 16 },
      { Base: '192.168.0.0/16', Size: 20 },
    ],
    CDISpecDirs: [],
    Warnings: warnings,
  };
  if (deps.firewallBackend) info.FirewallBackend = { Driver: deps.firewallBackend };
  return info;
}
