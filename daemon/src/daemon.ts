/**
 * Composition: builds the host, the engine services and the API, and serves them on the listeners.
 * Each part is constructed from the narrow interfaces of the parts below it.
 */
import { promises as fs, readFileSync } from 'node:fs';
import type http from 'node:http';
import { isLoopbackHost, listenOn, parseListenAddress } from './api/listen.js';
import { Router } from './api/router.js';
import { createApiServer } from './api/server.js';
import { EventBus } from './engine/events.js';
import { registerEventsRoutes } from './api/events.js';
import { registerNetworkRoutes } from './api/networks.js';
import { NetworkService } from './engine/networks/service.js';
import { LinuxNetworkHost } from './host/linux/network/linux-network-host.js';
import { registerSystemRoutes, type ComponentVersion, type ImageDiskUsage, type SystemBackend } from './api/system.js';
import { countOpenFds, loadEngineId, readComponentVersions, readDriverStatus, readHostInfo } from './host/linux/info.js';
import { fileURLToPath } from 'node:url';
import { log, type LogLevel } from './util/log.js';
import path from 'node:path';
import { registerImageRoutes } from './api/images.js';
import { ImageService } from './engine/images/service.js';
import { registerContainerRoutes } from './api/containers.js';
import { ContainerService } from './engine/containers/service.js';
import { LinuxHost } from './host/linux/index.js';
import { LinuxLayerStore } from './host/linux/layers/store.js';

export interface DaemonOptions {
  hosts: string[];
  dataRoot: string;
  execRoot: string;
  pidfile: string;
  runtime: 'crun' | 'runc';
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
}

export interface Daemon {
  /** Stops serving and releases the daemon's own resources; containers keep running under conmon. */
  shutdown(): Promise<void>;
}

async function writePidfile(pidfile: string): Promise<void> {
  try {
    const old = Number((await fs.readFile(pidfile, 'utf8')).trim());
    if (old && old !== process.pid) {
      try {
        process.kill(old, 0);
        throw new Error(`pid file ${pidfile} names a running process ${old}: is another berthd running?`);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'ESRCH') throw err;
      }
    }
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  await fs.writeFile(pidfile, `${process.pid}\n`);
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

export async function startDaemon(opts: DaemonOptions): Promise<Daemon> {
  const addresses = opts.hosts.map(parseListenAddress);
  for (const address of addresses) {
    if (address.kind === 'tcp' && !opts.tls && !isLoopbackHost(address.host)) {
      throw new Error(`refusing to serve the API on ${address.host}:${address.port} without TLS: use --tlsverify with --tlscacert, --tlscert and --tlskey`);
    }
  }
  if (opts.tls && (!opts.tlsCert || !opts.tlsKey)) throw new Error('--tls and --tlsverify need --tlscert and --tlskey');
  if (opts.tlsVerify && !opts.tlsCaCert) throw new Error('--tlsverify needs --tlscacert');

  await fs.mkdir(opts.dataRoot, { recursive: true, mode: 0o710 });
  await fs.mkdir(opts.execRoot, { recursive: true, mode: 0o700 });
  await writePidfile(opts.pidfile);

  const events = new EventBus();
  const router = new Router();
  const closers: Array<() => Promise<void> | void> = [];

  // -- engine services and their routes are wired below --
  void events;

  // Networks: the predefined networks and the default bridge (created or verified at every start).
  // The container engine calls networks.recover(liveContainerIds) once it knows which containers live.
  const networks = new NetworkService(new LinuxNetworkHost(), events, {
    dataRoot: opts.dataRoot,
    bridgeName: opts.bridgeName,
    bridgeCidr: opts.bridgeCidr,
    iptables: opts.iptables,
  });
  await networks.init();
  registerNetworkRoutes(router, networks);

  // Images: configurations, tags and layers under <data-root>/image. The container engine takes the
  // service as its ImageLookup & LayerFolders and gives back ImageUsers (images.setUsers).
  const imageRoot = path.join(opts.dataRoot, 'image');
  const layerStore = new LinuxLayerStore(imageRoot);
  const images = new ImageService(imageRoot, layerStore, events);
  await images.init();
  registerImageRoutes(router, images);

  // Containers: conmon and the OCI runtime on this machine; records under <data-root>/containers. Loading
  // reconciles them with what runs (reattach, exit codes of those that ended, crash leftovers, restarts).
  const host = new LinuxHost({ dataRoot: opts.dataRoot, execRoot: opts.execRoot, runtime: opts.runtime });
  for (const warning of host.warnings) log.warn(warning);
  closers.push(() => host.close());
  const containers = new ContainerService({
    dataRoot: opts.dataRoot,
    host: host.containers,
    images,
    networking: networks,
    events,
    defaultRuntime: host.containers.runtimeName,
  });
  images.setUsers(containers);
  await containers.load();
  closers.push(() => containers.close());
  registerContainerRoutes(router, {
    containers,
    imageId: async (ref) => (await images.resolveForContainer(ref).catch(() => undefined))?.id,
    readLog: (record, o) =>
      host.containers.readLog(record.LogPath, { ...o, until: () => !record.State.Running && !record.State.Restarting }),
    sizes: async (record) => {
      const rw = await host.containers.writableLayerSize(record.Id);
      let imageSize = 0;
      try {
        imageSize = Number(images.inspect(record.Image).Size) || 0;
      } catch {
        // The image was removed by force: only the container's own files count.
      }
      return { rw, rootFs: rw + imageSize };
    },
  });

  // System and events.
  const systemBackend: SystemBackend = {
    containerCounts: () => containers.counts(),
    imageCount: () => images.store.all().length,
  };
  const eventsApi = registerEventsRoutes(router, events);
  const hostInfoOptions = { runtimes: ['crun', 'runc'], defaultRuntime: opts.runtime };
  let componentVersions: Promise<ComponentVersion[]> | undefined;
  registerSystemRoutes(router, {
    backend: systemBackend,
    hostInfo: () => readHostInfo(hostInfoOptions),
    components: () => (componentVersions ??= readComponentVersions([opts.runtime, opts.runtime === 'crun' ? 'runc' : 'crun', 'conmon'])),
    engineId: await loadEngineId(opts.dataRoot),
    dataRoot: opts.dataRoot,
    debug: opts.logLevel === 'debug',
    buildTime: (await fs.stat(fileURLToPath(import.meta.url))).mtime.toISOString(),
    eventListeners: () => eventsApi.listeners(),
    openFds: () => countOpenFds(),
    driverStatus: () => readDriverStatus(opts.dataRoot),
    firewallBackend: opts.iptables ? 'iptables' : undefined,
    diskUsage: { images: async () => imageDiskUsage(images, layerStore) },
  });

  const servers: http.Server[] = [];
  for (const address of addresses) {
    const tls =
      address.kind === 'tcp' && opts.tls
        ? {
            key: readFileSync(opts.tlsKey!),
            cert: readFileSync(opts.tlsCert!),
            ca: opts.tlsCaCert ? readFileSync(opts.tlsCaCert) : undefined,
            verifyClients: opts.tlsVerify,
          }
        : undefined;
    const server = createApiServer(router, { corsOrigin: opts.corsOrigin, tls });
    await listenOn(server, address);
    servers.push(server);
    log.info('API listening', { address: address.kind === 'unix' ? `unix://${address.path}` : `tcp://${address.host}:${address.port}` });
  }
  log.info('daemon has completed initialization', { dataRoot: opts.dataRoot, execRoot: opts.execRoot });

  return {
    async shutdown() {
      for (const server of servers) {
        server.close();
        server.closeAllConnections();
      }
      for (const close of closers.reverse()) await close();
      await fs.rm(opts.pidfile, { force: true });
      for (const address of addresses) if (address.kind === 'unix') await fs.rm(address.path, { force: true });
    },
  };
}
