/** Remove and prune of user-defined networks (a network with endpoints stays). */
import { Forbidden, InvalidParameter } from '../../errors.js';
import { nowNano, parseTimestamp } from '../../util/json.js';
import { matchLabels, matchNotLabels } from '../filters.js';
import type { NetworkEntry } from './store.js';
import type { NetworkContext } from './context.js';
import { destroyRemote } from './remote.js';

export async function remove(ctx: NetworkContext, ref: string): Promise<void> {
  return ctx.lock.run(async () => {
    const entry = ctx.find(ref);
    if (ctx.isPredefined(entry)) throw new Forbidden(`${entry.network.Name} is a pre-defined network and cannot be removed`);
    if (entry.endpoints.size > 0) {
      throw new Forbidden(`error while removing network: network ${entry.network.Name} id ${entry.network.Id} has active endpoints`);
    }
    await destroy(ctx, entry);
  });
}

async function destroy(ctx: NetworkContext, entry: NetworkEntry): Promise<void> {
  if (entry.remote) await destroyRemote(ctx, entry);
  if (entry.bridge) {
    await ctx.host.removeNat(entry.bridge);
    await ctx.host.removeBridge(entry.bridge);
  }
  await ctx.store.remove(entry.network.Id);
  ctx.entries.delete(entry.network.Id);
  ctx.events.publish('network', 'destroy', entry.network.Id, { name: entry.network.Name, type: entry.network.Driver });
}

/** Removes the user-defined networks no container uses (filters: until, label, label!). */
export async function prune(ctx: NetworkContext, filters: ReadonlyMap<string, string[]> = new Map()): Promise<string[]> {
  let untilNano: bigint | undefined;
  for (const u of filters.get('until') ?? []) {
    const t = parseTimestamp(u) ?? parseDuration(u);
    if (t === undefined) throw new InvalidParameter(`invalid filter 'until=${u}': expected a timestamp or a duration such as 24h`);
    untilNano = t;
  }
  return ctx.lock.run(async () => {
    const removed: string[] = [];
    for (const entry of [...ctx.entries.values()]) {
      const n = entry.network;
      // A swarm network's local record (swarm.ts) is the swarm's to remove.
      if (ctx.isPredefined(entry) || entry.endpoints.size > 0 || entry.network.Driver === 'overlay') continue;
      if (untilNano !== undefined && BigInt(Date.parse(n.Created)) * 1_000_000n >= untilNano) continue;
      if (!matchLabels(filters.get('label'), n.Labels) || !matchNotLabels(filters.get('label!'), n.Labels)) continue;
      await destroy(ctx, entry);
      removed.push(n.Name);
    }
    return removed;
  });
}

/** A Go duration such as 24h, 90m or 1h30m, taken back from now; undefined when malformed. */
function parseDuration(text: string): bigint | undefined {
  if (!/^(\d+(\.\d+)?(h|m|s|ms))+$/.test(text)) return undefined;
  const unit: Record<string, number> = { h: 3600e3, m: 60e3, s: 1e3, ms: 1 };
  let ms = 0;
  for (const [, n, , u] of text.matchAll(/(\d+(\.\d+)?)(ms|h|m|s)/g)) ms += Number(n) * unit[u];
  return nowNano() - BigInt(Math.round(ms)) * 1_000_000n;
}
