/** Restart: a stop (of a container that may not run) and a start. */
import { NotModified } from '../../errors.js';
import type { ContainerContext } from './context.js';
import { start } from './start.js';
import { stop } from './stop.js';

export async function restart(ctx: ContainerContext, ref: string, opts: { timeoutSeconds?: number; signal?: string } = {}): Promise<void> {
  const record = ctx.store.get(ref);
  try {
    await stop(ctx, ref, opts);
  } catch (err) {
    if (!(err instanceof NotModified)) throw err;
  }
  await start(ctx, record.Id);
  ctx.publish(record, 'restart');
}

