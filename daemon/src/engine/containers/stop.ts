/** Stop: the stop signal, then SIGKILL once the timeout passes; a restarting container just stays stopped. */
import { NotModified } from '../../errors.js';
import type { ContainerContext } from './context.js';
import type { ContainerRecord } from './model.js';
import { parseSignal } from './validate.js';

export async function stop(ctx: ContainerContext, ref: string, opts: { timeoutSeconds?: number; signal?: string } = {}): Promise<void> {
  const record = ctx.store.get(ref);
  if (record.State.Restarting) {
    await ctx.withLock(record.Id, async () => {
      ctx.cancelRestart(record.Id);
      Object.assign(record.State, { Status: 'exited', Restarting: false });
      record.ManuallyStopped = true;
      await ctx.store.save(record);
    });
    ctx.publish(record, 'stop');
    return;
  }
  if (!record.State.Running) throw new NotModified('container already stopped');
  record.ManuallyStopped = true;
  // Persisted before the signal only where a daemon restart reads it (it restarts only these policies);
  // the exit's save records it for the others.
  const policy = record.HostConfig.RestartPolicy?.Name;
  if (policy === 'always' || policy === 'unless-stopped') await ctx.store.save(record);
  const stopSignal = parseSignal(opts.signal || record.Config.StopSignal || 'SIGTERM');
  const timeout = opts.timeoutSeconds ?? record.Config.StopTimeout ?? 10;
  await killAndWait(ctx, record, stopSignal, timeout);
  ctx.publish(record, 'stop');
}

/** Sends `signal`, waits up to `timeoutSeconds` (negative: forever), then SIGKILL. */
async function killAndWait(ctx: ContainerContext, record: ContainerRecord, signal: number, timeoutSeconds: number): Promise<void> {
  const exited = ctx.exited.get(record.Id) ?? Promise.resolve();
  if (signal !== 9) {
    ctx.publish(record, 'kill', { signal: String(signal) });
    await ctx.host.signal(record.Id, signal).catch(() => undefined);
    await ctx.signalled(record, signal);
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
  ctx.publish(record, 'kill', { signal: '9' });
  await ctx.host.signal(record.Id, 9).catch(() => undefined);
  await ctx.signalled(record, 9);
  await exited;
}

