/**
 * The network store: one file per network under `<data-root>/network/`, kept through the StateStore.
 *
 * Format (version 1), `<data-root>/network/<network id>.json`, written atomically:
 *   { "version": 1,
 *     "network": NetworkRecord (the API shape, without Containers),
 *     "endpoints": { "<container id>": EndpointRecord },   // who holds which address
 *     "lastAllocated": "172.17.0.5",                         // where the next dynamic allocation starts
 *     "lastAllocated6": "fd12:3456:789a::5",                 // the same for IPv6 (EnableIPv6)
 *     "engineSubnet6": true,                                 // the engine chose the IPv6 subnet
 *     "bridge": "br-0123456789ab",                           // the Linux bridge of a bridge network
 *     "remote": { "ipam": { "poolId", "gateway", "addressSpace" } } } // a plugin driver's network
 * The endpoints double as the address allocator's state, so a restarted daemon never hands out an
 * address a live container holds.
 */
import { readJSON, writeJSON, type StateStore } from '../../state/state.js';
import { log } from '../../util/log.js';
import type { RemoteState } from './remote.js';
import type { EndpointRecord, NetworkRecord } from './types.js';

export const NETWORK_STORE_VERSION = 1;

export interface NetworkEntry {
  network: NetworkRecord;
  endpoints: Map<string, EndpointRecord>;
  lastAllocated?: string;
  /** Where the next dynamic IPv6 allocation starts. */
  lastAllocated6?: string;
  /** The engine chose the IPv6 subnet (no static IPv6 addresses then, as Docker). */
  engineSubnet6?: boolean;
  /** Name of the Linux bridge (bridge driver). */
  bridge?: string;
  /** A plugin driver's network: what it keeps beside the record. */
  remote?: RemoteState;
}

interface NetworkFile {
  version: number;
  network: NetworkRecord;
  endpoints: Record<string, EndpointRecord>;
  lastAllocated?: string;
  lastAllocated6?: string;
  engineSubnet6?: boolean;
  bridge?: string;
  remote?: RemoteState;
}

/** Local networks' ids are 64 hex digits; swarm networks' (their local records, swarm.ts) are swarmkit's 25 base-36 digits. */
const ID = /^([0-9a-f]{64}|[0-9a-z]{25})$/;

/** The store's folder under the data root. */
const FOLDER = 'network';

export class NetworkStore {
  /**
   * Per network, its definition (network and bridge) as last written durably. A save that changes only the
   * endpoints or the allocation hint (every container start and exit) is atomic but not fsynced: after a power
   * loss no container runs any more, and recovery releases the endpoints of containers that do not run.
   */
  private readonly durable = new Map<string, string>();

  constructor(private readonly state: StateStore) {}

  async load(): Promise<NetworkEntry[]> {
    const out: NetworkEntry[] = [];
    for (const name of await this.state.list(FOLDER, { mode: 0o700 })) {
      const m = /^([0-9a-f]{64}|[0-9a-z]{25})\.json$/.exec(name);
      if (!m) continue;
      const file = await readJSON<NetworkFile>(this.state, `${FOLDER}/${name}`);
      if (!file) continue;
      if (file.version !== NETWORK_STORE_VERSION || file.network?.Id !== m[1]) {
        log.warn('skipping a network file of an unknown format', { file: name, version: file.version });
        continue;
      }
      this.durable.set(file.network.Id, definition(file.network, file.bridge));
      out.push({
        network: file.network,
        endpoints: new Map(Object.entries(file.endpoints ?? {})),
        lastAllocated: file.lastAllocated,
        lastAllocated6: file.lastAllocated6,
        engineSubnet6: file.engineSubnet6,
        bridge: file.bridge,
        ...(file.remote ? { remote: file.remote } : {}),
      });
    }
    return out;
  }

  async save(entry: NetworkEntry): Promise<void> {
    if (!ID.test(entry.network.Id)) throw new Error(`invalid network id ${entry.network.Id}`);
    const file: NetworkFile = {
      version: NETWORK_STORE_VERSION,
      network: entry.network,
      endpoints: Object.fromEntries(entry.endpoints),
      lastAllocated: entry.lastAllocated,
      lastAllocated6: entry.lastAllocated6,
      engineSubnet6: entry.engineSubnet6,
      bridge: entry.bridge,
      ...(entry.remote ? { remote: entry.remote } : {}),
    };
    const def = definition(entry.network, entry.bridge);
    const durable = this.durable.get(entry.network.Id) !== def;
    await writeJSON(this.state, `${FOLDER}/${entry.network.Id}.json`, file, { durable });
    if (durable) this.durable.set(entry.network.Id, def);
  }

  async remove(id: string): Promise<void> {
    if (!ID.test(id)) throw new Error(`invalid network id ${id}`);
    this.durable.delete(id);
    await this.state.remove(`${FOLDER}/${id}.json`);
  }
}

function definition(network: NetworkRecord, bridge: string | undefined): string {
  return JSON.stringify([network, bridge ?? null]);
}
