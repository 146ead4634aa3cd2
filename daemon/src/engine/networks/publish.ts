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

/**
 * What a network's port rules name: its bridge; for a plugin's network (no bridge of the engine: the plugin's
 * interface is reached by the host's route to the endpoint's address) a tag of its own, the rules routed.
 */
export function portRulesOf(ctx: NetworkContext, entry: NetworkEntry): { bridge: string; routed?: true } {
  if (entry.remote) return { bridge: `rn${entry.network.Id.slice(0, 12)}`, routed: true };
  return { bridge: entry.bridge ?? ctx.opts.bridgeName };
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
    ...portRulesOf(ctx, entry),
    containerId: endpoint.containerId,
    address: endpoint.ipv4,
    ...(endpoint.ipv6 ? { address6: endpoint.ipv6 } : {}),
    ports: mappings,
  });
}

export async function unpublish(ctx: NetworkContext, entry: NetworkEntry, endpoint: EndpointRecord): Promise<void> {
  await ctx.host.unpublishPorts({
    ...portRulesOf(ctx, entry),
    containerId: endpoint.containerId,
    address: endpoint.ipv4,
    ...(endpoint.ipv6 ? { address6: endpoint.ipv6 } : {}),
    ports: endpoint.ports ?? [],
  });
}

