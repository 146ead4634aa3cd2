/**
 * Registry logins, kept encrypted with the OS keychain through Electron's safeStorage: the password never
 * reaches the disk (nor the renderer) in clear. Where safeStorage has no keychain to use (Linux without a
 * secret service falls back to a fixed key, the `basic_text` backend), logins are refused, not kept weakly.
 *
 * Format (registries.json in the user data folder, version key `version`):
 *   { "version": 1, "logins": [ { "serveraddress": string, "username": string, "secret": base64 } ] }
 * `secret` is safeStorage.encryptString of the JSON { "password": string }. One login per server address.
 */
import { promises as fs } from 'node:fs';
import { writeAtomically } from './settings.js';

/** The part of Electron's safeStorage this store uses. */
export interface SafeStorageLike {
  isEncryptionAvailable(): boolean;
  encryptString(plain: string): Buffer;
  decryptString(encrypted: Buffer): string;
  /** Linux only: which keychain backs the key ('basic_text' is a key built into Electron). */
  getSelectedStorageBackend?(): string;
}

export interface RegistryLogin {
  serveraddress: string;
  username: string;
}

export interface RegistryCredentials extends RegistryLogin {
  password: string;
}

interface StoredLogin extends RegistryLogin {
  secret: string;
}

export class CredentialsUnavailable extends Error {}

/** Docker Hub's names for itself: a reference without a registry part means this one. */
export const DOCKER_HUB = 'https://index.docker.io/v1/';

/** The registry key of a server address as the user typed it (`localhost:5000`, `https://host/`, Docker Hub's names). */
export function registryKey(serveraddress: string): string {
  const bare = serveraddress
    .trim()
    .replace(/^[a-z]+:\/\//i, '')
    .replace(/\/.*$/, '')
    .toLowerCase();
  return bare === '' || bare === 'docker.io' || bare === 'index.docker.io' || bare === 'registry-1.docker.io' ? 'docker.io' : bare;
}

/** The registry an image reference names (the part before the first slash when it looks like a host). */
export function registryOfImage(ref: string): string {
  const slash = ref.indexOf('/');
  if (slash < 0) return 'docker.io';
  const first = ref.slice(0, slash);
  return /[.:]/.test(first) || first === 'localhost' ? registryKey(first) : 'docker.io';
}

export class CredentialStore {
  private logins: StoredLogin[] = [];
  constructor(
    private readonly file: string,
    private readonly safeStorage: SafeStorageLike,
  ) {}

  /** Whether logins can be kept: a keychain-backed key, not Electron's fixed fallback. */
  get available(): boolean {
    if (!this.safeStorage.isEncryptionAvailable()) return false;
    return this.safeStorage.getSelectedStorageBackend?.() !== 'basic_text';
  }

  async load(): Promise<RegistryLogin[]> {
    try {
      const raw = JSON.parse(await fs.readFile(this.file, 'utf8')) as { logins?: unknown };
      this.logins = (Array.isArray(raw.logins) ? raw.logins : []).filter(
        (l): l is StoredLogin => !!l && typeof l.serveraddress === 'string' && typeof l.username === 'string' && typeof l.secret === 'string',
      );
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') await fs.rename(this.file, `${this.file}.corrupt`).catch(() => undefined);
      this.logins = [];
    }
    return this.list();
  }

  /** The logins without their secrets. */
  list(): RegistryLogin[] {
    return this.logins.map(({ serveraddress, username }) => ({ serveraddress, username }));
  }

  async save(login: RegistryCredentials): Promise<void> {
    if (!this.available) throw new CredentialsUnavailable('no OS keychain is available to keep the password (safeStorage): the login was not saved');
    const secret = this.safeStorage.encryptString(JSON.stringify({ password: login.password })).toString('base64');
    const key = registryKey(login.serveraddress);
    const next = [...this.logins.filter((l) => registryKey(l.serveraddress) !== key), { serveraddress: login.serveraddress, username: login.username, secret }];
    await this.write(next);
  }

  async remove(serveraddress: string): Promise<boolean> {
    const key = registryKey(serveraddress);
    const next = this.logins.filter((l) => registryKey(l.serveraddress) !== key);
    if (next.length === this.logins.length) return false;
    await this.write(next);
    return true;
  }

  /** The credentials for a registry (by its key), decrypted; undefined without a login or a usable keychain. */
  credentialsFor(registry: string): RegistryCredentials | undefined {
    const login = this.logins.find((l) => registryKey(l.serveraddress) === registry);
    if (!login || !this.safeStorage.isEncryptionAvailable()) return undefined;
    try {
      const { password } = JSON.parse(this.safeStorage.decryptString(Buffer.from(login.secret, 'base64'))) as { password: string };
      return { serveraddress: login.serveraddress, username: login.username, password };
    } catch {
      return undefined;
    }
  }

  private async write(logins: StoredLogin[]): Promise<void> {
    await writeAtomically(this.file, JSON.stringify({ version: 1, logins }, null, 2) + '\n');
    this.logins = logins;
  }
}

/** The X-Registry-Auth header the engine takes for a pull or push: base64url of the JSON auth config. */
export function registryAuthHeader(c: RegistryCredentials): string {
  return Buffer.from(JSON.stringify({ username: c.username, password: c.password, serveraddress: c.serveraddress })).toString('base64url');
}
