/**
 * The guest's clock kept in step with the host's. A guest's clock stops while the host sleeps and does not
 * catch up on its own; so the host side sets it: at every handshake with the agent, after the host wakes, and
 * at a slow period in between (the agent sets the guest clock when it is off by more than its threshold).
 *
 * A wake is seen as a timer tick that came much later than asked: while the host sleeps no timer runs, and
 * the wall clock jumps on. (An event loop blocked for as long would look the same; it costs one extra sync.)
 */
export interface ClockKeeperOptions {
  /** Sends the host's time to the guest (the agent's clock call). */
  sync: (hostNow: Date) => Promise<void>;
  /** How often the tick looks at the clock (default 5 s). */
  tickMs?: number;
  /** A tick this much later than asked means the host slept (default 10 s). */
  wakeThresholdMs?: number;
  /** A sync at least this often while awake (default 10 min). */
  periodMs?: number;
  now?: () => number;
  setInterval?: (fn: () => void, ms: number) => { unref?: () => void };
  clearInterval?: (handle: unknown) => void;
  onError?: (err: unknown) => void;
}

export class ClockKeeper {
  private handle?: { unref?: () => void };
  private lastTick = 0;
  private lastSync = 0;
  private inflight?: Promise<void>;
  /** The last sync failed (the agent was away): try at every tick until one works. */
  private pending = false;
  private readonly now: () => number;
  readonly wakes: number[] = [];

  constructor(private readonly opts: ClockKeeperOptions) {
    this.now = opts.now ?? Date.now;
  }

  /** Starts the watch and syncs at once (the handshake). */
  start(): Promise<void> {
    const tick = this.opts.tickMs ?? 5000;
    this.lastTick = this.now();
    const set = this.opts.setInterval ?? ((fn: () => void, ms: number) => setInterval(fn, ms));
    this.handle = set(() => this.tick(), tick);
    this.handle.unref?.();
    return this.syncNow();
  }

  stop(): void {
    if (this.handle) (this.opts.clearInterval ?? ((h: unknown) => clearInterval(h as NodeJS.Timeout)))(this.handle);
    this.handle = undefined;
  }

  /** One look at the clock: a sync when the host slept or the period passed. */
  tick(): void {
    const now = this.now();
    const late = now - this.lastTick - (this.opts.tickMs ?? 5000);
    this.lastTick = now;
    if (late >= (this.opts.wakeThresholdMs ?? 10_000)) {
      this.wakes.push(late);
      void this.syncNow();
    } else if (this.pending || now - this.lastSync >= (this.opts.periodMs ?? 600_000)) {
      void this.syncNow();
    }
  }

  /** Syncs now, or waits for the sync under way. */
  syncNow(): Promise<void> {
    this.inflight ??= this.sync().finally(() => (this.inflight = undefined));
    return this.inflight;
  }

  private async sync(): Promise<void> {
    try {
      await this.opts.sync(new Date(this.now()));
      this.lastSync = this.now();
      this.pending = false;
    } catch (err) {
      this.pending = true;
      this.opts.onError?.(err);
    }
  }
}
