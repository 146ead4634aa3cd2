/**
 * Legacy plugins: processes that run outside the engine and are found by name, as sockets in the plugin
 * socket folder (`<name>.sock` or `<name>/<name>.sock`), or as `.spec` (an address) and `.json` files
 * (`{"Name", "Addr"}`) in the plugin configuration folders. The first use of one activates it
 * (`POST /Plugin.Activate`, answering the interfaces it implements); the answer is kept while the daemon runs.
 */
import path from 'node:path';
import { EngineError, errorMessage, NotFound } from '../../errors.js';
import type { PluginHost } from '../../host/host.js';
import { parsePluginAddress, PluginClient, type PluginAddress } from './client.js';

/** Where dockerd looks for legacy plugins. */
export const DEFAULT_SOCKET_DIRS = ['/run/docker/plugins'];
export const DEFAULT_SPEC_DIRS = ['/etc/docker/plugins', '/usr/lib/docker/plugins'];

export interface LegacyPluginDirs {
  /** The Host's plugin part: the folders are the machine's, and so are the connections to the plugins. */
  files: Pick<PluginHost, 'entries' | 'kindOf' | 'readText' | 'dial'>;
  socketDirs: string[];
  specDirs: string[];
  /** How long calls keep retrying a plugin that refuses connections (milliseconds). */
  retryWindowMs?: number;
}

export interface ActivePlugin {
  name: string;
  implements: string[];
  client: PluginClient;
}

/** The plugin names dockerd accepts: no path separators, nothing hidden. */
const PLUGIN_NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]*$/;

export class PluginNotImplementing extends EngineError {}

/** The largest `.spec` or `.json` file read. */
const MAX_SPEC_BYTES = 64 << 10;

export class LegacyPlugins {
  private readonly active = new Map<string, ActivePlugin>();
  private readonly pending = new Map<string, Promise<ActivePlugin>>();

  constructor(private readonly dirs: LegacyPluginDirs) {}

  private async isSocket(p: string): Promise<boolean> {
    return (await this.dirs.files.kindOf(p).catch(() => undefined)) === 'socket';
  }

  private read(file: string): Promise<string | undefined> {
    return this.dirs.files.readText(file, MAX_SPEC_BYTES).catch(() => undefined);
  }

  /** Finds where a plugin listens, or undefined when no socket or spec file names it. */
  async locate(name: string): Promise<PluginAddress | undefined> {
    if (!PLUGIN_NAME.test(name)) return undefined;
    for (const dir of this.dirs.socketDirs) {
      for (const p of [path.join(dir, `${name}.sock`), path.join(dir, name, `${name}.sock`)]) {
        if (await this.isSocket(p)) return { socketPath: p };
      }
    }
    for (const dir of this.dirs.specDirs) {
      for (const base of [path.join(dir, name), path.join(dir, name, name)]) {
        const spec = await this.read(`${base}.spec`);
        if (spec !== undefined) {
          if (spec.trim() === '') throw new EngineError(`plugin ${name}: ${base}.spec is empty`);
          return parsePluginAddress(spec);
        }
        const json = await this.read(`${base}.json`);
        if (json !== undefined) {
          let addr: unknown;
          try {
            addr = (JSON.parse(json) as { Addr?: unknown }).Addr;
          } catch (err) {
            throw new EngineError(`plugin ${name}: ${base}.json: ${errorMessage(err)}`);
          }
          if (typeof addr !== 'string' || addr === '') throw new EngineError(`plugin ${name}: ${base}.json has no Addr`);
          return parsePluginAddress(addr);
        }
      }
    }
    return undefined;
  }

  /** The names of every plugin found in the folders. */
  async names(): Promise<string[]> {
    const out = new Set<string>();
    for (const dir of this.dirs.socketDirs) {
      for (const entry of await this.dirs.files.entries(dir).catch(() => [])) {
        if (entry.name.endsWith('.sock')) out.add(entry.name.slice(0, -5));
        else if (entry.kind === 'dir' && (await this.isSocket(path.join(dir, entry.name, `${entry.name}.sock`)))) out.add(entry.name);
      }
    }
    for (const dir of this.dirs.specDirs) {
      for (const entry of await this.dirs.files.entries(dir).catch(() => [])) {
        const m = /^(.*)\.(spec|json)$/.exec(entry.name);
        if (m) out.add(m[1]);
        else if (entry.kind === 'dir') out.add(entry.name);
      }
    }
    return [...out].filter((n) => PLUGIN_NAME.test(n)).sort();
  }

  /**
   * The activated plugin `name` implementing `iface` (VolumeDriver, NetworkDriver, ...). NotFound when no
   * file names it; PluginNotImplementing when it does not implement the interface. `retry: false` gives a
   * plugin that does not answer no second chance.
   */
  async get(name: string, iface: string, opts: { retry?: boolean } = {}): Promise<ActivePlugin> {
    let plugin = this.active.get(name);
    if (!plugin) {
      let activation = this.pending.get(name);
      if (!activation) {
        activation = this.activate(name, opts.retry);
        this.pending.set(name, activation);
        void activation.catch(() => undefined).finally(() => this.pending.delete(name));
      }
      plugin = await activation;
    }
    if (!plugin.implements.includes(iface)) throw new PluginNotImplementing(`plugin ${JSON.stringify(name)} does not implement ${iface}`);
    return plugin;
  }

  /** Forgets an activation (its plugin went away): the next use activates again. */
  forget(name: string): void {
    this.active.delete(name);
  }

  private async activate(name: string, retry?: boolean): Promise<ActivePlugin> {
    const address = await this.locate(name);
    if (!address) throw new NotFound(`plugin ${JSON.stringify(name)} not found`);
    const client = new PluginClient(address, this.dirs.retryWindowMs, (a) => this.dirs.files.dial(a));
    const answer = await client.call<{ Implements?: unknown }>('Plugin.Activate', {}, { retry });
    const implemented = Array.isArray(answer.Implements) ? answer.Implements.filter((i): i is string => typeof i === 'string') : [];
    const plugin: ActivePlugin = { name, implements: implemented, client };
    this.active.set(name, plugin);
    return plugin;
  }

  /** Every plugin found that implements `iface` and answers its activation now. */
  async all(iface: string): Promise<ActivePlugin[]> {
    const out: ActivePlugin[] = [];
    for (const name of await this.names()) {
      const plugin = await this.get(name, iface, { retry: false }).catch(() => undefined);
      if (plugin) out.push(plugin);
    }
    return out;
  }
}
