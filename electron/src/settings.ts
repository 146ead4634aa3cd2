/**
 * The app's settings, persisted as JSON in the user data folder.
 *
 * Format (settings.json, version key `version`, now 3):
 *   { "version": 3,
 *     "engine": { "mode": "embedded" | "socket" | "tcp", "socketPath": string,
 *                 "tcp": { "host": string, "port": number, "tls": boolean, "ca": string, "cert": string, "key": string } },
 *     "vm": { "cpus": number, "memoryMiB": number, "diskGiB": number },
 *     "theme": "system" | "light" | "dark" }
 * - embedded: the main process starts berthd itself, serving on `socketPath`;
 * - socket: it connects to an engine that already serves `socketPath`;
 * - tcp: it connects to `host:port`, with TLS when `tls` is set: `ca` is the PEM file of the CA the engine's
 *   certificate must chain to, `cert` and `key` the client's own (for engines started with --tlsverify);
 *   each an absolute path, or empty.
 * - vm: the resources of the VM the bundled engine runs in on macOS and Windows (whole CPUs, memory in MiB,
 *   the data disk in GiB), given to the engine at its start; unused on Linux.
 * Version 1 had no `tcp`, version 2 no `vm` (their other fields are read as they are). Registry credentials are not kept here (see
 * credentials.ts). Unknown or invalid values fall back to the defaults, field by field; writes are atomic
 * (temp file, fsync, rename).
 */
import { promises as fs } from 'node:fs';
import path from 'node:path';

export type EngineMode = 'embedded' | 'socket' | 'tcp';
export type Theme = 'system' | 'light' | 'dark';

export interface TcpSettings {
  host: string;
  port: number;
  tls: boolean;
  ca: string;
  cert: string;
  key: string;
}

export interface VmSettings {
  cpus: number;
  memoryMiB: number;
  diskGiB: number;
}

export interface Settings {
  version: 3;
  engine: { mode: EngineMode; socketPath: string; tcp: TcpSettings };
  vm: VmSettings;
  theme: Theme;
}

export type SettingsPatch = { engine?: Partial<Omit<Settings['engine'], 'tcp'>> & { tcp?: Partial<TcpSettings> }; vm?: Partial<VmSettings>; theme?: Theme };

/** What the VM may be given: at least enough to run the guest, at most what a desktop would sensibly spare. */
export const VM_LIMITS: Record<keyof VmSettings, { min: number; max: number; what: string }> = {
  cpus: { min: 1, max: 64, what: 'CPUs' },
  memoryMiB: { min: 512, max: 262_144, what: 'memory (MiB)' },
  diskGiB: { min: 8, max: 4096, what: 'disk size (GiB)' },
};

function vmValue(key: keyof VmSettings, value: unknown): value is number {
  return Number.isInteger(value) && (value as number) >= VM_LIMITS[key].min && (value as number) <= VM_LIMITS[key].max;
}

export function defaultSettings(userData: string): Settings {
  return {
    version: 3,
    engine: { mode: 'embedded', socketPath: path.join(userData, 'engine.sock'), tcp: { host: '127.0.0.1', port: 2376, tls: true, ca: '', cert: '', key: '' } },
    // As daemon/src/vm/driver.ts DEFAULT_RESOURCES.
    vm: { cpus: 2, memoryMiB: 2048, diskGiB: 64 },
    theme: 'system',
  };
}

const MODES: readonly string[] = ['embedded', 'socket', 'tcp'];
const THEMES: readonly string[] = ['system', 'light', 'dark'];
/** A host name or an IPv4/IPv6 address, nothing that could carry a path or credentials. */
const HOST = /^(\[[0-9A-Fa-f:.]+\]|[0-9A-Fa-f:]*:[0-9A-Fa-f:.]+|[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?)$/;

function pemPath(value: unknown, fallback: string): string {
  if (value === '') return '';
  return typeof value === 'string' && path.isAbsolute(value) ? value : fallback;
}

/** Keeps what is valid in `raw`, the defaults for the rest. */
export function normalizeSettings(raw: unknown, defaults: Settings): Settings {
  const r = (raw && typeof raw === 'object' ? raw : {}) as Record<string, any>;
  const engine = r.engine && typeof r.engine === 'object' ? r.engine : {};
  const tcp = engine.tcp && typeof engine.tcp === 'object' ? engine.tcp : {};
  const d = defaults.engine.tcp;
  const vm = r.vm && typeof r.vm === 'object' ? r.vm : {};
  const vmField = (key: keyof VmSettings) => (vmValue(key, vm[key]) ? vm[key] : defaults.vm[key]);
  return {
    version: 3,
    engine: {
      mode: MODES.includes(engine.mode) ? engine.mode : defaults.engine.mode,
      socketPath: typeof engine.socketPath === 'string' && path.isAbsolute(engine.socketPath) ? engine.socketPath : defaults.engine.socketPath,
      tcp: {
        host: typeof tcp.host === 'string' && HOST.test(tcp.host) ? tcp.host : d.host,
        port: Number.isInteger(tcp.port) && tcp.port > 0 && tcp.port < 65536 ? tcp.port : d.port,
        tls: typeof tcp.tls === 'boolean' ? tcp.tls : d.tls,
        ca: pemPath(tcp.ca, d.ca),
        cert: pemPath(tcp.cert, d.cert),
        key: pemPath(tcp.key, d.key),
      },
    },
    vm: { cpus: vmField('cpus'), memoryMiB: vmField('memoryMiB'), diskGiB: vmField('diskGiB') },
    theme: THEMES.includes(r.theme) ? r.theme : defaults.theme,
  };
}

/** Why a patch cannot be applied as given (a field the user typed that normalizing would silently replace). */
export function patchProblem(patch: SettingsPatch): string | undefined {
  const e = patch.engine;
  if (e?.mode !== undefined && !MODES.includes(e.mode)) return `unknown engine mode ${JSON.stringify(e.mode)}`;
  if (e?.socketPath !== undefined && (typeof e.socketPath !== 'string' || !path.isAbsolute(e.socketPath))) return 'the socket path must be absolute';
  const t = e?.tcp;
  if (t?.host !== undefined && (typeof t.host !== 'string' || !HOST.test(t.host))) return `invalid host ${JSON.stringify(t.host)}`;
  if (t?.port !== undefined && !(Number.isInteger(t.port) && t.port > 0 && t.port < 65536)) return `invalid port ${JSON.stringify(t.port)}`;
  for (const k of ['ca', 'cert', 'key'] as const)
    if (t?.[k] !== undefined && t[k] !== '' && (typeof t[k] !== 'string' || !path.isAbsolute(t[k]!))) return `the ${k} file must be an absolute path`;
  for (const key of Object.keys(VM_LIMITS) as Array<keyof VmSettings>) {
    const value = patch.vm?.[key];
    if (value !== undefined && !vmValue(key, value)) return `the VM's ${VM_LIMITS[key].what} must be a whole number from ${VM_LIMITS[key].min} to ${VM_LIMITS[key].max}`;
  }
  if (patch.theme !== undefined && !THEMES.includes(patch.theme)) return `unknown theme ${JSON.stringify(patch.theme)}`;
  return undefined;
}

export class SettingsStore {
  private current: Settings;
  constructor(
    private readonly file: string,
    private readonly defaults: Settings,
  ) {
    this.current = defaults;
  }

  get value(): Settings {
    return this.current;
  }

  async load(): Promise<Settings> {
    try {
      this.current = normalizeSettings(JSON.parse(await fs.readFile(this.file, 'utf8')), this.defaults);
    } catch (err) {
      // A missing or corrupt file means the defaults; a corrupt one is kept aside for the user.
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') await fs.rename(this.file, `${this.file}.corrupt`).catch(() => undefined);
      this.current = this.defaults;
    }
    return this.current;
  }

  async update(patch: SettingsPatch): Promise<Settings> {
    const problem = patchProblem(patch);
    if (problem) throw new Error(problem);
    const engine = { ...this.current.engine, ...patch.engine, tcp: { ...this.current.engine.tcp, ...patch.engine?.tcp } };
    const next = normalizeSettings({ ...this.current, ...patch, engine, vm: { ...this.current.vm, ...patch.vm } }, this.defaults);
    await writeAtomically(this.file, JSON.stringify(next, null, 2) + '\n');
    this.current = next;
    return next;
  }
}

/** Writes a file of the user's (mode 0600) so that a crash leaves either the old content or the new. */
export async function writeAtomically(file: string, content: string): Promise<void> {
  await fs.mkdir(path.dirname(file), { recursive: true });
  const tmp = `${file}.${process.pid}.tmp`;
  const handle = await fs.open(tmp, 'w', 0o600);
  try {
    await handle.writeFile(content);
    await handle.sync();
  } finally {
    await handle.close();
  }
  await fs.rename(tmp, file);
}
