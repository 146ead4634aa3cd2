/**
 * Autolock. While the swarm's EncryptionConfig.AutoLockManagers is on, a manager keeps its keys at rest (its TLS
 * key, the root CA's key and the swarm's data key, which seals the secrets in the store) sealed under the
 * swarm's unlock key, `SWMKEY-1-` and the base64 of 32 bytes. A manager that starts again with sealed keys is
 * locked until `POST /swarm/unlock` brings the key. The store keeps the unlock key sealed under the data key:
 * neither etcd's files nor the node's key files alone open anything. Its etcd member reads the TLS key from a
 * copy on the exec root's tmpfs, written when the member starts.
 */
import { InvalidParameter } from '../../errors.js';
import type { ManagerKeys, NodeCertificates } from '../../host/cluster.js';
import { sealer } from './crypt.js';

/** What a sealed key file holds: this prefix and the key's PEM (or base64) sealed under the unlock key. */
const LOCKED = 'berth-locked:';

export const SWARM_LOCKED = 'Swarm is encrypted and needs to be unlocked before it can be used. Please use "docker swarm unlock" to unlock it.';
export const INVALID_UNLOCK_KEY = 'swarm could not be unlocked: invalid key provided';

/** The 32 bytes of an unlock key (as base64, the sealer's form); a 400 when it is not one. */
function keyBytes(unlockKey: string): string {
  const m = /^SWMKEY-1-([A-Za-z0-9+/]+={0,2})$/.exec(unlockKey.trim());
  const raw = m ? Buffer.from(m[1]!, 'base64') : undefined;
  if (!raw || raw.length !== 32) throw new InvalidParameter('invalid key string');
  return raw.toString('base64');
}

export type SwarmKeys = NodeCertificates & ManagerKeys;

/** Whether keys loaded from disk are sealed (the node is locked until unlocked). */
export function isLocked(certs: SwarmKeys): boolean {
  return certs.key.startsWith(LOCKED);
}

/** The keys as they are written to disk under autolock. */
export function lockKeys(certs: SwarmKeys, unlockKey: string): SwarmKeys {
  const seal = sealer(keyBytes(unlockKey));
  const lock = (v: string | undefined) => (v === undefined ? undefined : LOCKED + seal.seal(Buffer.from(v)));
  return { ...certs, key: lock(certs.key)!, caKey: lock(certs.caKey), dataKey: lock(certs.dataKey) };
}

/** The keys in clear, when `unlockKey` is the one they were sealed with; a 400 otherwise. */
export function unlockKeys(certs: SwarmKeys, unlockKey: string): SwarmKeys {
  const seal = sealer(keyBytes(unlockKey));
  const open = (v: string | undefined) => {
    if (v === undefined || !v.startsWith(LOCKED)) return v;
    try {
      return seal.open(v.slice(LOCKED.length)).toString();
    } catch {
      throw new InvalidParameter(INVALID_UNLOCK_KEY);
    }
  };
  return { ...certs, key: open(certs.key)!, caKey: open(certs.caKey), dataKey: open(certs.dataKey) };
}
