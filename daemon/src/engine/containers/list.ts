/** Queries over the containers: those using a volume or an image, and the counts by state. */
import type { ContainerContext } from './context.js';

/** Containers (in any state) whose mounts name the volume. */
export function containersUsingVolume(ctx: ContainerContext, name: string): string[] {
  return ctx.store.all().filter((c) => c.Mounts.some((m) => m.Type === 'volume' && m.Name === name)).map((c) => c.Id);
}

/** Running containers whose mounts name the volume. */
export function runningContainersUsingVolume(ctx: ContainerContext, name: string): string[] {
  return ctx.store.all().filter((c) => (c.State.Running || c.State.Paused) && c.Mounts.some((m) => m.Type === 'volume' && m.Name === name)).map((c) => c.Id);
}

export function containersUsingImage(ctx: ContainerContext, imageId: string): string[] {
  return ctx.store.all().filter((c) => c.Image === imageId).map((c) => c.Id);
}

export function counts(ctx: ContainerContext): { total: number; running: number; paused: number; stopped: number } {
  let running = 0;
  let paused = 0;
  let stopped = 0;
  for (const c of ctx.store.all()) {
    if (c.State.Paused) paused++;
    else if (c.State.Running) running++;
    else stopped++;
  }
  return { total: ctx.store.size, running, paused, stopped };
}

