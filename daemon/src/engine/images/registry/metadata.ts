/**
 * What the engine remembers of blobs seen in registries: for each layer (by diff id), the compressed
 * blobs it was pulled as or pushed as, and the repositories holding them. Push uses it to skip uploads
 * ("Layer already exists") and to mount blobs across repositories of one registry; it also lets a push
 * of a pulled image reuse the original blobs.
 *
 * ## Format (version 1): `<data-root>/image/distribution.json`
 *
 * `{"version": 1, "layers": {"sha256:<diff id>": [{"digest": "sha256:...", "mediaType": "...",
 * "size": N, "repositories": ["127.0.0.1:5000/app", ...]}]}}`, written atomically.
 */
import path from 'node:path';
import { readJSON, writeJSON, type StateStore } from '../../../state/state.js';
import { log } from '../../../util/log.js';

/** The file, in the StateStore. */
const FILE = 'image/distribution.json';

const FORMAT_VERSION = 1;
/** Repositories remembered per blob (the most recent first). */
const MAX_REPOSITORIES = 16;

export interface BlobRecord {
  digest: string;
  mediaType: string;
  size: number;
  /** `domain/path` of repositories known to hold the blob. */
  repositories: string[];
}

export class BlobMetadata {
  private readonly layers = new Map<string, BlobRecord[]>();
  private saving: Promise<void> = Promise.resolve();
  private loading?: Promise<void>;

  constructor(private readonly state: StateStore) {}

  /** Reads the file, once (later calls share the first read). */
  load(): Promise<void> {
    return (this.loading ??= this.read());
  }

  private async read(): Promise<void> {
    try {
      const parsed = await readJSON<{ version?: number; layers?: Record<string, BlobRecord[]> }>(this.state, FILE);
      if (!parsed) return;
      if (parsed.version !== FORMAT_VERSION) throw new Error(`unknown version ${parsed.version}`);
      for (const [diffId, records] of Object.entries(parsed.layers ?? {})) this.layers.set(diffId, records);
    } catch (err) {
      log.warn('ignoring unreadable registry blob metadata', { file: path.join(this.state.root, FILE), error: (err as Error).message });
    }
  }

  /** Blobs known for a diff id. */
  blobsOf(diffId: string): BlobRecord[] {
    return this.layers.get(diffId) ?? [];
  }

  /** Records that `repository` holds `blob`, the compressed form of `diffId`. */
  async record(diffId: string, blob: { digest: string; mediaType: string; size: number }, repository: string): Promise<void> {
    await this.load();
    const records = this.layers.get(diffId) ?? [];
    let record = records.find((r) => r.digest === blob.digest);
    if (!record) {
      record = { ...blob, repositories: [] };
      records.push(record);
    }
    record.repositories = [repository, ...record.repositories.filter((r) => r !== repository)].slice(0, MAX_REPOSITORIES);
    this.layers.set(diffId, records);
    await this.save();
  }

  /** Forgets that `repository` holds the blob (the registry said it does not). */
  async forget(diffId: string, digest: string, repository: string): Promise<void> {
    await this.load();
    const record = this.layers.get(diffId)?.find((r) => r.digest === digest);
    if (!record) return;
    record.repositories = record.repositories.filter((r) => r !== repository);
    await this.save();
  }

  private save(): Promise<void> {
    const run = this.saving.then(() => writeJSON(this.state, FILE, { version: FORMAT_VERSION, layers: Object.fromEntries(this.layers) }));
    this.saving = run.catch(() => undefined);
    return run;
  }
}
