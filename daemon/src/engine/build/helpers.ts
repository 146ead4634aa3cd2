/** Small helpers of the build steps: copies of a config, env lists, JSON-form arguments, durations, cache keys. */
import { createHash } from 'node:crypto';
import { InvalidParameter } from '../../errors.js';
import type { ImageRunConfig } from '../images/types.js';

export const ARCH = process.arch === 'x64' ? 'amd64' : process.arch === 'ia32' ? '386' : process.arch;
export const DEFAULT_SHELL = ['/bin/sh', '-c'];
/** Build args every build knows without an ARG line; their values never reach the history or the cache. */
export const PROXY_ARGS = new Set(['HTTP_PROXY', 'http_proxy', 'HTTPS_PROXY', 'https_proxy', 'FTP_PROXY', 'ftp_proxy', 'NO_PROXY', 'no_proxy', 'ALL_PROXY', 'all_proxy']);

export function cloneConfig(config: ImageRunConfig | undefined): ImageRunConfig {
  return JSON.parse(JSON.stringify(config ?? {})) as ImageRunConfig;
}

export function envLookup(env: string[] | undefined, name: string): string | undefined {
  for (const e of env ?? []) {
    const eq = e.indexOf('=');
    if ((eq < 0 ? e : e.slice(0, eq)) === name) return eq < 0 ? '' : e.slice(eq + 1);
  }
  return undefined;
}

export function setEnv(env: string[] | undefined, key: string, value: string): string[] {
  const out = [...(env ?? [])];
  const i = out.findIndex((e) => e.split('=')[0] === key);
  if (i >= 0) out[i] = `${key}=${value}`;
  else out.push(`${key}=${value}`);
  return out;
}

export function jsonArray(text: string): string[] | undefined {
  if (!text.startsWith('[')) return undefined;
  try {
    const v = JSON.parse(text) as unknown;
    return Array.isArray(v) && v.every((x) => typeof x === 'string') ? (v as string[]) : undefined;
  } catch {
    return undefined;
  }
}

/** A step's stderr in the build output: in bright red (ESC[91m ... ESC[0m), as dockerd shows it. */
export function stderrText(text: string): string {
  return `\x1b[91m${text}\x1b[0m`;
}

/** Go durations of HEALTHCHECK flags ("30s", "1m30s") in nanoseconds. */
export function parseDuration(flag: string, value: string): number {
  const units: Record<string, number> = { ns: 1, us: 1e3, µs: 1e3, ms: 1e6, s: 1e9, m: 60e9, h: 3600e9 };
  if (value === '0') return 0;
  if (!/^(\d+(\.\d+)?(ns|us|µs|ms|s|m|h))+$/.test(value)) throw new InvalidParameter(`invalid duration ${JSON.stringify(value)} for --${flag}`);
  let ns = 0;
  for (const m of value.matchAll(/(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)/g)) ns += Number(m[1]) * units[m[2]];
  return Math.round(ns);
}

export function hashKey(parts: unknown[]): string {
  return createHash('sha256').update(JSON.stringify(parts)).digest('hex');
}

export function splitArg(args: string): [string, string | undefined] {
  const eq = args.indexOf('=');
  if (eq < 0) return [args.trim(), undefined];
  let value = args.slice(eq + 1).trim();
  if ((value.startsWith('"') && value.endsWith('"')) || (value.startsWith("'") && value.endsWith("'"))) value = value.slice(1, -1);
  return [args.slice(0, eq).trim(), value];
}
