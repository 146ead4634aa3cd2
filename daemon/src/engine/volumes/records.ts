/**
 * The volumes' records: what the daemon knows of each volume (name, driver, labels, options, creation time),
 * its own state, kept apart from the volume's content (a folder on the Host's machine, VolumeHost).
 *
 * Formats: `volume-records/<name>/volume.json` in the daemon's state holds one VolumeRecord as JSON with
 * `FormatVersion: 1`, written atomically (a folder per volume, so that a name of 255 characters, the longest
 * allowed, still leaves room for the file's own name and its temporary one). Before it, the record was
 * `volumes/<name>/volume.json` inside the volume's own folder of the data root; such a record is moved here at
 * start (migrateLegacy), the volume's content staying where it is.
 */
import { errorMessage } from '../../errors.js';
import type { StateStore } from '../../state/state.js';
import { log } from '../../util/log.js';
import { VOLUME_NAME, type VolumeRecord } from './types.js';

export const VOLUME_FORMAT_VERSION = 1;

export interface VolumeFile extends VolumeRecord {
  FormatVersion: number;
}

/** The part of the daemon's state store the records use. */
export type VolumeState = Pick<StateStore, 'read' | 'write' | 'list' | 'remove' | 'makeFolder'>;

const RECORDS = 'volume-records';
const LEGACY = 'volumes';

function parse(bytes: Buffer): VolumeRecord {
  const { FormatVersion: _version, ...volume } = JSON.parse(bytes.toString('utf8')) as VolumeFile;
  return volume;
}

export class VolumeRecords {
  constructor(private readonly state: VolumeState) {}

  private file(name: string): string {
    return `${RECORDS}/${name}/volume.json`;
  }

  /** Writes (or replaces) a volume's record. */
  async save(volume: VolumeRecord): Promise<void> {
    await this.state.makeFolder(`${RECORDS}/${volume.Name}`);
    await this.state.write(this.file(volume.Name), JSON.stringify({ FormatVersion: VOLUME_FORMAT_VERSION, ...volume } satisfies VolumeFile));
  }

  async delete(name: string): Promise<void> {
    await this.state.remove(`${RECORDS}/${name}`);
  }

  /** Every stored record; one that cannot be read is left out (and said in the log). */
  async load(): Promise<VolumeRecord[]> {
    const out: VolumeRecord[] = [];
    for (const name of await this.state.list(RECORDS)) {
      if (!VOLUME_NAME.test(name)) continue;
      try {
        const bytes = await this.state.read(this.file(name));
        if (bytes) out.push(parse(bytes));
      } catch (err) {
        log.warn('unreadable volume record', { name, error: errorMessage(err) });
      }
    }
    return out;
  }

  /**
   * Makes the records' folder, and moves the records of the former layout (`volumes/<name>/volume.json`) here;
   * the content of a local volume (`_data` beside it) stays, the folder of a plugin's volume (which held the
   * record only) goes.
   */
  async migrateLegacy(): Promise<void> {
    await this.state.makeFolder(RECORDS);
    // The former folder is also the local Host's volumes folder where the daemon runs its own Host (0701, as dockerd's).
    for (const name of await this.state.list(LEGACY, { mode: 0o701 }).catch(() => [] as string[])) {
      if (!VOLUME_NAME.test(name)) continue;
      const legacy = `${LEGACY}/${name}/volume.json`;
      let volume: VolumeRecord;
      try {
        const bytes = await this.state.read(legacy);
        if (!bytes) continue;
        volume = parse(bytes);
      } catch (err) {
        log.warn('unreadable volume record', { name, error: errorMessage(err) });
        continue;
      }
      if (!(await this.state.read(this.file(name)))) await this.save(volume);
      await this.state.remove(volume.Driver === 'local' ? legacy : `${LEGACY}/${name}`);
      log.info('volume record moved to the records folder', { name });
    }
  }
}
