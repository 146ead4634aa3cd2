/** Inspect and list: networks in the API's shape, with their containers and address use. */
import { InvalidParameter, NotFound } from '../../errors.js';
import { compileLinear } from '../regexp.js';
import { parseCIDR, subnetSize } from './ipv4.js';
import { parseCIDR6, subnetSize6 } from '../../util/ipv6.js';
import type { NetworkEntry } from './store.js';
import type { NetworkRecord } from './types.js';
import { PREDEFINED_NETWORKS, type NetworkContext } from './context.js';

/** A network in the API's shape with its containers (and allocation status). */
export interface NetworkView extends NetworkRecord {
  Containers: Record<string, { Name: string; EndpointID: string; MacAddress: string; IPv4Address: string; IPv6Address: string }>;
  Status?: { IPAM: { Subnets: Record<string, { IPsInUse: number; DynamicIPsAvailable: number }> } };
}

/**
 * The `id` and `name` filters: each value matches itself, or as a Go regular expression somewhere in the
 * text; an absent filter matches everything.
 */
function patternFilter(values: string[] | undefined, what: string): (text: string) => boolean {
  if (!values?.length) return () => true;
  const patterns = values.map((v) => ({ exact: v, re: compileLinear(v, `filter '${what}'`) }));
  return (text) => patterns.some((p) => p.exact === text || p.re.test(text));
}

function view(ctx: NetworkContext, entry: NetworkEntry, withContainers: boolean): NetworkView {
  const network = structuredClone(entry.network) as NetworkView;
  network.Containers = {};
  // As Docker: null when no options were given.
  if (!network.IPAM.Options || Object.keys(network.IPAM.Options).length === 0) network.IPAM.Options = null;
  if (withContainers) {
    for (const ep of entry.endpoints.values()) {
      network.Containers[ep.containerId] = {
        Name: ep.containerName,
        EndpointID: ep.endpointId,
        MacAddress: ep.macAddress,
        IPv4Address: ep.ipv4 ? `${ep.ipv4}/${ep.prefixLen}` : '',
        IPv6Address: ep.ipv6 ? `${ep.ipv6}/${ep.prefixLen6}` : '',
      };
    }
    const subnets: Record<string, { IPsInUse: number; DynamicIPsAvailable: number }> = {};
    for (const pool of entry.network.IPAM.Config) {
      const subnet6 = parseCIDR6(pool.Subnet)?.subnet;
      if (subnet6) {
        // The network address (subnet-router anycast) and the gateway are reserved.
        const inUse = 2 + [...entry.endpoints.values()].filter((ep) => ep.ipv6).length;
        const available = subnetSize6(subnet6) - BigInt(inUse);
        subnets[pool.Subnet] = { IPsInUse: inUse, DynamicIPsAvailable: Number(available > BigInt(Number.MAX_SAFE_INTEGER) ? BigInt(Number.MAX_SAFE_INTEGER) : available) };
        continue;
      }
      const subnet = parseCIDR(pool.Subnet)?.subnet;
      if (!subnet) continue;
      // Network address, gateway and broadcast are reserved.
      const inUse = 3 + [...entry.endpoints.values()].filter((ep) => ep.ipv4).length;
      subnets[pool.Subnet] = { IPsInUse: inUse, DynamicIPsAvailable: Math.max(0, subnetSize(subnet) - inUse) };
    }
    network.Status = { IPAM: { Subnets: subnets } };
  }
  return network;
}

export function inspect(ctx: NetworkContext, ref: string, opts: { scope?: string } = {}): NetworkView {
  const entry = ctx.find(ref);
  // A swarm network's local record (swarm.ts): the swarm's view of it is shown instead.
  if (entry.network.Driver === 'overlay') throw new NotFound(`network ${ref} not found`);
  if (opts.scope && opts.scope !== entry.network.Scope) throw new NotFound(`network ${ref} not found`);
  return view(ctx, entry, true);
}

/** The containers of this node on a swarm network (its local record's endpoints), as inspect shows them. */
export function swarmContainers(ctx: NetworkContext, networkId: string): NetworkView['Containers'] {
  const entry = ctx.entries.get(networkId);
  return entry?.network.Driver === 'overlay' ? view(ctx, entry, true).Containers : {};
}

/** Lists networks; `filters` are validated by the api layer's key list (driver, id, label, name, type, scope, dangling). */
export function list(ctx: NetworkContext, filters: ReadonlyMap<string, string[]> = new Map()): NetworkView[] {
  const type = filters.get('type') ?? [];
  for (const t of type) if (t !== 'custom' && t !== 'builtin') throw new InvalidParameter(`invalid filter: 'type'='${t}'`);
  let dangling: boolean | undefined;
  const danglingValues = filters.get('dangling') ?? [];
  for (const v of danglingValues) {
    if (v === 'true' || v === '1') dangling = true;
    else if (v === 'false' || v === '0') dangling = false;
    else throw new InvalidParameter(`invalid filter 'dangling=${v}': expected true, false, 1 or 0`);
  }
  const idMatches = patternFilter(filters.get('id'), 'id');
  const nameMatches = patternFilter(filters.get('name'), 'name');
  const out: NetworkView[] = [];
  for (const entry of ctx.entries.values()) {
    const n = entry.network;
    if (n.Driver === 'overlay') continue;
    const builtin = (PREDEFINED_NETWORKS as readonly string[]).includes(n.Name);
    const driver = filters.get('driver');
    if (driver?.length && !driver.includes(n.Driver)) continue;
    if (!idMatches(n.Id) || !nameMatches(n.Name)) continue;
    const scope = filters.get('scope');
    if (scope?.length && !scope.includes(n.Scope)) continue;
    if (type.length && !type.includes(builtin ? 'builtin' : 'custom')) continue;
    const labels = filters.get('label');
    if (labels?.length) {
      const ok = labels.every((l) => {
        const eq = l.indexOf('=');
        if (eq < 0) return l in n.Labels;
        return n.Labels[l.slice(0, eq)] === l.slice(eq + 1);
      });
      if (!ok) continue;
    }
    if (dangling === true && (builtin || entry.endpoints.size > 0)) continue;
    if (dangling === false && !(builtin || entry.endpoints.size > 0)) continue;
    out.push(view(ctx, entry, false));
  }
  return out.sort((a, b) => a.Name.localeCompare(b.Name));
}

