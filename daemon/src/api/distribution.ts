/**
 * Registry routes that are not about local images: the login check (`POST /auth`) and distribution
 * inspect (`GET /distribution/{name}/json`: the descriptor a registry holds for a reference, and its
 * platforms).
 */
import { InvalidParameter } from '../engine/errors.js';
import { normaliseAuth, parseAuthHeader, type AuthConfig } from '../engine/images/registry/auth.js';
import type { Router } from './router.js';

export interface DistributionBackend {
  login(auth: AuthConfig): Promise<{ Status: string; IdentityToken: string }>;
  inspect(name: string, auth: AuthConfig | undefined, signal: AbortSignal): Promise<Record<string, unknown>>;
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

  router.get('/distribution/:name*/json', async (req, res) => {
    res.json(200, await backend.inspect(req.params.name, parseAuthHeader(req.header('x-registry-auth')), req.signal));
  });
}
