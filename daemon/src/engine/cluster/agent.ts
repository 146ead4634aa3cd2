/**
 * The node's agent: runs the tasks assigned to this node as ordinary containers of the container engine,
 * named and labelled as Docker names them (`<service>.<slot>.<task id>`, `com.docker.swarm.*`), with the
 * task's secrets and configs bind-mounted from files the host writes on the exec root's tmpfs; reports each
 * task's state upward, stops tasks whose desired state is past running, and removes the containers (and
 * files) of tasks that are gone. It works from the last assignments it got, so tasks keep running while no
 * manager can be reached.
 */
import { log } from '../../util/log.js';
import { Passes } from '../../util/passes.js';
import type { ClusterHost } from '../../host/cluster.js';
import type { ContainerLogReader, LogShipper } from './remotelogs.js';
import type { DnsAnswers } from '../../host/network.js';
import { lookupService } from './network/dns.js';
import { isTerminal, now, stateRank, type Obj } from './types.js';
import { OverlayPlane, type NodeNetworks } from './network/plane.js';
import type { AttachAnswer, AttachmentSource, AttachRequest } from './network/attachable.js';
import type { OverlayAttachment } from '../../host/overlay.js';

/** What the agent needs of the container engine. */
export interface TaskContainers {
  create(body: Obj, name: string): Promise<string>;
  start(id: string): Promise<void>;
  stop(id: string, timeoutSeconds: number): Promise<void>;
  remove(id: string): Promise<void>;
  /** The container's state, or undefined when it does not exist. */
  state(id: string): { running: boolean; exitCode: number; pid: number; error: string } | undefined;
  /** Containers with the label com.docker.swarm.task.id: their ids and task ids. */
  taskContainers(): Array<{ id: string; taskId: string }>;
  /** Calls `fn` when a container exits. */
  onExit(fn: (containerId: string) => void): () => void;
  /** The log of a container (undefined when it has none). */
  readLog?: ContainerLogReader;
  /** Serves the embedded DNS server (127.0.0.11) in the running container's namespace with these answers. */
  startDns?(containerId: string, pid: number, answers: DnsAnswers): Promise<void>;
  stopDns?(containerId: string): void;
}

/** Where the agent's assignments come from and where its reports go (the store on a manager, a dispatcher on a worker). */
export interface AgentSource extends Partial<AttachmentSource> {
  /** False until the first assignments arrived (nothing is removed before). */
  ready(): boolean;
  tasks(): Obj[];
  secret(id: string): Obj | undefined;
  config(id: string): Obj | undefined;
  onChange(fn: () => void): () => void;
  report(taskId: string, status: Obj): Promise<void>;
  /** The log requests of managers for this node's tasks (see remotelogs.ts). */
  logRequests?(): Obj[];
  /** The swarm networks this node must build, with their peers (none when absent). */
  networks?(): NodeNetworks | undefined;
}

export const TASK_LABEL = 'com.docker.swarm.task.id';
const SECOND = 1_000_000_000;

export function taskName(t: Obj): string {
  const service = t.ServiceAnnotations?.Name ?? t.ServiceID;
  return `${service}.${t.Slot ?? t.NodeID}.${t.ID}`;
}

/** The container create body of a task. */
export function containerBody(t: Obj, nodeId: string, files: Map<string, string>): Obj {
  const cs: Obj = t.Spec.ContainerSpec;
  const labels: Record<string, string> = {
    ...(cs.Labels ?? {}),
    'com.docker.swarm.node.id': nodeId,
    'com.docker.swarm.service.id': t.ServiceID,
    'com.docker.swarm.service.name': t.ServiceAnnotations?.Name ?? '',
    'com.docker.swarm.task': '',
    'com.docker.swarm.task.id': t.ID,
    'com.docker.swarm.task.name': `${t.ServiceAnnotations?.Name ?? t.ServiceID}.${t.Slot ?? t.NodeID}.${t.ID}`,
  };
  const mounts: Obj[] = [...(cs.Mounts ?? [])];
  for (const ref of cs.Secrets ?? []) {
    const name = ref.File?.Name ?? ref.SecretName;
    const source = files.get(`secret:${ref.SecretID}:${name}`);
    if (source) mounts.push({ Type: 'bind', Source: source, Target: name.startsWith('/') ? name : `/run/secrets/${name}`, ReadOnly: true });
  }
  for (const ref of cs.Configs ?? []) {
    const name = ref.File?.Name ?? ref.ConfigName;
    const source = files.get(`config:${ref.ConfigID}:${name}`);
    if (source) mounts.push({ Type: 'bind', Source: source, Target: name.startsWith('/') ? name : `/${name}`, ReadOnly: true });
  }
  const limits = t.Spec.Resources?.Limits ?? {};
  const reservations = t.Spec.Resources?.Reservations ?? {};
  const exposed: Record<string, object> = {};
  const bindings: Record<string, Array<{ HostIp: string; HostPort: string }>> = {};
  for (const p of t.Endpoint?.Ports ?? []) {
    if (p.PublishMode !== 'host') continue;
    const k = `${p.TargetPort}/${p.Protocol ?? 'tcp'}`;
    exposed[k] = {};
    (bindings[k] ??= []).push({ HostIp: '', HostPort: p.PublishedPort ? String(p.PublishedPort) : '' });
  }
  const hosts = (cs.Hosts ?? []).map((h: string) => {
    // Swarm writes "IP host [alias...]"; the container engine takes "host:IP".
    const [ip, ...names] = h.trim().split(/\s+/);
    return names.length > 0 ? names.map((n) => `${n}:${ip}`) : [h];
  }).flat();
  return {
    Image: cs.Image,
    ...(cs.Command ? { Entrypoint: cs.Command } : {}),
    ...(cs.Args ? { Cmd: cs.Args } : {}),
    Env: cs.Env ?? [],
    WorkingDir: cs.Dir ?? '',
    User: cs.User ?? '',
    Hostname: cs.Hostname ?? '',
    Tty: cs.TTY ?? false,
    OpenStdin: cs.OpenStdin ?? false,
    Labels: labels,
    ...(cs.StopSignal ? { StopSignal: cs.StopSignal } : {}),
    ...(cs.StopGracePeriod !== undefined ? { StopTimeout: Math.ceil(cs.StopGracePeriod / SECOND) } : {}),
    ...(cs.Healthcheck ? { Healthcheck: cs.Healthcheck } : {}),
    ExposedPorts: exposed,
    HostConfig: {
      Mounts: mounts,
      PortBindings: bindings,
      RestartPolicy: { Name: 'no' },
      ...(cs.Init !== undefined ? { Init: cs.Init } : {}),
      ReadonlyRootfs: cs.ReadOnly ?? false,
      ...(cs.CapabilityAdd ? { CapAdd: cs.CapabilityAdd } : {}),
      ...(cs.CapabilityDrop ? { CapDrop: cs.CapabilityDrop } : {}),
      ...(cs.Sysctls ? { Sysctls: cs.Sysctls } : {}),
      ...(cs.Ulimits ? { Ulimits: cs.Ulimits } : {}),
      ...(cs.Groups ? { GroupAdd: cs.Groups } : {}),
      ...(hosts.length ? { ExtraHosts: hosts } : {}),
      ...(cs.DNSConfig?.Nameservers ? { Dns: cs.DNSConfig.Nameservers } : {}),
      ...(cs.DNSConfig?.Search ? { DnsSearch: cs.DNSConfig.Search } : {}),
      ...(cs.DNSConfig?.Options ? { DnsOptions: cs.DNSConfig.Options } : {}),
      ...(limits.NanoCPUs ? { NanoCpus: limits.NanoCPUs } : {}),
      ...(limits.MemoryBytes ? { Memory: limits.MemoryBytes } : {}),
      ...(limits.Pids ? { PidsLimit: limits.Pids } : {}),
      ...(reservations.MemoryBytes ? { MemoryReservation: reservations.MemoryBytes } : {}),
    },
  };
}

export class Agent {
  private stopped = false;
  private readonly passes = new Passes(() => this.reconcile(), () => !this.stopped);
  private readonly busy = new Set<string>();
  private readonly filesRemoved = new Set<string>();
  private timer?: NodeJS.Timeout;
  private unsubscribe: Array<() => void> = [];
  private readonly plane: OverlayPlane;
  /** Attachments of removed containers whose release was asked for. */
  private readonly released = new Set<string>();
  /** Task containers whose embedded DNS server this process serves (none after a daemon restart). */
  private readonly dnsServed = new Set<string>();

  constructor(
    private readonly nodeId: string,
    private readonly source: AgentSource,
    private readonly containers: TaskContainers,
    private readonly host: ClusterHost,
    /** Ships the logs managers ask of this node's tasks. */
    private readonly shipper?: LogShipper,
  ) {
    this.plane = new OverlayPlane(host.overlay);
  }

  start(): void {
    this.unsubscribe.push(this.source.onChange(() => this.kick()));
    const shipper = this.shipper;
    if (shipper) {
      const requests = () => shipper.update(this.source.logRequests?.() ?? []);
      this.unsubscribe.push(this.source.onChange(requests), () => shipper.stop());
      requests();
    }
    this.unsubscribe.push(this.containers.onExit((id) => {
      this.plane.forget(id);
      if (this.dnsServed.delete(id)) this.containers.stopDns?.(id);
      this.kick();
    }));
    this.timer = setInterval(() => this.kick(), 1000);
    this.timer.unref();
    this.kick();
  }

  stop(): void {
    this.stopped = true;
    for (const u of this.unsubscribe) u();
    if (this.timer) clearInterval(this.timer);
  }

  /**
   * Stops, and takes down what only this process keeps up: the encryption of encrypted overlays (their
   * peers are removed too, so that nothing leaves in clear until the agent runs again).
   */
  async halt(): Promise<void> {
    this.stop();
    await this.plane.stopEncryption().catch((err: unknown) => log.warn('swarm agent: could not stop the encryption of overlays', { error: String(err) }));
  }

  /** Stops, waits for the work under way (a container being created), then removes every task's container and files (the node left the swarm). */
  async removeAll(): Promise<void> {
    this.stop();
    const deadline = Date.now() + 30_000;
    while ((this.passes.busy || this.busy.size > 0) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    for (const c of this.containers.taskContainers()) await this.containers.remove(c.id).catch(() => undefined);
    for (const id of await this.host.taskFileIds()) await this.host.removeTaskFiles(id).catch(() => undefined);
    await this.plane.removeAll();
  }

  kick(): void {
    if (this.stopped) return;
    this.passes.kick((err) => log.warn('swarm agent: a pass failed', { error: err instanceof Error ? err.message : String(err) }));
  }

  private report(t: Obj, status: Obj): void {
    if (stateRank(status.State) < stateRank(t.Status?.State ?? 'new')) return;
    if (status.State === t.Status?.State && status.Message === t.Status?.Message) return;
    void this.source.report(t.ID, { Timestamp: now(), ...status }).catch((err: unknown) =>
      log.warn('swarm agent: a task status could not be reported', { task: t.ID, error: err instanceof Error ? err.message : String(err) }),
    );
  }

  private async reconcile(): Promise<void> {
    if (!this.source.ready()) return;
    await this.plane.reconcile(this.source.networks?.()).catch((err: unknown) =>
      log.warn('swarm agent: the overlay networks could not be brought up to date', { error: err instanceof Error ? err.message : String(err) }));
    const tasks = this.source.tasks().filter((t) => t.NodeID === this.nodeId && stateRank(t.Status?.State) >= stateRank('assigned'));
    const byTask = new Map<string, string>();
    for (const c of this.containers.taskContainers()) byTask.set(c.taskId, c.id);
    const wanted = new Set(tasks.map((t) => t.ID));
    for (const id of this.filesRemoved) if (!wanted.has(id)) this.filesRemoved.delete(id);
    for (const [taskId, id] of byTask) {
      if (wanted.has(taskId) || this.busy.has(taskId)) continue;
      // A task that is gone (reaped, or placed elsewhere while this node was away): its container goes.
      this.busy.add(taskId);
      void this.containers.remove(id)
        .then(() => this.host.removeTaskFiles(taskId))
        .catch((err: unknown) => log.warn('swarm agent: could not remove a task container', { task: taskId, error: String(err) }))
        .finally(() => this.busy.delete(taskId));
    }
    for (const id of await this.host.taskFileIds()) if (!wanted.has(id) && !byTask.has(id) && !this.busy.has(id)) await this.host.removeTaskFiles(id);
    await this.plane.balance(
      [
        ...tasks.filter((t) => t.NetworksAttachments?.length && byTask.has(t.ID)).map((t) => ({ task: t, containerId: byTask.get(t.ID)!, pid: this.containers.state(byTask.get(t.ID)!)?.pid ?? 0 })),
        ...this.standalone(),
      ],
      this.source.networks?.(),
    ).catch((err: unknown) => log.warn('swarm agent: VIP rules could not be brought up to date', { error: err instanceof Error ? err.message : String(err) }));
    for (const t of tasks) {
      const cid = byTask.get(t.ID);
      if (!cid || !t.NetworksAttachments?.length || this.busy.has(t.ID) || this.dnsServed.has(cid) || isTerminal(t.Status?.State ?? 'new')) continue;
      const st = this.containers.state(cid);
      if (st?.running) await this.serveDns(t, cid, st.pid).catch((err: unknown) => log.warn('swarm agent: the embedded DNS server could not be started', { task: t.ID, error: String(err) }));
    }
    for (const t of tasks) {
      if (this.busy.has(t.ID)) continue;
      const cid = byTask.get(t.ID);
      const st = cid ? this.containers.state(cid) : undefined;
      const observed = t.Status?.State ?? 'assigned';
      // A job's task is desired complete: it runs until it ends on its own.
      if (stateRank(t.DesiredState) <= stateRank('running') || t.DesiredState === 'complete') {
        if (!st) {
          if (stateRank(observed) < stateRank('running')) this.launch(t);
          else if (!isTerminal(observed)) this.report(t, { State: 'failed', Message: 'task container is gone', Err: 'task container is gone' });
          continue;
        }
        if (st.running) {
          if (stateRank(observed) < stateRank('running')) this.report(t, { State: 'running', Message: 'started', ContainerStatus: { ContainerID: cid, PID: st.pid, ExitCode: 0 } });
        } else if (!isTerminal(observed) && stateRank(observed) >= stateRank('running')) {
          this.exited(t, cid!, st);
        }
      } else {
        if (st?.running) {
          this.busy.add(t.ID);
          const grace = t.Spec?.ContainerSpec?.StopGracePeriod;
          const timeout = typeof grace === 'number' ? Math.ceil(grace / SECOND) : 10;
          void this.containers.stop(cid!, timeout)
            .catch((err: unknown) => log.warn('swarm agent: could not stop a task container', { task: t.ID, error: String(err) }))
            .finally(() => {
              this.busy.delete(t.ID);
              this.report(t, { State: 'shutdown', Message: 'shutdown', ContainerStatus: { ContainerID: cid, ExitCode: this.containers.state(cid!)?.exitCode ?? 0 } });
              this.kick();
            });
        } else if (!isTerminal(observed)) {
          this.report(t, { State: 'shutdown', Message: 'shutdown', ...(st ? { ContainerStatus: { ContainerID: cid, ExitCode: st.exitCode } } : {}) });
        } else if (!this.filesRemoved.has(t.ID)) {
          // A task that stopped for good keeps its container (history) but not its secrets' and configs' files.
          this.filesRemoved.add(t.ID);
          await this.host.removeTaskFiles(t.ID);
        }
      }
    }
  }

  /**
   * The running standalone containers of this node on attachable networks (their VIP rules kept up to date as
   * tasks'), one entry per container; the attachments of containers that are gone are released.
   */
  private standalone(): Array<{ task: Obj; containerId: string; pid: number }> {
    const byContainer = new Map<string, Obj[]>();
    for (const a of this.source.attachments?.() ?? []) {
      const st = this.containers.state(a.ContainerID);
      const age = Date.now() - Date.parse(a.CreatedAt);
      // Its container was removed, or stopped long ago, while no one could release the address (a crash, a
      // manager away, a daemon down meanwhile).
      if (!st || (!st.running && age > 60_000)) {
        if (age > 10_000 && !this.released.has(a.ID)) {
          this.released.add(a.ID);
          void this.detach(a.ID).catch(() => this.released.delete(a.ID));
        }
        continue;
      }
      if (st.running && st.pid) byContainer.set(a.ContainerID, [...(byContainer.get(a.ContainerID) ?? []), a]);
    }
    return [...byContainer].map(([containerId, list]) => ({
      task: { NetworksAttachments: list.map((a) => ({ Network: { ID: a.NetworkID } })) },
      containerId,
      pid: this.containers.state(containerId)!.pid,
    }));
  }

  /** An address of an attachable network for a standalone container of this node (the managers choose it). */
  attach(body: AttachRequest): Promise<AttachAnswer> {
    if (!this.source.attach) throw new Error('this node cannot attach containers to swarm networks');
    return this.source.attach(body);
  }

  /** Releases an attachment. */
  async detach(id: string): Promise<void> {
    await this.source.detach?.({ ID: id });
  }

  /**
   * Gives a standalone container its interface on an attachable network, once this node's view of the swarm
   * holds the network (the attachment just made reaches it through the managers).
   */
  async plug(spec: Omit<OverlayAttachment, 'mtu'>): Promise<void> {
    const deadline = Date.now() + 15_000;
    let view = this.source.networks?.();
    while (!view?.Networks.some((n) => n.ID === spec.networkId)) {
      if (Date.now() > deadline) throw new Error(`network ${spec.networkId} did not reach this node in time`);
      await new Promise((r) => setTimeout(r, 50));
      view = this.source.networks?.();
    }
    await this.plane.plug(spec, view);
    this.kick();
  }

  unplug(pid: number, ifname: string): Promise<void> {
    return this.plane.unplug(pid, ifname);
  }

  /** What the embedded DNS server answers a standalone container on the swarm networks `networkIds` for `name`. */
  lookup(networkIds: readonly string[], name: string): string[] | undefined {
    return lookupService(this.source.networks?.(), networkIds, name);
  }

  /** Serves the embedded DNS server of a running task container on swarm networks. */
  private async serveDns(t: Obj, containerId: string, pid: number): Promise<void> {
    if (!this.containers.startDns || !pid) return;
    const networkIds = (t.NetworksAttachments as Obj[]).map((a) => a.Network?.ID as string);
    const upstreams = t.Spec.ContainerSpec.DNSConfig?.Nameservers;
    await this.containers.startDns(containerId, pid, {
      lookup: (name) => lookupService(this.source.networks?.(), networkIds, name),
      upstreams: () => (upstreams?.length ? upstreams : undefined),
    });
    this.dnsServed.add(containerId);
  }

  private exited(t: Obj, cid: string, st: { exitCode: number; error: string }): void {
    if (st.exitCode === 0) this.report(t, { State: 'complete', Message: 'finished', ContainerStatus: { ContainerID: cid, ExitCode: 0 } });
    else this.report(t, { State: 'failed', Message: 'started', Err: `task: non-zero exit (${st.exitCode})`, ContainerStatus: { ContainerID: cid, ExitCode: st.exitCode } });
  }

  private launch(t: Obj): void {
    this.busy.add(t.ID);
    void (async () => {
      try {
        this.report(t, { State: 'preparing', Message: 'preparing' });
        const files: Array<{ name: string; data: Buffer; mode: number }> = [];
        const cs = t.Spec.ContainerSpec;
        for (const ref of cs.Secrets ?? []) {
          const s = this.source.secret(ref.SecretID);
          if (!s) throw new Error(`secret ${ref.SecretName ?? ref.SecretID} is not available on this node`);
          const name = ref.File?.Name ?? ref.SecretName;
          files.push({ name: `secret:${ref.SecretID}:${name}`, data: Buffer.from(s.Spec.Data ?? '', 'base64'), mode: ref.File?.Mode ?? 0o444 });
        }
        for (const ref of cs.Configs ?? []) {
          const c = this.source.config(ref.ConfigID);
          if (!c) throw new Error(`config ${ref.ConfigName ?? ref.ConfigID} is not available on this node`);
          const name = ref.File?.Name ?? ref.ConfigName;
          files.push({ name: `config:${ref.ConfigID}:${name}`, data: Buffer.from(c.Spec.Data ?? '', 'base64'), mode: ref.File?.Mode ?? 0o444 });
        }
        const paths = files.length ? await this.host.writeTaskFiles(t.ID, files) : new Map<string, string>();
        const body = containerBody(t, this.nodeId, paths);
        // On swarm networks, names go to the embedded DNS server first (services, tasks.<service>).
        if (t.NetworksAttachments?.length && this.containers.startDns) body.HostConfig.Dns = ['127.0.0.11'];
        // A task only on internal networks has no way out: no default bridge beside them.
        if (t.NetworksAttachments?.length && (t.NetworksAttachments as Obj[]).every((a) => a.Network?.Spec?.Internal)) body.HostConfig.NetworkMode = 'none';
        const id = await this.containers.create(body, taskName(t));
        this.report(t, { State: 'starting', Message: 'starting', ContainerStatus: { ContainerID: id } });
        await this.containers.start(id);
        const st = this.containers.state(id);
        if (t.NetworksAttachments?.length) {
          try {
            await this.plane.attach(t, st?.pid ?? 0, this.source.networks?.());
            await this.plane.balance([{ task: t, containerId: id, pid: st?.pid ?? 0 }], this.source.networks?.(), false);
            await this.serveDns(t, id, st?.pid ?? 0);
          } catch (err) {
            await this.containers.remove(id).catch(() => undefined);
            throw err;
          }
        }
        this.report(t, { State: 'running', Message: 'started', ContainerStatus: { ContainerID: id, PID: st?.pid ?? 0, ExitCode: 0 } });
      } catch (err) {
        const message = err instanceof Error ? err.message : String(err);
        this.report(t, { State: 'rejected', Message: 'preparing', Err: message });
      } finally {
        this.busy.delete(t.ID);
        this.kick();
      }
    })();
  }
}
