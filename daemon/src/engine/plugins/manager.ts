/**
 * Managed plugins: made from a tar of `config.json` and `rootfs/` (`POST /plugins/create`), their records in
 * the daemon's state (`plugins/<id>/config.json` holds the plugin object) and their files on the Host's
 * machine (`<pluginsRoot>/<id>/rootfs`: the same folder when the Host is in the daemon's process), and run
 * when enabled as a runtime container of their own (outside the containers list, with its own runtime state
 * root), with the Host's folder `<pluginsRunRoot>/<id>` bind-mounted at `/run/docker/plugins` inside it.
 * The manager waits for the plugin's socket there, restarts a plugin that dies while enabled, stops them
 * when the daemon stops, and starts the enabled ones again when it starts. Its client's connections to the
 * plugin's socket are the Host's (through an agent, they cross on the agent's stream).
 */
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { log } from '../../util/log.js';
import { Conflict, EngineError, errorMessage, InvalidParameter, NotFound, ToolFailure } from '../../errors.js';
import type { PluginHost } from '../../host/host.js';
import { readJSON, writeJSON, type StateStore } from '../../state/state.js';
import type { EventBus } from '../events.js';
import type { AuthConfig } from '../images/registry/auth.js';
import type { RegistryClient } from '../images/registry/client.js';
import { PluginClient } from './client.js';
import { checkConfig, NAME, normalizePluginName, settingsFrom, typeImplements, type PluginConfig, type PluginRecord } from './config.js';
import { fetchPlugin, privilegesOf, pushPlugin, unpackLayers, type Emit, type PluginTools, type Privilege } from './distribution.js';
import { applySettings } from './settable.js';
import { pluginSpec, type PluginDevices } from './spec.js';

export { normalizePluginName, typeImplements, type PluginConfig, type PluginEnv, type PluginRecord } from './config.js';

export interface PluginManagerOptions {
  /** The daemon's state: the plugins' records (`plugins/<id>/config.json`). */
  state: StateStore;
  /** The Host's plugin part: the plugins' folders, their processes under the OCI runtime, their sockets. */
  host: PluginHost;
  events: EventBus;
  /** The Host's tar: plugin roots packed for a push, plugin contexts and layers unpacked. */
  tools: PluginTools;
  /** The machine's device nodes (a plugin's Devices setting). */
  probe: PluginDevices;
}

/** The records' folder in the daemon's state. */
const RECORDS = 'plugins';

export class PluginManager {
  private readonly plugins = new Map<string, PluginRecord>();
  /** The plugins this manager runs (their processes are the Host's). */
  private readonly running = new Set<string>();
  private readonly stopping = new Set<string>();
  /** Starts under way: a stop waits for the plugin's to settle (the Host may have nothing to stop before). */
  private readonly starting = new Map<string, Promise<void>>();
  private closed = false;
  /** Says which volumes use a plugin (a plugin with volumes is not disabled unless forced). */
  usersOf: (name: string) => string[] = () => [];
  /** The registry client for pull and push (the image service's). */
  registry: RegistryClient | undefined;

  constructor(private readonly opts: PluginManagerOptions) {}

  /** The folder of the plugins' files on the Host's machine. */
  private get root(): string {
    return this.opts.host.pluginsRoot;
  }

  /** A plugin's folder on the Host's machine (its rootfs, propagated mount and log). */
  private dir(id: string): string {
    return path.join(this.root, id);
  }

  /** The Host's folder bind-mounted at /run/docker/plugins inside the plugin. */
  socketDir(id: string): string {
    return path.join(this.opts.host.pluginsRunRoot, id);
  }

  /** Loads the stored plugins and starts those that were enabled. */
  async init(): Promise<void> {
    await this.opts.host.makeDir(this.root);
    const folders = await this.opts.host.entries(this.root);
    for (const id of await this.opts.state.list(RECORDS)) {
      if (!/^[0-9a-f]{64}$/.test(id)) continue;
      const record = await readJSON<PluginRecord>(this.opts.state, recordName(id)).catch(() => undefined);
      if (!record) {
        await this.opts.host.remove(this.dir(id)).catch(() => undefined);
        await this.opts.state.remove(`${RECORDS}/${id}`).catch(() => undefined);
        continue;
      }
      this.plugins.set(id, record);
    }
    // A create or pull cut short leaves its staging folder; a plugin removed halfway, its folder.
    for (const { name } of folders) {
      if (/^tmp-[0-9a-f]{64}$/.test(name) || (/^[0-9a-f]{64}$/.test(name) && !this.plugins.has(name))) {
        await this.opts.host.remove(path.join(this.root, name)).catch(() => undefined);
      }
    }
    // Side by side: one that does not come up delays the daemon's start by its timeout, not the sum of them.
    await Promise.all(
      [...this.plugins.values()]
        .filter((p) => p.Enabled)
        .map((p) => this.start(p, 30_000).catch((err) => log.warn('plugin not restored', { plugin: p.Name, error: errorMessage(err) }))),
    );
  }

  list(): PluginRecord[] {
    return [...this.plugins.values()].sort((a, b) => a.Name.localeCompare(b.Name));
  }

  /** A plugin by name (a missing tag is `latest`), full id or unique id prefix. */
  get(ref: string): PluginRecord {
    const name = normalizePluginName(ref);
    for (const p of this.plugins.values()) if (p.Name === name) return p;
    if (/^[0-9a-f]+$/.test(ref)) {
      const byId = [...this.plugins.values()].filter((p) => p.Id.startsWith(ref));
      if (byId.length === 1) return byId[0];
      if (byId.length > 1) throw new InvalidParameter(`multiple plugins found with id prefix ${ref}`);
    }
    throw new NotFound(`plugin ${JSON.stringify(ref)} not found`);
  }

  find(ref: string): PluginRecord | undefined {
    try {
      return this.get(ref);
    } catch {
      return undefined;
    }
  }

  private async save(p: PluginRecord): Promise<void> {
    await this.opts.state.makeFolder(`${RECORDS}/${p.Id}`, { mode: 0o700 });
    await writeJSON(this.opts.state, recordName(p.Id), p);
  }

  /** Makes a plugin from a tar of config.json and rootfs/ (disabled). */
  async create(nameRef: string, tar: Readable): Promise<PluginRecord> {
    if (!NAME.test(nameRef)) throw new InvalidParameter(`invalid plugin name ${JSON.stringify(nameRef)}: expected [registry/]name[:tag] in lower case`);
    const name = normalizePluginName(nameRef);
    if (this.find(name)) throw new Conflict(`plugin ${JSON.stringify(name)} already exists`);
    const id = randomBytes(32).toString('hex');
    const dir = this.dir(id);
    const staging = path.join(this.root, `tmp-${id}`);
    await this.opts.host.makeDir(staging);
    try {
      await extractTar(tar, staging, this.opts.tools);
      const text = await this.opts.host.readText(path.join(staging, 'config.json'), 4 << 20);
      if (text === undefined) throw new InvalidParameter('the plugin context holds no config.json');
      let raw: unknown;
      try {
        raw = JSON.parse(text);
      } catch (err) {
        throw new InvalidParameter(`invalid plugin config: ${errorMessage(err)}`);
      }
      const config = checkConfig(raw);
      if ((await this.opts.host.kindOf(path.join(staging, 'rootfs'))) !== 'dir') throw new InvalidParameter('the plugin context holds no rootfs folder');
      if (this.find(name)) throw new Conflict(`plugin ${JSON.stringify(name)} already exists`);
      await this.opts.host.rename(staging, dir);
      const record: PluginRecord = { Id: id, Name: name, Enabled: false, Settings: settingsFrom(config), PluginReference: '', Config: config };
      await this.save(record);
      this.plugins.set(id, record);
      this.opts.events.publish('plugin', 'create', id, { name });
      return record;
    } catch (err) {
      await this.opts.host.remove(staging).catch(() => undefined);
      await this.opts.host.remove(dir).catch(() => undefined);
      throw err;
    }
  }

  private needRegistry(): RegistryClient {
    if (!this.registry) throw new EngineError('no registry client is configured');
    return this.registry;
  }

  /** The privileges a plugin in a registry asks for. */
  async privileges(remote: string, auth: AuthConfig | undefined, signal?: AbortSignal): Promise<Privilege[]> {
    const fetched = await fetchPlugin(this.needRegistry(), remote, auth, signal);
    return privilegesOf(fetched.config);
  }

  /**
   * Fetches a remote plugin, checks the privileges granted against those it asks for, and unpacks its
   * layers into a staging folder of its own (`<root>/tmp-<id>/rootfs`): the caller moves it into place.
   */
  private async fetchInto(remote: string, granted: unknown, auth: AuthConfig | undefined, emit: Emit, signal?: AbortSignal) {
    const fetched = await fetchPlugin(this.needRegistry(), normalizePluginName(remote), auth, signal);
    const config = checkConfig(fetched.config);
    const asked = privilegesOf(config);
    const key = (list: unknown) =>
      JSON.stringify(
        (Array.isArray(list) ? list : [])
          .map((p: any) => [String(p?.Name), [...(Array.isArray(p?.Value) ? p.Value : [])].map(String).sort()])
          .sort(),
      );
    if (key(granted) !== key(asked)) throw new InvalidParameter('the privileges granted do not match those the plugin asks for: ask GET /plugins/privileges again');
    emit({ status: `Pulling from ${fetched.ref.path}`, id: fetched.ref.tag ?? 'latest' });
    const staging = path.join(this.root, `tmp-${randomBytes(32).toString('hex')}`);
    await this.opts.host.makeDir(path.join(staging, 'rootfs'));
    try {
      await unpackLayers(fetched, path.join(staging, 'rootfs'), emit, this.opts.tools);
    } catch (err) {
      await this.opts.host.remove(staging).catch(() => undefined);
      throw err;
    }
    return { staging, config, digest: fetched.digest };
  }

  /**
   * Installs a plugin from a registry (disabled) under `localName` (the remote's name by default), once the
   * privileges granted match those it asks for.
   */
  async pull(remote: string, localName: string | undefined, granted: unknown, auth: AuthConfig | undefined, emit: Emit, signal?: AbortSignal): Promise<PluginRecord> {
    const name = normalizePluginName(localName || remote);
    if (!NAME.test(name)) throw new InvalidParameter(`invalid plugin name ${JSON.stringify(name)}`);
    if (this.find(name)) throw new Conflict(`plugin ${JSON.stringify(name)} already exists`);
    const { staging, config, digest } = await this.fetchInto(remote, granted, auth, emit, signal);
    const id = randomBytes(32).toString('hex');
    try {
      if (this.find(name)) throw new Conflict(`plugin ${JSON.stringify(name)} already exists`);
      await this.opts.host.rename(staging, this.dir(id));
      const record: PluginRecord = { Id: id, Name: name, Enabled: false, Settings: settingsFrom(config), PluginReference: normalizePluginName(remote), Config: config };
      await this.save(record);
      this.plugins.set(id, record);
    } catch (err) {
      await this.opts.host.remove(staging).catch(() => undefined);
      await this.opts.host.remove(this.dir(id)).catch(() => undefined);
      throw err;
    }
    emit({ status: `Digest: ${digest}` });
    emit({ status: `Status: Downloaded newer plugin for ${name}` });
    const record = this.get(name);
    this.opts.events.publish('plugin', 'pull', id, { name });
    return record;
  }

  /**
   * Replaces a disabled plugin's root and config with those of `remote` (privileges checked as for an
   * install); its id, name and settings stay.
   */
  async upgrade(ref: string, remote: string, granted: unknown, auth: AuthConfig | undefined, emit: Emit, signal?: AbortSignal): Promise<void> {
    const p = this.get(ref);
    if (p.Enabled) throw new Conflict(`plugin must be disabled before upgrading: plugin ${p.Name} is enabled`);
    const { staging, config, digest } = await this.fetchInto(remote, granted, auth, emit, signal);
    const rootfs = path.join(this.dir(p.Id), 'rootfs');
    const old = path.join(staging, 'rootfs-old');
    try {
      if (this.plugins.get(p.Id) !== p || p.Enabled) throw new Conflict(`plugin ${p.Name} changed during the upgrade`);
      await this.opts.host.rename(rootfs, old);
      await this.opts.host.rename(path.join(staging, 'rootfs'), rootfs).catch(async (err) => {
        await this.opts.host.rename(old, rootfs);
        throw err;
      });
      p.Config = config;
      p.PluginReference = normalizePluginName(remote);
      await this.save(p);
    } finally {
      await this.opts.host.remove(staging).catch(() => undefined);
    }
    emit({ status: `Digest: ${digest}` });
    emit({ status: `Status: Downloaded newer plugin for ${remote}` });
    this.opts.events.publish('plugin', 'pull', p.Id, { name: p.Name });
  }

  /** Pushes a plugin to the registry its name says. */
  async push(ref: string, auth: AuthConfig | undefined, emit: Emit, signal?: AbortSignal): Promise<void> {
    const p = this.get(ref);
    const { rootfs: _rootfs, ...config } = p.Config as PluginConfig & { rootfs?: unknown };
    await pushPlugin(this.needRegistry(), p.Name, path.join(this.dir(p.Id), 'rootfs'), config as PluginConfig, auth, emit, this.opts.tools, signal);
    this.opts.events.publish('plugin', 'push', p.Id, { name: p.Name });
  }

  async enable(ref: string, timeoutMs: number): Promise<void> {
    const p = this.get(ref);
    if (p.Enabled) throw new EngineError(`plugin ${p.Name} is already enabled`);
    await this.start(p, timeoutMs);
    p.Enabled = true;
    await this.save(p);
    this.opts.events.publish('plugin', 'enable', p.Id, { name: p.Name });
  }

  async disable(ref: string, force: boolean): Promise<void> {
    const p = this.get(ref);
    if (!p.Enabled) throw new EngineError(`plugin ${p.Name} is already disabled`);
    const users = this.usersOf(p.Name);
    if (users.length > 0 && !force) throw new EngineError(`plugin ${p.Name} is in use`);
    p.Enabled = false;
    await this.stop(p);
    await this.save(p);
    this.opts.events.publish('plugin', 'disable', p.Id, { name: p.Name });
  }

  async remove(ref: string, force: boolean): Promise<void> {
    const p = this.get(ref);
    if (p.Enabled && !force) throw new EngineError(`plugin ${p.Name} is enabled: disable it first, or remove it with force`);
    if (p.Enabled && this.usersOf(p.Name).length > 0 && !force) throw new EngineError(`plugin ${p.Name} is in use`);
    p.Enabled = false;
    await this.stop(p);
    await this.opts.state.remove(recordName(p.Id));
    this.plugins.delete(p.Id);
    await this.opts.host.remove(this.dir(p.Id));
    await this.opts.state.remove(`${RECORDS}/${p.Id}`);
    await this.opts.host.remove(this.socketDir(p.Id)).catch(() => undefined);
    this.opts.events.publish('plugin', 'remove', p.Id, { name: p.Name });
  }

  /** Changes what the plugin's config declares settable (env values, args, mounts' sources, devices' paths) of a disabled plugin. */
  async set(ref: string, settings: unknown): Promise<void> {
    const p = this.get(ref);
    if (!Array.isArray(settings) || !settings.every((s) => typeof s === 'string')) throw new InvalidParameter('the request body must be a JSON list of "name=value" strings');
    if (p.Enabled) throw new EngineError('cannot set on an active plugin, disable plugin before setting');
    p.Settings = applySettings(p, settings as string[]);
    await this.save(p);
  }

  /** Enabled plugins that implement `capability` (e.g. `volumedriver`, matched as Docker matches Types). */
  enabledWith(capability: string): PluginRecord[] {
    return this.list().filter((p) => p.Enabled && p.Config.Interface.Types.some((t) => typeImplements(t, capability)));
  }

  /** A client to an enabled plugin's socket. */
  client(p: PluginRecord): PluginClient {
    return new PluginClient({ socketPath: path.join(this.socketDir(p.Id), p.Config.Interface.Socket) }, 10_000, (address) => this.opts.host.dial(address));
  }

  /** A path inside the plugin, as a host path (under its propagated mount, or its root). */
  scopedPath(p: PluginRecord, inside: string): string {
    const clean = path.posix.normalize(`/${inside}`);
    const prop = p.Config.PropagatedMount;
    if (prop && (clean === prop || clean.startsWith(`${prop.replace(/\/$/, '')}/`))) {
      return path.join(this.dir(p.Id), 'propagated-mount', path.posix.relative(prop, clean));
    }
    return path.join(this.dir(p.Id), 'rootfs', clean);
  }

  /** Runs the plugin and waits for its socket (one start at a time for each plugin). */
  private start(p: PluginRecord, timeoutMs: number): Promise<void> {
    const pending = this.starting.get(p.Id);
    if (pending) return pending;
    const started = this.launch(p, timeoutMs).finally(() => this.starting.delete(p.Id));
    this.starting.set(p.Id, started);
    return started;
  }

  private async launch(p: PluginRecord, timeoutMs: number): Promise<void> {
    if (this.running.has(p.Id)) return;
    const host = this.opts.host;
    const sockets = this.socketDir(p.Id);
    await host.makeDir(sockets);
    if (p.Config.PropagatedMount) await host.makeDir(path.join(this.dir(p.Id), 'propagated-mount'));
    const socket = path.join(sockets, p.Config.Interface.Socket);
    const spec = await pluginSpec(p, { plugin: this.dir(p.Id), sockets }, this.opts.probe);
    this.running.add(p.Id);
    try {
      await host.run({
        id: p.Id,
        runtimeRoot: path.join(host.pluginsRunRoot, 'runtime'),
        bundle: path.join(host.pluginsRunRoot, 'bundles', p.Id),
        spec,
        logFile: path.join(this.dir(p.Id), 'plugin.log'),
        socket,
        timeoutMs,
      });
    } catch (err) {
      this.running.delete(p.Id);
      throw new EngineError(`plugin ${p.Name} ${errorMessage(err)}`, { cause: err });
    }
    void host.waitExit(p.Id).then(
      (exit) => this.exited(p, exit),
      () => this.running.delete(p.Id),
    );
  }

  /** A plugin's run ended: one that is still enabled (and not being stopped) is started again. */
  private exited(p: PluginRecord, exit: { code: number | null; signal: string | null }): void {
    if (!this.running.delete(p.Id) || this.stopping.has(p.Id) || this.closed) return;
    const current = this.plugins.get(p.Id);
    if (!current?.Enabled) return;
    log.warn('plugin exited; restarting it', { plugin: p.Name, code: exit.code, signal: exit.signal });
    setTimeout(() => {
      if (this.closed || !this.plugins.get(p.Id)?.Enabled) return;
      this.start(current, 30_000).catch((err) => log.warn('plugin restart failed', { plugin: p.Name, error: errorMessage(err) }));
    }, 500);
  }

  private async stop(p: PluginRecord): Promise<void> {
    // Disabled, removed or the daemon stopping while it starts (a restart after an exit, say).
    await this.starting.get(p.Id)?.catch(() => undefined);
    if (!this.running.has(p.Id)) return;
    this.stopping.add(p.Id);
    try {
      await this.opts.host.stop(p.Id);
    } finally {
      this.running.delete(p.Id);
      this.stopping.delete(p.Id);
    }
  }

  /** Stops every running plugin (the daemon stops); they start again with it. */
  async close(): Promise<void> {
    this.closed = true;
    for (const p of this.plugins.values()) await this.stop(p).catch(() => undefined);
  }
}

/** A plugin's record in the daemon's state. */
function recordName(id: string): string {
  return `${RECORDS}/${id}/config.json`;
}

/** Unpacks a tar stream into `dir` with the Host's tar (which refuses members that leave the folder). */
async function extractTar(tar: Readable, dir: string, tools: PluginTools): Promise<void> {
  await tools.unpackInto(dir, tar).catch((err: unknown) => {
    throw new InvalidParameter(`the plugin context is not a valid tar: ${err instanceof ToolFailure ? err.failure.detail : errorMessage(err)}`, { cause: err });
  });
}

