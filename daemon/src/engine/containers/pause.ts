/**
 * Pause and unpause: every process of the container frozen and thawed through the cgroup freezer (the
 * Host asks the OCI runtime, which uses cgroup v1's freezer.state or cgroup v2's cgroup.freeze). A paused
 * container stays Running with Paused set, as in Docker; attach and exec refuse it (409), stop and kill
 * thaw it after sending their signal so that the signal is delivered.
 */
import { Conflict } from '../../errors.js';
import type { ContainerRecord } from './model.js';
import { parseSignal } from './validate.js';

/** What pausing needs of the Host. */
export interface FreezerHost {
  pause(id: string): Promise<void>;
  resume(id: string): Promise<void>;
}

/** What pausing needs of the container engine. */
export interface PauseContainers {
  get(ref: string): ContainerRecord;
  serialised<T>(id: string, fn: () => Promise<T>): Promise<T>;
  containerEvent(record: ContainerRecord, action: string, extra?: Record<string, string>): void;
  readonly store: { save(record: ContainerRecord): Promise<void> };
}

export class PauseService {
  constructor(
    private readonly containers: PauseContainers,
    private readonly host: FreezerHost,
  ) {}

  async pause(ref: string): Promise<void> {
    const record = this.containers.get(ref);
    await this.containers.serialised(record.Id, async () => {
      const state = record.State;
      if (!state.Running) throw new Conflict(`Container ${record.Id} is not running`);
      if (state.Paused) throw new Conflict(`Container ${record.Id} is already paused`);
      if (state.Restarting) throw new Conflict(`Container ${record.Id} is restarting, wait until the container is running`);
      await this.host.pause(record.Id);
      Object.assign(state, { Paused: true, Status: 'paused' });
      await this.containers.store.save(record);
    });
    this.containers.containerEvent(record, 'pause');
  }

  async unpause(ref: string): Promise<void> {
    const record = this.containers.get(ref);
    await this.containers.serialised(record.Id, async () => {
      const state = record.State;
      if (!state.Running || !state.Paused) throw new Conflict(`Container ${record.Id} is not paused`);
      await this.host.resume(record.Id);
      Object.assign(state, { Paused: false, Status: 'running' });
      await this.containers.store.save(record);
    });
    this.containers.containerEvent(record, 'unpause');
  }

  /**
   * After a signal to a paused container: SIGKILL and the container's stop signal thaw it, so that the
   * process gets the signal and can exit (Docker does the same); other signals stay pending while frozen.
   */
  async afterSignal(record: ContainerRecord, signal: number): Promise<void> {
    if (!record.State.Paused || !record.State.Running) return;
    const stopSignal = parseSignal(record.Config.StopSignal || 'SIGTERM');
    if (signal !== 9 && signal !== stopSignal) return;
    await this.host.resume(record.Id);
    // The thawed process may have exited, and its exit been recorded, while the thaw was answered: the
    // exited state stands.
    if (!record.State.Running || !record.State.Paused) return;
    Object.assign(record.State, { Paused: false, Status: 'running' });
    await this.containers.store.save(record);
  }
}
