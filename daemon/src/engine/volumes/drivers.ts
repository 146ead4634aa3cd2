/**
 * Volume drivers of plugins: the VolumeDriver protocol spoken to a plugin, and the lookup of a driver by
 * name (with dockerd's wording when none has that name).
 */
import { EngineError, errorMessage, NotFound } from '../../errors.js';
import type { PluginClient } from '../plugins/client.js';
import type { LegacyPlugins } from '../plugins/legacy.js';
import { normalizePluginName, type PluginManager, type PluginRecord } from '../plugins/manager.js';

export const VOLUME_DRIVER_INTERFACE = 'VolumeDriver';

/** A volume as a driver describes it. */
export interface DriverVolume {
  Name: string;
  Mountpoint?: string;
  Status?: Record<string, unknown>;
}

/** One plugin's volume driver. */
export class VolumeDriverProxy {
  private scope: Promise<'local' | 'global'> | undefined;

  constructor(
    readonly name: string,
    private readonly client: PluginClient,
    /** Turns a path the plugin answers into a host path (a managed plugin's paths are inside its root). */
    private readonly hostPath: (p: string) => string = (p) => p,
  ) {}

  async create(name: string, opts: Record<string, string>): Promise<void> {
    await this.client.call('VolumeDriver.Create', { Name: name, Opts: opts });
  }

  async remove(name: string): Promise<void> {
    await this.client.call('VolumeDriver.Remove', { Name: name });
  }

  /** Mounts the volume for one user (`id`: a container's id); answers the host path to bind. */
  async mount(name: string, id: string): Promise<string> {
    const answer = await this.client.call<{ Mountpoint?: unknown }>('VolumeDriver.Mount', { Name: name, ID: id });
    if (typeof answer.Mountpoint !== 'string' || !answer.Mountpoint.startsWith('/')) {
      throw new EngineError(`VolumeDriver.Mount: the plugin answered no absolute Mountpoint for ${name}`);
    }
    return this.hostPath(answer.Mountpoint);
  }

  async unmount(name: string, id: string): Promise<void> {
    await this.client.call('VolumeDriver.Unmount', { Name: name, ID: id });
  }

  async path(name: string): Promise<string> {
    const answer = await this.client.call<{ Mountpoint?: unknown }>('VolumeDriver.Path', { Name: name });
    return typeof answer.Mountpoint === 'string' && answer.Mountpoint ? this.hostPath(answer.Mountpoint) : '';
  }

  async get(name: string): Promise<DriverVolume> {
    const answer = await this.client.call<{ Volume?: DriverVolume | null }>('VolumeDriver.Get', { Name: name });
    const v = answer.Volume;
    if (!v || typeof v !== 'object') throw new NotFound(`no such volume: ${name}`);
    return { Name: name, Mountpoint: typeof v.Mountpoint === 'string' && v.Mountpoint ? this.hostPath(v.Mountpoint) : '', Status: isObject(v.Status) ? v.Status : undefined };
  }

  async list(opts: { retry?: boolean } = {}): Promise<DriverVolume[]> {
    const answer = await this.client.call<{ Volumes?: unknown }>('VolumeDriver.List', {}, opts);
    if (!Array.isArray(answer.Volumes)) return [];
    return answer.Volumes.filter((v): v is DriverVolume => isObject(v) && typeof v.Name === 'string').map((v) => ({
      Name: v.Name,
      Mountpoint: typeof v.Mountpoint === 'string' && v.Mountpoint ? this.hostPath(v.Mountpoint) : '',
    }));
  }

  /** The driver's scope (asked once; a driver without the method is local). */
  capabilities(): Promise<'local' | 'global'> {
    this.scope ??= this.client.call<{ Capabilities?: { Scope?: unknown } }>('VolumeDriver.Capabilities').then(
      (answer) => (answer.Capabilities?.Scope === 'global' ? 'global' : 'local'),
      () => 'local' as const,
    );
    return this.scope;
  }
}

function isObject(value: unknown): value is Record<string, any> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

/** The volume drivers beyond `local`, by name. */
export interface VolumeDrivers {
  /** The driver `name`; NotFound (`error looking up volume plugin X: ...`) when there is none. */
  lookup(name: string): Promise<VolumeDriverProxy>;
  /** Every driver that answers now. */
  all(): Promise<VolumeDriverProxy[]>;
  /** The name the volumes of driver `name` are recorded under. */
  canonical?(name: string): string;
}

/** Volume drivers served by managed plugins (enabled ones, by their name with its tag) and legacy plugins. */
export class PluginVolumeDrivers implements VolumeDrivers {
  private readonly proxies = new Map<string, VolumeDriverProxy>();

  constructor(
    private readonly plugins: LegacyPlugins,
    private readonly managed?: PluginManager,
  ) {}

  private managedProxy(p: PluginRecord): VolumeDriverProxy {
    return new VolumeDriverProxy(p.Name, this.managed!.client(p), (inside) => this.managed!.scopedPath(p, inside));
  }

  /** The managed plugin a driver name means, if one is installed under that name. */
  private managedPlugin(name: string): PluginRecord | undefined {
    if (!this.managed) return undefined;
    const full = normalizePluginName(name);
    return this.managed.list().find((p) => p.Name === full);
  }

  private proxy(name: string, client: PluginClient): VolumeDriverProxy {
    let p = this.proxies.get(name);
    if (!p) {
      p = new VolumeDriverProxy(name, client);
      this.proxies.set(name, p);
    }
    return p;
  }

  async lookup(name: string): Promise<VolumeDriverProxy> {
    const managed = this.managedPlugin(name);
    if (managed) {
      if (!managed.Enabled) throw new EngineError(`error looking up volume plugin ${name}: plugin ${JSON.stringify(managed.Name)} is disabled`);
      if (!this.managed!.enabledWith('volumedriver').includes(managed)) {
        throw new EngineError(`error looking up volume plugin ${name}: plugin ${JSON.stringify(managed.Name)} does not implement VolumeDriver`);
      }
      return this.managedProxy(managed);
    }
    try {
      const plugin = await this.plugins.get(name, VOLUME_DRIVER_INTERFACE);
      return this.proxy(name, plugin.client);
    } catch (err) {
      const message = `error looking up volume plugin ${name}: ${errorMessage(err)}`;
      if (err instanceof NotFound) throw new NotFound(message, { cause: err });
      throw new EngineError(message, { cause: err });
    }
  }

  async all(): Promise<VolumeDriverProxy[]> {
    const managed = (this.managed?.enabledWith('volumedriver') ?? []).map((p) => this.managedProxy(p));
    return [...managed, ...(await this.plugins.all(VOLUME_DRIVER_INTERFACE)).map((p) => this.proxy(p.name, p.client))];
  }

  /** The name volumes of a driver are recorded under (a managed plugin's full name). */
  canonical(name: string): string {
    return this.managedPlugin(name)?.Name ?? name;
  }
}
