/**
 * Passes of one piece of work, one at a time: an ask that comes while a pass runs makes one more pass after it
 * (however many asks came meanwhile). For reconcilers that bring something in step with a source that keeps
 * changing: the swarm agent and orchestrator, the VM's port forwards.
 */
export class Passes {
  private current?: Promise<void>;
  private again = false;

  /** `goOn` is asked before each further pass (false: the passes end, e.g. once stopped). */
  constructor(
    private readonly pass: () => Promise<void>,
    private readonly goOn: () => boolean = () => true,
  ) {}

  /** Whether a pass is under way. */
  get busy(): boolean {
    return this.current !== undefined;
  }

  /** Starts passes, or asks the ones under way for one more; answers when they end (a pass's failure ends them). */
  run(): Promise<void> {
    if (this.current) {
      this.again = true;
      return this.current;
    }
    this.current = (async () => {
      do {
        this.again = false;
        await this.pass();
      } while (this.again && this.goOn());
    })().finally(() => (this.current = undefined));
    return this.current;
  }

  /** run() without waiting: a failure goes to `onError` once, however many asks joined the passes it ended. */
  kick(onError: (err: unknown) => void): void {
    if (this.current) {
      this.again = true;
      return;
    }
    this.run().catch(onError);
  }
}
