/**
 * Join tokens in Docker's format, `SWMTKN-1-<digest>-<secret>`: the digest is the SHA-256 of the root CA
 * certificate's PEM as a base-36 number of 50 digits, so that a joining node can check the manager it reached
 * before it sends the secret (16 random bytes as 25 base-36 digits). Unlock keys: `SWMKEY-1-` and base64.
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { InvalidParameter } from '../../errors.js';

function base36(bytes: Buffer, width: number): string {
  let n = 0n;
  for (const b of bytes) n = (n << 8n) | BigInt(b);
  return n.toString(36).padStart(width, '0');
}

export function caDigest(caPem: string): string {
  return base36(createHash('sha256').update(caPem).digest(), 50);
}

export function newJoinToken(caPem: string): string {
  return `SWMTKN-1-${caDigest(caPem)}-${base36(randomBytes(16), 25)}`;
}

export function newUnlockKey(): string {
  return `SWMKEY-1-${randomBytes(32).toString('base64').replace(/=+$/, '')}`;
}

/** Splits a token into its CA digest and secret; throws a 400 naming the problem when malformed. */
export function parseJoinToken(token: string): { digest: string; secret: string } {
  const m = /^SWMTKN-1-([0-9a-z]{50})-([0-9a-z]{25})$/.exec(token);
  if (!m) throw new InvalidParameter('invalid join token');
  return { digest: m[1]!, secret: m[2]! };
}

export function sameToken(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}
