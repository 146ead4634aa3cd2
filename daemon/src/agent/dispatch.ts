/**
 * The agent's side of the Host contract: each call of the daemon (`part.member` with its arguments) is made
 * on the agent's own Host (a LinuxHost), as host/remote/parts.ts describes it.
 */
import type { Writable } from 'node:stream';
import type { Host } from '../host/host.js';
import { NotImplemented } from '../errors.js';
import { holderOf, memberSpec, partMembers, PART_NAMES } from '../host/remote/parts.js';
import { markHandle, markSink, Sink, type CallHandler } from '../host/remote/session.js';
import type { LayerInfo } from '../host/layers.js';

/** What the remote Host copies at each connection: fixed figures, optional members the Host lacks, the layer index. */
export interface HostSnapshot {
  values: Record<string, { value: unknown; fn: boolean }>;
  missing: string[];
  layers: LayerIndex;
}

export interface LayerIndex {
  infos: LayerInfo[];
  dirs: Record<string, string>;
}

export const SNAPSHOT = '$snapshot';
export const LAYER_INDEX = '$layers';

function layerIndex(host: Host): LayerIndex {
  const infos: LayerInfo[] = [];
  const dirs: Record<string, string> = {};
  for (const chainId of host.layers.chainIds()) {
    const info = host.layers.info(chainId);
    if (!info) continue;
    infos.push(info);
    dirs[chainId] = host.layers.lowerDirs([chainId])[0]!;
  }
  return { infos, dirs };
}

function snapshot(host: Host): HostSnapshot {
  const values: HostSnapshot['values'] = {};
  const missing: string[] = [];
  for (const part of PART_NAMES) {
    const object = host[part] as unknown as Record<string, unknown>;
    for (const [member, spec] of partMembers(part)) {
      const value = object[member];
      if (value === undefined && spec.kind !== 'snapshot') {
        missing.push(`${part}.${member}`);
        continue;
      }
      if (spec.kind !== 'snapshot') continue;
      values[`${part}.${member}`] = typeof value === 'function' ? { value: (value as () => unknown).call(object), fn: true } : { value, fn: false };
    }
  }
  return { values, missing, layers: layerIndex(host) };
}

export function hostHandler(host: Host): CallHandler {
  return async (target, args) => {
    if (target === SNAPSHOT) return snapshot(host);
    if (target === LAYER_INDEX) return layerIndex(host);
    const dot = target.indexOf('.');
    const part = target.slice(0, dot);
    const member = target.slice(dot + 1);
    const spec = memberSpec(part, member);
    const object = spec ? ((host as unknown as Record<string, Record<string, unknown>>)[part]) : undefined;
    const method = object?.[member];
    if (!spec || typeof method !== 'function') throw new NotImplemented(`the agent's Host has no ${target}`);
    const result = await (method as (...a: unknown[]) => unknown).apply(object, args);
    if (spec.kind === 'duplex' || spec.kind === 'open') return { input: new Sink(result as Writable), output: result };
    if (spec.handle && result && typeof result === 'object') markHandle(result);
    for (const sink of spec.sinks ?? []) {
      const at = holderOf(result, sink);
      const stream = at?.holder[at.key];
      if (stream) markSink(stream as never);
    }
    return result;
  };
}
