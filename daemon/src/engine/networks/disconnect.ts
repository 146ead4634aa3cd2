/** Disconnect: a container leaves one network (network disconnect) or all of them (its exit). */
import { errorMessage, Forbidden, NotFound } from '../../errors.js';
import { log } from '../../util/log.js';
import type { EndpointSettings } from './types.js';
import type { NetworkContext } from './context.js';
import { parseEndpoint } from './plan.js';
import { containerNetworks, undirect, unplug } from './endpoint.js';
import { unpublish } from './publish.js';
import { leaveRemote } from './remote.js';
import { leaveSwarm } from './swarm.js';

/** Validates an endpoint config (network connect of a container that is not running) for the network. */
export function checkEndpoint(ctx: NetworkContext, networkRef: string, endpointConfig: unknown, field: string): void {
  parseEndpoint(ctx, ctx.find(networkRef), endpointConfig, field);
}

/** A container that is not running left the network's configuration: `network disconnect`, as Docker. */
export function disconnectedConfigured(ctx: NetworkContext, containerId: string, networkRef: string): void {
  const entry = ctx.find(networkRef);
  ctx.publishEndpoint('disconnect', entry, containerId);
}

export function disconnectOne(ctx: NetworkContext, containerId: string, networkRef: string): Promise<Record<string, EndpointSettings>> {
  const entry = ctx.find(networkRef);
  return ctx.lock.run(async () => {
    const ep = entry.endpoints.get(containerId);
    if (!ep || ep.gateway) throw new NotFound(`container ${containerId} is not connected to network ${entry.network.Name}`);
    if (entry.network.Driver !== 'bridge' && entry.network.Driver !== 'overlay' && !entry.remote) throw new Forbidden('container cannot be disconnected from host network or connected to host network');
    entry.endpoints.delete(containerId);
    await ctx.store.save(entry);
    await unplug(ctx, entry, ep);
    if (ep.swarmAttachment) await dropGateway(ctx, containerId);
    // As Docker: the embedded DNS server keeps serving a container that leaves its last user-defined network
    // (its resolv.conf still names it); another endpoint of the container carries the mark (and its
    // upstreams), so that a daemon restart serves it again.
    if (ep.dns) {
      const rest = [...ctx.entries.values()].filter((e) => (e.network.Driver === 'bridge' || e.network.Driver === 'overlay' || e.remote) && e.endpoints.has(containerId));
      const heir = rest.find((e) => e.endpoints.get(containerId)!.dns) ? undefined : rest[0];
      if (heir) {
        const kept = heir.endpoints.get(containerId)!;
        kept.dns = true;
        if (ep.dnsServers && !kept.dnsServers) kept.dnsServers = ep.dnsServers;
        await ctx.store.save(heir);
      }
    }
    ctx.publishEndpoint('disconnect', entry, containerId);
    return containerNetworks(ctx, containerId);
  });
}

/** A container on no swarm network any more loses the way out it had for them (swarm.ts joinGateway). */
async function dropGateway(ctx: NetworkContext, containerId: string): Promise<void> {
  const entries = [...ctx.entries.values()];
  if (entries.some((e) => e.network.Driver === 'overlay' && e.endpoints.has(containerId))) return;
  const bridge = entries.find((e) => e.endpoints.get(containerId)?.gateway);
  const ep = bridge?.endpoints.get(containerId);
  if (!bridge || !ep) return;
  if (ep.ports && ep.ports.length > 0) await unpublish(ctx, bridge, ep).catch((err) => log.warn('cannot remove the port rules of a container', { id: containerId, error: errorMessage(err) }));
  bridge.endpoints.delete(containerId);
  await ctx.saveEndpoints(bridge);
  // Its end in the container goes first (the host's end goes with it), then what the bridge keeps of it.
  if (ep.pid && ep.containerInterface) await ctx.swarm?.unplug(ep.pid, ep.containerInterface).catch((err) => log.warn('cannot remove a container interface', { id: containerId, error: errorMessage(err) }));
  await unplug(ctx, bridge, ep);
}

export function disconnect(ctx: NetworkContext, containerId: string): Promise<void> {
  return ctx.lock.run(async () => {
    ctx.host.stopDns(containerId);
    for (const entry of ctx.entries.values()) {
      const ep = entry.endpoints.get(containerId);
      if (!ep) continue;
      if (ep.ports && ep.ports.length > 0) {
        await unpublish(ctx, entry, ep).catch((err) => {
          log.warn('cannot remove the port rules of a container', { id: containerId, error: errorMessage(err) });
        });
      }
      entry.endpoints.delete(containerId);
      await ctx.saveEndpoints(entry);
      if (ep.remote) await leaveRemote(ctx, entry, ep);
      // Its interface went with its namespace; the managers are told in the background.
      if (ep.swarmAttachment) await leaveSwarm(ctx, entry, ep, { unplug: false, wait: false });
      // Before the address can be given to another container (whose MAC would be the same).
      await undirect(ctx, entry, ep);
      // The veth normally dies with the namespace; the kernel may not have got to it yet. Nobody waits for
      // its removal: its name is never used again.
      if (ep.hostInterface) {
        void ctx.host.removeInterface(ep.hostInterface).catch((err) => {
          log.warn('cannot remove a container interface', { interface: ep.hostInterface, error: errorMessage(err) });
        });
      }
      ctx.publishEndpoint('disconnect', entry, containerId);
    }
  });
}

