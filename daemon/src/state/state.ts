/**
 * The daemon's own state: the small records its stores keep (containers, images, networks, volumes, users
 * and tokens, registry metadata), as named files under one root, the data root. The engine's stores read and
 * write their records only through this interface; `state/fs.ts` implements it on the daemon's own file
 * system (the daemon's machine, also when its Host is remote), and daemon.ts hands it to the services.
 *
 * Names are paths relative to the root with `/` between their parts (`network/<id>.json`,
 * `containers/<id>/container.json`); an implementation refuses a name that leaves the root.
 */
export interface StateWriteOptions {
  /** File mode of a new file (0600 by default). */
  mode?: number;
  /**
   * Durable (the default): the new content survives a power loss (fsync of the file and its folder). Not
   * durable: still atomic against a crash of the process, and cheaper; for records recovery can rebuild.
   */
  durable?: boolean;
}

export interface StateStore {
  /** Where the records are, for messages and for the folders other parts are given by path. */
  readonly root: string;
  /** A record's bytes, or undefined when it does not exist. */
  read(name: string): Promise<Buffer | undefined>;
  /** Replaces (or makes) a record atomically: a crash leaves the old bytes or the new, never a torn record. */
  write(name: string, data: string | Uint8Array, opts?: StateWriteOptions): Promise<void>;
  /**
   * Makes a record that must not exist yet (EEXIST otherwise), durably and with one fsync, in a folder made
   * for it when missing (`dirMode`, not its parents). A crash before it returns leaves no record or a torn
   * one, which its reader takes for an unfinished creation.
   */
  create(name: string, data: string | Uint8Array, opts?: { mode?: number; dirMode?: number }): Promise<void>;
  /** The names in a folder, made first (with its parents, `mode` 0700 by default) when missing. */
  list(folder: string, opts?: { mode?: number }): Promise<string[]>;
  /** Makes a folder and its parents when missing. */
  makeFolder(folder: string, opts?: { mode?: number }): Promise<void>;
  /** Removes a record, or a folder with all it holds; a missing one is fine. */
  remove(name: string): Promise<void>;
  /**
   * Renames a record or folder, durably (the folder holding both is synced): false when `from` is missing.
   * Both names are in the same folder.
   */
  rename(from: string, to: string): Promise<boolean>;
  /**
   * A stamp of a record's version as last written (by this daemon or another process, such as the
   * `berthd auth` subcommands): equal stamps mean unchanged content; 'missing' when it does not exist.
   */
  stamp(name: string): Promise<string>;
  /**
   * Takes a lock named `name` shared with other processes on the same root (a record made exclusively,
   * holding the owner's PID; one whose owner is gone is taken over). Throws after `timeoutMs` (10 s by
   * default). Resolves to the function that releases it.
   */
  lock(name: string, opts?: { timeoutMs?: number }): Promise<() => Promise<void>>;
}

/** A record's JSON, or undefined when it does not exist (a SyntaxError when it is not JSON). */
export async function readJSON<T>(state: Pick<StateStore, 'read'>, name: string): Promise<T | undefined> {
  const bytes = await state.read(name);
  return bytes === undefined ? undefined : (JSON.parse(bytes.toString('utf8')) as T);
}

/** Replaces a record with a value's JSON, atomically (see StateStore.write). */
export async function writeJSON(state: Pick<StateStore, 'write'>, name: string, value: unknown, opts?: StateWriteOptions): Promise<void> {
  await state.write(name, JSON.stringify(value), opts);
}
