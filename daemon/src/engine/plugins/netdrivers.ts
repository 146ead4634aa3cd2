/**
 * Network and IPAM drivers of plugins, for the network service: a managed plugin (enabled, of type
 * `docker.networkdriver/1.0` or `docker.ipamdriver/1.0`, by its full name) or a legacy one implementing
 * `NetworkDriver` or `IpamDriver`.
 */
import { EngineError, errorMessage, NotFound } from '../../errors.js';
import type { NetworkPluginDriver, NetworkPlugins } from '../networks/remote.js';
import { normalizePluginName, typeImplements } from './config.js';
import type { LegacyPlugins } from './legacy.js';
import type { PluginManager } from './manager.js';

export class PluginNetworkDrivers implements NetworkPlugins {
  constructor(
    private readonly managed: PluginManager,
    private readonly legacy: LegacyPlugins,
  ) {}

  private async driver(name: string, capability: string, iface: string): Promise<NetworkPluginDriver | undefined> {
    const full = normalizePluginName(name);
    const p = this.managed.list().find((x) => x.Name === full);
    if (p) {
      if (!p.Config.Interface.Types.some((t) => typeImplements(t, capability))) throw new EngineError(`plugin ${JSON.stringify(p.Name)} does not implement ${iface}`);
      if (!p.Enabled) throw new EngineError(`plugin ${JSON.stringify(p.Name)} is disabled`);
      const client = this.managed.client(p);
      return { name: p.Name, call: (method, body) => client.call(method, body) };
    }
    try {
      const plugin = await this.legacy.get(name, iface);
      return { name, call: (method, body) => plugin.client.call(method, body) };
    } catch (err) {
      if (err instanceof NotFound) return undefined;
      throw new EngineError(`plugin ${JSON.stringify(name)}: ${errorMessage(err)}`, { cause: err });
    }
  }

  networkDriver(name: string): Promise<NetworkPluginDriver | undefined> {
    return this.driver(name, 'networkdriver', 'NetworkDriver');
  }

  ipamDriver(name: string): Promise<NetworkPluginDriver | undefined> {
    return this.driver(name, 'ipamdriver', 'IpamDriver');
  }
}
