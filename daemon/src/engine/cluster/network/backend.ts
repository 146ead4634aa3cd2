/**
 * The network routes' backend with swarm networks beside the local ones: `Driver: overlay` creates a swarm
 * network through the cluster (on a manager), list and inspect show both (local first; `scope` picks), and
 * remove and the name check reach the one that holds the network.
 */
import { Conflict, Forbidden, NotFound, Unavailable } from '../../../errors.js';
import { compileLinear } from '../../regexp.js';
import { networkResource, type ClusterNetworks } from './networks.js';
import type { Obj } from '../types.js';
import type { NodeNetwork } from './attachments.js';

/** What the network routes call (api/networks.ts NetworkBackend, declared here as the engine sees it). */
export interface NetworksBackend {
  list(filters: ReadonlyMap<string, string[]>): object[];
  inspect(ref: string, opts: { scope?: string; verbose?: boolean }): object;
  create(body: unknown): Promise<{ Id: string; Warning?: string }>;
  remove(ref: string): Promise<void>;
  prune?(filters: ReadonlyMap<string, string[]>): Promise<string[]>;
  /** This node's containers on a swarm network (standalone ones on an attachable overlay). */
  containersOf?(networkId: string): object;
  connectable?(ref: string): void;
}

/** What the backend needs of the cluster: its networks when this node is a manager, and whether it is in a swarm at all. */
export interface SwarmNetworksSource {
  clusterNetworks(): ClusterNetworks | undefined;
  /** 'manager', 'worker' or undefined outside a swarm. */
  swarmRole(): 'manager' | 'worker' | undefined;
  /** On a worker, the swarm networks its tasks use (as Docker's workers list them). */
  workerNetworks(): NodeNetwork[];
}

/** A worker's view of a swarm network, shaped as the network list shows it. */
function workerView(n: NodeNetwork): Obj {
  return networkResource({ ID: n.ID, Name: n.Name, Subnet: n.Subnet, Gateway: n.Gateway, VNI: n.VNI, Internal: n.Internal, Attachable: !!n.Attachable, Labels: {}, Options: n.Encrypted ? { encrypted: '' } : {} });
}

function matches(values: string[] | undefined, text: string, what: string): boolean {
  if (!values?.length) return true;
  return values.some((v) => v === text || compileLinear(v, `filter '${what}'`).test(text));
}

function listed(n: Obj, filters: ReadonlyMap<string, string[]>): boolean {
  const f = (k: string) => filters.get(k);
  if (f('driver')?.length && !f('driver')!.includes('overlay')) return false;
  if (f('scope')?.length && !f('scope')!.includes('swarm')) return false;
  if (f('type')?.length && !f('type')!.includes('custom')) return false;
  if (f('dangling')?.some((v) => v === 'true' || v === '1')) return false;
  if (!matches(f('id'), n.Id, 'id') || !matches(f('name'), n.Name, 'name')) return false;
  for (const l of f('label') ?? []) {
    const eq = l.indexOf('=');
    if (eq < 0 ? !(l in n.Labels) : n.Labels[l.slice(0, eq)] !== l.slice(eq + 1)) return false;
  }
  return true;
}

/** `cluster` is asked for at each call (the daemon makes the cluster after the routes). */
export function withSwarmNetworks(local: NetworksBackend, cluster: () => SwarmNetworksSource): NetworksBackend {
  const swarm: SwarmNetworksSource = {
    clusterNetworks: () => cluster().clusterNetworks(),
    swarmRole: () => cluster().swarmRole(),
    workerNetworks: () => cluster().workerNetworks(),
  };
  const localHas = (ref: string): boolean => {
    try {
      local.inspect(ref, {});
      return true;
    } catch (err) {
      if (err instanceof NotFound) return false;
      throw err;
    }
  };
  return {
    list(filters) {
      const out = local.list(filters);
      const networks = swarm.clusterNetworks();
      const all = networks ? networks.all().map(networkResource) : swarm.workerNetworks().map(workerView);
      const views = all.filter((n) => listed(n, filters));
      if (views.length === 0) return out;
      return [...out, ...views].sort((a, b) => String((a as Obj).Name).localeCompare(String((b as Obj).Name)));
    },
    inspect(ref, opts) {
      const networks = swarm.clusterNetworks();
      const withContainers = (n: Obj) => ({ ...n, Containers: local.containersOf?.(n.Id) ?? {} });
      const view = (e: { obj: Obj }) => withContainers(opts.verbose ? networks!.verbose(e.obj) : networkResource(e.obj));
      if (opts.scope === 'swarm') {
        const e = networks?.find(ref);
        if (!e) throw new NotFound(`network ${ref} not found`);
        return view(e);
      }
      try {
        return local.inspect(ref, { scope: opts.scope });
      } catch (err) {
        if (!(err instanceof NotFound) || opts.scope === 'local') throw err;
        const e = networks?.find(ref);
        if (e) return view(e);
        const known = networks ? undefined : swarm.workerNetworks().find((n) => n.ID === ref || n.Name === ref || (ref.length > 0 && n.ID.startsWith(ref)));
        if (!known) throw err;
        return withContainers(workerView(known));
      }
    },
    async create(body) {
      const b = (body ?? {}) as Obj;
      if (b.Driver !== 'overlay') return local.create(body);
      const role = swarm.swarmRole();
      if (!role) throw new Unavailable('This node is not a swarm manager. Use "docker swarm init" or "docker swarm join" to connect this node to swarm and try again.');
      const networks = swarm.clusterNetworks();
      if (role !== 'manager' || !networks) throw new Forbidden('Cannot create a multi-host network from a worker node. Please create the network from a manager node.');
      if (typeof b.Name === 'string' && b.Name !== '' && localHas(b.Name)) throw new Conflict(`network with name ${b.Name} already exists`);
      const subnets = local.list(new Map()).flatMap((n) => ((n as Obj).IPAM?.Config ?? []).map((c: Obj) => c.Subnet as string).filter(Boolean));
      return networks.create(body, subnets);
    },
    async remove(ref) {
      if (localHas(ref)) return local.remove(ref);
      const networks = swarm.clusterNetworks();
      if (!networks?.find(ref)) throw new NotFound(`network ${ref} not found`);
      return networks.remove(ref);
    },
    connectable(ref) {
      // A worker knows only the swarm networks its node uses: the managers decide about the others (attachable.ts).
      if (swarm.swarmRole() === 'worker') return;
      this.inspect(ref, {});
    },
    ...(local.prune ? { prune: (filters: ReadonlyMap<string, string[]>) => local.prune!(filters) } : {}),
  };
}
