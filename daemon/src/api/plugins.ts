/**
 * Managed plugins: /plugins. This engine has no plugin manager yet; these routes answer as a daemon with
 * no plugin installed (an empty list; a named plugin is not found) and refuse to install one. A real
 * implementation replaces this module.
 */
import { InvalidParameter, NotFound, NotImplemented } from '../engine/errors.js';
import type { ApiRequest, Handler } from './http.js';
import { parseFilters, requiredParam } from './params.js';
import type { Router } from './router.js';

function notFound(name: string): NotFound {
  return new NotFound(`plugin ${JSON.stringify(name)} not found`);
}

const UNSUPPORTED = 'plugins are not supported by this engine';

export function registerPluginRoutes(router: Router): void {
  const missing: Handler = (req: ApiRequest) => {
    req.raw.resume();
    throw notFound(req.params.name);
  };

  router.get('/plugins', (req, res) => {
    // The filters dockerd knows are checked, though no plugin is there to match them.
    const filters = parseFilters(req.query.get('filters'), ['capability', 'enabled']);
    for (const v of filters.get('enabled') ?? []) {
      if (!['true', '1', 'false', '0'].includes(v.toLowerCase())) throw new InvalidParameter(`invalid filter 'enabled=${v}'`);
    }
    res.json(200, []);
  });
  // Installing needs a registry and a plugin runtime: refused. `remote` and `name` are still required.
  router.get('/plugins/privileges', (req) => {
    requiredParam(req, 'remote');
    throw new NotImplemented(UNSUPPORTED);
  });
  router.post('/plugins/pull', (req) => {
    req.raw.resume();
    // API 1.24 named the plugin to pull `name`; later versions `remote`.
    if (!req.query.get('name')) requiredParam(req, 'remote');
    throw new NotImplemented(UNSUPPORTED);
  });
  router.post('/plugins/create', (req) => {
    req.raw.resume();
    requiredParam(req, 'name');
    throw new NotImplemented(UNSUPPORTED);
  });
  // Names hold slashes (`vieux/sshfs:latest`), hence `:name*`.
  router.get('/plugins/:name*/json', missing);
  router.post('/plugins/:name*/enable', missing);
  router.post('/plugins/:name*/disable', missing);
  router.post('/plugins/:name*/upgrade', missing);
  router.post('/plugins/:name*/push', missing);
  router.post('/plugins/:name*/set', missing);
  router.delete('/plugins/:name*', missing);
  // API 1.24 inspected a plugin at /plugins/{name}, without /json.
  router.get('/plugins/:name*', missing);
}
