/**
 * Composition: builds the host, the engine services and the API routes, and restores the engine's state.
 * Each part is constructed from the narrow interfaces of the parts below it. boot.ts loads this module once
 * the daemon listens, and holds the requests that need it until it is done.
 */
import { promises as fs } from 'node:fs';
import type http from 'node:http';
import { PassThrough, type Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { Router } from './api/router.js';
import { startDaemon as bootDaemon, type Daemon } from './boot.js';
import { EventBus } from './engine/events.js';
import { registerEventsRoutes } from './api/events.js';
import { registerNetworkRoutes } from './api/networks.js';
import { NetworkService } from './engine/networks/service.js';
import { containerConnector } from './engine/networks/connect.js';
import { LinuxNetworkHost } from './host/linux/network/linux-network-host.js';
import { LinuxSandboxHost } from './host/linux/network/sandbox.js';
import { SandboxService } from './engine/sandbox/service.js';
import type { ContainerRecord } from './engine/containers/model.js';
import { registerSystemRoutes, type ComponentVersion, type ContainerDiskUsage, type ImageDiskUsage, type SystemBackend } from './api/system.js';
import { containerSummary } from './engine/containers/views.js';
import { countOpenFds, loadEngineId, readComponentVersions, readDriverStatus, readHostInfo } from './host/linux/info.js';
import { fileURLToPath } from 'node:url';
import { log, type LogLevel } from './util/log.js';
import path from 'node:path';
import { registerImageRoutes } from './api/images.js';
import { registerDistributionRoutes } from './api/distribution.js';
import { ImageService } from './engine/images/service.js';
import { registerContainerRoutes } from './api/containers.js';
import { registerArchiveRoutes } from './api/archive.js';
import { ContainerFiles } from './engine/containers/archive.js';
import { registerStatsRoutes } from './api/stats.js';
import { ContainerStats } from './engine/containers/stats.js';
import { CgroupStats } from './host/linux/cgroups/stats.js';
import { registerContainerControlRoutes } from './api/control.js';
import { registerExecRoutes } from './api/exec.js';
import { registerAttachWsRoutes } from './api/attachws.js';
import { ExecService } from './engine/containers/exec.js';
import { HealthMonitor } from './engine/containers/health.js';
import { PauseService } from './engine/containers/pause.js';
import { topProcesses } from './engine/containers/top.js';
import { updateContainer } from './engine/containers/update.js';
import { pruneContainers } from './engine/containers/prune.js';
import { ContainerService } from './engine/containers/service.js';
import { LinuxHost } from './host/linux/index.js';
import { findInitBinary, readInitVersion } from './host/linux/init.js';
import { writebackAfterDeletions } from './host/linux/nojournal.js';
import { useAfterBatch } from './util/later.js';
import { setInitBinary } from './engine/containers/init.js';
import { nativeAtomicWriter, nativeFreshFilesWriter, nativeNewFileWriter, nativeReleaseMemory } from './host/linux/sys.js';
import { whenIdle } from './util/idle.js';
import { useAtomicWriter, useFreshFilesWriter, useNewFileWriter } from './util/atomic.js';
import { LinuxLayerStore } from './host/linux/layers/store.js';
import { registerBuildRoutes, type BuildBackend } from './api/build.js';
import { registerSwarmRoutes } from './api/swarm.js';
import { registerPluginRoutes } from './api/plugins.js';
import { CommitService } from './engine/containers/commit.js';
import { RUNTIME_MOUNT_POINTS } from './engine/containers/archive.js';
import { registerVolumeRoutes } from './api/volumes.js';
import { ContainerVolumes } from './engine/volumes/mounts.js';
import { VolumeService } from './engine/volumes/service.js';
import { PluginVolumeDrivers } from './engine/volumes/drivers.js';
import { DEFAULT_SOCKET_DIRS, DEFAULT_SPEC_DIRS, LegacyPlugins } from './engine/plugins/legacy.js';
import { PluginManager } from './engine/plugins/manager.js';
import { findExecutable } from './host/linux/runtime/ociruntime.js';
import { LinuxVolumeHost } from './host/linux/volumes/index.js';
import type { AuthStoreReader } from './engine/auth/store.js';
import { registerScimRoutes } from './api/scim.js';
import { registerSandboxRoutes } from './api/sandbox.js';
import { type ContainerFilesHost } from './host/host.js';

export interface DaemonOptions {
  hosts: string[];
  dataRoot: string;
  execRoot: string;
  pidfile: string;
  runtime: 'crun' | 'runc';
  /** `--init-path`: the init binary of containers with HostConfig.Init (default: looked up by name). */
  initPath?: string;
  corsOrigin?: string;
  bridgeName: string;
  bridgeCidr?: string;
  iptables: boolean;
  tls: boolean;
  tlsVerify: boolean;
  tlsCaCert?: string;
  tlsCert?: string;
  tlsKey?: string;
  logLevel: LogLevel;
  /** `--ui [ADDRESS]`: serve the renderer to a browser on a loopback address ('' = the default one). */
  ui?: string;
  /** `--registry-mirror`: mirrors of Docker Hub, tried first. */
  registryMirrors?: string[];
  /** `--insecure-registry`: registries (CIDR or host[:port]) reached over plain HTTP or unverified TLS; loopback always is. */
  insecureRegistries?: string[];
  /** `--auth-tokens`: the engine API on TCP listeners needs a bearer token (unix sockets stay as they are). */
  authTokens?: boolean;
}

export { UI_LOGIN_FILE, type Daemon } from './boot.js';

/**
 * The daemon started whole, for embedders (the Electron shell): resolves once it has restored its state, and
 * fails (releasing what it took) when it cannot start. berthd's own command line serves earlier (boot.ts).
 */
export async function startDaemon(opts: DaemonOptions): Promise<Daemon> {
  const daemon = await bootDaemon(opts);
  try {
    await daemon.ready;
  } catch (err) {
    await daemon.shutdown().catch(() => undefined);
    throw err;
  }
  return daemon;
}

/** What boot.ts gives the composition: the router it serves, the auth store it reads, and the closers to fill. */
export interface CompositionParts {
  router: Router;
  authStore: Pick<AuthStoreReader, 'user' | 'verify'>;
  /** Run in reverse order at shutdown. */
  closers: Array<() => Promise<void> | void>;
}

export interface Composition {
  /** Called for every request and upgrade of every listener. */
  onRequest?(req: http.IncomingMessage, res?: http.ServerResponse): void;
}

/** A stream that a promise gives later: its bytes, or its error. */
function streamLater(source: Promise<Readable>): Readable {
  const out = new PassThrough();
  // The error may come before the consumer listens: the stream keeps it (errored) for the consumer's
  // pipeline or iterator, and this listener keeps it from ending the process meanwhile.
  out.on('error', () => undefined);
  source.then(
    (stream) => pipeline(stream, out).catch((err: unknown) => out.destroy(err as Error)),
    (err: unknown) => out.destroy(err as Error),
  );
  return out;
}

/** A ContainerFilesHost whose implementation `load` gives at the first call. */
function lazyContainerFilesHost(load: () => Promise<ContainerFilesHost>): ContainerFilesHost {
  let loaded: Promise<ContainerFilesHost> | undefined;
  const get = () =>
    (loaded ??= load().catch((err: unknown) => {
      loaded = undefined;
      throw err;
    }));
  return {
    mountRootfs: async (id, lowerDirs) => (await get()).mountRootfs(id, lowerDirs),
    unmountRootfs: async (id) => (await get()).unmountRootfs(id),
    readFileFromLayers: async (lowerDirs, file) => (await get()).readFileFromLayers(lowerDirs, file),
    statPath: async (view, file) => (await get()).statPath(view, file),
    archivePath: async (view, file, signal) => (await get()).archivePath(view, file, signal),
    extractArchive: async (view, file, tar, opts) => (await get()).extractArchive(view, file, tar, opts),
    exportRootfs: (root, signal) => streamLater(get().then((h) => h.exportRootfs(root, signal))),
    changes: async (id, lowerDirs, ignoreAdded) => (await get()).changes(id, lowerDirs, ignoreAdded),
  };
}

/** Disk use of images for /system/df: each layer counted once; reclaimable is what no image in use holds. */
function imageDiskUsage(images: ImageService, layers: LinuxLayerStore): ImageDiskUsage {
  const items = images.list({ all: true, filters: new Map() }) as ImageDiskUsage['items'];
  const inUse = new Set(items.filter((i) => i.Containers > 0).map((i) => i.Id as string));
  const all = new Set<string>();
  const held = new Set<string>();
  for (const image of images.store.all()) {
    for (const chainId of image.chainIds) {
      all.add(chainId);
      if (inUse.has(image.id)) held.add(chainId);
    }
  }
  const size = (ids: Set<string>) => [...ids].reduce((sum, id) => sum + (layers.info(id)?.diskSize ?? 0), 0);
  return { layersSize: size(all), reclaimable: size(all) - size(held), items };
}

export async function composeDaemon(opts: DaemonOptions, { router, authStore, closers }: CompositionParts): Promise<Composition> {
  // Every state file is written by one native task of the thread pool when the addon is built.
  useAtomicWriter(nativeAtomicWriter());
  useNewFileWriter(nativeNewFileWriter());
  useFreshFilesWriter(nativeFreshFilesWriter());
  // Deleting files on ext without a journal leaves their inodes in the way of new files until written back.
  useAfterBatch(writebackAfterDeletions([opts.dataRoot, opts.execRoot]));

  const events = new EventBus();

  // -- engine services and their routes are wired below --
  void events;

  // Networks: the predefined networks and the default bridge (created or verified at every start, with the
  // rest of the state, once everything is wired: below). The container engine calls
  // networks.recover(liveContainerIds) once it knows which containers live.
  const networkHost = new LinuxNetworkHost();
  const networks = new NetworkService(networkHost, events, {
    dataRoot: opts.dataRoot,
    bridgeName: opts.bridgeName,
    bridgeCidr: opts.bridgeCidr,
    iptables: opts.iptables,
  });

  // Images: configurations, tags and layers under <data-root>/image. The container engine takes the
  // service as its ImageLookup & LayerFolders and gives back ImageUsers (images.setUsers).
  const imageRoot = path.join(opts.dataRoot, 'image');
  const layerStore = new LinuxLayerStore(imageRoot);
  const images = new ImageService(imageRoot, layerStore, events);
  // Registries: pull and push through the image service; login check and distribution inspect.
  const distribution = images.useRegistries({ mirrors: opts.registryMirrors, insecure: opts.insecureRegistries });
  registerImageRoutes(router, images);
  registerDistributionRoutes(router, distribution);

  // Containers: conmon and the OCI runtime on this machine; records under <data-root>/containers. Loading
  // reconciles them with what runs (reattach, exit codes of those that ended, crash leftovers, restarts).
  const host = new LinuxHost({ dataRoot: opts.dataRoot, execRoot: opts.execRoot, runtime: opts.runtime });
  for (const warning of host.warnings) log.warn(warning);
  // The init binary of containers started with HostConfig.Init; without one, only those fail to start.
  const initBinary = findInitBinary(opts.initPath);
  setInitBinary(initBinary);
  if (initBinary.problem) log.warn('containers with an init process cannot start', { reason: initBinary.problem });
  closers.push(() => host.close());
  // Legacy plugins, found by name in dockerd's folders (BERTH_PLUGIN_SOCKET_DIRS and BERTH_PLUGIN_SPEC_DIRS,
  // colon-separated lists, replace them), serve volume drivers beside the local one.
  const folders = (value: string | undefined, defaults: string[]) => (value === undefined ? defaults : value.split(':').filter((d) => d !== ''));
  const legacyPlugins = new LegacyPlugins({
    socketDirs: folders(process.env.BERTH_PLUGIN_SOCKET_DIRS, DEFAULT_SOCKET_DIRS),
    specDirs: folders(process.env.BERTH_PLUGIN_SPEC_DIRS, DEFAULT_SPEC_DIRS),
  });
  // Volumes of the local driver under <data-root>/volumes, and the records of the plugins' drivers' volumes;
  // the container engine says who uses them.
  // Managed plugins under <data-root>/plugins, run with the OCI runtime outside the containers list.
  const pluginManager = new PluginManager({
    dataRoot: opts.dataRoot,
    execRoot: opts.execRoot,
    runtimePath: findExecutable(host.containers.runtimeName) ?? host.containers.runtimeName,
    events,
  });
  const volumes = new VolumeService(opts.dataRoot, new LinuxVolumeHost(path.join(opts.dataRoot, 'volumes')), events, new PluginVolumeDrivers(legacyPlugins, pluginManager));
  pluginManager.usersOf = (name) => volumes.namesOfDriver(name);
  closers.push(() => pluginManager.close());
  pluginManager.registry = distribution.client;
  registerPluginRoutes(router, pluginManager);
  registerVolumeRoutes(router, volumes);
  // Sandboxes: egress network policies of containers, enforced in the kernel and fed by the embedded DNS.
  const sandboxes: SandboxService = new SandboxService(
    { find: (ref): ContainerRecord | undefined => containers.store.find(ref), dir: (id) => containers.store.dir(id), all: () => containers.store.all() },
    networks,
    new LinuxSandboxHost(),
  );
  networkHost.observeDns((id, name, records) => sandboxes.dnsAnswer(id, name, records));
  events.subscribe((event) => {
    const container = event.Actor.Attributes.container;
    if (event.Type === 'network' && event.Action === 'connect' && container) {
      void sandboxes.networkChanged(container).catch((err: unknown) => log.warn('a sandbox policy could not follow a network connect', { id: container, error: err instanceof Error ? err.message : String(err) }));
    }
  });
  const containers: ContainerService = new ContainerService({
    sandboxes,
    dataRoot: opts.dataRoot,
    host: host.containers,
    images,
    networking: networks,
    events,
    defaultRuntime: host.containers.runtimeName,
    volumes: new ContainerVolumes(volumes),
  });
  images.setUsers(containers);
  volumes.setUsers(containers);
  // Exec and health checks follow the containers' events from the first one on (load may restart some).
  const execs = new ExecService({
    containers: {
      get: (ref) => containers.get(ref),
      find: (id) => containers.store.find(id),
      containerEvent: (r, a, e) => containers.containerEvent(r, a, e),
      linkEnv: (r) => containers.linkEnv(r),
    },
    host: host.containers,
    lowerDirs: (chainIds) => images.lowerDirs(chainIds),
    events,
  });
  const health = new HealthMonitor({
    containers: {
      find: (id) => containers.store.find(id),
      all: () => containers.all(),
      serialised: (id, fn) => containers.serialised(id, fn),
      save: (record) => containers.store.save(record),
      containerEvent: (r, a, e) => containers.containerEvent(r, a, e),
    },
    execs,
    events,
  });
  closers.push(() => health.close());
  registerNetworkRoutes(router, networks, containerConnector(networks, {
    get: (ref) => containers.get(ref),
    configureNetworks: (id, change) => containers.configureNetworks(id, change),
  }));
  closers.push(() => containers.close());
  const containerSizes = async (record: ContainerRecord) => {
    const rw = await host.containers.writableLayerSize(record.Id);
    let imageSize = 0;
    try {
      imageSize = Number(images.inspect(record.Image).Size) || 0;
    } catch {
      // The image was removed by force: only the container's own files count.
    }
    return { rw, rootFs: rw + imageSize };
  };
  registerContainerRoutes(router, {
    containers,
    imageId: async (ref) => (await images.resolveForContainer(ref).catch(() => undefined))?.id,
    readLog: (record, o) =>
      host.containers.readLogBlocks(record.LogPath, { ...o, until: () => !record.State.Running && !record.State.Restarting }),
    sizes: containerSizes,
    prune: (filters) => pruneContainers({
      all: () => containers.all(),
      remove: (id, o) => containers.remove(id, o),
      ownSize: (record) => host.containers.writableLayerSize(record.Id),
      events,
    }, filters),
  });

  // Container verbs kept in their own files: exec, pause/unpause, update, top, and attach over websocket.
  const pauses = new PauseService(containers, host.containers);
  containers.afterSignal = (record, signal) => pauses.afterSignal(record, signal);
  registerExecRoutes(router, {
    create: (ref, body) => execs.create(ref, body),
    start: (id, o) => execs.start(id, o),
    checkStart: (id) => execs.checkStart(id),
    inspect: (id) => execs.inspect(id),
    resize: (id, h, w) => execs.resize(id, h, w),
    get: (id) => execs.get(id),
    detached: (id) => {
      const exec = execs.get(id);
      const record = containers.store.find(exec.config.ContainerID);
      if (record) containers.containerEvent(record, 'exec_detach', { execID: id });
    },
  });
  registerContainerControlRoutes(router, {
    pause: (ref) => pauses.pause(ref),
    unpause: (ref) => pauses.unpause(ref),
    update: (ref, body) => updateContainer(containers, host.containers, ref, body),
    top: (ref, psArgs) => topProcesses(containers, host.containers, ref, psArgs),
  });
  registerAttachWsRoutes(router, {
    containers,
    readLog: (record, o) =>
      host.containers.readLogBatches(record.LogPath, { ...o, until: () => !record.State.Running && !record.State.Restarting }),
  });

  // Container files: docker cp (archive), export and changes. Their host part (tar packing and unpacking, path
  // resolution in a container root) is loaded at its first use: an idle daemon does not carry it.
  const containerFiles = new ContainerFiles({
    containers: { get: (ref) => containers.get(ref), serialised: (id, fn) => containers.serialised(id, fn) },
    host: lazyContainerFilesHost(() => import('./host/linux/archive/index.js').then(({ LinuxContainerFiles }) => new LinuxContainerFiles(host.containers))),
    images,
    events,
  });
  registerArchiveRoutes(router, containerFiles);

  // Commit and build: images from a container's writable layer, and from a Dockerfile (RUN steps are
  // containers of the container engine, committed the same way). The layer's packer is loaded at its first use.
  const diffTar = (id: string, lowerDirs: string[], signal?: AbortSignal) =>
    streamLater(
      import('./host/linux/archive/diff.js').then(({ upperDiffTar }) =>
        upperDiffTar(path.join(host.containers.layout.containerDir(id), 'upper'), lowerDirs, RUNTIME_MOUNT_POINTS, signal),
      ),
    );
  const commits = new CommitService({
    containers: {
      get: (ref) => containers.get(ref),
      serialised: (id, fn) => containers.serialised(id, fn),
      containerEvent: (r, a, e) => containers.containerEvent(r, a, e),
      pause: (ref) => pauses.pause(ref),
      unpause: (ref) => pauses.unpause(ref),
    },
    images,
    host: { diffTar },
  });
  // The builder (its Dockerfile parser, context and copy code) is loaded at the first build: an idle daemon
  // does not carry it. Its scratch folder is emptied now, as what a build left there is garbage.
  const buildRoot = path.join(opts.dataRoot, 'build');
  await fs.rm(path.join(buildRoot, 'tmp'), { recursive: true, force: true });
  let loadedBuilder: Promise<BuildBackend> | undefined;
  const loadBuilder = () =>
    (loadedBuilder ??= import('./engine/build/builder.js').then(async ({ Builder }) => {
      const b = new Builder(buildRoot, {
        images,
        containers,
        host: { diffTar },
        pull: (ref, emit, signal, auth) => images.pull({ fromImage: ref, auth }, emit, signal ?? new AbortController().signal),
      });
      await b.init();
      return b;
    })).catch((err) => {
      loadedBuilder = undefined;
      throw err;
    });
  const builder: BuildBackend = {
    build: async (input, o, emit, signal) => (await loadBuilder()).build(input, o, emit, signal),
    prune: async (o) => (await loadBuilder()).prune(o),
  };
  registerBuildRoutes(router, { builder, commits });
  registerSwarmRoutes(router);
  // Container statistics from the cgroups.
  registerStatsRoutes(router, new ContainerStats({ containers: { get: (ref) => containers.get(ref) }, host: new CgroupStats() }));

  // System and events.
  const systemBackend: SystemBackend = {
    containerCounts: () => containers.counts(),
    imageCount: () => images.store.all().length,
  };
  const eventsApi = registerEventsRoutes(router, events);
  // The runtime in use: the one asked for, unless it cannot work on this host (the host falls back and warns).
  const runtimeInUse = host.containers.runtimeName;
  const hostInfoOptions = { runtimes: ['crun', 'runc'], defaultRuntime: runtimeInUse };
  let componentVersions: Promise<ComponentVersion[]> | undefined;
  registerSystemRoutes(router, {
    backend: systemBackend,
    hostInfo: () => readHostInfo(hostInfoOptions),
    components: () =>
      (componentVersions ??= Promise.all([
        readComponentVersions([runtimeInUse, runtimeInUse === 'crun' ? 'runc' : 'crun', 'conmon']),
        readInitVersion(initBinary),
      ]).then(([tools, init]) => (init ? [...tools, { name: 'docker-init', version: init.version, commit: init.commit }] : tools))),
    initBinary: initBinary.name,
    volumePlugins: () => pluginManager.enabledWith('volumedriver').map((p) => p.Name),
    engineId: await loadEngineId(opts.dataRoot),
    dataRoot: opts.dataRoot,
    debug: opts.logLevel === 'debug',
    buildTime: (await fs.stat(fileURLToPath(import.meta.url))).mtime.toISOString(),
    eventListeners: () => eventsApi.listeners(),
    openFds: () => countOpenFds(),
    driverStatus: () => readDriverStatus(opts.dataRoot),
    firewallBackend: opts.iptables ? 'iptables' : undefined,
    registryConfig: () => distribution.config.info(),
    diskUsage: {
      images: async () => imageDiskUsage(images, layerStore),
      volumes: async () => ({ items: (await volumes.usage()).map((v) => ({ ...v })) }),
      containers: async () => ({
        items: await Promise.all(
          containers.all().map(async (c) => containerSummary(c, c.Config.Image, await containerSizes(c)) as ContainerDiskUsage['items'][number]),
        ),
      }),
    },
  });

  // The SCIM user lookup in the users and API tokens (made by `berthd user` and `berthd token`).
  registerScimRoutes(router, { user: (id) => authStore.user(id) });
  registerSandboxRoutes(router, sandboxes);

  // Once no request has come or ended for a second, the memory a burst of requests made the daemon commit
  // goes back to the kernel: V8's heap pages it no longer uses (the old generation grew with what the burst
  // promoted, and V8 keeps free pages for later), and what malloc's arenas keep of freed buffers. After a
  // burst of container work they were 10 to 15 MB of the idle daemon's RSS. The collections take a few ms
  // of a daemon that has nothing else to do, at most once in 5 s (a client polling does not make it run more).
  const release = nativeReleaseMemory();
  const afterBurst = release ? whenIdle(release, 1000, 5000) : undefined;
  if (afterBurst) closers.push(() => afterBurst.close());
  // The state, restored once everything is wired (routes marked beforeReady, such as /version, serve
  // meanwhile): the default bridge, the images' layers, the managed plugins (enabled ones started), the volumes,
  // then the containers reconciled with what runs (reattached, exit codes of those that ended, crash leftovers,
  // restart policies applied), their sandboxes' policies, volume mounts and health checks.
  await networks.init();
  await images.init();
  await pluginManager.init();
  await volumes.init();
  await containers.load();
  await sandboxes.recover();
  await volumes.recover();
  health.recover();

  // The start was such a burst too (and the requests that waited for it were not counted).
  afterBurst?.touch();
  return {
    onRequest: afterBurst
      ? (req, res) => {
          afterBurst.touch();
          (res ?? req.socket).once('close', () => afterBurst.touch());
        }
      : undefined,
  };
}
