/** A container's network configuration changed by network connect and disconnect, under its lock. */
import { log } from '../../util/log.js';
import { errorMessage, NotFound } from '../../errors.js';
import type { ContainerNetworkChange, ContainerNetworkConfig } from '../networks/connect.js';
import { planOptions, type ContainerContext } from './context.js';
import { rewriteResolvConf } from './files.js';
import type { ContainerRecord } from './model.js';

/** A running container now served by the embedded DNS server resolves through it: its resolv.conf names it. */
export async function useEmbeddedDns(ctx: ContainerContext, ref: string): Promise<void> {
  const record = ctx.store.get(ref);
  await ctx.withLock(record.Id, async () => {
    if (record.State.Running) await rewriteResolvConf(ctx.deps.etcFiles, record, ctx.deps.probe, { embeddedDns: true });
  });
}

/**
 * Changes a container's network configuration (network connect and disconnect), serialised with its
 * other state changes: `change` sees the configuration and whether the container runs, and returns the new
 * one. For a container that is not running, the endpoints shown are the planned ones (no address yet).
 */
export async function configureNetworks(ctx: ContainerContext, ref: string, change: (current: ContainerNetworkConfig) => Promise<ContainerNetworkChange | undefined>): Promise<void> {
  const record = ctx.store.get(ref);
  await ctx.withLock(record.Id, async () => {
    if (!ctx.store.find(record.Id)) throw new NotFound(`No such container: ${ref}`);
    const hc = record.HostConfig as Record<string, any>;
    const next = await change({
      Id: record.Id,
      Name: record.Name,
      Running: record.State.Running,
      Pid: record.State.Pid,
      NetworkMode: (hc.NetworkMode as string | undefined) ?? '',
      EndpointsConfig: structuredClone(record.EndpointsConfig ?? {}),
      Dns: (hc.Dns as string[] | null | undefined) ?? undefined,
      Sandbox: (await ctx.deps.sandboxes?.hasPolicy(record)) === true,
    });
    if (!next) return;
    // A running container that now has the embedded DNS server (it joined a user-defined network) resolves
    // through it, as with Docker: its resolv.conf is written again, in place.
    if (next.Networks && record.State.Running && ctx.networking.servesDns(record.Id)) {
      await rewriteResolvConf(ctx.deps.etcFiles, record, ctx.deps.probe, { embeddedDns: true }).catch((err) =>
        log.warn('cannot point the resolv.conf of a container at the embedded DNS server', { id: record.Id, error: errorMessage(err) }),
      );
    }
    const networkMode = next.NetworkMode ?? hc.NetworkMode;
    const networks =
      next.Networks ??
      ctx.networking.plannedNetworks(
        ctx.networking.plan(networkMode, { EndpointsConfig: next.EndpointsConfig }, { ...planOptions(record.Config, hc), deferUnknownNetwork: true }),
      );
    hc.NetworkMode = networkMode;
    record.EndpointsConfig = next.EndpointsConfig as ContainerRecord['EndpointsConfig'];
    record.Networks = networks;
    await ctx.store.save(record);
  });
}

