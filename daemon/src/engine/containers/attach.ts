/**
 * Attach and resize. A client may attach before the start: it is connected between the runtime's create and
 * start; what conmon's socket lost of the run is taken from the log once the run has ended.
 */
import { Readable } from 'node:stream';
import type { AttachStreams } from '../../host/host.js';
import { nowNano } from '../../util/json.js';
import { Conflict } from '../../errors.js';
import type { ContainerContext, PendingAttach } from './context.js';
import { logChunks } from './logs.js';
import type { ContainerRecord } from './model.js';

/** Output beyond this is not re-read from the log when an attach socket lost its tail. */
const RECONCILE_LIMIT = 16 * 1024 * 1024;

/**
 * Connects to the container's stdio. A container that is not running yet is waited for: the connection
 * is made between the runtime's create and start, so that no output is lost. `delivery`, when given,
 * settles once the client has the output (the caller wrote the last of it, or the client went away): the
 * run's exit is told to its waiters only after that (see outputDelivered).
 */
export async function attach(ctx: ContainerContext, ref: string, signal: AbortSignal, delivery?: Promise<void>): Promise<{ record: ContainerRecord; streams: AttachStreams }> {
  const record = ctx.store.get(ref);
  if (record.State.Paused) throw new Conflict(`You cannot attach to a paused container, unpause it first`);
  if (delivery) awaitDelivery(ctx, record.Id, delivery);
  if (record.State.Running) return { record, streams: await ctx.host.attach(record.Id) };
  // Everything this run writes comes after this moment: the container is not running yet.
  const attachedNano = nowNano();
  const streams = await new Promise<AttachStreams>((resolve, reject) => {
    const set = ctx.pendingAttach.get(record.Id) ?? new Set<PendingAttach>();
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
    ctx.pendingAttach.set(record.Id, set);
    signal.addEventListener('abort', abort, { once: true });
  });
  return { record, streams: completedFromLog(ctx, record, streams, attachedNano) };
}

/**
 * conmon may close an attach socket before the last output of an ending container went through it (seen
 * in about one run in twenty), while its log has every byte. For a client attached from before the start,
 * the whole run is in the log after `sinceNano`: once the container has ended, what the log holds beyond
 * the bytes already delivered (per stream) is sent too. Not after a detach, and not for huge outputs.
 */
function awaitDelivery(ctx: ContainerContext, id: string, delivery: Promise<void>): void {
  let set = ctx.deliveries.get(id);
  if (!set) ctx.deliveries.set(id, (set = new Set()));
  set.add(delivery);
  const done = () => {
    set.delete(delivery);
    if (set.size === 0 && ctx.deliveries.get(id) === set) ctx.deliveries.delete(id);
  };
  delivery.then(done, done);
}

function completedFromLog(ctx: ContainerContext, record: ContainerRecord, streams: AttachStreams, sinceNano: bigint): AttachStreams {
  if ((record.HostConfig.LogConfig as { Type?: string } | undefined)?.Type === 'none') return streams;
  let detached = false;
  const host = ctx.host;
  // The exit being known is enough for the log to be complete; the exit's handling waits for this output.
  const exited = () => ctx.exitSeen.get(record.Id)?.promise ?? Promise.resolve();
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
export function attached(ctx: ContainerContext, record: ContainerRecord): void {
  ctx.publish(record, 'attach');
}

/** Publishes the detach event (an attached client typed the detach keys). */
export function detached(ctx: ContainerContext, record: ContainerRecord): void {
  ctx.publish(record, 'detach');
}

export async function resize(ctx: ContainerContext, ref: string, height: number, width: number): Promise<void> {
  const record = ctx.store.get(ref);
  if (!record.State.Running) throw new Conflict(`Container ${record.Id} is not running`);
  if (record.Config.Tty) await ctx.host.resize(record.Id, height, width);
  ctx.publish(record, 'resize', { height: String(height), width: String(width) });
}

