import { InvalidParameter } from '../errors.js';
import type { ApiRequest } from './http.js';

/** Boolean query values as the API defines them: 1/True/true and 0/False/false; absent gives the default. */
export function boolParam(req: ApiRequest, name: string, fallback = false): boolean {
  const value = req.query.get(name);
  if (value === null || value === '') return fallback;
  if (value === '1' || value === 'true' || value === 'True') return true;
  if (value === '0' || value === 'false' || value === 'False') return false;
  throw new InvalidParameter(`invalid boolean value ${JSON.stringify(value)} for query parameter ${name}`);
}

/** An integer query value; absent or empty gives the default. */
export function intParam(req: ApiRequest, name: string, fallback: number, opts: { min?: number; max?: number } = {}): number {
  const value = req.query.get(name);
  if (value === null || value === '') return fallback;
  if (!/^-?\d+$/.test(value)) throw new InvalidParameter(`invalid integer value ${JSON.stringify(value)} for query parameter ${name}`);
  const n = Number(value);
  if (opts.min !== undefined && n < opts.min) throw new InvalidParameter(`query parameter ${name} must be at least ${opts.min}, got ${n}`);
  if (opts.max !== undefined && n > opts.max) throw new InvalidParameter(`query parameter ${name} must be at most ${opts.max}, got ${n}`);
  return n;
}

export function stringParam(req: ApiRequest, name: string): string | undefined {
  const value = req.query.get(name);
  return value === null ? undefined : value;
}

export function requiredParam(req: ApiRequest, name: string): string {
  const value = req.query.get(name);
  if (value === null || value === '') throw new InvalidParameter(`query parameter ${name} is required`);
  return value;
}

/** Parsed `filters`: each key maps to its list of values. */
export type Filters = Map<string, string[]>;

/**
 * Parses the `filters` query parameter in both shapes clients send: `{"key": ["v1", "v2"]}` and the older
 * `{"key": {"v1": true}}`. Keys outside `allowed` answer 400, as Docker does.
 */
export function parseFilters(raw: string | null | undefined, allowed: readonly string[]): Filters {
  const filters: Filters = new Map();
  if (raw === null || raw === undefined || raw.trim() === '') return filters;
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch (err) {
    throw new InvalidParameter(`invalid filters: ${(err as Error).message}`, { cause: err });
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
    throw new InvalidParameter('invalid filters: expected a JSON object of filter names to values');
  }
  for (const [key, value] of Object.entries(parsed as Record<string, unknown>)) {
    if (!allowed.includes(key)) throw new InvalidParameter(`invalid filter '${key}'`);
    let values: string[];
    if (Array.isArray(value)) {
      values = value.map((v) => {
        if (typeof v !== 'string') throw new InvalidParameter(`invalid filters: values of '${key}' must be strings`);
        return v;
      });
    } else if (value !== null && typeof value === 'object') {
      values = Object.entries(value as Record<string, unknown>).filter(([, on]) => on === true).map(([v]) => v);
    } else if (typeof value === 'string') {
      values = [value];
    } else {
      throw new InvalidParameter(`invalid filters: values of '${key}' must be a list or a map`);
    }
    filters.set(key, [...(filters.get(key) ?? []), ...values]);
  }
  return filters;
}

export function filterParam(req: ApiRequest, allowed: readonly string[]): Filters {
  return parseFilters(req.query.get('filters'), allowed);
}

/** Reads a boolean filter value such as dangling=true|1|false|0. */
export function boolFilter(filters: Filters, key: string): boolean | undefined {
  const values = filters.get(key);
  if (!values || values.length === 0) return undefined;
  const v = values[values.length - 1];
  if (v === 'true' || v === '1') return true;
  if (v === 'false' || v === '0') return false;
  throw new InvalidParameter(`invalid filter '${key}=${v}': expected true, false, 1 or 0`);
}

/** The `h` and `w` of a terminal resize, each 0 to 65535. */
export function terminalSize(req: ApiRequest): { height: number; width: number } {
  return { height: intParam(req, 'h', 0, { min: 0, max: 65535 }), width: intParam(req, 'w', 0, { min: 0, max: 65535 }) };
}
