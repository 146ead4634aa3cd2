/** Wait: answered at the container's exit (now, if it does not run) or at its removal. */
import type { ContainerContext } from './context.js';

export type WaitCondition = 'not-running' | 'next-exit' | 'removed';

export async function wait(ctx: ContainerContext, ref: string, condition: WaitCondition, signal?: AbortSignal): Promise<{ StatusCode: number; Error: { Message: string } | null }> {
  const record = ctx.store.get(ref);
  const result = () => ({ StatusCode: record.State.ExitCode, Error: null });
  if (condition === 'not-running' && !record.State.Running && !record.State.Restarting) return result();
  const key = condition === 'removed' ? `removed:${record.Id}` : `exit:${record.Id}`;
  return new Promise((resolve, reject) => {
    const done = () => {
      signal?.removeEventListener('abort', abort);
      resolve(result());
    };
    const abort = () => {
      ctx.signals.off(key, done);
      reject(new Error('client went away'));
    };
    ctx.signals.once(key, done);
    signal?.addEventListener('abort', abort, { once: true });
  });
}

