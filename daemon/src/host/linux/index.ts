/**
 * The Host on the machine the daemon runs on, built whole from its parts (createLinuxHost). Each part
 * implements one interface of host/host.ts; this module only builds them from the daemon's options. The
 * files part (tar packing and unpacking, path resolution in a container root) is loaded at its first use:
 * an idle daemon does not carry it.
 */
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { PassThrough, type Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { ContainerFilesHost, Host } from '../host.js';
import { CgroupStats } from './cgroups/stats.js';
import { allDevices, blockDevice, devicesFromPath, readBlkioSupport } from './devices.js';
import { readEtcFile, writeEtcFiles } from './etcfiles.js';
import { readCapabilityBoundingSet, readMachineId, readRlimits } from './facts.js';
import { readComponentVersions, readDriverStatus, readHostInfo } from './info.js';
import { findInitBinary, readInitVersion } from './init.js';
import { LinuxLayerStore } from './layers/store.js';
import { LinuxNetworkHost } from './network/linux-network-host.js';
import { LinuxSandboxHost } from './network/sandbox.js';
import { findExecutable, type RuntimeName } from './runtime/ociruntime.js';
import { LinuxContainerRuntime } from './runtime/runtime.js';
import { LinuxTools } from './tools.js';
import { LinuxPluginHost } from './plugins.js';
import { LinuxVolumeHost } from './volumes/index.js';

export interface LinuxHostOptions {
  dataRoot: string;
  execRoot: string;
  /** The preferred OCI runtime (crun or runc). */
  runtime: RuntimeName;
  /** `--init-path`: the init binary of containers with HostConfig.Init (default: looked up by name). */
  initPath?: string;
}

/** Runtimes /info lists when they are installed. */
const KNOWN_RUNTIMES = ['crun', 'runc'];

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
    // On the start path: written without loading the rest.
    writeEtcFiles: (files, mode) => writeEtcFiles(files, mode),
    readEtcFile: (file) => readEtcFile(file),
    mountRootfs: async (id, lowerDirs) => (await get()).mountRootfs(id, lowerDirs),
    unmountRootfs: async (id) => (await get()).unmountRootfs(id),
    readFileFromLayers: async (lowerDirs, file) => (await get()).readFileFromLayers(lowerDirs, file),
    statPath: async (view, file) => (await get()).statPath(view, file),
    archivePath: async (view, file, signal) => (await get()).archivePath(view, file, signal),
    extractArchive: async (view, file, tar, opts) => (await get()).extractArchive(view, file, tar, opts),
    exportRootfs: (root, signal) => streamLater(get().then((h) => h.exportRootfs(root, signal))),
    changes: async (id, lowerDirs, ignoreAdded) => (await get()).changes(id, lowerDirs, ignoreAdded),
    diffTar: (id, lowerDirs, ignoreAdded, signal) => streamLater(get().then((h) => h.diffTar(id, lowerDirs, ignoreAdded, signal))),
  };
}

/** Builds the Host of this machine: the runtime (crun or runc under conmon), overlayfs layers, volumes, networks, cgroups. */
export async function createLinuxHost(opts: LinuxHostOptions): Promise<Host> {
  const runtime = new LinuxContainerRuntime({ dataRoot: opts.dataRoot, execRoot: opts.execRoot, runtime: opts.runtime });
  const runtimeName = runtime.runtimeName;
  const initBinary = findInitBinary(opts.initPath);
  const warnings: string[] = [];
  if (runtime.runtimeWarning) warnings.push(runtime.runtimeWarning);
  let components: ReturnType<Host['probe']['componentVersions']> | undefined;
  const facts: { -readonly [K in 'rlimits' | 'capabilityBoundingSet' | 'machineId' | 'blkio']?: Host['probe'][K] } = {};
  const host: Host = {
    runtime,
    exec: runtime,
    files: lazyContainerFilesHost(() => import('./archive/index.js').then(({ LinuxContainerFiles }) => new LinuxContainerFiles(runtime))),
    layers: new LinuxLayerStore(path.join(opts.dataRoot, 'image')),
    volumes: new LinuxVolumeHost(path.join(opts.dataRoot, 'volumes')),
    network: new LinuxNetworkHost(),
    plugins: new LinuxPluginHost(findExecutable(runtimeName) ?? runtimeName, path.join(opts.dataRoot, 'plugins'), path.join(opts.execRoot, 'plugins')),
    sandbox: new LinuxSandboxHost(),
    stats: new CgroupStats(),
    tools: new LinuxTools(),
    probe: {
      runtimeName,
      runtimePath: findExecutable(runtimeName) ?? runtimeName,
      warnings,
      initBinary,
      // Read at their first use, once: none of them changes while the daemon runs.
      get rlimits() {
        return (facts.rlimits ??= readRlimits());
      },
      get capabilityBoundingSet() {
        if (!('capabilityBoundingSet' in facts)) facts.capabilityBoundingSet = readCapabilityBoundingSet();
        return facts.capabilityBoundingSet;
      },
      get machineId() {
        return (facts.machineId ??= readMachineId());
      },
      get blkio() {
        return (facts.blkio ??= readBlkioSupport());
      },
      devices: (pathOnHost, pathInContainer) => devicesFromPath(pathOnHost, pathInContainer),
      allDevices: () => allDevices(),
      blockDevice: (field, file) => blockDevice(field, file),
      etcFile: (name) => fs.readFile(path.join('/etc', name), 'utf8').catch(() => undefined),
      pathExists: (hostPath) => fs.stat(hostPath).then(() => true, () => false),
      info: () => readHostInfo({ runtimes: KNOWN_RUNTIMES, defaultRuntime: runtimeName }),
      // The versions of installed programs do not change while the daemon runs: read once.
      componentVersions: () =>
        (components ??= Promise.all([
          readComponentVersions([runtimeName, runtimeName === 'crun' ? 'runc' : 'crun', 'conmon']),
          readInitVersion(initBinary),
        ]).then(([tools, init]) => (init ? [...tools, { name: 'docker-init', version: init.version, commit: init.commit }] : tools))),
      driverStatus: () => readDriverStatus(opts.dataRoot),
    },
    async close() {
      runtime.close();
    },
  };
  return host;
}
