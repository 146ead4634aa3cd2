import path from 'node:path';
import { Conflict, InvalidParameter, NotFound } from '../../errors.js';
import type { StateStore } from '../../state/state.js';
import { removeLater } from '../../util/later.js';
import { log } from '../../util/log.js';
import { CONTAINER_FORMAT_VERSION, type ContainerRecord } from './model.js';

/** Prefix of the folders of removed containers being deleted (never an id: ids are hexadecimal). */
const REMOVING = '.removing-';

/** The store's folder under the data root. */
const FOLDER = 'containers';

/**
 * Containers in memory, indexed by id and name, persisted one folder per container under
 * `<data-root>/containers/` through the StateStore (see model.ts for the format). Lookups accept a full id, a unique id prefix, or a name with or without its slash.
 */
export class ContainerStore {
  private readonly byId = new Map<string, ContainerRecord>();
  private readonly byName = new Map<string, string>();
  /**
   * A number per record that changes whenever anything the container list shows of it may have changed
   * (views cache what they build of a record against it). Kept beside the record, never in it: the record
   * is what is written to disk.
   */
  private readonly revisions = new WeakMap<ContainerRecord, number>();
  /** Records inside a change that is not settled yet (a section under the container's lock). */
  private readonly changing = new WeakMap<ContainerRecord, number>();
  private nextRevision = 1;

  /** The containers' folder (their engine files are written in each container's, see dir()). */
  readonly root: string;

  constructor(private readonly state: StateStore) {
    this.root = path.join(state.root, FOLDER);
  }

  dir(id: string): string {
    return path.join(this.root, id);
  }

  /** Makes the container's folder when it is missing (its engine files are written there at start). */
  async ensureDir(id: string): Promise<void> {
    await this.state.makeFolder(`${FOLDER}/${id}`);
  }

  /**
   * Reads the records. Answers the ids of removed containers whose clean-up a stop of the daemon may have
   * interrupted (their folders are still aside): the caller releases what they held, then dropTombstone().
   */
  async load(): Promise<string[]> {
    const removed: string[] = [];
    for (const entry of await this.state.list(FOLDER, { mode: 0o710 })) {
      if (entry.startsWith(REMOVING)) {
        const id = entry.slice(REMOVING.length);
        if (/^[0-9a-f]{64}$/.test(id)) removed.push(id);
        else void this.state.remove(`${FOLDER}/${entry}`).catch(() => undefined);
        continue;
      }
      let record: ContainerRecord;
      try {
        const bytes = await this.state.read(`${FOLDER}/${entry}/container.json`);
        if (!bytes) throw new Error('container.json is missing');
        record = JSON.parse(bytes.toString('utf8')) as ContainerRecord;
      } catch (err) {
        // A folder without a readable record is what an interrupted create leaves: it holds nothing of value.
        log.warn('removing incomplete container folder', { id: entry, error: (err as Error).message });
        await this.state.remove(`${FOLDER}/${entry}`);
        continue;
      }
      if (record.FormatVersion !== CONTAINER_FORMAT_VERSION) {
        log.error('skipping container with an unknown format version', { id: entry, version: record.FormatVersion });
        continue;
      }
      this.byId.set(record.Id, record);
      this.byName.set(record.Name, record.Id);
    }
    return removed;
  }

  all(): ContainerRecord[] {
    return [...this.byId.values()];
  }

  get size(): number {
    return this.byId.size;
  }

  /** Finds a container by id, unique id prefix or name; NotFound otherwise. */
  get(ref: string): ContainerRecord {
    const found = this.find(ref);
    if (!found) throw new NotFound(`No such container: ${ref}`);
    return found;
  }

  find(ref: string): ContainerRecord | undefined {
    if (ref === '') return undefined;
    const exact = this.byId.get(ref);
    if (exact) return exact;
    const byName = this.byName.get(ref.startsWith('/') ? ref : `/${ref}`);
    if (byName) return this.byId.get(byName);
    if (!/^[0-9a-f]+$/.test(ref)) return undefined;
    let match: ContainerRecord | undefined;
    for (const [id, record] of this.byId) {
      if (!id.startsWith(ref)) continue;
      if (match) throw new InvalidParameter(`multiple containers match the id prefix ${ref}`);
      match = record;
    }
    return match;
  }

  nameTaken(name: string): string | undefined {
    return this.byName.get(name);
  }

  /** Reserves the name and keeps the record; the caller persists it. */
  add(record: ContainerRecord): void {
    const holder = this.byName.get(record.Name);
    if (holder) {
      throw new Conflict(
        `Conflict. The container name "${record.Name}" is already in use by container "${holder}". You have to remove (or rename) that container to be able to reuse that name.`,
      );
    }
    this.byId.set(record.Id, record);
    this.byName.set(record.Name, record.Id);
  }

  /**
   * The record's current revision, or undefined while a change of it is in progress (its fields may change
   * at any await of that change, so nothing built of it can be kept).
   */
  revision(record: ContainerRecord): number | undefined {
    if (this.changing.has(record)) return undefined;
    let revision = this.revisions.get(record);
    if (revision === undefined) {
      revision = this.nextRevision++;
      this.revisions.set(record, revision);
    }
    return revision;
  }

  /** Marks that the record may have changed. */
  touch(record: ContainerRecord): void {
    this.revisions.set(record, this.nextRevision++);
  }

  /**
   * Marks the start of a change of the container that may span awaits (a section under its lock); the
   * returned function marks its end. Until then revision() answers undefined; after, a new revision.
   */
  beginChange(id: string): () => void {
    const record = this.byId.get(id);
    if (!record) return () => undefined;
    this.changing.set(record, (this.changing.get(record) ?? 0) + 1);
    let ended = false;
    return () => {
      if (ended) return;
      ended = true;
      const left = this.changing.get(record)! - 1;
      if (left > 0) this.changing.set(record, left);
      else this.changing.delete(record);
      this.touch(record);
    };
  }

  rename(record: ContainerRecord, newName: string): void {
    const holder = this.byName.get(newName);
    if (holder && holder !== record.Id) {
      throw new Conflict(`Conflict. The container name "${newName}" is already in use by container "${holder}". You have to remove (or rename) that container to be able to reuse that name.`);
    }
    this.byName.delete(record.Name);
    record.Name = newName;
    this.byName.set(newName, record.Id);
    this.touch(record);
  }

  /**
   * Writes a new container's record, durably (one fsync, no rename: see StateStore.create). A crash before it
   * returns leaves a folder without a readable record, which load() removes as an unfinished creation.
   */
  async create(record: ContainerRecord): Promise<void> {
    await this.state.create(`${FOLDER}/${record.Id}/container.json`, JSON.stringify(record), { mode: 0o600, dirMode: 0o710 });
  }

  /**
   * Writes the record after a change: atomic but not fsynced (creation is durable: see create). After a power
   * loss, load() reconciles a stale state with the runtime and conmon's exit files.
   */
  async save(record: ContainerRecord): Promise<void> {
    this.touch(record);
    if (!this.byId.has(record.Id)) return; // removed meanwhile: never resurrect it on disk
    await this.state.write(`${FOLDER}/${record.Id}/container.json`, JSON.stringify(record), { durable: false });
  }

  /**
   * Takes the record out of the index at once (before the first await: its name is free for the next create),
   * then out of the disk, durably: its folder is renamed aside (`.removing-<id>`) and the rename synced, so that
   * a crash never brings a removed container back. The folder is deleted later in a batch (util/later.ts);
   * with `tombstone` it stays until dropTombstone(), as the mark of a clean-up still to finish.
   */
  async remove(record: ContainerRecord, opts: { tombstone?: boolean } = {}): Promise<void> {
    this.byId.delete(record.Id);
    if (this.byName.get(record.Name) === record.Id) this.byName.delete(record.Name);
    let moved: boolean;
    try {
      moved = await this.state.rename(`${FOLDER}/${record.Id}`, this.tombstone(record.Id));
    } catch {
      await this.state.remove(`${FOLDER}/${record.Id}`);
      return;
    }
    if (moved && !opts.tombstone) this.deleteLater(record.Id);
  }

  /** Deletes the folder of a removed container kept by remove({ tombstone: true }) or found by load(). */
  async dropTombstone(id: string): Promise<void> {
    this.deleteLater(id);
  }

  private tombstone(id: string): string {
    return `${FOLDER}/${REMOVING}${id}`;
  }

  private deleteLater(id: string): void {
    removeLater(this.tombstone(id), (name) => this.state.remove(name), (err) => log.warn('cannot delete the files of a removed container', { id, error: (err as Error).message }));
  }
}
