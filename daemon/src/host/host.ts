/**
 * The Host contract: everything that must happen on the machine containers run on. Each part is declared in
 * its own file beside this one and gathered here; the engine imports the parts' types from this module
 * (engine -> host types is the one allowed direction, and host/ never imports engine/). `host/linux`
 * builds the whole object on this machine (createLinuxHost); a remote implementation replaces it whole.
 *
 * Every method is describable for a remote implementation: its arguments and results are plain data,
 * Buffers, Readable or Writable streams, AsyncIterables, AbortSignals, or handle objects whose methods are
 * themselves such calls (AttachStreams, ExecProcess, openBeneath's holder). The only functions handed to the
 * Host are the hooks named in their parts' doc comments (StartHooks, DnsAnswers, DnsObserver, and the log
 * readers' `until`, asked at the end of the log whether a follow stops); a remote Host calls them back.
 * Synchronous members (LayerStore's lookups, StatsHost's machine figures, ProbeHost's properties, stopDns)
 * answer from what the Host already knows: a remote Host keeps a copy it refreshes.
 */
import type { ExecHost } from './exec.js';
import type { ContainerFilesHost } from './files.js';
import type { LayerStore } from './layers.js';
import type { NetworkHost } from './network.js';
import type { PluginHost } from './plugins.js';
import type { ProbeHost } from './probe.js';
import type { ContainerRuntimeHost } from './runtime.js';
import type { SandboxHost } from './sandbox.js';
import type { StatsHost } from './stats.js';
import type { ToolsHost } from './tools.js';
import type { VolumeHost } from './volumes.js';

export * from './cluster.js';
export * from './exec.js';
export * from './files.js';
export * from './layers.js';
export * from './network.js';
export * from './overlay.js';
export * from './plugins.js';
export * from './probe.js';
export * from './runtime.js';
export * from './sandbox.js';
export * from './stats.js';
export * from './tools.js';
export * from './volumes.js';

/** One Host, whole: the parts the engine's services take (each service declares the part, or the Pick<> of it, it needs). */
export interface Host {
  /** Containers: root filesystems, the OCI runtime under its monitor, signals, exits, attach, logs. */
  readonly runtime: ContainerRuntimeHost;
  /** Extra processes in running containers. */
  readonly exec: ExecHost;
  /** A container's files: archive in and out, stat, export, changes, the writable layer as a tar. */
  readonly files: ContainerFilesHost;
  /** Image layers: staged, committed, unpacked once into folders, given back as tars. */
  readonly layers: LayerStore;
  /** The local volume driver's folders and mounts, and mount points in container roots. */
  readonly volumes: VolumeHost;
  /** Bridges, veths, NAT and port rules, the embedded DNS. */
  readonly network: NetworkHost;
  /** Managed plugins' folders and processes, legacy plugins' discovery files. */
  readonly plugins: PluginHost;
  /** Egress network policies of sandboxes, in the kernel. */
  readonly sandbox: SandboxHost;
  /** Readings of containers' cgroups. */
  readonly stats: StatsHost;
  /** Programs of the machine run as stream stages (the decompressors Node lacks). */
  readonly tools: ToolsHost;
  /** Facts of the machine: kernel, OS, runtimes, init binary, resources. */
  readonly probe: ProbeHost;
  /** Releases watchers and handles; containers keep running under their monitors. */
  close(): Promise<void>;
}
