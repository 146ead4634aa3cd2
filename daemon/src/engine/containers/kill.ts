/** Kill: a signal to the container's process (SIGKILL by default, which is waited for). */
import { Conflict } from '../../errors.js';
import type { ContainerContext } from './context.js';
import { parseSignal } from './validate.js';

export async function kill(ctx: ContainerContext, ref: string, signalText = 'SIGKILL'): Promise<void> {
  const record = ctx.store.get(ref);
  const signal = parseSignal(signalText);
  if (!record.State.Running) throw new Conflict(`cannot kill container: ${ref}: container ${record.Id} is not running`);
  if (signal === 9 || signal === 15 || signal === 2) record.ManuallyStopped = true;
  ctx.publish(record, 'kill', { signal: String(signal) });
  await ctx.host.signal(record.Id, signal);
  await ctx.signalled(record, signal);
  if (signal === 9) await (ctx.exited.get(record.Id) ?? Promise.resolve());
}

