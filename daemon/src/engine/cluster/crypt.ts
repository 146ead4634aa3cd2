/**
 * Secret values (and the root CA's key) are sealed in the store with AES-256-GCM under the swarm's data key,
 * which only the managers hold, on their own disks (never in etcd): a copy of etcd's files alone does not
 * reveal them. Workers get the values of their tasks' secrets in clear over the dispatcher's mutual TLS.
 */
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';

const PREFIX = 'berth-aes256gcm:';

export interface Sealer {
  seal(plain: Buffer): string;
  open(sealed: string): Buffer;
}

export function newDataKey(): string {
  return randomBytes(32).toString('base64');
}

export function sealer(key: string | undefined): Sealer {
  const k = key ? Buffer.from(key, 'base64') : undefined;
  const need = () => {
    if (!k || k.length !== 32) throw new Error('this node holds no data key of the swarm');
    return k;
  };
  return {
    seal(plain) {
      const iv = randomBytes(12);
      const cipher = createCipheriv('aes-256-gcm', need(), iv);
      const body = Buffer.concat([cipher.update(plain), cipher.final()]);
      return PREFIX + Buffer.concat([iv, cipher.getAuthTag(), body]).toString('base64');
    },
    open(sealed) {
      if (!sealed.startsWith(PREFIX)) return Buffer.from(sealed, 'base64');
      const raw = Buffer.from(sealed.slice(PREFIX.length), 'base64');
      const decipher = createDecipheriv('aes-256-gcm', need(), raw.subarray(0, 12));
      decipher.setAuthTag(raw.subarray(12, 28));
      return Buffer.concat([decipher.update(raw.subarray(28)), decipher.final()]);
    },
  };
}
