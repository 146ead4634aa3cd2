/**
 * What the embedded DNS server of a container answers (the containers of the user-defined networks it
 * shares, its links) and where it sends other names.
 */
import type { NetworkEntry } from './store.js';
import type { DnsAnswers } from '../../host/host.js';
import type { EndpointRecord } from './types.js';
import type { NetworkContext } from './context.js';

/**
 * What the embedded DNS server of one container answers: the containers of the user-defined networks it
 * shares with the asker, by name, alias, short id or `name.network`; other names go upstream.
 */
export function dnsAnswers(ctx: NetworkContext, containerId: string): DnsAnswers {
  return {
    lookup: (rawName) => {
      const name = rawName.toLowerCase().replace(/\.$/, '');
      const found: string[] = [];
      const shared = [...ctx.entries.values()].filter((entry) => !ctx.isPredefined(entry) && entry.endpoints.has(containerId));
      const resolveIn = (entry: NetworkEntry, wanted: string) => {
        const network = entry.network.Name.toLowerCase();
        for (const ep of entry.endpoints.values()) {
          if (!ep.ipv4) continue;
          const names = [ep.containerName, ...(ep.aliases ?? [])].map((n) => n.toLowerCase());
          const matches =
            names.some((n) => n === wanted || `${n}.${network}` === wanted) || (wanted.length === 12 && ep.containerId.startsWith(wanted));
          if (!matches) continue;
          if (!found.includes(ep.ipv4)) found.push(ep.ipv4);
          if (ep.ipv6 && !found.includes(ep.ipv6)) found.push(ep.ipv6);
        }
      };
      // As Docker: the asker's own links (EndpointSettings.Links) first; a link's alias stands for the linked
      // container's name on that network, and for this asker only.
      for (const entry of shared) {
        const target = linkTarget(entry.endpoints.get(containerId)!, name, entry.network.Name.toLowerCase());
        if (target !== undefined) resolveIn(entry, target);
      }
      if (found.length > 0) return found;
      for (const entry of shared) {
        if (linkTarget(entry.endpoints.get(containerId)!, name, entry.network.Name.toLowerCase()) !== undefined) continue;
        resolveIn(entry, name);
      }
      if (found.length > 0) return found;
      // On swarm networks: services (VIP or tasks), tasks.<service> and containers of other nodes.
      const swarmIds = shared.filter((e) => e.network.Driver === 'overlay').map((e) => e.network.Id);
      return swarmIds.length > 0 ? ctx.swarm?.lookup(swarmIds, name) : undefined;
    },
    upstreams: () => {
      for (const entry of ctx.entries.values()) {
        const servers = entry.endpoints.get(containerId)?.dnsServers;
        if (servers && servers.length > 0) return servers;
      }
      // The machine's own resolvers, which the Host reads where the DNS server runs.
      return undefined;
    },
  };
}

export function servesDns(ctx: NetworkContext, containerId: string): boolean {
  for (const entry of ctx.entries.values()) if (entry.endpoints.get(containerId)?.dns) return true;
  return false;
}

/**
 * Serves the embedded DNS server to a running container of the default bridge that has none (a sandbox given
 * its policy while it runs), its upstreams `dns` when given; its endpoint there carries the mark. True when
 * it serves it from now on, false when it did already or the container has no bridge endpoint.
 */
export function serveDnsNow(ctx: NetworkContext, containerId: string, dns?: readonly string[]): Promise<boolean> {
  return ctx.lock.run(async () => {
    if (servesDns(ctx, containerId)) return false;
    const entry = [...ctx.entries.values()].find((e) => e.network.Driver === 'bridge' && e.endpoints.get(containerId)?.pid);
    if (!entry) return false;
    const ep = entry.endpoints.get(containerId)!;
    await ctx.host.startDns(containerId, ep.pid!, dnsAnswers(ctx, containerId));
    ep.dns = true;
    if (dns && dns.length > 0 && !ep.dnsServers) ep.dnsServers = [...dns];
    await ctx.store.save(entry);
    return true;
  });
}

/** The container name an endpoint's link alias (`alias` or `alias.network`) stands for, if `name` is one. */
function linkTarget(ep: EndpointRecord, name: string, network: string): string | undefined {
  for (const link of ep.links ?? []) {
    const [target, alias = target] = link.split(':');
    const a = alias.replace(/^.*\//, '').toLowerCase();
    if (a === name || `${a}.${network}` === name) return target.replace(/^\//, '').toLowerCase();
  }
  return undefined;
}
