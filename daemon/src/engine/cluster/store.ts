/**
 * The cluster's store on etcd: one key per object (`/berth/v1/<kind>/<id>`, JSON), names kept unique by a
 * key per name written in the same transaction, and Version.Index = the key's mod_revision. Every manager
 * keeps the whole store in memory, fed by one watch of the prefix from the revision it listed at; writes
 * wait until that copy has caught up with them, so that a read after a write sees it.
 */
import { Etcd3, type IKeyValue } from 'etcd3';
import { Conflict, InvalidParameter, NotFound, Unavailable } from '../../errors.js';
import { log } from '../../util/log.js';
import type { Kind, Obj } from './types.js';

export const PREFIX = '/berth/v1/';
export const key = (kind: Kind | 'names', id: string) => `${PREFIX}${kind}/${id}`;

export interface Entry {
  obj: Obj;
  createRev: number;
  modRev: number;
  lease: string;
}

export type ChangeListener = (kind: string, id: string, entry: Entry | undefined) => void;

/** A leader's fence: its election key and that key's create revision, compared in each of its writes. */
export interface Fence {
  key: string;
  revision: number;
}

/** etcd's failures (no quorum, member gone) as an error the API answers with 503. */
function unavailable(err: unknown): Error {
  if (err instanceof Conflict || err instanceof NotFound || err instanceof InvalidParameter) return err;
  const message = err instanceof Error ? err.message : String(err);
  return new Unavailable(`the swarm's store cannot be reached: ${message}`, { cause: err });
}

export class ClusterStore {
  private readonly cache = new Map<string, Map<string, Entry>>();
  private revision = 0;
  private waiters: Array<{ revision: number; resolve: () => void }> = [];
  private listeners: ChangeListener[] = [];
  private watcher?: { cancel(): Promise<void> };
  private closed = false;

  constructor(readonly client: Etcd3) {}

  /** Lists the store and follows it from there. */
  async start(): Promise<void> {
    await this.relist();
  }

  private async relist(): Promise<void> {
    const res = await this.client.getAll().prefix(PREFIX).exec();
    const fresh = new Map<string, Map<string, Entry>>();
    for (const kv of res.kvs) {
      const parsed = this.parse(kv);
      if (!parsed) continue;
      let m = fresh.get(parsed.kind);
      if (!m) fresh.set(parsed.kind, (m = new Map()));
      m.set(parsed.id, parsed.entry);
    }
    // Tell listeners what changed between the old copy and the fresh one.
    const changes: Array<[string, string, Entry | undefined]> = [];
    for (const [kind, m] of fresh) for (const [id, e] of m) if (this.cache.get(kind)?.get(id)?.modRev !== e.modRev) changes.push([kind, id, e]);
    for (const [kind, m] of this.cache) for (const id of m.keys()) if (!fresh.get(kind)?.has(id)) changes.push([kind, id, undefined]);
    this.cache.clear();
    for (const [k, v] of fresh) this.cache.set(k, v);
    this.advance(Number(res.header.revision));
    for (const [kind, id, e] of changes) this.emit(kind, id, e);
    await this.watch(Number(res.header.revision) + 1);
  }

  private async watch(fromRevision: number): Promise<void> {
    const watcher = await this.client.watch().prefix(PREFIX).withPreviousKV().startRevision(String(fromRevision)).create();
    this.watcher = watcher;
    watcher.on('put', (kv) => this.applyPut(kv));
    watcher.on('delete', (kv) => this.applyDelete(kv));
    watcher.on('data', (res) => {
      if (res.header) this.advance(Number(res.header.revision));
    });
    watcher.on('error', (err) => {
      // A watch that fails (compaction past it, or a lost stream) is replaced by a fresh list and watch.
      log.warn('swarm store: watch failed; listing again', { error: err.message });
      void watcher.cancel().catch(() => undefined);
      if (this.closed) return;
      setTimeout(() => {
        if (!this.closed) this.relist().catch((e: unknown) => log.warn('swarm store: list failed', { error: String(e) }));
      }, 200).unref();
    });
  }

  private parse(kv: IKeyValue): { kind: string; id: string; entry: Entry } | undefined {
    const k = kv.key.toString();
    if (!k.startsWith(PREFIX)) return undefined;
    const rest = k.slice(PREFIX.length);
    const slash = rest.indexOf('/');
    if (slash < 0) return undefined;
    let obj: Obj;
    try {
      obj = JSON.parse(kv.value.toString() || 'null') as Obj;
    } catch {
      return undefined;
    }
    return {
      kind: rest.slice(0, slash),
      id: rest.slice(slash + 1),
      entry: { obj, createRev: Number(kv.create_revision), modRev: Number(kv.mod_revision), lease: String(kv.lease ?? '0') },
    };
  }

  private applyPut(kv: IKeyValue): void {
    const parsed = this.parse(kv);
    if (!parsed) return;
    let m = this.cache.get(parsed.kind);
    if (!m) this.cache.set(parsed.kind, (m = new Map()));
    // A duplicated event (etcd 3.4.23 can send one) is no newer than what is applied.
    const old = m.get(parsed.id);
    if (old && old.modRev >= parsed.entry.modRev) return;
    m.set(parsed.id, parsed.entry);
    this.emit(parsed.kind, parsed.id, parsed.entry);
  }

  private applyDelete(kv: IKeyValue): void {
    const k = kv.key.toString();
    if (!k.startsWith(PREFIX)) return;
    const rest = k.slice(PREFIX.length);
    const slash = rest.indexOf('/');
    const kind = rest.slice(0, slash);
    const id = rest.slice(slash + 1);
    if (this.cache.get(kind)?.delete(id)) this.emit(kind, id, undefined);
  }

  private emit(kind: string, id: string, entry: Entry | undefined): void {
    for (const l of this.listeners) {
      try {
        l(kind, id, entry);
      } catch (err) {
        log.warn('swarm store: a listener failed', { error: String(err) });
      }
    }
  }

  private advance(revision: number): void {
    if (revision <= this.revision) return;
    this.revision = revision;
    const ready = this.waiters.filter((w) => w.revision <= revision);
    this.waiters = this.waiters.filter((w) => w.revision > revision);
    for (const w of ready) w.resolve();
  }

  /** Resolves when the in-memory copy has applied `revision` (or after a few seconds, whichever first). */
  waitFor(revision: number): Promise<void> {
    if (revision <= this.revision) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, 5000);
      timer.unref();
      this.waiters.push({ revision, resolve: () => (clearTimeout(timer), resolve()) });
    });
  }

  onChange(listener: ChangeListener): () => void {
    this.listeners.push(listener);
    return () => {
      this.listeners = this.listeners.filter((l) => l !== listener);
    };
  }

  get(kind: Kind, id: string): Entry | undefined {
    return this.cache.get(kind)?.get(id);
  }

  list(kind: Kind): Entry[] {
    return [...(this.cache.get(kind)?.values() ?? [])];
  }

  /** Objects as the API shows them: with Version.Index. */
  view(entry: Entry): Obj {
    return { ID: entry.obj.ID, Version: { Index: entry.modRev }, ...entry.obj };
  }

  /** Creates an object whose id and (when given) name must be new. */
  async create(kind: Kind, id: string, obj: Obj, opts: { name?: string; fence?: Fence } = {}): Promise<number> {
    const txn = this.client.if(key(kind, id), 'Create', '==', 0);
    if (opts.name !== undefined) txn.and(key('names', `${kind}/${opts.name}`), 'Create', '==', 0);
    if (opts.fence) txn.and(opts.fence.key, 'Create', '==', opts.fence.revision);
    const ops = [this.client.put(key(kind, id)).value(JSON.stringify(obj))];
    if (opts.name !== undefined) ops.push(this.client.put(key('names', `${kind}/${opts.name}`)).value(id));
    const res = await txn.then(...ops).commit().catch((err: unknown) => {
      throw unavailable(err);
    });
    if (!res.succeeded) {
      if (opts.name !== undefined) throw new Conflict(`rpc error: code = AlreadyExists desc = ${kind.replace(/s$/, '')} ${opts.name} already exists`);
      throw new Conflict(`${kind.replace(/s$/, '')} ${id} already exists`);
    }
    const rev = Number(res.header.revision);
    await this.waitFor(rev);
    return rev;
  }

  /**
   * Replaces an object if its version is still `version` (the API's rule); a name change moves its name key.
   * Fails with "update out of sequence" otherwise.
   */
  async update(kind: Kind, id: string, version: number, obj: Obj, opts: { oldName?: string; name?: string; fence?: Fence } = {}): Promise<number> {
    const txn = this.client.if(key(kind, id), 'Mod', '==', version);
    const ops = [this.client.put(key(kind, id)).value(JSON.stringify(obj))];
    const rename = opts.name !== undefined && opts.name !== opts.oldName;
    if (rename) {
      txn.and(key('names', `${kind}/${opts.name}`), 'Create', '==', 0);
      ops.push(this.client.put(key('names', `${kind}/${opts.name}`)).value(id));
      if (opts.oldName !== undefined) ops.push(this.client.delete().key(key('names', `${kind}/${opts.oldName}`)) as any);
    }
    if (opts.fence) txn.and(opts.fence.key, 'Create', '==', opts.fence.revision);
    const res = await txn.then(...ops).commit().catch((err: unknown) => {
      throw unavailable(err);
    });
    if (!res.succeeded) {
      const current = await this.client.get(key(kind, id)).exec().catch((err: unknown) => {
        throw unavailable(err);
      });
      if (current.kvs.length === 0) throw new NotFound(`${kind.replace(/s$/, '')} ${id} not found`);
      if (rename && Number(current.kvs[0]!.mod_revision) === version) throw new Conflict(`rpc error: code = AlreadyExists desc = name conflicts with an existing object`);
      throw new InvalidParameter('rpc error: code = Unknown desc = update out of sequence');
    }
    const rev = Number(res.header.revision);
    await this.waitFor(rev);
    return rev;
  }

  /**
   * Read-modify-write of an object, retried on conflicts: `change` gets the current object and answers the
   * new one (or undefined to leave it). Answers the written entry's revision, or 0 when nothing was written.
   */
  async mutate(kind: Kind, id: string, change: (obj: Obj) => Obj | undefined, fence?: Fence): Promise<number> {
    for (let attempt = 0; attempt < 20; attempt++) {
      const res = await this.client.get(key(kind, id)).exec().catch((err: unknown) => {
        throw unavailable(err);
      });
      const kv = res.kvs[0];
      if (!kv) return 0;
      const next = change(JSON.parse(kv.value.toString()) as Obj);
      if (!next) return 0;
      const txn = this.client.if(key(kind, id), 'Mod', '==', Number(kv.mod_revision));
      if (fence) txn.and(fence.key, 'Create', '==', fence.revision);
      const put = await txn.then(this.client.put(key(kind, id)).value(JSON.stringify(next))).commit().catch((err: unknown) => {
        throw unavailable(err);
      });
      if (put.succeeded) return Number(put.header.revision);
      if (fence) {
        const f = await this.client.get(fence.key).exec().catch(() => undefined);
        if (!f || Number(f.kvs[0]?.create_revision ?? 0) !== fence.revision) throw new Unavailable('this manager no longer leads the swarm');
      }
    }
    throw new Unavailable(`${kind} ${id}: too many concurrent changes`);
  }

  /** Deletes an object (and its name key). */
  async remove(kind: Kind, id: string, opts: { name?: string; fence?: Fence } = {}): Promise<void> {
    const ops: any[] = [this.client.delete().key(key(kind, id))];
    if (opts.name !== undefined) ops.push(this.client.delete().key(key('names', `${kind}/${opts.name}`)));
    const txn = opts.fence ? this.client.if(opts.fence.key, 'Create', '==', opts.fence.revision) : this.client.if(key(kind, id), 'Create', '>', 0);
    const res = await txn.then(...ops).commit().catch((err: unknown) => {
      throw unavailable(err);
    });
    await this.waitFor(Number(res.header.revision));
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const w of this.waiters) w.resolve();
    this.waiters = [];
    await this.watcher?.cancel().catch(() => undefined);
    this.client.close();
  }
}
