/**
 * Remove: at once for a container that does not run (its clean-up follows under its lock, its folder kept
 * aside as a tombstone until then), or under its lock after a forced kill; `rm -v` removes its anonymous
 * volumes.
 */
import { log } from '../../util/log.js';
import { Conflict, errorMessage } from '../../errors.js';
import type { ContainerContext } from './context.js';
import type { ContainerRecord } from './model.js';

export async function remove(ctx: ContainerContext, ref: string, opts: { force: boolean; volumes?: boolean }): Promise<void> {
  const record = ctx.store.get(ref);
  if (record.State.Status === 'removing') throw new Conflict(`removal of container ${record.Id} is already in progress`);
  if ((record.State.Running || record.State.Paused || record.State.Restarting) && !opts.force) {
    const state = record.State.Paused ? 'paused' : record.State.Restarting ? 'restarting' : 'running';
    throw new Conflict(`cannot remove container "${ref}": container is ${state}: stop the container before removing or force remove`);
  }
  if (record.State.Running && opts.force) {
    record.ManuallyStopped = true;
    ctx.publish(record, 'kill', { signal: '9' });
    await ctx.host.signal(record.Id, 9).catch(() => undefined);
    await ctx.signalled(record, 9);
    await (ctx.exited.get(record.Id) ?? Promise.resolve());
  }
  if (canRemoveAtOnce(ctx, record)) {
    await removeAtOnce(ctx, record);
    return;
  }
  await ctx.withLock(record.Id, () => removeLocked(ctx, record, opts));
}

/**
 * Whether a removal may answer before the container's clean-up: the container does not run, nothing but its
 * exit's release holds its lock (a start, a copy or a commit in progress is waited for), and it has no
 * volumes (`rm -v` removes them before it answers, and a volume is free once the container is gone).
 */
function canRemoveAtOnce(ctx: ContainerContext, record: ContainerRecord): boolean {
  if (record.State.Running || record.State.Paused || record.State.Restarting) return false;
  if (record.Mounts.some((m) => m.Type === 'volume')) return false;
  const users = ctx.lockUsers.get(record.Id) ?? 0;
  return users === 0 || (users === 1 && ctx.releasing.has(record.Id));
}

/**
 * Removes the container as users see it (its record, durably, and its name; the destroy event; its network
 * endpoints, addresses and published ports, which the next container may ask for), and leaves the release of
 * the rest (runtime state, cgroups, root filesystem, folders) to a section under its lock, after its exit's
 * own. Until that section is done the record's folder stays aside as a tombstone, so that a daemon stopped
 * meanwhile finishes the clean-up at its next start (load()).
 */
async function removeAtOnce(ctx: ContainerContext, record: ContainerRecord): Promise<void> {
  const id = record.Id;
  ctx.cancelRestart(id);
  record.State.Status = 'removing';
  const network = ctx.networkReleases.get(id);
  // Taken from the index now (the name is free at once); the folder goes aside, durably, below.
  const gone = ctx.store.remove(record, { tombstone: true });
  const finished = ctx.withLock(id, async () => {
    await gone.catch(() => undefined);
    await finishRemoval(ctx, id);
  }).finally(() => {
    if (ctx.finishing.get(id) === finished) ctx.finishing.delete(id);
  });
  ctx.finishing.set(id, finished);
  await Promise.all([gone, network]);
  removed(ctx, record);
}

/**
 * The clean-up of a removed container whose folder is kept aside (a tombstone) until it is done: what it held
 * is released, then the folder goes. A failure is logged; the tombstone stays for the next start of the daemon.
 */
export async function finishRemoval(ctx: ContainerContext, id: string): Promise<void> {
  try {
    await releaseRemoved(ctx, id);
    await ctx.store.dropTombstone(id);
  } catch (err) {
    log.warn('clean-up of a removed container failed', { id, error: errorMessage(err) });
  }
}

/** Releases what a removed container held, whatever its exit released already. */
async function releaseRemoved(ctx: ContainerContext, id: string): Promise<void> {
  if (!ctx.released.has(id)) {
    await ctx.disconnectNetwork(id).catch(() => undefined);
    await ctx.host.cleanup(id).catch((err) => log.warn('runtime clean-up of a removed container failed', { id, error: errorMessage(err) }));
  }
  ctx.released.delete(id);
  await ctx.host.unmountRootfs(id).catch(() => undefined);
  await ctx.host.removeContainerFiles(id);
}

export async function removeLocked(ctx: ContainerContext, record: ContainerRecord, opts: { force: boolean; volumes?: boolean }): Promise<void> {
  if (!ctx.store.find(record.Id)) return;
  ctx.cancelRestart(record.Id);
  record.State.Status = 'removing';
  // What the exit already released is not released again (a second `crun delete` costs a process). The
  // root filesystem is always unmounted: a copy into a stopped container mounts it again.
  if (!ctx.released.has(record.Id)) {
    await ctx.disconnectNetwork(record.Id).catch(() => undefined);
    await ctx.host.cleanup(record.Id).catch(() => undefined);
  }
  ctx.released.delete(record.Id);
  await ctx.host.unmountRootfs(record.Id).catch(() => undefined);
  await ctx.host.removeContainerFiles(record.Id);
  await ctx.store.remove(record);
  // As Docker: `rm -v` (and AutoRemove) removes the container's anonymous volumes; named ones stay.
  if (opts.volumes) await ctx.deps.volumes?.removeAnonymous(record);
  removed(ctx, record);
}

/** The rest of an auto-removal whose record went beside the exit's release (see handleExit). */
export async function finishAutoRemove(ctx: ContainerContext, record: ContainerRecord): Promise<void> {
  await finishRemoval(ctx, record.Id);
  removed(ctx, record);
}

/** What users see once a container is removed: the destroy event, and the answer of its `removed` waiters. */
export function removed(ctx: ContainerContext, record: ContainerRecord): void {
  ctx.restartDelays.delete(record.Id);
  ctx.exitSeen.delete(record.Id);
  ctx.publish(record, 'destroy');
  ctx.signals.emit(`removed:${record.Id}`);
}

