/**
 * The keys of encrypted overlay networks (`--opt encrypted`). The leader keeps one ring of keys for the swarm
 * in the store (`netkeys/overlay`), each sealed under the swarm's data key as secret values are, while an
 * encrypted network exists. Nodes get the ring in clear with their assignments, and only while they build an
 * encrypted network.
 *
 * Rotation (every 12 hours unless BERTH_NETWORK_KEY_ROTATION_MS says otherwise) appends a new key and drops
 * the oldest beyond three. Nodes accept traffic under every key of the ring and send under the primary one,
 * the second newest: a new key is only received until the next rotation makes it primary (by then every
 * node has it), and a key stops being primary one rotation before it is removed. Traffic keeps flowing
 * across a rotation without any node waiting for another.
 */
import { randomBytes } from 'node:crypto';
import { log } from '../../../util/log.js';
import type { Sealer } from '../crypt.js';
import type { ClusterStore, Fence } from '../store.js';
import type { Obj } from '../types.js';

export const NETWORK_KEYS_ID = 'overlay';
const DEFAULT_ROTATION_MS = 12 * 3600_000;
const RING_SIZE = 3;
/** An AES-128 key and the 4-byte salt of its GCM nonces. */
export const KEY_BYTES = 20;

/** A key of the ring: Key is sealed in the store, in clear (base64) in a node's assignments. */
export interface RingKey {
  Tag: number;
  Key: string;
  /** When it was made (ms since the epoch, the leader's clock). */
  Created: number;
}

export function isEncrypted(n: Obj): boolean {
  return n.Options?.encrypted !== undefined;
}

export function rotationInterval(): number {
  const v = Number(process.env.BERTH_NETWORK_KEY_ROTATION_MS);
  return Number.isFinite(v) && v > 0 ? v : DEFAULT_ROTATION_MS;
}

/**
 * The ring after `keys` at time `nowMs`: two keys to begin with (the first primary), a new one appended once
 * the newest is `interval` old (the oldest beyond three dropped); undefined when nothing changes.
 */
export function nextRing(keys: RingKey[], nowMs: number, interval: number, newKey: () => string): RingKey[] | undefined {
  if (keys.length === 0) return [{ Tag: 1, Key: newKey(), Created: nowMs }, { Tag: 2, Key: newKey(), Created: nowMs }];
  const newest = keys[keys.length - 1]!;
  if (nowMs - newest.Created < interval) return undefined;
  return [...keys, { Tag: newest.Tag + 1, Key: newKey(), Created: nowMs }].slice(-RING_SIZE);
}

/** The key nodes send under: the second newest (the only one of a ring of one). */
export function primaryOf<T>(keys: T[]): T | undefined {
  return keys.length >= 2 ? keys[keys.length - 2] : keys[0];
}

/** On the leader: makes the ring while an encrypted network exists, and rotates it when due. */
export async function maintainNetworkKeys(store: ClusterStore, fence: Fence, seal: Sealer, nowMs = Date.now()): Promise<void> {
  if (!store.list('networks').some((e) => isEncrypted(e.obj))) return;
  const entry = store.get('netkeys', NETWORK_KEYS_ID);
  const keys: RingKey[] = entry?.obj.Keys ?? [];
  const next = nextRing(keys, nowMs, rotationInterval(), () => seal.seal(randomBytes(KEY_BYTES)));
  if (!next) return;
  if (!entry) {
    await store.create('netkeys', NETWORK_KEYS_ID, { Keys: next }, { fence });
  } else {
    const before = JSON.stringify(keys);
    await store.mutate('netkeys', NETWORK_KEYS_ID, (o) => (JSON.stringify(o.Keys ?? []) === before ? { ...o, Keys: next } : undefined), fence);
  }
  log.info('swarm: the keys of encrypted networks changed', { primary: primaryOf(next)!.Tag, newest: next[next.length - 1]!.Tag });
}

/** What a node gets with its networks when one of them is encrypted: the ring in clear and the primary key's tag. */
export interface NodeKeys {
  Keys?: Array<{ Tag: number; Key: string; Created: number }>;
  PrimaryKey?: number;
}

/** `networks` with the ring added when one of them is encrypted (and the ring exists). */
export function withNetworkKeys<T extends { Networks: Array<{ Encrypted?: boolean }> }>(networks: T, store: ClusterStore, seal: Sealer): T & NodeKeys {
  if (!networks.Networks.some((n) => n.Encrypted)) return networks;
  const keys: RingKey[] = store.get('netkeys', NETWORK_KEYS_ID)?.obj.Keys ?? [];
  if (keys.length === 0) return networks;
  try {
    return { ...networks, Keys: keys.map((k) => ({ Tag: k.Tag, Key: seal.open(k.Key).toString('base64'), Created: k.Created })), PrimaryKey: primaryOf(keys)!.Tag };
  } catch (err) {
    log.warn('swarm: the keys of encrypted networks cannot be opened', { error: String(err) });
    return networks;
  }
}
