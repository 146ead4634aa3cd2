/**
 * The container engine: the state machine of containers over the Host, with the verbs the API serves.
 * It never spawns a tool or mounts anything itself; the Host does.
 */
import { EventEmitter } from 'node:events';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { Readable } from 'node:stream';
import type { AttachStreams, ContainerRuntimeHost, ExitInfo, LayerFolders } from '../../host/host.js';
import { nowNano, rfc3339Nano } from '../../util/json.js';
import { log } from '../../util/log.js';
import { Conflict, errorMessage, InvalidParameter, NotFound, NotModified } from '../../errors.js';
import type { EventBus } from '../events.js';
import type { ImageLookup, ImageUsers } from '../images/types.js';
import type { ContainerNetworking, LiveContainer, PlanOptions } from '../networks/types.js';
import type { ContainerNetworkChange, ContainerNetworkConfig } from '../networks/connect.js';
import { buildRecord, generateName } from './create.js';
import { discardUnsupported, resolveDevices } from './devices.js';
import { logChunks } from './logs.js';
import { replaceHostsEntry, rewriteResolvConf, writeContainerFiles, writeHostsFile, type LinkEntry } from './files.js';
import { linkEntry, linkEnv, parseLink } from './links.js';
import type { ContainerRecord, MountPoint } from './model.js';
import { buildSpec, resolveUser } from './ocispec.js';
import { checkPropagation } from './propagation.js';
import { checkStorageOptions } from './storageopt.js';
import { ContainerStore } from './store.js';
import { parseBind, parseSignal, validateCreateBody, validateName } from './validate.js';

export interface ContainerServiceDeps {
  dataRoot: string;
  host: ContainerRuntimeHost;
  images: ImageLookup & LayerFolders;
  networking: ContainerNetworking;
  events: EventBus;
  defaultRuntime: string;
  /** Volumes in containers; without it, volume mounts answer 400. */
  volumes?: ContainerVolumeParts;
  /** Network policies of sandboxes (engine/sandbox/service.ts). */
  sandboxes?: ContainerSandboxes;
}

/** What the container engine asks of the sandbox service. */
export interface ContainerSandboxes {
  /** Checks the policy a create body's labels give (InvalidParameter). */
  checkCreate(labels: Record<string, unknown> | null | undefined, hostConfig: Record<string, any>): void;
  /** The container has its network and its process has not run yet: its policy goes in the kernel. */
  connected(record: ContainerRecord): Promise<void>;
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

export type WaitCondition = 'not-running' | 'next-exit' | 'removed';

/** Output beyond this is not re-read from the log when an attach socket lost its tail. */
const RECONCILE_LIMIT = 16 * 1024 * 1024;

/**
 * How long an exit waits for the output of the run to reach the clients attached to it before its waiters
 * are answered (Docker waits as long for its stream copies).
 */
const DELIVERY_WAIT_MS = 2000;

/** How long a stopping daemon waits for the clean-up of removals already answered. */
const CLOSE_WAIT_MS = 5000;

const RESTART_BASE_DELAY_MS = 100;
const RESTART_MAX_DELAY_MS = 60_000;
/** A container that ran this long before exiting restarts with the base delay again. */
const RESTART_RESET_AFTER_MS = 10_000;

interface PendingAttach {
  resolve(streams: AttachStreams): void;
  reject(err: unknown): void;
}

/** What planning a container's networks takes from its configuration (the create body's or the record's). */
function planOptions(config: { MacAddress?: string; ExposedPorts?: Record<string, unknown> | null }, hc: Record<string, any>): PlanOptions {
  return {
    macAddress: config.MacAddress,
    portBindings: hc.PortBindings,
    publishAllPorts: hc.PublishAllPorts === true,
    exposedPorts: Object.keys(config.ExposedPorts ?? {}),
    dns: hc.Dns ?? undefined,
  };
}

export class ContainerService implements ImageUsers {
  readonly store: ContainerStore;
  private readonly host: ContainerRuntimeHost;
  private readonly images: ImageLookup & LayerFolders;
  private readonly networking: ContainerNetworking;
  private readonly events: EventBus;
  private readonly signals = new EventEmitter();
  private readonly locks = new Map<string, Promise<unknown>>();
  private readonly exited = new Map<string, Promise<void>>();
  private readonly pendingAttach = new Map<string, Set<PendingAttach>>();
  /** Per container, the attached clients' deliveries of the current run's output (see attach). */
  private readonly deliveries = new Map<string, Set<Promise<void>>>();
  /** Per container, resolved once the exit of its current run is known (before its release and its waiters). */
  private readonly exitSeen = new Map<string, { promise: Promise<void>; resolve(): void }>();
  private readonly restartTimers = new Map<string, { timer: NodeJS.Timeout; delay: number }>();
  private readonly restartDelays = new Map<string, number>();
  /** Containers whose runtime state and network the exit already released (only until they start again). */
  private readonly released = new Set<string>();
  /** Sections under each container's lock, running or queued (see withLock). */
  private readonly lockUsers = new Map<string, number>();
  /** Containers whose exit is releasing their runtime, network and root filesystem (under their lock). */
  private readonly releasing = new Set<string>();
  /** The network release of each exit in progress (a removal waits for it: see removeAtOnce). */
  private readonly networkReleases = new Map<string, Promise<void>>();
  /** Removals answered whose clean-up (runtime, root filesystem, files) still runs, by container id. */
  private readonly finishing = new Map<string, Promise<void>>();
  /**
   * Called after every signal sent to a container's process (pause.ts thaws a frozen container there, so
   * that a stop or kill reaches it, as Docker does).
   */
  afterSignal: ((record: ContainerRecord, signal: number) => Promise<void>) | undefined;

  constructor(private readonly deps: ContainerServiceDeps) {
    this.store = new ContainerStore(path.join(deps.dataRoot, 'containers'));
    this.host = deps.host;
    this.images = deps.images;
    this.networking = deps.networking;
    this.events = deps.events;
    this.signals.setMaxListeners(0);
  }

  /** Releases the container's network, and its sandbox policy with it. */
  private async disconnectNetwork(id: string): Promise<void> {
    await this.networking.disconnect(id);
    await this.deps.sandboxes?.disconnected(id);
  }

  /** Serialises the state changes of one container. */
  private withLock<T>(id: string, fn: () => Promise<T>): Promise<T> {
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

  private publish(record: ContainerRecord, action: string, extra: Record<string, string> = {}): void {
    this.store.touch(record);
    this.events.publish('container', action, record.Id, this.attributes(record, extra));
  }

  /** For the verbs kept in their own files (exec, pause, update, top): a container event with the usual attributes. */
  containerEvent(record: ContainerRecord, action: string, extra: Record<string, string> = {}): void {
    this.publish(record, action, extra);
  }

  /** For the verbs kept in their own files: runs `fn` serialised with the container's other state changes. */
  serialised<T>(id: string, fn: () => Promise<T>): Promise<T> {
    return this.withLock(id, fn);
  }

  private async signalled(record: ContainerRecord, signal: number): Promise<void> {
    await this.afterSignal?.(record, signal).catch((err) => log.warn('after-signal hook failed', { id: record.Id, error: errorMessage(err) }));
  }

  // ---- queries ----

  get(ref: string): ContainerRecord {
    return this.store.get(ref);
  }

  all(): ContainerRecord[] {
    return this.store.all();
  }

  /** Containers (in any state) whose mounts name the volume. */
  containersUsingVolume(name: string): string[] {
    return this.store.all().filter((c) => c.Mounts.some((m) => m.Type === 'volume' && m.Name === name)).map((c) => c.Id);
  }

  /** Running containers whose mounts name the volume. */
  runningContainersUsingVolume(name: string): string[] {
    return this.store.all().filter((c) => (c.State.Running || c.State.Paused) && c.Mounts.some((m) => m.Type === 'volume' && m.Name === name)).map((c) => c.Id);
  }

  containersUsingImage(imageId: string): string[] {
    return this.store.all().filter((c) => c.Image === imageId).map((c) => c.Id);
  }

  counts(): { total: number; running: number; paused: number; stopped: number } {
    let running = 0;
    let paused = 0;
    let stopped = 0;
    for (const c of this.store.all()) {
      if (c.State.Paused) paused++;
      else if (c.State.Running) running++;
      else stopped++;
    }
    return { total: this.store.size, running, paused, stopped };
  }

  // ---- create ----

  async create(body: unknown, nameParam: string | undefined): Promise<{ Id: string; Warnings: string[] }> {
    validateCreateBody(body);
    const request = body as Record<string, any>;
    const name = nameParam ? validateName(nameParam) : generateName((n) => this.store.nameTaken(n) !== undefined);
    if (this.store.nameTaken(name)) {
      throw new Conflict(`Conflict. The container name "${name}" is already in use by container "${this.store.nameTaken(name)}". You have to remove (or rename) that container to be able to reuse that name.`);
    }
    const hc = (request.HostConfig ?? {}) as Record<string, any>;
    const warnings: string[] = [];
    this.checkUnsupported(request, hc);
    this.deps.sandboxes?.checkCreate(request.Labels, hc);
    warnings.push(...discardUnsupported(hc));
    // An unknown network is reported at start, as Docker does: a 404 from create would make the docker CLI
    // try to pull the image and hide the real error.
    const plan = this.networking.plan(hc.NetworkMode, request.NetworkingConfig, { ...planOptions(request, hc), deferUnknownNetwork: true });
    if (plan.mode === 'container') this.store.get(plan.container);
    for (const bind of (hc.Binds as string[] | null) ?? []) {
      const b = parseBind(bind);
      if (!b.volume) {
        const stat = await fs.stat(b.source).catch(() => undefined);
        if (!stat) throw new InvalidParameter(`invalid mount config for type "bind": bind source path does not exist: ${b.source}`);
      }
    }
    for (const m of (hc.Mounts as Array<Record<string, any>> | null) ?? []) {
      if (m?.Type !== 'bind' || typeof m.Source !== 'string' || !m.Source.startsWith('/') || m.BindOptions?.CreateMountpoint === true) continue;
      const stat = await fs.stat(m.Source).catch(() => undefined);
      if (!stat) throw new InvalidParameter(`invalid mount config for type "bind": bind source path does not exist: ${m.Source}`);
    }
    const image = await this.images.resolveForContainer(request.Image);
    // After the image, as Docker: a missing image is the 404 the CLI pulls on, whatever the links say.
    const links = this.checkLinks(hc, name);
    const record = buildRecord(request, name, image, this.store.root);
    checkStorageOptions(hc.StorageOpt);
    if (!hc.Runtime) record.HostConfig.Runtime = this.deps.defaultRuntime;
    record.HostConfig.Links = links;
    if (record.Path === '') throw new InvalidParameter('no command specified: give Cmd or Entrypoint, or use an image that has one');
    record.Networks = this.networking.plannedNetworks(plan);
    let volumes: Awaited<ReturnType<ContainerVolumeParts['prepare']>> | undefined;
    if (this.deps.volumes) {
      volumes = await this.deps.volumes.prepare(request, image.config.Volumes, (ref) => this.store.get(ref));
      record.Mounts = volumes.mounts;
    } else {
      record.Mounts = ((hc.Binds as string[] | null) ?? []).map((bind) => {
        const b = parseBind(bind);
        return { Type: 'bind' as const, Source: b.source, Destination: b.destination, Mode: b.options.join(','), RW: !b.readOnly, Propagation: b.propagation };
      });
    }
    this.store.add(record);
    try {
      await this.store.create(record);
      // New volumes get the image's content at their place (from the container's root, mounted for the copy).
      if (volumes && volumes.copies.length > 0) {
        const rootfs = await this.host.mountRootfs(record.Id, this.images.lowerDirs(record.ImageChainIds));
        try {
          await this.deps.volumes!.populate(rootfs, volumes.copies);
        } finally {
          await this.host.unmountRootfs(record.Id);
        }
      }
    } catch (err) {
      await this.host.removeContainerFiles(record.Id).catch(() => undefined);
      await this.store.remove(record);
      await volumes?.undo();
      throw err;
    }
    this.publish(record, 'create');
    return { Id: record.Id, Warnings: warnings };
  }

  /** Features whose engine parts are not built yet answer a clear error instead of being ignored. */
  private checkUnsupported(request: Record<string, any>, hc: Record<string, any>): void {
    if (!this.deps.volumes) {
      for (const bind of (hc.Binds as string[] | null) ?? []) {
        if (parseBind(bind).volume) throw new InvalidParameter(`named volumes are not supported by this engine yet (HostConfig.Binds entry ${JSON.stringify(bind)})`);
      }
      if (request.Volumes && Object.keys(request.Volumes).length > 0) {
        throw new InvalidParameter('anonymous volumes (Config.Volumes) are not supported by this engine yet');
      }
      if ((hc.VolumesFrom ?? []).length > 0) throw new InvalidParameter('HostConfig.VolumesFrom is not supported by this engine yet');
    }
    for (const m of (hc.Mounts as Array<{ Type?: string }> | null) ?? []) {
      if (m.Type !== 'bind' && m.Type !== 'tmpfs' && !(m.Type === 'volume' && this.deps.volumes)) throw new InvalidParameter(`mounts of type ${JSON.stringify(m.Type)} are not supported by this engine yet`);
    }
  }

  // ---- start ----

  async start(ref: string): Promise<void> {
    const record = this.store.get(ref);
    await this.withLock(record.Id, () => this.startLocked(record));
  }

  private async startLocked(record: ContainerRecord): Promise<void> {
    const state = record.State;
    if (state.Paused) throw new Conflict(`cannot start a paused container, try unpause instead`);
    if (state.Running) throw new NotModified('container already started');
    if (state.Status === 'removing') throw new Conflict(`container ${record.Id} is marked for removal and cannot be started`);
    this.cancelRestart(record.Id);
    const hc = record.HostConfig as Record<string, any>;
    let mounted = false;
    let volumesMounted = false;
    let mountedVolumes: { sources: Map<string, string>; release(): Promise<void> } | undefined;
    let connected = false;
    try {
      // Planned again at every start: the network may have gone or changed since create.
      const plan = this.networking.plan(hc.NetworkMode, { EndpointsConfig: record.EndpointsConfig }, planOptions(record.Config, hc));
      const onBridge = plan.mode === 'bridge' && (plan.networkName === 'bridge' || (plan.extra ?? []).some((e) => e.networkName === 'bridge'));
      const links = this.legacyLinks(record, onBridge);
      let network: 'new' | 'host' | { path: string } = plan.mode === 'host' ? 'host' : 'new';
      if (plan.mode === 'container') {
        const other = this.store.get(plan.container);
        if (!other.State.Running) throw new Conflict(`cannot join network of a non running container: ${other.Id}`);
        network = { path: `/proc/${other.State.Pid}/ns/net` };
      }
      this.host.startBeginning?.();
      const lowerDirs = this.images.lowerDirs(record.ImageChainIds);
      const [, passwd, group] = await Promise.all([
        fs.mkdir(this.store.dir(record.Id), { recursive: true }),
        this.host.readFileFromLayers(lowerDirs, '/etc/passwd'),
        this.host.readFileFromLayers(lowerDirs, '/etc/group'),
      ]);
      const user = resolveUser(record.Config.User, passwd?.toString('utf8'), group?.toString('utf8'), (hc.GroupAdd as string[] | null) ?? []);
      // Independent steps, done together: the root filesystem's mount, and the files the runtime bind-mounts at
      // create (/etc/hosts is written again, in place, once the address is known).
      // Both settle before going on: a mount that succeeds beside a failure is undone below.
      const [mount, files] = await Promise.allSettled([
        this.host.mountRootfs(record.Id, lowerDirs),
        writeContainerFiles(record, undefined, plan.hostGateway, { embeddedDns: plan.embeddedDns }),
      ]);
      if (mount.status === 'rejected') throw mount.reason;
      mounted = true;
      if (files.status === 'rejected') throw files.reason;
      const rootfs = mount.value;
      if (this.deps.volumes) {
        mountedVolumes = await this.deps.volumes.mountAll(record, rootfs);
        volumesMounted = true;
      }
      await checkPropagation(record.Mounts, this.host);
      const devices = await resolveDevices(hc);
      const spec = buildSpec({
        record, user, network, cgroupParent: (hc.CgroupParent as string) || '/berth', devices, mountSources: mountedVolumes?.sources, linkEnv: links.env,
      });
      const pending = this.pendingAttach.get(record.Id);
      this.runBegins(record.Id);
      const { pid } = await this.host.start(
        record.Id,
        spec,
        {
          tty: record.Config.Tty,
          openStdin: record.Config.OpenStdin,
          stdinOnce: record.Config.StdinOnce,
          logPath: record.LogPath,
          noLog: (hc.LogConfig as { Type?: string } | undefined)?.Type === 'none',
        },
        {
          afterCreate: async (pid: number) => {
            const attachment = await this.networking.connect({ id: record.Id, name: record.Name.slice(1) }, plan, network === 'host' ? undefined : pid);
            connected = true;
            await this.deps.sandboxes?.connected(record);
            record.Networks = attachment.networks;
            (record as ContainerRecord & { SandboxKey?: string }).SandboxKey = attachment.sandboxKey;
            record.Ports = attachment.ports;
            const hostsAddresses = [attachment.hostsAddress, attachment.hostsAddress6].filter((a): a is string => !!a);
            if (hostsAddresses.length > 0 || links.hosts.length > 0) await writeHostsFile(record, hostsAddresses, plan.hostGateway, links.hosts);
            // Clients that attached before start get the stream from the first byte on.
            if (pending) {
              this.pendingAttach.delete(record.Id);
              for (const p of pending) {
                await this.host.attach(record.Id).then(p.resolve, p.reject);
              }
            }
          },
        },
      );
      await mountedVolumes?.release();
      const startedAt = nowNano();
      Object.assign(record.State, {
        Status: 'running', Running: true, Paused: false, Restarting: false, OOMKilled: false, Dead: false,
        Pid: pid, ExitCode: 0, Error: '', StartedAt: rfc3339Nano(startedAt),
      });
      record.ManuallyStopped = false;
      this.released.delete(record.Id);
      this.monitor(record);
      await this.store.save(record);
      this.publish(record, 'start');
      this.signals.emit(`start:${record.Id}`);
      await this.updateLinkParents(record);
    } catch (err) {
      await mountedVolumes?.release();
      if (connected) await this.disconnectNetwork(record.Id).catch(() => undefined);
      await this.host.cleanup(record.Id).catch(() => undefined);
      if (mounted) await this.host.unmountRootfs(record.Id).catch(() => undefined);
      if (volumesMounted) await this.deps.volumes!.unmountAll(record).catch(() => undefined);
      const message = errorMessage(err);
      record.State.Error = message;
      // The runtime's error says which exit code a command that could not start gets (127 not found, 126 not
      // executable); any other start failure is recorded as 128.
      const code = (err as { exitCode?: unknown }).exitCode;
      record.State.ExitCode = typeof code === 'number' ? code : 128;
      if (record.State.Status !== 'created') record.State.Status = 'exited';
      await this.store.save(record).catch(() => undefined);
      this.exitSeen.get(record.Id)?.resolve();
      const pending = this.pendingAttach.get(record.Id);
      if (pending) {
        this.pendingAttach.delete(record.Id);
        for (const p of pending) p.reject(err);
      }
      // As Docker: a container that removes itself on exit is removed when it cannot start either.
      if (record.HostConfig.AutoRemove) {
        await this.removeLocked(record, { force: true, volumes: true }).catch((e) => log.warn('auto-remove failed', { id: record.Id, error: errorMessage(e) }));
      }
      throw err;
    }
  }

  /**
   * HostConfig.Links at create, as Docker checks them: not with host or container networking; on a
   * user-defined network they are left to the endpoint's Links (the embedded DNS answers them); otherwise each
   * names an existing container (following `container:` networking to the namespace's owner) that is not on
   * the host's network, and is kept as `/child:/parent/alias`. An alias given twice keeps its first link.
   */
  private checkLinks(hc: Record<string, any>, parentName: string): string[] | null {
    const given = (hc.Links as string[] | null | undefined) ?? [];
    if (given.length === 0) return null;
    const mode = (hc.NetworkMode as string | undefined) || 'default';
    if (mode === 'host') throw new InvalidParameter("conflicting options: host type networking can't be used with links. This would result in undefined behavior");
    if (mode.startsWith('container:')) throw new InvalidParameter("conflicting options: container type network can't be used with links. This would result in undefined behavior");
    if (!['default', 'bridge', 'none'].includes(mode)) return null;
    const lookup = (ref: string) => {
      try {
        return this.store.get(ref);
      } catch (err) {
        // Not a 404: the docker CLI would take it for a missing image and try to pull it.
        if (err instanceof NotFound) throw new InvalidParameter(`could not get container for ${ref}: No such container: ${ref}`, { cause: err });
        throw err;
      }
    };
    const out: string[] = [];
    const aliases = new Set<string>();
    for (const text of given) {
      const { name, alias } = parseLink(text);
      let child = lookup(name);
      for (let hops = 0; String(child.HostConfig.NetworkMode ?? '').startsWith('container:') && hops < 16; hops++) {
        child = lookup(String(child.HostConfig.NetworkMode).slice('container:'.length));
      }
      if (child.HostConfig.NetworkMode === 'host') throw new InvalidParameter("conflicting options: host type networking can't be used with links. This would result in undefined behavior");
      if (aliases.has(alias)) continue;
      aliases.add(alias);
      out.push(linkEntry(child.Name, parentName, alias));
    }
    return out;
  }

  /**
   * What HostConfig.Links give a container that joins the default bridge: for each linked container (which
   * must run, on the default bridge too) an /etc/hosts line (its address under the alias, its hostname and
   * its name) and the link's variables. Nothing for a container that is not on the default bridge.
   */
  private legacyLinks(record: ContainerRecord, onBridge: boolean): { hosts: LinkEntry[]; env: string[] } {
    const hosts: LinkEntry[] = [];
    const env: string[] = [];
    const links = (record.HostConfig.Links as string[] | null) ?? [];
    if (links.length === 0 || !onBridge) return { hosts, env };
    for (const link of links) {
      const { name, alias } = parseLink(link);
      const linkName = `${record.Name}/${alias}`;
      const other = this.store.find(name);
      // A linked container removed since is no more running than a stopped one (and not this start's 404).
      if (!other?.State.Running) throw new Conflict(`Cannot link to a non running container: ${other?.Name ?? `/${name}`} AS ${linkName}`);
      const address = other.Networks.bridge?.IPAddress;
      if (!address) throw new InvalidParameter(`Cannot link to ${other.Name}, as it does not belong to the default network`);
      const names = [alias, other.Config.Hostname || other.Id.slice(0, 12)];
      if (alias !== other.Name.slice(1)) names.push(other.Name.slice(1));
      hosts.push({ address, names });
      const v6 = other.Networks.bridge?.GlobalIPv6Address;
      if (v6) hosts.push({ address: v6, names });
      env.push(...linkEnv({ linkName, address, env: other.Config.Env ?? [], exposedPorts: Object.keys(other.Config.ExposedPorts ?? {}) }));
    }
    return { hosts, env };
  }

  /**
   * The link variables of a running container, for its exec processes (as Docker gives them); none when a
   * linked container no longer runs.
   */
  linkEnv(record: ContainerRecord): string[] {
    try {
      return this.legacyLinks(record, record.Networks.bridge !== undefined).env;
    } catch {
      return [];
    }
  }

  /**
   * The running containers that link to `child` see its new address on the default bridge in their
   * /etc/hosts (as Docker updates its parents' files when a linked container starts again).
   */
  private async updateLinkParents(child: ContainerRecord): Promise<void> {
    const address = child.Networks.bridge?.IPAddress;
    if (!address) return;
    for (const parent of this.store.all()) {
      if (parent.Id === child.Id || !parent.State.Running) continue;
      for (const link of (parent.HostConfig.Links as string[] | null) ?? []) {
        const { name, alias } = parseLink(link);
        if (name !== child.Name.slice(1)) continue;
        await replaceHostsEntry(parent.HostsPath, alias, address).catch((err) =>
          log.warn('cannot update the hosts file of a linked container', { id: parent.Id, error: errorMessage(err) }),
        );
      }
    }
  }

  /**
   * Legacy links follow a renamed container, as Docker's do: those to it (as the linked container) and its
   * own (as the parent) name it anew.
   */
  private async renameInLinks(oldName: string, newName: string): Promise<void> {
    const bare = (n: string) => n.replace(/^\//, '');
    for (const c of this.store.all()) {
      const links = (c.HostConfig.Links as string[] | null) ?? [];
      let changed = false;
      const next = links.map((l) => {
        const { name, alias } = parseLink(l);
        const child = name === bare(oldName) ? newName : `/${name}`;
        const entry = linkEntry(child, c.Name, alias);
        if (entry !== l) changed = true;
        return entry;
      });
      if (!changed) continue;
      c.HostConfig.Links = next;
      await this.store.save(c).catch((err) => log.warn('cannot save the renamed links of a container', { id: c.Id, error: errorMessage(err) }));
    }
  }

  /**
   * Removes the legacy link `parent/alias` (DELETE /containers/parent/alias?link=1): the parent's
   * configuration forgets it, and a running parent's /etc/hosts loses its line.
   */
  async removeLink(ref: string): Promise<void> {
    const full = ref.replace(/^\/+/, '');
    const slash = full.lastIndexOf('/');
    if (slash < 0) {
      this.store.get(full);
      throw new Conflict('Conflict, cannot remove the default link name of the container');
    }
    const parentName = full.slice(0, slash);
    const alias = full.slice(slash + 1);
    const parent = this.store.all().find((c) => c.Name === `/${parentName}`);
    const has = (c: ContainerRecord) => ((c.HostConfig.Links as string[] | null) ?? []).some((l) => parseLink(l).alias === alias);
    if (!parent || !has(parent)) throw new NotFound(`No such container: ${full}`);
    await this.withLock(parent.Id, async () => {
      const kept = ((parent.HostConfig.Links as string[] | null) ?? []).filter((l) => parseLink(l).alias !== alias);
      parent.HostConfig.Links = kept.length > 0 ? kept : null;
      await this.store.save(parent);
      if (parent.State.Running) {
        await replaceHostsEntry(parent.HostsPath, alias, undefined).catch((err) =>
          log.warn('cannot update the hosts file of a container', { id: parent.Id, error: errorMessage(err) }),
        );
      }
    });
  }

  /** Watches a running container's process and handles its exit. */
  private monitor(record: ContainerRecord): void {
    const id = record.Id;
    const seen = this.exitSeen.get(id) ?? this.runBegins(id);
    const exited = this.host.waitExit(id);
    exited.then(seen.resolve, seen.resolve);
    const done = exited.then(
      (exit) => this.withLock(id, () => this.handleExit(record, exit)),
      (err) => {
        log.error('lost track of container process', { id, error: errorMessage(err) });
        return this.withLock(id, () => this.handleExit(record, { exitCode: 255, finishedAtNano: nowNano(), oomKilled: false }));
      },
    );
    this.exited.set(id, done.catch(() => undefined));
  }

  /** A run of the container begins: its exit is not known yet. */
  private runBegins(id: string): { promise: Promise<void>; resolve(): void } {
    let resolve!: () => void;
    const seen = { promise: new Promise<void>((r) => (resolve = r)), resolve: () => resolve() };
    this.exitSeen.set(id, seen);
    return seen;
  }

  /**
   * As Docker: an exit is told (state, events, waiters) once the attached clients have the run's output,
   * or after DELIVERY_WAIT_MS when one of them does not take it.
   */
  private async outputDelivered(id: string): Promise<void> {
    const pending = this.deliveries.get(id);
    this.deliveries.delete(id);
    if (!pending || pending.size === 0) return;
    let timer: NodeJS.Timeout | undefined;
    const delivered = await Promise.race([
      Promise.all(pending).then(() => true),
      new Promise<boolean>((r) => (timer = setTimeout(() => r(false), DELIVERY_WAIT_MS))),
    ]);
    clearTimeout(timer);
    if (!delivered) log.debug('an attached client did not take the output of the run in time: its exit is told without waiting further', { id });
  }

  private async handleExit(record: ContainerRecord, exit: ExitInfo): Promise<void> {
    if (!record.State.Running && !record.State.Restarting) return;
    await this.outputDelivered(record.Id);
    const ranMs = Date.now() - Date.parse(record.State.StartedAt);
    Object.assign(record.State, {
      Status: 'exited', Running: false, Paused: false, Restarting: false, Pid: 0,
      ExitCode: exit.exitCode, OOMKilled: exit.oomKilled, FinishedAt: rfc3339Nano(exit.finishedAtNano),
    });
    this.exited.delete(record.Id);
    if (exit.oomKilled) this.publish(record, 'oom');
    this.publish(record, 'die', { exitCode: String(exit.exitCode) });
    const restart = this.shouldRestart(record, exit.exitCode);
    if (restart) {
      const previous = this.restartDelays.get(record.Id) ?? 0;
      const delay = ranMs >= RESTART_RESET_AFTER_MS || previous === 0 ? RESTART_BASE_DELAY_MS : Math.min(previous * 2, RESTART_MAX_DELAY_MS);
      this.restartDelays.set(record.Id, delay);
      Object.assign(record.State, { Status: 'restarting', Restarting: true });
    }
    // As Docker: the waiters have their answer as soon as the exit is known; the network, the volumes, the
    // record on disk, the runtime's state and the root filesystem follow, still under the container's lock (a
    // start, remove or copy that follows waits for them; recovery reads the exit from the monitor's file).
    this.releasing.add(record.Id);
    this.signals.emit(`exit:${record.Id}`, exit.exitCode);
    let released = true;
    const warn = (what: string, releases: boolean) => (err: unknown) => {
      if (releases) released = false;
      log.warn(`${what} failed`, { id: record.Id, error: errorMessage(err) });
    };
    // Independent of one another, so done together; the volumes are unmounted before the root filesystem
    // they sit in.
    // A container that removes itself on exit (without volumes, which `rm -v` removes in order) leaves the
    // index now and its record the disk beside the release, instead of after it: nobody reads the exited state.
    const removeNow = !restart && record.HostConfig.AutoRemove && !record.Mounts.some((m) => m.Type === 'volume');
    if (removeNow) record.State.Status = 'removing';
    const network = this.disconnectNetwork(record.Id).catch(warn('network disconnect', true));
    this.networkReleases.set(record.Id, network);
    const [saved] = await Promise.allSettled([
      removeNow ? this.store.remove(record, { tombstone: true }) : this.store.save(record),
      network,
      this.host.cleanup(record.Id).catch(warn('runtime cleanup', true)),
      (async () => {
        await this.deps.volumes?.unmountAll(record).catch(warn('volume unmount', false));
        await this.host.unmountRootfs(record.Id).catch(warn('unmount', false));
      })(),
    ]);
    this.releasing.delete(record.Id);
    this.networkReleases.delete(record.Id);
    if (released) this.released.add(record.Id);
    if (removeNow) {
      if (saved.status === 'rejected') log.warn('auto-remove failed', { id: record.Id, error: errorMessage(saved.reason) });
      await this.finishAutoRemove(record);
      return;
    }
    if (saved.status === 'rejected') throw saved.reason;
    if (restart) {
      this.scheduleRestart(record, this.restartDelays.get(record.Id)!);
    } else if (record.HostConfig.AutoRemove) {
      await this.removeLocked(record, { force: true, volumes: true }).catch((err) => log.warn('auto-remove failed', { id: record.Id, error: errorMessage(err) }));
    }
  }

  /** The rest of an auto-removal whose record went beside the exit's release (see handleExit). */
  private async finishAutoRemove(record: ContainerRecord): Promise<void> {
    await this.finishRemoval(record.Id);
    this.removed(record);
  }

  /** What users see once a container is removed: the destroy event, and the answer of its `removed` waiters. */
  private removed(record: ContainerRecord): void {
    this.restartDelays.delete(record.Id);
    this.exitSeen.delete(record.Id);
    this.publish(record, 'destroy');
    this.signals.emit(`removed:${record.Id}`);
  }

  private shouldRestart(record: ContainerRecord, exitCode: number): boolean {
    if (record.ManuallyStopped || record.State.Status === 'removing') return false;
    const policy = record.HostConfig.RestartPolicy;
    switch (policy.Name) {
      case 'always':
      case 'unless-stopped':
        return true;
      case 'on-failure':
        return exitCode !== 0 && (policy.MaximumRetryCount === 0 || record.RestartCount < policy.MaximumRetryCount);
      default:
        return false;
    }
  }

  private scheduleRestart(record: ContainerRecord, delay: number): void {
    const timer = setTimeout(() => {
      this.restartTimers.delete(record.Id);
      void this.withLock(record.Id, async () => {
        if (!record.State.Restarting || !this.store.find(record.Id)) return;
        record.RestartCount++;
        record.State.Restarting = false;
        record.State.Status = 'exited';
        await this.startLocked(record);
      }).catch((err) => log.warn('restart failed', { id: record.Id, error: errorMessage(err) }));
    }, delay);
    this.restartTimers.set(record.Id, { timer, delay });
  }

  private cancelRestart(id: string): boolean {
    const pending = this.restartTimers.get(id);
    if (!pending) return false;
    clearTimeout(pending.timer);
    this.restartTimers.delete(id);
    return true;
  }

  // ---- stop, kill, restart ----

  async stop(ref: string, opts: { timeoutSeconds?: number; signal?: string } = {}): Promise<void> {
    const record = this.store.get(ref);
    if (record.State.Restarting) {
      await this.withLock(record.Id, async () => {
        this.cancelRestart(record.Id);
        Object.assign(record.State, { Status: 'exited', Restarting: false });
        record.ManuallyStopped = true;
        await this.store.save(record);
      });
      this.publish(record, 'stop');
      return;
    }
    if (!record.State.Running) throw new NotModified('container already stopped');
    record.ManuallyStopped = true;
    // Persisted before the signal only where a daemon restart reads it (it restarts only these policies);
    // the exit's save records it for the others.
    const policy = record.HostConfig.RestartPolicy?.Name;
    if (policy === 'always' || policy === 'unless-stopped') await this.store.save(record);
    const stopSignal = parseSignal(opts.signal || record.Config.StopSignal || 'SIGTERM');
    const timeout = opts.timeoutSeconds ?? record.Config.StopTimeout ?? 10;
    await this.killAndWait(record, stopSignal, timeout);
    this.publish(record, 'stop');
  }

  /** Sends `signal`, waits up to `timeoutSeconds` (negative: forever), then SIGKILL. */
  private async killAndWait(record: ContainerRecord, signal: number, timeoutSeconds: number): Promise<void> {
    const exited = this.exited.get(record.Id) ?? Promise.resolve();
    if (signal !== 9) {
      this.publish(record, 'kill', { signal: String(signal) });
      await this.host.signal(record.Id, signal).catch(() => undefined);
      await this.signalled(record, signal);
      if (timeoutSeconds < 0) {
        await exited;
        return;
      }
      const timedOut = await Promise.race([
        exited.then(() => false),
        new Promise<boolean>((r) => setTimeout(() => r(true), timeoutSeconds * 1000).unref()),
      ]);
      if (!timedOut) return;
    }
    if (!record.State.Running) return;
    this.publish(record, 'kill', { signal: '9' });
    await this.host.signal(record.Id, 9).catch(() => undefined);
    await this.signalled(record, 9);
    await exited;
  }

  async kill(ref: string, signalText = 'SIGKILL'): Promise<void> {
    const record = this.store.get(ref);
    const signal = parseSignal(signalText);
    if (!record.State.Running) throw new Conflict(`cannot kill container: ${ref}: container ${record.Id} is not running`);
    if (signal === 9 || signal === 15 || signal === 2) record.ManuallyStopped = true;
    this.publish(record, 'kill', { signal: String(signal) });
    await this.host.signal(record.Id, signal);
    await this.signalled(record, signal);
    if (signal === 9) await (this.exited.get(record.Id) ?? Promise.resolve());
  }

  async restart(ref: string, opts: { timeoutSeconds?: number; signal?: string } = {}): Promise<void> {
    const record = this.store.get(ref);
    try {
      await this.stop(ref, opts);
    } catch (err) {
      if (!(err instanceof NotModified)) throw err;
    }
    await this.start(record.Id);
    this.publish(record, 'restart');
  }

  // ---- wait ----

  async wait(ref: string, condition: WaitCondition, signal?: AbortSignal): Promise<{ StatusCode: number; Error: { Message: string } | null }> {
    const record = this.store.get(ref);
    const result = () => ({ StatusCode: record.State.ExitCode, Error: null });
    if (condition === 'not-running' && !record.State.Running && !record.State.Restarting) return result();
    const key = condition === 'removed' ? `removed:${record.Id}` : `exit:${record.Id}`;
    return new Promise((resolve, reject) => {
      const done = () => {
        signal?.removeEventListener('abort', abort);
        resolve(result());
      };
      const abort = () => {
        this.signals.off(key, done);
        reject(new Error('client went away'));
      };
      this.signals.once(key, done);
      signal?.addEventListener('abort', abort, { once: true });
    });
  }

  // ---- remove, rename ----

  async remove(ref: string, opts: { force: boolean; volumes?: boolean }): Promise<void> {
    const record = this.store.get(ref);
    if (record.State.Status === 'removing') throw new Conflict(`removal of container ${record.Id} is already in progress`);
    if ((record.State.Running || record.State.Paused || record.State.Restarting) && !opts.force) {
      const state = record.State.Paused ? 'paused' : record.State.Restarting ? 'restarting' : 'running';
      throw new Conflict(`cannot remove container "${ref}": container is ${state}: stop the container before removing or force remove`);
    }
    if (record.State.Running && opts.force) {
      record.ManuallyStopped = true;
      this.publish(record, 'kill', { signal: '9' });
      await this.host.signal(record.Id, 9).catch(() => undefined);
      await this.signalled(record, 9);
      await (this.exited.get(record.Id) ?? Promise.resolve());
    }
    if (this.canRemoveAtOnce(record)) {
      await this.removeAtOnce(record);
      return;
    }
    await this.withLock(record.Id, () => this.removeLocked(record, opts));
  }

  /**
   * Whether a removal may answer before the container's clean-up: the container does not run, nothing but its
   * exit's release holds its lock (a start, a copy or a commit in progress is waited for), and it has no
   * volumes (`rm -v` removes them before it answers, and a volume is free once the container is gone).
   */
  private canRemoveAtOnce(record: ContainerRecord): boolean {
    if (record.State.Running || record.State.Paused || record.State.Restarting) return false;
    if (record.Mounts.some((m) => m.Type === 'volume')) return false;
    const users = this.lockUsers.get(record.Id) ?? 0;
    return users === 0 || (users === 1 && this.releasing.has(record.Id));
  }

  /**
   * Removes the container as users see it (its record, durably, and its name; the destroy event; its network
   * endpoints, addresses and published ports, which the next container may ask for), and leaves the release of
   * the rest (runtime state, cgroups, root filesystem, folders) to a section under its lock, after its exit's
   * own. Until that section is done the record's folder stays aside as a tombstone, so that a daemon stopped
   * meanwhile finishes the clean-up at its next start (load()).
   */
  private async removeAtOnce(record: ContainerRecord): Promise<void> {
    const id = record.Id;
    this.cancelRestart(id);
    record.State.Status = 'removing';
    const network = this.networkReleases.get(id);
    // Taken from the index now (the name is free at once); the folder goes aside, durably, below.
    const gone = this.store.remove(record, { tombstone: true });
    const finished = this.withLock(id, async () => {
      await gone.catch(() => undefined);
      await this.finishRemoval(id);
    }).finally(() => {
      if (this.finishing.get(id) === finished) this.finishing.delete(id);
    });
    this.finishing.set(id, finished);
    await Promise.all([gone, network]);
    this.removed(record);
  }

  /**
   * The clean-up of a removed container whose folder is kept aside (a tombstone) until it is done: what it held
   * is released, then the folder goes. A failure is logged; the tombstone stays for the next start of the daemon.
   */
  private async finishRemoval(id: string): Promise<void> {
    try {
      await this.releaseRemoved(id);
      await this.store.dropTombstone(id);
    } catch (err) {
      log.warn('clean-up of a removed container failed', { id, error: errorMessage(err) });
    }
  }

  /** Releases what a removed container held, whatever its exit released already. */
  private async releaseRemoved(id: string): Promise<void> {
    if (!this.released.has(id)) {
      await this.disconnectNetwork(id).catch(() => undefined);
      await this.host.cleanup(id).catch((err) => log.warn('runtime clean-up of a removed container failed', { id, error: errorMessage(err) }));
    }
    this.released.delete(id);
    await this.host.unmountRootfs(id).catch(() => undefined);
    await this.host.removeContainerFiles(id);
  }

  private async removeLocked(record: ContainerRecord, opts: { force: boolean; volumes?: boolean }): Promise<void> {
    if (!this.store.find(record.Id)) return;
    this.cancelRestart(record.Id);
    record.State.Status = 'removing';
    // What the exit already released is not released again (a second `crun delete` costs a process). The
    // root filesystem is always unmounted: a copy into a stopped container mounts it again.
    if (!this.released.has(record.Id)) {
      await this.disconnectNetwork(record.Id).catch(() => undefined);
      await this.host.cleanup(record.Id).catch(() => undefined);
    }
    this.released.delete(record.Id);
    await this.host.unmountRootfs(record.Id).catch(() => undefined);
    await this.host.removeContainerFiles(record.Id);
    await this.store.remove(record);
    // As Docker: `rm -v` (and AutoRemove) removes the container's anonymous volumes; named ones stay.
    if (opts.volumes) await this.deps.volumes?.removeAnonymous(record);
    this.removed(record);
  }

  async rename(ref: string, newNameParam: string): Promise<void> {
    if (!newNameParam) throw new InvalidParameter('query parameter name is required: give the new name');
    const newName = validateName(newNameParam);
    const record = this.store.get(ref);
    const oldName = record.Name;
    if (oldName === newName) throw new Conflict(`Renaming a container with the same name as its current name`);
    await this.withLock(record.Id, async () => {
      this.store.rename(record, newName);
      try {
        await this.store.save(record);
      } catch (err) {
        this.store.rename(record, oldName);
        throw err;
      }
      await this.networking.renamed(record.Id, newName);
      await this.renameInLinks(oldName, record.Name);
      // A running container's endpoints now answer to the new name: its record shows their DNSNames.
      if (record.State.Running) {
        const networks = this.networking.containerNetworks(record.Id);
        if (Object.keys(networks).length > 0) {
          record.Networks = networks;
          await this.store.save(record);
        }
      }
    });
    this.publish(record, 'rename', { oldName });
  }

  /**
   * Changes a container's network configuration (network connect and disconnect), serialised with its
   * other state changes: `change` sees the configuration and whether the container runs, and returns the new
   * one. For a container that is not running, the endpoints shown are the planned ones (no address yet).
   */
  async configureNetworks(ref: string, change: (current: ContainerNetworkConfig) => Promise<ContainerNetworkChange | undefined>): Promise<void> {
    const record = this.store.get(ref);
    await this.withLock(record.Id, async () => {
      if (!this.store.find(record.Id)) throw new NotFound(`No such container: ${ref}`);
      const hc = record.HostConfig as Record<string, any>;
      const next = await change({
        Id: record.Id,
        Name: record.Name,
        Running: record.State.Running,
        Pid: record.State.Pid,
        NetworkMode: (hc.NetworkMode as string | undefined) ?? '',
        EndpointsConfig: structuredClone(record.EndpointsConfig ?? {}),
        Dns: (hc.Dns as string[] | null | undefined) ?? undefined,
      });
      if (!next) return;
      // A running container that now has the embedded DNS server (it joined a user-defined network) resolves
      // through it, as with Docker: its resolv.conf is written again, in place.
      if (next.Networks && record.State.Running && this.networking.servesDns(record.Id)) {
        await rewriteResolvConf(record, { embeddedDns: true }).catch((err) =>
          log.warn('cannot point the resolv.conf of a container at the embedded DNS server', { id: record.Id, error: errorMessage(err) }),
        );
      }
      const networkMode = next.NetworkMode ?? hc.NetworkMode;
      const networks =
        next.Networks ??
        this.networking.plannedNetworks(
          this.networking.plan(networkMode, { EndpointsConfig: next.EndpointsConfig }, { ...planOptions(record.Config, hc), deferUnknownNetwork: true }),
        );
      hc.NetworkMode = networkMode;
      record.EndpointsConfig = next.EndpointsConfig as ContainerRecord['EndpointsConfig'];
      record.Networks = networks;
      await this.store.save(record);
    });
  }

  // ---- attach, resize ----

  /**
   * Connects to the container's stdio. A container that is not running yet is waited for: the connection
   * is made between the runtime's create and start, so that no output is lost. `delivery`, when given,
   * settles once the client has the output (the caller wrote the last of it, or the client went away): the
   * run's exit is told to its waiters only after that (see outputDelivered).
   */
  async attach(ref: string, signal: AbortSignal, delivery?: Promise<void>): Promise<{ record: ContainerRecord; streams: AttachStreams }> {
    const record = this.store.get(ref);
    if (record.State.Paused) throw new Conflict(`You cannot attach to a paused container, unpause it first`);
    if (delivery) this.awaitDelivery(record.Id, delivery);
    if (record.State.Running) return { record, streams: await this.host.attach(record.Id) };
    // Everything this run writes comes after this moment: the container is not running yet.
    const attachedNano = nowNano();
    const streams = await new Promise<AttachStreams>((resolve, reject) => {
      const set = this.pendingAttach.get(record.Id) ?? new Set<PendingAttach>();
      const entry: PendingAttach = {
        resolve: (s) => {
          signal.removeEventListener('abort', abort);
          resolve(s);
        },
        reject: (e) => {
          signal.removeEventListener('abort', abort);
          reject(e);
        },
      };
      const abort = () => {
        set.delete(entry);
        reject(new Error('client went away'));
      };
      set.add(entry);
      this.pendingAttach.set(record.Id, set);
      signal.addEventListener('abort', abort, { once: true });
    });
    return { record, streams: this.completedFromLog(record, streams, attachedNano) };
  }

  /**
   * conmon may close an attach socket before the last output of an ending container went through it (seen
   * in about one run in twenty), while its log has every byte. For a client attached from before the start,
   * the whole run is in the log after `sinceNano`: once the container has ended, what the log holds beyond
   * the bytes already delivered (per stream) is sent too. Not after a detach, and not for huge outputs.
   */
  private awaitDelivery(id: string, delivery: Promise<void>): void {
    let set = this.deliveries.get(id);
    if (!set) this.deliveries.set(id, (set = new Set()));
    set.add(delivery);
    const done = () => {
      set.delete(delivery);
      if (set.size === 0 && this.deliveries.get(id) === set) this.deliveries.delete(id);
    };
    delivery.then(done, done);
  }

  private completedFromLog(record: ContainerRecord, streams: AttachStreams, sinceNano: bigint): AttachStreams {
    if ((record.HostConfig.LogConfig as { Type?: string } | undefined)?.Type === 'none') return streams;
    let detached = false;
    const host = this.host;
    // The exit being known is enough for the log to be complete; the exit's handling waits for this output.
    const exited = () => this.exitSeen.get(record.Id)?.promise ?? Promise.resolve();
    async function* output(): AsyncGenerator<{ stream: 'stdout' | 'stderr'; data: Buffer }> {
      const sent = { stdout: 0, stderr: 0 };
      for await (const chunk of streams.output as AsyncIterable<{ stream: 'stdout' | 'stderr'; data: Buffer }>) {
        sent[chunk.stream] += chunk.data.length;
        yield chunk;
      }
      if (detached || sent.stdout + sent.stderr > RECONCILE_LIMIT) return;
      await exited();
      const skip = { ...sent };
      const records = host.readLogBatches(record.LogPath, { follow: false, signal: new AbortController().signal });
      for await (const chunk of logChunks(records, { stdout: true, stderr: true, timestamps: false, follow: false, sinceNano })) {
        const already = skip[chunk.stream];
        if (already >= chunk.data.length) {
          skip[chunk.stream] -= chunk.data.length;
          continue;
        }
        skip[chunk.stream] = 0;
        yield { stream: chunk.stream, data: chunk.data.subarray(already) };
      }
    }
    return {
      input: streams.input,
      output: Readable.from(output(), { objectMode: true }),
      close: () => {
        detached = true;
        streams.close();
      },
    };
  }

  /** Publishes the attach event (the API calls it once a client is attached). */
  attached(record: ContainerRecord): void {
    this.publish(record, 'attach');
  }

  /** Publishes the detach event (an attached client typed the detach keys). */
  detached(record: ContainerRecord): void {
    this.publish(record, 'detach');
  }

  async resize(ref: string, height: number, width: number): Promise<void> {
    const record = this.store.get(ref);
    if (!record.State.Running) throw new Conflict(`Container ${record.Id} is not running`);
    if (record.Config.Tty) await this.host.resize(record.Id, height, width);
    this.publish(record, 'resize', { height: String(height), width: String(width) });
  }

  // ---- recovery ----

  /**
   * Loads the containers and reconciles them with what runs: live ones are watched again, those that ended
   * while the daemon was down get their exit code, leftovers of a crash are removed, and containers whose
   * restart policy says so are started.
   */
  async load(): Promise<void> {
    // Removals answered before their clean-up, which a stop of the daemon interrupted: finished first.
    for (const id of await this.store.load()) await this.finishRemoval(id);
    const live = new Map<string, LiveContainer>();
    const toRestart: ContainerRecord[] = [];
    for (const record of this.store.all()) {
      if (record.State.Status === 'removing') {
        await this.removeLocked(record, { force: true }).catch(() => undefined);
        continue;
      }
      if (record.State.Running || record.State.Paused) {
        const status = await this.host.isRunning(record.Id).catch(() => ({ running: false, pid: 0 }));
        if (status.running) {
          live.set(record.Id, { name: record.Name, networks: record.Networks });
          record.State.Pid = status.pid;
          this.monitor(record);
          continue;
        }
        const exit = await Promise.race([
          this.host.waitExit(record.Id),
          new Promise<undefined>((r) => setTimeout(() => r(undefined), 200)),
        ]).catch(() => undefined);
        await this.host.cleanup(record.Id).catch(() => undefined);
        await this.host.unmountRootfs(record.Id).catch(() => undefined);
        Object.assign(record.State, {
          Status: 'exited', Running: false, Paused: false, Restarting: false, Pid: 0,
          ExitCode: exit?.exitCode ?? 255,
          Error: exit ? '' : 'the container ended while the engine was down and its exit code was not recorded',
          FinishedAt: rfc3339Nano(exit?.finishedAtNano ?? nowNano()),
        });
        await this.store.save(record);
        this.publish(record, 'die', { exitCode: String(record.State.ExitCode) });
      } else {
        await this.host.unmountRootfs(record.Id).catch(() => undefined);
      }
      if (record.State.Restarting) Object.assign(record.State, { Status: 'exited', Restarting: false });
      const policy = record.HostConfig.RestartPolicy.Name;
      if ((policy === 'always' || (policy === 'unless-stopped' && !record.ManuallyStopped)) && !record.ManuallyStopped) toRestart.push(record);
    }
    for (const id of await this.host.listRuntimeContainers().catch(() => [] as string[])) {
      if (!live.has(id)) await this.host.cleanup(id).catch(() => undefined);
    }
    await this.networking.recover(live);
    for (const record of toRestart) {
      await this.start(record.Id).catch((err) => log.warn('restart at daemon start failed', { id: record.Id, error: errorMessage(err) }));
    }
  }

  /**
   * At daemon shutdown: pending restarts are dropped (the containers themselves keep running), and the clean-up
   * of removals already answered is given a few seconds to end (what it leaves, the next start finishes).
   */
  async close(): Promise<void> {
    for (const { timer } of this.restartTimers.values()) clearTimeout(timer);
    this.restartTimers.clear();
    const pending = [...this.finishing.values()];
    if (pending.length === 0) return;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([Promise.all(pending), new Promise((resolve) => (timer = setTimeout(resolve, CLOSE_WAIT_MS)))]);
    clearTimeout(timer);
  }
}
