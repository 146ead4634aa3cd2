/**
 * The state the container verbs share (start.ts, stop.ts, remove.ts, ...): the store, the per-container locks,
 * the runs being watched, the restart timers, the Host parts and the event bus. One object, built by the
 * façade (service.ts) and passed to every verb.
 */
import { EventEmitter } from 'node:events';
import type { AttachStreams, ContainerRuntimeHost, LayerFolders, ProbeHost } from '../../host/host.js';
import type { DeviceProbe } from './devices.js';
import { log } from '../../util/log.js';
import { errorMessage } from '../../errors.js';
import type { EventBus } from '../events.js';
import type { ImageLookup } from '../images/types.js';
import type { ContainerNetworking, PlanOptions } from '../networks/types.js';
import type { EtcFilesHost } from './files.js';
import type { ContainerRecord, MountPoint } from './model.js';
import { ContainerStore } from './store.js';
import type { StateStore } from '../../state/state.js';

export interface ContainerServiceDeps {
  /** The daemon's state: the containers' records are kept under `containers/` in it. */
  state: StateStore;
  host: ContainerRuntimeHost;
  images: ImageLookup & LayerFolders;
  networking: ContainerNetworking;
  events: EventBus;
  defaultRuntime: string;
  /** Volumes in containers; without it, volume mounts answer 400. */
  volumes?: ContainerVolumeParts;
  /** Network policies of sandboxes (engine/sandbox/service.ts). */
  sandboxes?: ContainerSandboxes;
  /** The machine's device nodes, bind sources and /etc files, as the Host's probe reads them. */
  probe: DeviceProbe & Pick<ProbeHost, 'pathExists' | 'etcFile'>;
  /** Where the container's own /etc files (hosts, hostname, resolv.conf) are written: the Host's files part. */
  etcFiles: EtcFilesHost;
}

/** What the container engine asks of the sandbox service. */
export interface ContainerSandboxes {
  /** Checks the policy a create body's labels give (InvalidParameter). */
  checkCreate(labels: Record<string, unknown> | null | undefined, hostConfig: Record<string, any>): void;
  /** The container has its network and its process has not run yet: its policy goes in the kernel. */
  connected(record: ContainerRecord): Promise<void>;
  /** Whether the container has a network policy (its domain rules need the embedded DNS server, on any bridge). */
  hasPolicy(record: ContainerRecord): Promise<boolean>;
  /** The container's network was released. */
  disconnected(id: string): Promise<void>;
}

/** What the container engine asks of the volume service (engine/volumes/mounts.ts ContainerVolumes). */
export interface ContainerVolumeParts {
  /** Plans the mounts of a create body and creates the volumes they need; `undo` removes those it created. */
  prepare(
    body: Record<string, any>,
    imageVolumes: Record<string, unknown> | null | undefined,
    lookup: (ref: string) => ContainerRecord,
  ): Promise<{ mounts: MountPoint[]; copies: Array<{ name: string; destination: string }>; undo(): Promise<void> }>;
  /** Copies the image's content into the new volumes, from the container's mounted root. */
  populate(rootfs: string, copies: Array<{ name: string; destination: string }>): Promise<void>;
  /** At start, with the container's mounted root (where the mount points' folders are made). */
  /** Answers the host paths to bind instead of some mount points' Source, held until `release`. */
  mountAll(record: ContainerRecord, rootfs: string): Promise<{ sources: Map<string, string>; release(): Promise<void> }>;
  unmountAll(record: ContainerRecord): Promise<void>;
  removeAnonymous(record: ContainerRecord): Promise<void>;
}

export interface PendingAttach {
  resolve(streams: AttachStreams): void;
  reject(err: unknown): void;
}

/** What planning a container's networks takes from its configuration (the create body's or the record's). */
export function planOptions(config: { MacAddress?: string; ExposedPorts?: Record<string, unknown> | null }, hc: Record<string, any>): PlanOptions {
  return {
    macAddress: config.MacAddress,
    portBindings: hc.PortBindings,
    publishAllPorts: hc.PublishAllPorts === true,
    exposedPorts: Object.keys(config.ExposedPorts ?? {}),
    dns: hc.Dns ?? undefined,
  };
}

export class ContainerContext {
  readonly store: ContainerStore;
  readonly host: ContainerRuntimeHost;
  readonly images: ImageLookup & LayerFolders;
  readonly networking: ContainerNetworking;
  readonly events: EventBus;
  readonly signals = new EventEmitter();
  readonly locks = new Map<string, Promise<unknown>>();
  readonly exited = new Map<string, Promise<void>>();
  readonly pendingAttach = new Map<string, Set<PendingAttach>>();
  /** Per container, the attached clients' deliveries of the current run's output (see attach). */
  readonly deliveries = new Map<string, Set<Promise<void>>>();
  /** Per container, resolved once the exit of its current run is known (before its release and its waiters). */
  readonly exitSeen = new Map<string, { promise: Promise<void>; resolve(): void }>();
  readonly restartTimers = new Map<string, { timer: NodeJS.Timeout; delay: number }>();
  readonly restartDelays = new Map<string, number>();
  /** Containers whose runtime state and network the exit already released (only until they start again). */
  readonly released = new Set<string>();
  /** Sections under each container's lock, running or queued (see withLock). */
  readonly lockUsers = new Map<string, number>();
  /** Containers whose exit is releasing their runtime, network and root filesystem (under their lock). */
  readonly releasing = new Set<string>();
  /** The network release of each exit in progress (a removal waits for it: see removeAtOnce). */
  readonly networkReleases = new Map<string, Promise<void>>();
  /** Removals answered whose clean-up (runtime, root filesystem, files) still runs, by container id. */
  readonly finishing = new Map<string, Promise<void>>();
  /**
   * Called after every signal sent to a container's process (pause.ts thaws a frozen container there, so
   * that a stop or kill reaches it, as Docker does).
   */
  afterSignal: ((record: ContainerRecord, signal: number) => Promise<void>) | undefined;

  constructor(readonly deps: ContainerServiceDeps) {
    this.store = new ContainerStore(deps.state);
    this.host = deps.host;
    this.images = deps.images;
    this.networking = deps.networking;
    this.events = deps.events;
    this.signals.setMaxListeners(0);
  }

  /** Releases the container's network, and its sandbox policy with it. */
  async disconnectNetwork(id: string): Promise<void> {
    await this.networking.disconnect(id);
    await this.deps.sandboxes?.disconnected(id);
  }

  /** Serialises the state changes of one container. */
  withLock<T>(id: string, fn: () => Promise<T>): Promise<T> {
    const prev = this.locks.get(id) ?? Promise.resolve();
    this.lockUsers.set(id, (this.lockUsers.get(id) ?? 0) + 1);
    // While the section runs, views build the container afresh; once it settles, it has a new revision.
    const run = async () => {
      const changed = this.store.beginChange(id);
      try {
        return await fn();
      } finally {
        changed();
        const left = this.lockUsers.get(id)! - 1;
        if (left > 0) this.lockUsers.set(id, left);
        else this.lockUsers.delete(id);
      }
    };
    const next = prev.then(run, run);
    const settled = next.catch(() => undefined);
    this.locks.set(id, settled);
    void settled.then(() => {
      if (this.locks.get(id) === settled) this.locks.delete(id);
    });
    return next;
  }

  private attributes(record: ContainerRecord, extra: Record<string, string> = {}): Record<string, string> {
    return { ...record.Config.Labels, image: record.Config.Image, name: record.Name.slice(1), ...extra };
  }

  publish(record: ContainerRecord, action: string, extra: Record<string, string> = {}): void {
    this.store.touch(record);
    this.events.publish('container', action, record.Id, this.attributes(record, extra));
  }

  async signalled(record: ContainerRecord, signal: number): Promise<void> {
    await this.afterSignal?.(record, signal).catch((err) => log.warn('after-signal hook failed', { id: record.Id, error: errorMessage(err) }));
  }

  cancelRestart(id: string): boolean {
    const pending = this.restartTimers.get(id);
    if (!pending) return false;
    clearTimeout(pending.timer);
    this.restartTimers.delete(id);
    return true;
  }
}
