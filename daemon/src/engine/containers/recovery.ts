/**
 * The engine's start and stop: containers loaded and reconciled with what runs, removals interrupted by a
 * stop finished, restart policies applied; at shutdown, pending restarts dropped.
 */
import type { LiveContainer } from '../networks/types.js';
import { nowNano, rfc3339Nano } from '../../util/json.js';
import { log } from '../../util/log.js';
import { errorMessage } from '../../errors.js';
import type { ContainerContext } from './context.js';
import type { ContainerRecord } from './model.js';
import { finishRemoval, removeLocked } from './remove.js';
import { monitor, start } from './start.js';

/** How long a stopping daemon waits for the clean-up of removals already answered. */
const CLOSE_WAIT_MS = 5000;

/**
 * Loads the containers and reconciles them with what runs: live ones are watched again, those that ended
 * while the daemon was down get their exit code, leftovers of a crash are removed, and containers whose
 * restart policy says so are started.
 */
export async function load(ctx: ContainerContext): Promise<void> {
  // Removals answered before their clean-up, which a stop of the daemon interrupted: finished first.
  for (const id of await ctx.store.load()) await finishRemoval(ctx, id);
  const live = new Map<string, LiveContainer>();
  const toRestart: ContainerRecord[] = [];
  for (const record of ctx.store.all()) {
    if (record.State.Status === 'removing') {
      await removeLocked(ctx, record, { force: true }).catch(() => undefined);
      continue;
    }
    if (record.State.Running || record.State.Paused) {
      const status = await ctx.host.isRunning(record.Id).catch(() => ({ running: false, pid: 0 }));
      if (status.running) {
        live.set(record.Id, { name: record.Name, networks: record.Networks });
        record.State.Pid = status.pid;
        monitor(ctx, record);
        continue;
      }
      const exit = await Promise.race([
        ctx.host.waitExit(record.Id),
        new Promise<undefined>((r) => setTimeout(() => r(undefined), 200)),
      ]).catch(() => undefined);
      await ctx.host.cleanup(record.Id).catch(() => undefined);
      await ctx.host.unmountRootfs(record.Id).catch(() => undefined);
      Object.assign(record.State, {
        Status: 'exited', Running: false, Paused: false, Restarting: false, Pid: 0,
        ExitCode: exit?.exitCode ?? 255,
        Error: exit ? '' : 'the container ended while the engine was down and its exit code was not recorded',
        FinishedAt: rfc3339Nano(exit?.finishedAtNano ?? nowNano()),
      });
      await ctx.store.save(record);
      ctx.publish(record, 'die', { exitCode: String(record.State.ExitCode) });
    } else {
      await ctx.host.unmountRootfs(record.Id).catch(() => undefined);
    }
    if (record.State.Restarting) Object.assign(record.State, { Status: 'exited', Restarting: false });
    const policy = record.HostConfig.RestartPolicy.Name;
    if ((policy === 'always' || (policy === 'unless-stopped' && !record.ManuallyStopped)) && !record.ManuallyStopped) toRestart.push(record);
  }
  for (const id of await ctx.host.listRuntimeContainers().catch(() => [] as string[])) {
    if (!live.has(id)) await ctx.host.cleanup(id).catch(() => undefined);
  }
  await ctx.networking.recover(live);
  for (const record of toRestart) {
    await start(ctx, record.Id).catch((err) => log.warn('restart at daemon start failed', { id: record.Id, error: errorMessage(err) }));
  }
}

/**
 * At daemon shutdown: pending restarts are dropped (the containers themselves keep running), and the clean-up
 * of removals already answered is given a few seconds to end (what it leaves, the next start finishes).
 */
export async function close(ctx: ContainerContext): Promise<void> {
  for (const { timer } of ctx.restartTimers.values()) clearTimeout(timer);
  ctx.restartTimers.clear();
  const pending = [...ctx.finishing.values()];
  if (pending.length === 0) return;
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([Promise.all(pending), new Promise((resolve) => (timer = setTimeout(resolve, CLOSE_WAIT_MS)))]);
  clearTimeout(timer);
}

