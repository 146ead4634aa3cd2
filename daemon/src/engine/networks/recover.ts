/**
 * At daemon start: endpoints of containers that are no longer running released, stale port rules and
 * interfaces removed, and the live containers' DNS served again.
 */
import { errorMessage } from '../../errors.js';
import { newId } from '../../util/ids.js';
import { log } from '../../util/log.js';
import type { LiveContainer } from './types.js';
import type { NetworkContext } from './context.js';
import { undirect } from './endpoint.js';
import { portRulesOf, unpublish } from './publish.js';
import { leaveRemote } from './remote.js';
import { dnsAnswers } from './dns.js';
import { dropUnused } from './swarm.js';

export function recover(ctx: NetworkContext, live: ReadonlyMap<string, LiveContainer>): Promise<void> {
  return ctx.lock.run(async () => {
    for (const entry of ctx.entries.values()) {
      const gone = [...entry.endpoints.values()].filter((ep) => !live.has(ep.containerId));
      for (const ep of gone) {
        if (ep.ports && ep.ports.length > 0) await unpublish(ctx, entry, ep).catch(() => undefined);
        await undirect(ctx, entry, ep);
        if (ep.remote) await leaveRemote(ctx, entry, ep);
        entry.endpoints.delete(ep.containerId);
      }
      if (entry.network.Driver === 'host' || entry.network.Driver === 'null') {
        for (const [id, c] of live) {
          const settings = Object.values(c.networks).find((n) => n.NetworkID === entry.network.Id);
          if (!settings || entry.endpoints.has(id)) continue;
          entry.endpoints.set(id, { containerId: id, containerName: c.name.replace(/^\//, ''), endpointId: settings.EndpointID || newId(), ipv4: '', prefixLen: 0, macAddress: '' });
        }
      }
      if (gone.length > 0) {
        // Their swarm attachments are released by the swarm's agent once it finds their containers gone.
        if (entry.network.Driver === 'overlay' && entry.endpoints.size === 0) await dropUnused(ctx, entry);
        else await ctx.saveEndpoints(entry);
        log.info('released network endpoints of containers that are not running', { network: entry.network.Name, count: gone.length });
      }
      for (const ep of gone) {
        ctx.publishEndpoint('disconnect', entry, ep.containerId);
      }
      if (entry.remote && ctx.opts.iptables) {
        // A plugin network's port rules, by their tag: those of containers that are gone.
        const holders = new Set([...entry.endpoints.values()].filter((ep) => (ep.ports ?? []).length > 0).map((ep) => ep.containerId));
        const tag = portRulesOf(ctx, entry).bridge;
        await ctx.host.removeStalePortRules(tag, holders).catch((err) => log.warn('cannot remove stale port rules', { network: entry.network.Name, error: errorMessage(err) }));
      }
      const bridge = entry.network.Driver === 'bridge' ? (entry.bridge ?? (entry.network.Name === 'bridge' ? ctx.opts.bridgeName : undefined)) : undefined;
      if (!bridge) continue;
      if (ctx.opts.iptables) {
        const holders = new Set([...entry.endpoints.values()].filter((ep) => (ep.ports ?? []).length > 0).map((ep) => ep.containerId));
        await ctx.host.removeStalePortRules(bridge, holders, { ipv6: ctx.hasIPv6(entry) }).catch((err) => log.warn('cannot remove stale port rules', { bridge, error: errorMessage(err) }));
      }
      const owned = new Set([...entry.endpoints.values()].map((ep) => ep.hostInterface).filter(Boolean));
      for (const port of await ctx.host.bridgePorts(bridge)) {
        if (owned.has(port)) continue;
        log.info('removing an interface no live container owns', { bridge, interface: port });
        await ctx.host.removeInterface(port).catch((err) => log.warn('cannot remove interface', { interface: port, error: errorMessage(err) }));
      }
    }
    // The DNS listeners died with the previous daemon: the live containers get theirs again.
    const served = new Set<string>();
    for (const entry of ctx.entries.values()) {
      for (const ep of entry.endpoints.values()) {
        if (!ep.dns || !ep.pid || served.has(ep.containerId)) continue;
        served.add(ep.containerId);
        await ctx.host.startDns(ep.containerId, ep.pid, dnsAnswers(ctx, ep.containerId)).catch((err) => {
          log.warn('cannot serve DNS to a container again', { id: ep.containerId, error: errorMessage(err) });
        });
      }
    }
  });
}

