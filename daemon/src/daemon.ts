/**
 * Composition: builds the host, the engine services and the API routes, and restores the engine's state.
 * Each part is constructed from the narrow interfaces of the parts below it. boot.ts loads this module once
 * the daemon listens, and holds the requests that need it until it is done.
 */
import { promises as fs } from 'node:fs';
import type http from 'node:http';
import type { Router } from './api/router.js';
import { EventBus } from './engine/events.js';
import { registerEventsRoutes } from './api/events.js';
import { registerNetworkRoutes } from './api/networks.js';
import { NetworkService } from './engine/networks/service.js';
import { containerConnector } from './engine/networks/connect.js';
import type { SandboxService } from './engine/sandbox/service.js';
import { composeSandboxes, registerControlRoutes } from './sandboxes.js';
import type { ContainerRecord } from './engine/containers/model.js';
import { registerSystemRoutes, type ContainerDiskUsage, type SystemBackend } from './api/system.js';
import { containerSummary } from './engine/containers/views.js';
import { countOpenFds, loadEngineId } from './host/linux/info.js';
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
import { createLinuxHost } from './host/linux/index.js';
import { writebackAfterDeletions } from './host/linux/nojournal.js';
import { useAfterBatch } from './util/later.js';
import { setInitBinary } from './engine/containers/init.js';
import { useMachineFacts } from './engine/machine.js';
import { nativeAtomicWriter, nativeFreshFilesWriter, nativeNewFileWriter, nativeReleaseMemory } from './host/linux/sys.js';
import { whenIdle } from './util/idle.js';
import { useAtomicWriter, useFreshFilesWriter, useNewFileWriter } from './util/atomic.js';
import { useOffThreadHasher } from './util/digest.js';
import { loadLayerHasher } from './host/linux/layers/hash.js';
import { registerBuildRoutes, type BuildBackend } from './api/build.js';
import { registerSwarmRoutes } from './api/swarm.js';
import { ClusterService, withSwarmNetworks } from './engine/cluster/cluster.js';
import { taskContainers } from './engine/cluster/containers.js';
import { LinuxClusterHost } from './host/linux/cluster/index.js';
import { ENGINE_VERSION } from './version.js';
import { CommitService } from './engine/containers/commit.js';
import { RUNTIME_MOUNT_POINTS } from './engine/containers/archive.js';
import { registerVolumeRoutes } from './api/volumes.js';
import { ContainerVolumes } from './engine/volumes/mounts.js';
import { VolumeService } from './engine/volumes/service.js';
import { PluginVolumeDrivers } from './engine/volumes/drivers.js';
import type { Authorizer } from './engine/plugins/authz.js';
import { composePlugins } from './plugins.js';
import type { AuthStoreReader } from './engine/auth/store.js';
import type { Host } from './host/host.js';
import { FsStateStore } from './state/fs.js';
import { FsBuildScratch } from './state/fs-scratch.js';
import { readLogBatches, readLogBlocks } from './engine/containers/logs.js';
import { containerSizes } from './engine/containers/sizes.js';
import { SystemFacts } from './engine/system/facts.js';

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
  /** `--agent unix://PATH`: the Host is the agent's there (berthd agent), not this machine's. */
  agent?: string;
  /** `--agent-path HOST=GUEST`: folders of this machine and their paths on the agent's (a VM's shares, data root). */
  agentPaths?: Array<{ hostPath: string; guestPath: string }>;
  /** `--agent-wsl DISTRO`: the agent runs in that WSL2 distribution (Windows drives at /mnt/<letter>). */
  agentWsl?: string;
  /** `--authorization-plugin`: plugins every API request and answer is put to, in this order. */
  authorizationPlugins?: string[];
}

// The daemon started whole, for embedders (the Electron shell), as boot.ts's startDaemonReady.
export { startDaemonReady as startDaemon, UI_LOGIN_FILE, type Daemon } from './boot.js';

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
  /** The authorization plugins (--authorization-plugin), when any is named. */
  authz?: Authorizer;
}

/**
 * Builds the engine on `host` (by default the Host of this machine, built from the options; the daemon closes
 * it when it shuts down), registers its routes on the router, then restores its state.
 */
export async function composeDaemon(opts: DaemonOptions, { router, authStore, closers }: CompositionParts, givenHost?: Host): Promise<Composition> {
  // Every state file is written by one native task of the thread pool when the addon is built.
  useAtomicWriter(nativeAtomicWriter());
  useNewFileWriter(nativeNewFileWriter());
  useFreshFilesWriter(nativeFreshFilesWriter());
  // Digests of pulled blobs and of layers on the thread pool (the addon is loaded at the first one).
  useOffThreadHasher(loadLayerHasher);
  // Deleting files on ext without a journal leaves their inodes in the way of new files until written back.
  useAfterBatch(writebackAfterDeletions([opts.dataRoot, opts.execRoot]));
  // The machine containers run on: crun or runc under conmon, overlayfs layers, volumes, networks, cgroups.
  // Or the agent's Host, over the agent protocol (a root agent service, or the guest of a VM).
  const host =
    givenHost ??
    (opts.agent
      ? await (await import('./host/remote/index.js')).createRemoteHost(opts.agent, {
          paths: (await import('./host/remote/paths.js')).guestPathsFor({ mappings: opts.agentPaths, wslDistro: opts.agentWsl }),
        })
      : await createLinuxHost({ dataRoot: opts.dataRoot, execRoot: opts.execRoot, runtime: opts.runtime, initPath: opts.initPath }));
  // What the engine's checks read of the machine at once: resource limits, capabilities, machine id.
  useMachineFacts(host.probe);

  const events = new EventBus();
  // The daemon's own records (containers, images, networks, users...) under its data root, on this machine
  // also when the Host is remote.
  const state = new FsStateStore(opts.dataRoot);

  // -- engine services and their routes are wired below --
  void events;

  // Networks: the predefined networks and the default bridge (created or verified at every start, with the
  // rest of the state, once everything is wired: below). The container engine calls
  // networks.recover(liveContainerIds) once it knows which containers live.
  const networks = new NetworkService(host.network, events, {
    dataRoot: opts.dataRoot,
    state,
    bridgeName: opts.bridgeName,
    bridgeCidr: opts.bridgeCidr,
    iptables: opts.iptables,
  });

  // Images: configurations, tags and layers under <data-root>/image. The container engine takes the
  // service as its ImageLookup & LayerFolders and gives back ImageUsers (images.setUsers).
  const images = new ImageService(state, host.layers, events);
  // Registries: pull and push through the image service; login check and distribution inspect.
  const distribution = images.useRegistries({ mirrors: opts.registryMirrors, insecure: opts.insecureRegistries }, host.tools);
  registerImageRoutes(router, images);
  registerDistributionRoutes(router, distribution);

  // Containers: conmon and the OCI runtime on this machine; records under <data-root>/containers. Loading
  // reconciles them with what runs (reattach, exit codes of those that ended, crash leftovers, restarts).
  for (const warning of host.probe.warnings) log.warn(warning);
  // The init binary of containers started with HostConfig.Init; without one, only those fail to start.
  const initBinary = host.probe.initBinary;
  setInitBinary(initBinary);
  if (initBinary.problem) log.warn('containers with an init process cannot start', { reason: initBinary.problem });
  closers.push(() => host.close());
  // Plugins (plugins.ts): legacy ones, the managed ones, the drivers they serve, authorization.
  const plugins = composePlugins(opts, { host, state, events, networks, router, registry: distribution.client, closers });
  // Volumes: their records in the data root, the local driver's content in the Host's folders (on its machine),
  // the plugins' drivers' volumes in the plugins; the container engine says who uses them.
  const volumes = new VolumeService(state, host.volumes, events, new PluginVolumeDrivers(plugins.legacy, plugins.manager));
  plugins.manager.usersOf = (name) => [...volumes.namesOfDriver(name), ...networks.namesOfDriver(name), ...(plugins.authorizes(name) ? ['--authorization-plugin'] : [])];
  registerVolumeRoutes(router, volumes);
  // Sandboxes: egress network policies of containers, enforced in the kernel and fed by the embedded DNS.
  const sandboxes: SandboxService = composeSandboxes(host, networks, events, () => containers);
  const containers: ContainerService = new ContainerService({
    sandboxes,
    state,
    host: host.runtime,
    images,
    networking: networks,
    events,
    defaultRuntime: host.probe.runtimeName,
    probe: host.probe,
    etcFiles: host.files,
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
    host: host.exec,
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
  const connector = containerConnector(networks, {
    get: (ref) => containers.get(ref),
    configureNetworks: (id, change) => containers.configureNetworks(id, change),
  });
  registerNetworkRoutes(router, withSwarmNetworks(networks, () => cluster), connector);
  closers.push(() => containers.close());
  const sizes = (record: ContainerRecord) => containerSizes({ host: host.runtime, images }, record);
  registerContainerRoutes(router, {
    containers,
    imageId: async (ref) => (await images.resolveForContainer(ref).catch(() => undefined))?.id,
    readLog: (record, o) => readLogBlocks(host.runtime, record, o),
    sizes,
    prune: (filters) => pruneContainers({
      all: () => containers.all(),
      remove: (id, o) => containers.remove(id, o),
      ownSize: (record) => host.runtime.writableLayerSize(record.Id),
      events,
    }, filters),
  });

  // Container verbs kept in their own files: exec, pause/unpause, update, top, and attach over websocket.
  const pauses = new PauseService(containers, host.runtime);
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
    update: (ref, body) => updateContainer(containers, host.runtime, ref, body),
    top: (ref, psArgs) => topProcesses(containers, host.runtime, ref, psArgs),
  });
  registerAttachWsRoutes(router, {
    containers,
    readLog: (record, o) => readLogBatches(host.runtime, record, o),
  });

  // Container files: docker cp (archive), export and changes.
  const containerFiles = new ContainerFiles({
    containers: { get: (ref) => containers.get(ref), serialised: (id, fn) => containers.serialised(id, fn) },
    host: host.files,
    images,
    events,
  });
  registerArchiveRoutes(router, containerFiles);

  // Commit and build: images from a container's writable layer, and from a Dockerfile (RUN steps are
  // containers of the container engine, committed the same way).
  const diffTar = (id: string, lowerDirs: string[], signal?: AbortSignal) => host.files.diffTar(id, lowerDirs, RUNTIME_MOUNT_POINTS, signal);
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
  const buildScratch = new FsBuildScratch(path.join(opts.dataRoot, 'build', 'tmp'));
  await buildScratch.reset();
  let loadedBuilder: Promise<BuildBackend> | undefined;
  const loadBuilder = () =>
    (loadedBuilder ??= import('./engine/build/builder.js').then(async ({ Builder }) => {
      const b = new Builder({
        state,
        scratch: buildScratch,
        images,
        containers,
        host: { diffTar, decompressor: (format, signal) => host.tools.decompressor(format, signal), layers: host.layers },
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
  // Swarm mode: a node that was in a swarm goes back into it (in the background) once its containers are known
  // (cluster.restore, with the rest of the state below).
  const cluster = new ClusterService({
    // The swarm's state, certificates and etcd member live on this machine, whatever Host runs the containers.
    host: new LinuxClusterHost(opts.dataRoot, opts.execRoot),
    containers: taskContainers(containers, events, host.network, (id, o) => {
      const record = containers.store.find(id);
      return record ? readLogBatches(host.runtime, record, o) : undefined;
    }),
    events,
    describe: async () => {
      const info = await host.probe.info();
      return { hostname: info.hostname, os: info.osType, arch: info.architecture, ncpu: info.ncpu, memTotal: info.memTotal, engineVersion: ENGINE_VERSION, engineLabels: {} };
    },
  });
  closers.push(() => cluster.close());
  networks.setSwarm(cluster.swarmAttacher());
  // As dockerd: a node that leaves its swarm first disconnects its containers from the swarm's networks.
  cluster.onLeave(async () => {
    for (const { networkId, containerId } of networks.swarmEndpoints()) {
      await connector.disconnectContainer(networkId, containerId, true).catch((err) => log.warn('cannot disconnect a container from a swarm network', { id: containerId, error: String(err) }));
    }
  });
  registerSwarmRoutes(router, cluster, (task, o) => {
    if (task.NodeID && task.NodeID !== cluster.nodeId) return cluster.remoteLogs(task, o);
    const record = containers.store.find(task.Status?.ContainerStatus?.ContainerID ?? '');
    return record ? readLogBatches(host.runtime, record, o) : undefined;
  });
  // Container statistics from the cgroups.
  registerStatsRoutes(router, new ContainerStats({ containers: { get: (ref) => containers.get(ref) }, host: host.stats }));

  // System and events.
  const systemBackend: SystemBackend = {
    containerCounts: () => containers.counts(),
    imageCount: () => images.store.all().length,
  };
  const eventsApi = registerEventsRoutes(router, events);
  const facts = new SystemFacts(host.probe);
  registerSystemRoutes(router, {
    backend: systemBackend,
    swarm: () => cluster.status(),
    hostInfo: () => facts.hostInfo(),
    components: () => facts.components(),
    initBinary: initBinary.name,
    volumePlugins: () => plugins.manager.enabledWith('volumedriver').map((p) => p.Name),
    engineId: await loadEngineId(opts.dataRoot),
    dataRoot: opts.dataRoot,
    debug: opts.logLevel === 'debug',
    buildTime: (await fs.stat(fileURLToPath(import.meta.url))).mtime.toISOString(),
    eventListeners: () => eventsApi.listeners(),
    openFds: () => countOpenFds(),
    driverStatus: () => facts.driverStatus(),
    firewallBackend: opts.iptables ? 'iptables' : undefined,
    registryConfig: () => distribution.config.info(),
    diskUsage: {
      images: async () => images.diskUsage(),
      volumes: async () => ({ items: (await volumes.usage()).map((v) => ({ ...v })) }),
      containers: async () => ({
        items: await Promise.all(
          containers.all().map(async (c) => containerSummary(c, c.Config.Image, await sizes(c)) as ContainerDiskUsage['items'][number]),
        ),
      }),
    },
  });

  registerControlRoutes(router, { sandboxes, authStore, state });

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
  // restart policies applied), their sandboxes' policies, volume mounts and health checks. Whatever else is
  // restored at start belongs here too, after what it needs (after containers.load when it needs them known).
  await networks.init();
  await images.init();
  await plugins.manager.init();
  await volumes.init();
  await containers.load();
  await sandboxes.recover();
  await volumes.recover();
  health.recover();
  await cluster.restore();

  // The start was such a burst too (and the requests that waited for it were not counted).
  afterBurst?.touch();
  return {
    authz: plugins.authz,
    onRequest: afterBurst
      ? (req, res) => {
          afterBurst.touch();
          (res ?? req.socket).once('close', () => afterBurst.touch());
        }
      : undefined,
  };
}
