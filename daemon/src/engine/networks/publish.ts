/** Published ports: host ports chosen under the lock, written down, then their forwarding rules installed. */
import { InvalidParameter } from '../../errors.js';
import { allocatePorts } from './ports.js';
import type { NetworkEntry } from './store.js';
import type { PortMapping } from '../../host/host.js';
import type { EndpointRecord, PlanExtras } from './types.js';
import type { NetworkContext } from './context.js';

/** The host ports every container holds now. */
function publishedPorts(ctx: NetworkContext, exceptContainerId?: string): PortMapping[] {
  const out: PortMapping[] = [];
  for (const entry of ctx.entries.values()) {
    for (const ep of entry.endpoints.values()) if (ep.containerId !== exceptContainerId) out.push(...(ep.ports ?? []));
  }
  return out;
}

/** Chooses the host ports (under the lock) and installs their forwarding rules; the choice is on disk first. */
export async function publish(ctx: NetworkContext, entry: NetworkEntry, endpoint: EndpointRecord, requests: NonNullable<PlanExtras['ports']>): Promise<void> {
  if (!ctx.opts.iptables) throw new InvalidParameter('publishing ports needs the engine to manage firewall rules (--iptables)');
  const mappings = await allocatePorts(requests, publishedPorts(ctx, endpoint.containerId), {
    range: () => ctx.host.ephemeralPortRange(),
    isFree: (proto, hostIp, port) => ctx.host.hostPortFree(proto, hostIp, port),
  });
  endpoint.ports = mappings;
  await ctx.store.save(entry);
  await ctx.host.publishPorts({
    bridge: entry.bridge ?? ctx.opts.bridgeName,
    containerId: endpoint.containerId,
    address: endpoint.ipv4,
    ...(endpoint.ipv6 ? { address6: endpoint.ipv6 } : {}),
    ports: mappings,
  });
}

export async function unpublish(ctx: NetworkContext, entry: NetworkEntry, endpoint: EndpointRecord): Promise<void> {
  const bridge = entry.bridge ?? ctx.opts.bridgeName;
  await ctx.host.unpublishPorts({
    bridge,
    containerId: endpoint.containerId,
    address: endpoint.ipv4,
    ...(endpoint.ipv6 ? { address6: endpoint.ipv6 } : {}),
    ports: endpoint.ports ?? [],
  });
}

