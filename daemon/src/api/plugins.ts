/**
 * Managed plugins: /plugins. Made with `create` from a tar of config.json and rootfs/, enabled, disabled,
 * set, removed and inspected through the plugin manager. Installing from a registry (pull, privileges,
 * upgrade, push) is refused.
 */
import { InvalidParameter, NotImplemented } from '../engine/errors.js';
import type { PluginManager } from '../engine/plugins/manager.js';
import { typeImplements } from '../engine/plugins/manager.js';
import { pluginShape } from './compat.js';
import type { ApiRequest } from './http.js';
import { boolParam, intParam, parseFilters, requiredParam } from './params.js';
import type { Router } from './router.js';

const UNSUPPORTED = 'installing plugins from a registry is not supported by this engine yet: make one with `docker plugin create`';

export function registerPluginRoutes(router: Router, plugins: PluginManager): void {
  const name = (req: ApiRequest) => req.params.name;

  router.get('/plugins', (req, res) => {
    const filters = parseFilters(req.query.get('filters'), ['capability', 'enabled']);
    let enabled: boolean | undefined;
    for (const v of filters.get('enabled') ?? []) {
      const lower = v.toLowerCase();
      if (!['true', '1', 'false', '0'].includes(lower)) throw new InvalidParameter(`invalid filter 'enabled=${v}'`);
      enabled = lower === 'true' || lower === '1';
    }
    const caps = filters.get('capability') ?? [];
    const out = plugins
      .list()
      .filter((p) => enabled === undefined || p.Enabled === enabled)
      .filter((p) => caps.length === 0 || caps.some((c) => p.Config.Interface.Types.some((t) => typeImplements(t, c))))
      .map((p) => pluginShape(req.version, p));
    res.json(200, out);
  });
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
  router.post('/plugins/create', async (req, res) => {
    const pluginName = requiredParam(req, 'name');
    await plugins.create(pluginName, req.raw);
    res.noContent();
  });
  // Names hold slashes (`vieux/sshfs:latest`), hence `:name*`.
  router.get('/plugins/:name*/json', (req, res) => {
    res.json(200, pluginShape(req.version, plugins.get(name(req))));
  });
  router.post('/plugins/:name*/enable', async (req, res) => {
    req.raw.resume();
    const timeout = intParam(req, 'timeout', 30, { min: 0, max: 3600 });
    await plugins.enable(name(req), (timeout || 30) * 1000);
    res.status(200);
  });
  router.post('/plugins/:name*/disable', async (req, res) => {
    req.raw.resume();
    await plugins.disable(name(req), boolParam(req, 'force'));
    res.status(200);
  });
  router.post('/plugins/:name*/upgrade', (req) => {
    req.raw.resume();
    plugins.get(name(req));
    throw new NotImplemented(UNSUPPORTED);
  });
  router.post('/plugins/:name*/push', (req) => {
    req.raw.resume();
    plugins.get(name(req));
    throw new NotImplemented('pushing plugins is not supported by this engine yet');
  });
  router.post('/plugins/:name*/set', async (req, res) => {
    const body = await req.json();
    await plugins.set(name(req), body);
    res.noContent();
  });
  router.delete('/plugins/:name*', async (req, res) => {
    await plugins.remove(name(req), boolParam(req, 'force'));
    res.status(200);
  });
  // API 1.24 inspected a plugin at /plugins/{name}, without /json.
  router.get('/plugins/:name*', (req, res) => {
    res.json(200, pluginShape(req.version, plugins.get(name(req))));
  });
}
