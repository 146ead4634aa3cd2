/**
 * The app's settings, persisted as JSON in the user data folder.
 *
 * Format (settings.json, version key `version`):
 *   { "version": 1, "engine": { "mode": "embedded" | "socket", "socketPath": string }, "theme": "system" | "light" | "dark" }
 * - embedded: the main process starts berthd itself, serving on `socketPath`;
 * - socket: it connects to an engine that already serves `socketPath`.
 * Unknown or invalid values fall back to the defaults, field by field; writes are atomic (temp file, fsync, rename).
 */
import { promises as fs } from 'node:fs';
import path from 'node:path';

export type EngineMode = 'embedded' | 'socket';
export type Theme = 'system' | 'light' | 'dark';

export interface Settings {
  version: 1;
  engine: { mode: EngineMode; socketPath: string };
  theme: Theme;
}

export function defaultSettings(userData: string): Settings {
  return { version: 1, engine: { mode: 'embedded', socketPath: path.join(userData, 'engine.sock') }, theme: 'system' };
}

/** Keeps what is valid in `raw`, the defaults for the rest. */
export function normalizeSettings(raw: unknown, defaults: Settings): Settings {
  const r = (raw && typeof raw === 'object' ? raw : {}) as Record<string, any>;
  const engine = r.engine && typeof r.engine === 'object' ? r.engine : {};
  return {
    version: 1,
    engine: {
      mode: engine.mode === 'embedded' || engine.mode === 'socket' ? engine.mode : defaults.engine.mode,
      socketPath: typeof engine.socketPath === 'string' && path.isAbsolute(engine.socketPath) ? engine.socketPath : defaults.engine.socketPath,
    },
    theme: r.theme === 'light' || r.theme === 'dark' || r.theme === 'system' ? r.theme : defaults.theme,
  };
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

  async update(patch: { engine?: Partial<Settings['engine']>; theme?: Theme }): Promise<Settings> {
    const next = normalizeSettings({ ...this.current, ...patch, engine: { ...this.current.engine, ...patch.engine } }, this.defaults);
    await fs.mkdir(path.dirname(this.file), { recursive: true });
    const tmp = `${this.file}.${process.pid}.tmp`;
    const handle = await fs.open(tmp, 'w', 0o600);
    try {
      await handle.writeFile(JSON.stringify(next, null, 2) + '\n');
      await handle.sync();
    } finally {
      await handle.close();
    }
    await fs.rename(tmp, this.file);
    this.current = next;
    return next;
  }
}
