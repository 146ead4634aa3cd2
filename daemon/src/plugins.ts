/**
 * The plugins' part of the composition (daemon.ts): legacy plugins found by name in dockerd's folders
 * (BERTH_PLUGIN_SOCKET_DIRS and BERTH_PLUGIN_SPEC_DIRS, colon-separated lists, replace them), the managed
 * plugins (records in the daemon's state, files and processes the Host's, outside the containers list), the network and IPAM
 * drivers they serve, their routes, and the authorization plugins the daemon names. Legacy plugins are found
 * on the Host's machine, and every plugin is reached through the Host.
 */
import { registerPluginRoutes } from './api/plugins.js';
import type { Router } from './api/router.js';
import type { EventBus } from './engine/events.js';
import type { RegistryClient } from './engine/images/registry/client.js';
import type { NetworkService } from './engine/networks/service.js';
import { AuthzPlugins } from './engine/plugins/authz.js';
import { DEFAULT_SOCKET_DIRS, DEFAULT_SPEC_DIRS, LegacyPlugins } from './engine/plugins/legacy.js';
import { normalizePluginName, PluginManager } from './engine/plugins/manager.js';
import { PluginNetworkDrivers } from './engine/plugins/netdrivers.js';
import type { Host } from './host/host.js';
import type { StateStore } from './state/state.js';

export interface PluginParts {
  legacy: LegacyPlugins;
  manager: PluginManager;
  /** Set when the daemon names authorization plugins. */
  authz?: AuthzPlugins;
  /** Whether the managed plugin of that full name is one of the daemon's authorization plugins (it stays enabled). */
  authorizes(name: string): boolean;
}

export function composePlugins(
  opts: { authorizationPlugins?: string[] },
  deps: { host: Host; state: StateStore; events: EventBus; networks: NetworkService; router: Router; registry: RegistryClient; closers: Array<() => Promise<void> | void> },
): PluginParts {
  const { host } = deps;
  const folders = (value: string | undefined, defaults: string[]) => (value === undefined ? defaults : value.split(':').filter((d) => d !== ''));
  const legacy = new LegacyPlugins({
    files: host.plugins,
    socketDirs: folders(process.env.BERTH_PLUGIN_SOCKET_DIRS, DEFAULT_SOCKET_DIRS),
    specDirs: folders(process.env.BERTH_PLUGIN_SPEC_DIRS, DEFAULT_SPEC_DIRS),
  });
  const manager = new PluginManager({ state: deps.state, host: host.plugins, tools: host.tools, probe: host.probe, events: deps.events });
  manager.registry = deps.registry;
  deps.closers.push(() => manager.close());
  deps.networks.setPlugins(new PluginNetworkDrivers(manager, legacy));
  registerPluginRoutes(deps.router, manager);
  const authz = opts.authorizationPlugins?.length ? new AuthzPlugins(opts.authorizationPlugins, manager, legacy) : undefined;
  const authorizing = new Set((opts.authorizationPlugins ?? []).map(normalizePluginName));
  return { legacy, manager, authz, authorizes: (name) => authorizing.has(name) };
}
