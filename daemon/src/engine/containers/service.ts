/**
 * The container engine: the state machine of containers over the Host, with the verbs the API serves.
 * It never spawns a tool or mounts anything itself; the Host does. Each verb lives in its own file
 * (create.ts, start.ts, stop.ts, remove.ts, ...) over the state they share (context.ts); this class only
 * gathers them for the API and the daemon.
 */
import type { AttachStreams } from '../../host/host.js';
import type { ImageUsers } from '../images/types.js';
import type { ContainerNetworkChange, ContainerNetworkConfig } from '../networks/connect.js';
import { attach, attached, detached, resize } from './attach.js';
import { ContainerContext, type ContainerServiceDeps } from './context.js';
import { create } from './create.js';
import { kill } from './kill.js';
import { removeLink, runningLinkEnv } from './linking.js';
import { containersUsingImage, containersUsingVolume, counts, runningContainersUsingVolume } from './list.js';
import type { ContainerRecord } from './model.js';
import { configureNetworks, useEmbeddedDns } from './netconfig.js';
import { close, load } from './recovery.js';
import { remove } from './remove.js';
import { rename } from './rename.js';
import { restart } from './restart.js';
import { start } from './start.js';
import type { ContainerStore } from './store.js';
import { stop } from './stop.js';
import { wait, type WaitCondition } from './wait.js';

export type { ContainerSandboxes, ContainerServiceDeps, ContainerVolumeParts } from './context.js';
export type { WaitCondition } from './wait.js';

export class ContainerService implements ImageUsers {
  private readonly ctx: ContainerContext;

  constructor(deps: ContainerServiceDeps) {
    this.ctx = new ContainerContext(deps);
  }

  get store(): ContainerStore {
    return this.ctx.store;
  }

  /**
   * Called after every signal sent to a container's process (pause.ts thaws a frozen container there, so
   * that a stop or kill reaches it, as Docker does).
   */
  get afterSignal(): ContainerContext['afterSignal'] {
    return this.ctx.afterSignal;
  }

  set afterSignal(hook: ContainerContext['afterSignal']) {
    this.ctx.afterSignal = hook;
  }

  /** For the verbs kept in their own files (exec, pause, update, top): a container event with the usual attributes. */
  containerEvent(record: ContainerRecord, action: string, extra: Record<string, string> = {}): void {
    this.ctx.publish(record, action, extra);
  }

  /** For the verbs kept in their own files: runs `fn` serialised with the container's other state changes. */
  serialised<T>(id: string, fn: () => Promise<T>): Promise<T> {
    return this.ctx.withLock(id, fn);
  }

  // ---- queries ----

  get(ref: string): ContainerRecord {
    return this.ctx.store.get(ref);
  }

  all(): ContainerRecord[] {
    return this.ctx.store.all();
  }

  /** Containers (in any state) whose mounts name the volume. */
  containersUsingVolume(name: string): string[] {
    return containersUsingVolume(this.ctx, name);
  }

  /** Running containers whose mounts name the volume. */
  runningContainersUsingVolume(name: string): string[] {
    return runningContainersUsingVolume(this.ctx, name);
  }

  containersUsingImage(imageId: string): string[] {
    return containersUsingImage(this.ctx, imageId);
  }

  counts(): { total: number; running: number; paused: number; stopped: number } {
    return counts(this.ctx);
  }

  // ---- verbs ----

  create(body: unknown, nameParam: string | undefined): Promise<{ Id: string; Warnings: string[] }> {
    return create(this.ctx, body, nameParam);
  }

  start(ref: string): Promise<void> {
    return start(this.ctx, ref);
  }

  stop(ref: string, opts: { timeoutSeconds?: number; signal?: string } = {}): Promise<void> {
    return stop(this.ctx, ref, opts);
  }

  kill(ref: string, signalText = 'SIGKILL'): Promise<void> {
    return kill(this.ctx, ref, signalText);
  }

  restart(ref: string, opts: { timeoutSeconds?: number; signal?: string } = {}): Promise<void> {
    return restart(this.ctx, ref, opts);
  }

  wait(ref: string, condition: WaitCondition, signal?: AbortSignal): Promise<{ StatusCode: number; Error: { Message: string } | null }> {
    return wait(this.ctx, ref, condition, signal);
  }

  remove(ref: string, opts: { force: boolean; volumes?: boolean }): Promise<void> {
    return remove(this.ctx, ref, opts);
  }

  rename(ref: string, newNameParam: string): Promise<void> {
    return rename(this.ctx, ref, newNameParam);
  }

  /** The link variables of a running container, for its exec processes (none when a linked container no longer runs). */
  linkEnv(record: ContainerRecord): string[] {
    return runningLinkEnv(this.ctx, record);
  }

  /** Removes the legacy link `parent/alias` (DELETE /containers/parent/alias?link=1). */
  removeLink(ref: string): Promise<void> {
    return removeLink(this.ctx, ref);
  }

  /** Changes a container's network configuration (network connect and disconnect): see netconfig.ts. */
  /** Points a running container's resolv.conf at the embedded DNS server (which serves it now). */
  useEmbeddedDns(ref: string): Promise<void> {
    return useEmbeddedDns(this.ctx, ref);
  }

  configureNetworks(ref: string, change: (current: ContainerNetworkConfig) => Promise<ContainerNetworkChange | undefined>): Promise<void> {
    return configureNetworks(this.ctx, ref, change);
  }

  // ---- attach, resize ----

  /** Connects to the container's stdio (see attach.ts; `delivery` settles once the client has the output). */
  attach(ref: string, signal: AbortSignal, delivery?: Promise<void>): Promise<{ record: ContainerRecord; streams: AttachStreams }> {
    return attach(this.ctx, ref, signal, delivery);
  }

  /** Publishes the attach event (the API calls it once a client is attached). */
  attached(record: ContainerRecord): void {
    attached(this.ctx, record);
  }

  /** Publishes the detach event (an attached client typed the detach keys). */
  detached(record: ContainerRecord): void {
    detached(this.ctx, record);
  }

  resize(ref: string, height: number, width: number): Promise<void> {
    return resize(this.ctx, ref, height, width);
  }

  // ---- recovery ----

  /** Loads the containers and reconciles them with what runs (see recovery.ts). */
  load(): Promise<void> {
    return load(this.ctx);
  }

  /** At daemon shutdown: pending restarts dropped, removals' clean-up given a few seconds. */
  close(): Promise<void> {
    return close(this.ctx);
  }
}
