/**
 * Managed plugins: /plugins. Made with `create` from a tar of config.json and rootfs/ or pulled from a
 * registry (after `privileges`), pushed, enabled, disabled, set, removed and inspected through the plugin
 * manager; a disabled plugin is upgraded from a registry in place.
 */
import { InvalidParameter } from '../errors.js';
import { parseAuthHeader } from '../engine/images/registry/auth.js';
import type { PluginManager } from '../engine/plugins/manager.js';
import { normalizePluginName, typeImplements } from '../engine/plugins/manager.js';
import { pluginShape, supports } from './compat.js';
import type { ApiRequest } from './http.js';
import { boolParam, intParam, parseFilters, requiredParam, stringParam } from './params.js';
import type { Router } from './router.js';
import { ProgressStream } from './streams.js';

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
  router.get('/plugins/privileges', async (req, res) => {
    const remote = requiredParam(req, 'remote');
    res.json(200, await plugins.privileges(remote, parseAuthHeader(req.header('x-registry-auth')), req.signal));
  });
  router.post('/plugins/pull', async (req, res) => {
    const auth = parseAuthHeader(req.header('x-registry-auth'));
    if (supports(req.version, 'plugins.pull.oneCall')) {
      // API 1.24 pulled and installed in one call (all privileges taken as granted), answering the privileges.
      const remote = requiredParam(req, 'name');
      req.raw.resume();
      const asked = await plugins.privileges(remote, auth, req.signal);
      await plugins.pull(remote, undefined, asked, auth, () => undefined, req.signal);
      res.json(200, asked);
      return;
    }
    const remote = requiredParam(req, 'remote');
    const granted = (await req.json()) ?? [];
    const localName = stringParam(req, 'name') || undefined;
    // The client goes on (set, enable) with the name the plugin is installed under.
    const progress = new ProgressStream(res, { 'Docker-Plugin-Name': normalizePluginName(localName || remote) });
    await progress.run((write) => plugins.pull(remote, localName, granted, auth, write, req.signal));
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
  router.post('/plugins/:name*/upgrade', async (req, res) => {
    const remote = requiredParam(req, 'remote');
    const granted = (await req.json()) ?? [];
    plugins.get(name(req));
    await new ProgressStream(res).run((write) => plugins.upgrade(name(req), remote, granted, parseAuthHeader(req.header('x-registry-auth')), write, req.signal));
  });
  router.post('/plugins/:name*/push', async (req, res) => {
    req.raw.resume();
    plugins.get(name(req));
    await new ProgressStream(res).run((write) => plugins.push(name(req), parseAuthHeader(req.header('x-registry-auth')), write, req.signal));
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
