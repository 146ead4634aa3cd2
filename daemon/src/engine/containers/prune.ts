/**
 * POST /containers/prune: removes every container that does not run (created, exited, dead), narrowed by
 * the `until` and `label` / `label!` filters, and reports their ids and the bytes their own files held.
 * Paused and restarting containers count as running, as in Docker. One `prune` event follows, with the
 * bytes reclaimed.
 */
import type { EventBus } from '../events.js';
import { errorMessage, Conflict } from '../../errors.js';
import { matchLabels, matchNotLabels } from '../filters.js';
import { parseUntil } from '../images/service.js';
import { parseTimestamp } from '../../util/json.js';
import { log } from '../../util/log.js';
import type { ContainerRecord } from './model.js';

/** The filters prune accepts; others are refused by the api layer. */
export const PRUNE_FILTERS = ['until', 'label', 'label!'] as const;

export interface ContainerPruneDeps {
  all(): ContainerRecord[];
  remove(id: string, opts: { force: boolean }): Promise<void>;
  /** Bytes of the container's own files (its writable layer). */
  ownSize(record: ContainerRecord): Promise<number>;
  events: Pick<EventBus, 'publish'>;
}

export interface ContainerPruneReport {
  ContainersDeleted: string[];
  SpaceReclaimed: number;
}

let running = false;

export async function pruneContainers(deps: ContainerPruneDeps, filters: ReadonlyMap<string, string[]>): Promise<ContainerPruneReport> {
  const until = filters.get('until')?.map(parseUntil);
  if (running) throw new Conflict('a prune operation is already running');
  running = true;
  try {
    const report: ContainerPruneReport = { ContainersDeleted: [], SpaceReclaimed: 0 };
    for (const record of deps.all()) {
      const state = record.State;
      if (state.Running || state.Paused || state.Restarting || state.Status === 'removing') continue;
      if (until) {
        const created = parseTimestamp(record.Created) ?? 0n;
        if (!until.every((u) => created <= u)) continue;
      }
      const labels = record.Config.Labels;
      if (!matchLabels(filters.get('label'), labels) || !matchNotLabels(filters.get('label!'), labels)) continue;
      const size = await deps.ownSize(record).catch(() => 0);
      try {
        await deps.remove(record.Id, { force: false });
      } catch (err) {
        // Started or removed meanwhile: it is not this prune's to remove.
        log.warn('container prune skipped a container', { id: record.Id, error: errorMessage(err) });
        continue;
      }
      report.ContainersDeleted.push(record.Id);
      report.SpaceReclaimed += size;
    }
    deps.events.publish('container', 'prune', '', { reclaimed: String(report.SpaceReclaimed) });
    return report;
  } finally {
    running = false;
  }
}
