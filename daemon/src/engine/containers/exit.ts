/**
 * The exit of a container's run: told to its waiters once the attached clients have the output, then what
 * the run held (network, runtime state, volumes, root filesystem) released under the container's lock, and
 * the restart policy's answer given with its back-off delay.
 */
import type { ExitInfo } from '../../host/host.js';
import { rfc3339Nano } from '../../util/json.js';
import { log } from '../../util/log.js';
import { errorMessage } from '../../errors.js';
import type { ContainerContext } from './context.js';
import type { ContainerRecord } from './model.js';
import { finishAutoRemove, removeLocked } from './remove.js';

/**
 * How long an exit waits for the output of the run to reach the clients attached to it before its waiters
 * are answered (Docker waits as long for its stream copies).
 */
const DELIVERY_WAIT_MS = 2000;

const RESTART_BASE_DELAY_MS = 100;
const RESTART_MAX_DELAY_MS = 60_000;
/** A container that ran this long before exiting restarts with the base delay again. */
const RESTART_RESET_AFTER_MS = 10_000;

/** A run of the container begins: its exit is not known yet. */
export function runBegins(ctx: ContainerContext, id: string): { promise: Promise<void>; resolve(): void } {
  let resolve!: () => void;
  const seen = { promise: new Promise<void>((r) => (resolve = r)), resolve: () => resolve() };
  ctx.exitSeen.set(id, seen);
  return seen;
}

/**
 * As Docker: an exit is told (state, events, waiters) once the attached clients have the run's output,
 * or after DELIVERY_WAIT_MS when one of them does not take it.
 */
async function outputDelivered(ctx: ContainerContext, id: string): Promise<void> {
  const pending = ctx.deliveries.get(id);
  ctx.deliveries.delete(id);
  if (!pending || pending.size === 0) return;
  let timer: NodeJS.Timeout | undefined;
  const delivered = await Promise.race([
    Promise.all(pending).then(() => true),
    new Promise<boolean>((r) => (timer = setTimeout(() => r(false), DELIVERY_WAIT_MS))),
  ]);
  clearTimeout(timer);
  if (!delivered) log.debug('an attached client did not take the output of the run in time: its exit is told without waiting further', { id });
}

/**
 * Records an exit and releases what the run held, under the container's lock. Answers whether the container's
 * restart policy starts it again (the caller schedules it, with the delay kept in restartDelays).
 */
export async function handleExit(ctx: ContainerContext, record: ContainerRecord, exit: ExitInfo): Promise<boolean> {
  if (!record.State.Running && !record.State.Restarting) return false;
  await outputDelivered(ctx, record.Id);
  const ranMs = Date.now() - Date.parse(record.State.StartedAt);
  Object.assign(record.State, {
    Status: 'exited', Running: false, Paused: false, Restarting: false, Pid: 0,
    ExitCode: exit.exitCode, OOMKilled: exit.oomKilled, FinishedAt: rfc3339Nano(exit.finishedAtNano),
  });
  ctx.exited.delete(record.Id);
  if (exit.oomKilled) ctx.publish(record, 'oom');
  ctx.publish(record, 'die', { exitCode: String(exit.exitCode) });
  const restart = shouldRestart(ctx, record, exit.exitCode);
  if (restart) {
    const previous = ctx.restartDelays.get(record.Id) ?? 0;
    const delay = ranMs >= RESTART_RESET_AFTER_MS || previous === 0 ? RESTART_BASE_DELAY_MS : Math.min(previous * 2, RESTART_MAX_DELAY_MS);
    ctx.restartDelays.set(record.Id, delay);
    Object.assign(record.State, { Status: 'restarting', Restarting: true });
  }
  // As Docker: the waiters have their answer as soon as the exit is known; the network, the volumes, the
  // record on disk, the runtime's state and the root filesystem follow, still under the container's lock (a
  // start, remove or copy that follows waits for them; recovery reads the exit from the monitor's file).
  ctx.releasing.add(record.Id);
  ctx.signals.emit(`exit:${record.Id}`, exit.exitCode);
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
  const network = ctx.disconnectNetwork(record.Id).catch(warn('network disconnect', true));
  ctx.networkReleases.set(record.Id, network);
  const [saved] = await Promise.allSettled([
    removeNow ? ctx.store.remove(record, { tombstone: true }) : ctx.store.save(record),
    network,
    ctx.host.cleanup(record.Id).catch(warn('runtime cleanup', true)),
    (async () => {
      await ctx.deps.volumes?.unmountAll(record).catch(warn('volume unmount', false));
      await ctx.host.unmountRootfs(record.Id).catch(warn('unmount', false));
    })(),
  ]);
  ctx.releasing.delete(record.Id);
  ctx.networkReleases.delete(record.Id);
  if (released) ctx.released.add(record.Id);
  if (removeNow) {
    if (saved.status === 'rejected') log.warn('auto-remove failed', { id: record.Id, error: errorMessage(saved.reason) });
    await finishAutoRemove(ctx, record);
    return false;
  }
  if (saved.status === 'rejected') throw saved.reason;
  if (restart) return true;
  if (record.HostConfig.AutoRemove) {
    await removeLocked(ctx, record, { force: true, volumes: true }).catch((err) => log.warn('auto-remove failed', { id: record.Id, error: errorMessage(err) }));
  }
  return false;
}

function shouldRestart(ctx: ContainerContext, record: ContainerRecord, exitCode: number): boolean {
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

