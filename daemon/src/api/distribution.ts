/**
 * Registry routes that are not about local images: the login check (`POST /auth`), distribution
 * inspect (`GET /distribution/{name}/json`: the descriptor a registry holds for a reference, and its
 * platforms) and image search (`GET /images/search`).
 */
import { InvalidParameter } from '../errors.js';
import { normaliseAuth, parseAuthHeader, type AuthConfig } from '../engine/images/registry/auth.js';
import type { SearchRequest, SearchResult } from '../engine/images/registry/search.js';
import { SEARCH_FILTERS } from '../engine/images/registry/search.js';
import { parseFilters, requiredParam, stringParam } from './params.js';
import type { Router } from './router.js';

export interface DistributionBackend {
  login(auth: AuthConfig): Promise<{ Status: string; IdentityToken: string }>;
  inspect(name: string, auth: AuthConfig | undefined, signal: AbortSignal): Promise<Record<string, unknown>>;
  search(request: SearchRequest): Promise<SearchResult[]>;
}

export function registerDistributionRoutes(router: Router, backend: DistributionBackend): void {
  router.post('/auth', async (req, res) => {
    const body = await req.json<Record<string, unknown>>();
    if (body === undefined || body === null || typeof body !== 'object' || Array.isArray(body)) {
      throw new InvalidParameter('a JSON body with username, password and serveraddress (or identitytoken) is required');
    }
    const auth = normaliseAuth(body);
    if (!auth) throw new InvalidParameter('a user name and password (or an identity token) are required to log in');
    res.json(200, await backend.login(auth));
  });

  router.get('/images/search', async (req, res) => {
    const term = requiredParam(req, 'term');
    const limitText = stringParam(req, 'limit');
    let limit: number | undefined;
    if (limitText !== undefined && limitText !== '') {
      if (!/^-?\d+$/.test(limitText)) throw new InvalidParameter(`invalid value for limit: ${JSON.stringify(limitText)}`);
      limit = Number(limitText);
    }
    const filters = parseFilters(req.query.get('filters'), SEARCH_FILTERS);
    // As dockerd: credentials that cannot be read do not stop a search.
    let auth: AuthConfig | undefined;
    try {
      auth = parseAuthHeader(req.header('x-registry-auth'));
    } catch {
      auth = undefined;
    }
    res.json(200, await backend.search({ term, limit, filters, auth, signal: req.signal }));
  });

  router.get('/distribution/:name*/json', async (req, res) => {
    res.json(200, await backend.inspect(req.params.name, parseAuthHeader(req.header('x-registry-auth')), req.signal));
  });
}
