/**
 * Image search (`GET /images/search`) against a registry's index search API (`/v1/search`), as Docker
 * does: the term's registry part (`127.0.0.1:5000/busybox`) picks the index, Docker Hub's otherwise. The
 * index is first pinged (`/v1/_ping`), over https and, for an insecure registry, over http after that;
 * an index that cannot be reached is an invalid parameter (400), an index that answers the search with
 * anything but 200 a server error.
 */
import { DEFAULT_DOMAIN } from '../../reference.js';
import { EngineError, InvalidParameter } from '../../../errors.js';
import { basicHeader, type AuthConfig } from './auth.js';
import type { RegistryConfig } from './config.js';
import { DOCKER_HUB_INDEX } from './config.js';
import { discard, readSmall, send } from './http.js';

export const DEFAULT_SEARCH_LIMIT = 25;
export const SEARCH_FILTERS = ['is-automated', 'is-official', 'stars'] as const;

export interface SearchResult {
  description: string;
  is_official: boolean;
  /** Deprecated: always false (automated builds are gone). */
  is_automated: boolean;
  name: string;
  star_count: number;
}

/** Splits a search term into the index it names and the term sent to it. */
export function splitSearchTerm(term: string): { index: string; remote: string } {
  const slash = term.indexOf('/');
  if (slash < 0) return { index: DEFAULT_DOMAIN, remote: term };
  const first = term.slice(0, slash);
  if (!first.includes('.') && !first.includes(':') && first !== 'localhost') return { index: DEFAULT_DOMAIN, remote: term };
  const index = first === 'index.docker.io' ? DEFAULT_DOMAIN : first;
  return { index, remote: term.slice(slash + 1) };
}

function boolFilterValue(filters: ReadonlyMap<string, string[]>, key: string): boolean | undefined {
  const values = filters.get(key);
  if (!values || values.length === 0) return undefined;
  let result: boolean | undefined;
  for (const v of values) {
    const lower = v.toLowerCase();
    if (lower === 'true' || lower === '1') result = true;
    else if (lower === 'false' || lower === '0') result = false;
    else throw new InvalidParameter(`invalid filter '${key}=${v}'`);
  }
  return result;
}

export interface SearchRequest {
  term: string;
  limit?: number;
  filters: ReadonlyMap<string, string[]>;
  auth?: AuthConfig;
  signal?: AbortSignal;
}

/** Searches the index the term names; results are filtered by `is-official`, `is-automated` and `stars`. */
export async function searchImages(config: RegistryConfig, request: SearchRequest): Promise<SearchResult[]> {
  // No limit, or 0, is the default.
  const limit = request.limit || DEFAULT_SEARCH_LIMIT;
  if (!Number.isInteger(limit) || limit < 1 || limit > 100) throw new InvalidParameter(`limit ${limit} is outside the range of [1, 100]`);
  const official = boolFilterValue(request.filters, 'is-official');
  const automated = boolFilterValue(request.filters, 'is-automated');
  let minStars = 0;
  for (const v of request.filters.get('stars') ?? []) {
    if (!/^-?\d+$/.test(v)) throw new InvalidParameter(`invalid filter 'stars=${v}'`);
    minStars = Math.max(minStars, Number(v));
  }

  const { index, remote } = splitSearchTerm(request.term);
  const term = index === DEFAULT_DOMAIN ? remote.replace(/^library\//, '') : remote;
  const endpoint = await indexEndpoint(config, index, request.signal);
  const headers: Record<string, string> = { Accept: 'application/json' };
  const basic = request.auth ? basicHeader(request.auth) : undefined;
  if (basic) headers.Authorization = basic;
  const url = `${endpoint.url}search?q=${encodeURIComponent(term)}&n=${limit}`;
  const res = await send({ method: 'GET', url, headers, skipVerify: endpoint.skipVerify, signal: request.signal }).catch((err: unknown) => {
    throw new EngineError(`error searching ${endpoint.url}: ${(err as Error).message}`, { cause: err });
  });
  if (res.statusCode !== 200) {
    discard(res);
    throw new EngineError(`Unexpected status code ${res.statusCode}`);
  }
  let body: { results?: unknown };
  try {
    body = JSON.parse((await readSmall(res)).toString('utf8')) as { results?: unknown };
  } catch (err) {
    throw new EngineError(`error decoding registry search results: ${(err as Error).message}`, { cause: err });
  }
  const results: SearchResult[] = [];
  for (const raw of Array.isArray(body?.results) ? (body.results as Record<string, unknown>[]) : []) {
    if (!raw || typeof raw !== 'object') continue;
    const result: SearchResult = {
      description: typeof raw.description === 'string' ? raw.description : '',
      is_official: raw.is_official === true,
      is_automated: false,
      name: typeof raw.name === 'string' ? raw.name : '',
      star_count: typeof raw.star_count === 'number' ? raw.star_count : 0,
    };
    if (official !== undefined && result.is_official !== official) continue;
    // No result is automated any more: asking for automated ones finds none.
    if (automated === true) continue;
    if (result.star_count < minStars) continue;
    results.push(result);
  }
  return results;
}

/** The index's v1 endpoint (`https://host/v1/`), checked by a ping; insecure registries fall back to http. */
async function indexEndpoint(config: RegistryConfig, index: string, signal?: AbortSignal): Promise<{ url: string; skipVerify: boolean }> {
  if (index === DEFAULT_DOMAIN) return { url: DOCKER_HUB_INDEX, skipVerify: false };
  const insecure = config.isInsecure(index);
  const secureUrl = `https://${index}/v1/`;
  const httpsError = await ping(secureUrl, insecure, signal);
  if (httpsError === undefined) return { url: secureUrl, skipVerify: insecure };
  if (!insecure) {
    throw new InvalidParameter(
      `invalid registry endpoint ${secureUrl}: ${httpsError}. A registry reached over plain HTTP or with a certificate of an unknown CA needs --insecure-registry ${index} on the daemon`,
    );
  }
  const plainUrl = `http://${index}/v1/`;
  const httpError = await ping(plainUrl, true, signal);
  if (httpError === undefined) return { url: plainUrl, skipVerify: true };
  throw new InvalidParameter(`invalid registry endpoint ${JSON.stringify(plainUrl)}. HTTPS attempt: ${httpsError}. HTTP attempt: ${httpError}`);
}

/** How long a ping waits for an index's answer. */
const PING_TIMEOUT_MS = 15_000;

/** Pings an index; its answer's status and body do not matter, only that it answered. Gives the failure, if any. */
async function ping(base: string, skipVerify: boolean, signal?: AbortSignal): Promise<string | undefined> {
  const url = `${base}_ping`;
  const timeout = AbortSignal.timeout(PING_TIMEOUT_MS);
  try {
    const res = await send({ method: 'GET', url, skipVerify, signal: signal ? AbortSignal.any([signal, timeout]) : timeout });
    discard(res);
    return undefined;
  } catch (err) {
    if (signal?.aborted) throw err;
    if (timeout.aborted) return `GET ${JSON.stringify(url)}: no answer within ${PING_TIMEOUT_MS / 1000} s`;
    return (err as Error).message;
  }
}
