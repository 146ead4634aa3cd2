/**
 * Start: the container's network planned again, its root filesystem and files in place, its spec built and
 * its process run by the Host; then its exit watched (exit.ts), and a restart its policy asks for scheduled.
 */
import type { ExitInfo } from '../../host/host.js';
import { nowNano, rfc3339Nano } from '../../util/json.js';
import { log } from '../../util/log.js';
import { Conflict, errorMessage, NotModified } from '../../errors.js';
import { planOptions, type ContainerContext } from './context.js';
import { resolveDevices } from './devices.js';
import { handleExit, runBegins } from './exit.js';
import { writeContainerFiles, writeHostsFile } from './files.js';
import { legacyLinks, updateLinkParents } from './linking.js';
import type { ContainerRecord } from './model.js';
import { buildSpec, resolveUser } from './ocispec.js';
import { checkPropagation } from './propagation.js';
import { removeLocked } from './remove.js';

export async function start(ctx: ContainerContext, ref: string): Promise<void> {
  const record = ctx.store.get(ref);
  await ctx.withLock(record.Id, () => startLocked(ctx, record));
}

async function startLocked(ctx: ContainerContext, record: ContainerRecord): Promise<void> {
  const state = record.State;
  if (state.Paused) throw new Conflict(`cannot start a paused container, try unpause instead`);
  if (state.Running) throw new NotModified('container already started');
  if (state.Status === 'removing') throw new Conflict(`container ${record.Id} is marked for removal and cannot be started`);
  ctx.cancelRestart(record.Id);
  const hc = record.HostConfig as Record<string, any>;
  let mounted = false;
  let volumesMounted = false;
  let mountedVolumes: { sources: Map<string, string>; release(): Promise<void> } | undefined;
  let connected = false;
  try {
    // Planned again at every start: the network may have gone or changed since create.
    // A sandbox on a bridge network gets the embedded DNS server (its policy read only for such a start).
    const mode = String(hc.NetworkMode ?? '');
    const sandbox = mode !== 'none' && mode !== 'host' && !mode.startsWith('container:') && (await ctx.deps.sandboxes?.hasPolicy(record)) === true;
    const plan = ctx.networking.plan(hc.NetworkMode, { EndpointsConfig: record.EndpointsConfig }, { ...planOptions(record.Config, hc), sandbox });
    const onBridge = plan.mode === 'bridge' && (plan.networkName === 'bridge' || (plan.extra ?? []).some((e) => e.networkName === 'bridge'));
    const links = legacyLinks(ctx, record, onBridge);
    let network: 'new' | 'host' | { path: string } = plan.mode === 'host' ? 'host' : 'new';
    if (plan.mode === 'container') {
      const other = ctx.store.get(plan.container);
      if (!other.State.Running) throw new Conflict(`cannot join network of a non running container: ${other.Id}`);
      network = { path: `/proc/${other.State.Pid}/ns/net` };
    }
    ctx.host.startBeginning?.();
    const lowerDirs = ctx.images.lowerDirs(record.ImageChainIds);
    const [, passwd, group] = await Promise.all([
      ctx.store.ensureDir(record.Id),
      ctx.host.readFileFromLayers(lowerDirs, '/etc/passwd'),
      ctx.host.readFileFromLayers(lowerDirs, '/etc/group'),
    ]);
    const user = resolveUser(record.Config.User, passwd?.toString('utf8'), group?.toString('utf8'), (hc.GroupAdd as string[] | null) ?? []);
    // Independent steps, done together: the root filesystem's mount, and the files the runtime bind-mounts at
    // create (/etc/hosts is written again, in place, once the address is known).
    // Both settle before going on: a mount that succeeds beside a failure is undone below.
    const [mount, files] = await Promise.allSettled([
      ctx.host.mountRootfs(record.Id, lowerDirs),
      writeContainerFiles(ctx.deps.etcFiles, record, ctx.deps.probe, undefined, plan.hostGateway, { embeddedDns: plan.embeddedDns }),
    ]);
    if (mount.status === 'rejected') throw mount.reason;
    mounted = true;
    if (files.status === 'rejected') throw files.reason;
    const rootfs = mount.value;
    if (ctx.deps.volumes) {
      mountedVolumes = await ctx.deps.volumes.mountAll(record, rootfs);
      volumesMounted = true;
    }
    await checkPropagation(record.Mounts, ctx.host);
    const devices = await resolveDevices(hc, ctx.deps.probe);
    const spec = buildSpec({
      record, user, network, cgroupParent: (hc.CgroupParent as string) || '/berth', devices, mountSources: mountedVolumes?.sources, linkEnv: links.env,
    });
    const pending = ctx.pendingAttach.get(record.Id);
    runBegins(ctx, record.Id);
    const { pid } = await ctx.host.start(
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
          const attachment = await ctx.networking.connect({ id: record.Id, name: record.Name.slice(1) }, plan, network === 'host' ? undefined : pid);
          connected = true;
          await ctx.deps.sandboxes?.connected(record);
          record.Networks = attachment.networks;
          (record as ContainerRecord & { SandboxKey?: string }).SandboxKey = attachment.sandboxKey;
          record.Ports = attachment.ports;
          const hostsAddresses = [attachment.hostsAddress, attachment.hostsAddress6].filter((a): a is string => !!a);
          if (hostsAddresses.length > 0 || links.hosts.length > 0) await writeHostsFile(ctx.deps.etcFiles, record, hostsAddresses, plan.hostGateway, links.hosts);
          // Clients that attached before start get the stream from the first byte on.
          if (pending) {
            ctx.pendingAttach.delete(record.Id);
            for (const p of pending) {
              await ctx.host.attach(record.Id).then(p.resolve, p.reject);
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
    ctx.released.delete(record.Id);
    monitor(ctx, record);
    await ctx.store.save(record);
    ctx.publish(record, 'start');
    ctx.signals.emit(`start:${record.Id}`);
    await updateLinkParents(ctx, record);
  } catch (err) {
    await mountedVolumes?.release();
    if (connected) await ctx.disconnectNetwork(record.Id).catch(() => undefined);
    await ctx.host.cleanup(record.Id).catch(() => undefined);
    if (mounted) await ctx.host.unmountRootfs(record.Id).catch(() => undefined);
    if (volumesMounted) await ctx.deps.volumes!.unmountAll(record).catch(() => undefined);
    const message = errorMessage(err);
    record.State.Error = message;
    // The runtime's error says which exit code a command that could not start gets (127 not found, 126 not
    // executable); any other start failure is recorded as 128.
    const code = (err as { exitCode?: unknown }).exitCode;
    record.State.ExitCode = typeof code === 'number' ? code : 128;
    if (record.State.Status !== 'created') record.State.Status = 'exited';
    await ctx.store.save(record).catch(() => undefined);
    ctx.exitSeen.get(record.Id)?.resolve();
    const pending = ctx.pendingAttach.get(record.Id);
    if (pending) {
      ctx.pendingAttach.delete(record.Id);
      for (const p of pending) p.reject(err);
    }
    // As Docker: a container that removes itself on exit is removed when it cannot start either.
    if (record.HostConfig.AutoRemove) {
      await removeLocked(ctx, record, { force: true, volumes: true }).catch((e) => log.warn('auto-remove failed', { id: record.Id, error: errorMessage(e) }));
    }
    throw err;
  }
}

/** Watches a running container's process and handles its exit. */
export function monitor(ctx: ContainerContext, record: ContainerRecord): void {
  const id = record.Id;
  const seen = ctx.exitSeen.get(id) ?? runBegins(ctx, id);
  const exited = ctx.host.waitExit(id);
  exited.then(seen.resolve, seen.resolve);
  // The exit is handled under the container's lock, and a restart its policy asks for is scheduled there.
  const handle = (exit: ExitInfo) =>
    ctx.withLock(id, async () => {
      if (await handleExit(ctx, record, exit)) scheduleRestart(ctx, record, ctx.restartDelays.get(id)!);
    });
  const done = exited.then(handle, (err) => {
    log.error('lost track of container process', { id, error: errorMessage(err) });
    return handle({ exitCode: 255, finishedAtNano: nowNano(), oomKilled: false });
  });
  ctx.exited.set(id, done.catch(() => undefined));
}

function scheduleRestart(ctx: ContainerContext, record: ContainerRecord, delay: number): void {
  const timer = setTimeout(() => {
    ctx.restartTimers.delete(record.Id);
    void ctx.withLock(record.Id, async () => {
      if (!record.State.Restarting || !ctx.store.find(record.Id)) return;
      record.RestartCount++;
      record.State.Restarting = false;
      record.State.Status = 'exited';
      await startLocked(ctx, record);
    }).catch((err) => log.warn('restart failed', { id: record.Id, error: errorMessage(err) }));
  }, delay);
  ctx.restartTimers.set(record.Id, { timer, delay });
}

