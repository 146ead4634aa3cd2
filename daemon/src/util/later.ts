/**
 * Deletion of removed containers' folders, in batches and off the request path. A removal renames a
 * container's folders aside at once; deleting their files right away put many unlinks in the file system's
 * journal beside the next create, whose fsync then waited for all of them (a create took 13 ms with the
 * deletions beside it, 3.6 ms with them batched, on ext4 here). Folders still queued when the daemon stops
 * are deleted at its next start by their owner (they keep the `.removing-` name).
 */

export type Remover = (path: string) => Promise<void>;

interface Pending {
  path: string;
  remove: Remover;
  onError: (err: unknown) => void;
}

/** How long a removed folder waits, so that the deletions of a burst of removals go together. */
export const REMOVE_LATER_DELAY_MS = 1000;

const queue: Pending[] = [];
let timer: NodeJS.Timeout | undefined;
let sweeping: Promise<void> | undefined;
let afterBatch: (() => Promise<void>) | undefined;

/** Sets what runs after each batch of deletions (the host's: see host/linux/nojournal.ts); its failure is ignored. */
export function useAfterBatch(fn: (() => Promise<void>) | undefined): void {
  afterBatch = fn;
}

/** Queues `path` for deletion by `remove` in the next batch; `onError` hears of a failure. */
export function removeLater(path: string, remove: Remover, onError: (err: unknown) => void): void {
  queue.push({ path, remove, onError });
  if (!timer && !sweeping) schedule();
}

function schedule(): void {
  timer = setTimeout(() => void sweep(), REMOVE_LATER_DELAY_MS);
  timer.unref();
}

/** Deletes the folders queued so far; those queued meanwhile wait for the next batch. */
function sweep(): Promise<void> {
  timer = undefined;
  const batch = queue.splice(0);
  sweeping = (async () => {
    // One at a time: the batch is background work and should not crowd the thread pool.
    for (const item of batch) await item.remove(item.path).catch(item.onError);
    if (afterBatch && batch.length > 0) await afterBatch().catch(() => undefined);
  })().finally(() => {
    sweeping = undefined;
    if (queue.length > 0 && !timer) schedule();
  });
  return sweeping;
}

/** Deletes what is queued now without waiting for the batch's time (for tests: a stopping daemon leaves the rest to its next start). */
export async function removeQueuedNow(): Promise<void> {
  if (timer) {
    clearTimeout(timer);
    timer = undefined;
  }
  while (sweeping || queue.length > 0) {
    if (sweeping) await sweeping;
    if (timer) {
      clearTimeout(timer);
      timer = undefined;
    }
    if (queue.length > 0) await sweep();
  }
}
