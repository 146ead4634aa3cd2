/**
 * Work to do once the daemon has gone quiet after a burst of requests: `touch()` at every request (its start
 * and its end), and `work` runs once, `quietMs` after the last touch, and never sooner than `gapMs` after its
 * previous run (a client polling every few seconds does not make it run at each poll). An idle daemon with no
 * requests does nothing; a stream that stays open (events, logs, attach) does not count as activity.
 */
export interface IdleWork {
  touch(): void;
  close(): void;
}

export function whenIdle(work: () => void, quietMs: number, gapMs = 0): IdleWork {
  let timer: NodeJS.Timeout | undefined;
  let lastRun = -Infinity;
  let closed = false;
  const schedule = (ms: number) => {
    timer = setTimeout(() => {
      timer = undefined;
      const wait = lastRun + gapMs - Date.now();
      if (wait > 0) return schedule(wait);
      lastRun = Date.now();
      work();
    }, ms);
    // It never keeps the daemon alive.
    timer.unref();
  };
  return {
    touch() {
      if (closed) return;
      if (timer) timer.refresh();
      else schedule(quietMs);
    },
    close() {
      closed = true;
      clearTimeout(timer);
      timer = undefined;
    },
  };
}
