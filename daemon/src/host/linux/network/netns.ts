/**
 * The `netns` addon (daemon/native/netns): sockets bound inside a container's network namespace (for the
 * embedded DNS server) and an interface configured there without spawning `nsenter ip`. Callers fall back
 * to the tools, or report the addon missing, when it is not built (or BERTH_NETNS_ADDON=none).
 */
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export interface NetnsAddon {
  bindInNetns(pid: number, stream: boolean, address: string, port: number): number;
  configureInterface(pid: number, ifname: string, address: string, prefixLen: number, gateway: string): void;
  createVeth(hostName: string, bridge: string, mtu: number, peerName: string, mac: string, pid: number): void;
  /** Absent from builds that predate it (callers fall back to `nsenter ip -6`). */
  configureIPv6?(pid: number, ifname: string, address: string, prefixLen: number, gateway: string): void;
  /** Frames the bridge's other containers send to `mac` go straight to `hostName` (absent from older builds). */
  directDelivery?(hostName: string, bridge: string, mac: string): void;
  dropDirectDelivery?(bridge: string, mac: string): void;
}

let addon: NetnsAddon | null | undefined;

export function netnsAddon(): NetnsAddon | null {
  if (addon !== undefined) return addon;
  addon = null;
  if (process.env.BERTH_NETNS_ADDON === 'none') return addon;
  // daemon/ from dist/src/host/linux/network (compiled)
  const daemonDir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..', '..', '..');
  try {
    addon = createRequire(import.meta.url)(path.join(daemonDir, 'native', 'netns', 'build', 'Release', 'netns.node')) as NetnsAddon;
  } catch {
    addon = null;
  }
  return addon;
}
