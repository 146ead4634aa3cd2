import { randomBytes } from 'node:crypto';

/** A 64-hex-digit random id, as Docker gives containers, execs and networks. */
export function newId(): string {
  return randomBytes(32).toString('hex');
}

export function shortId(id: string): string {
  return id.replace(/^sha256:/, '').slice(0, 12);
}
