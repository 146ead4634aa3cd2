/**
 * The bridges: the predefined networks made once, the default bridge (its address from --bip, the bridge
 * already there, or a free range) and the bridges of user-defined networks brought up with their rules.
 */
import { Conflict, errorMessage, InvalidParameter } from '../../errors.js';
import { newId } from '../../util/ids.js';
import { nowNano, rfc3339Nano } from '../../util/json.js';
import { log } from '../../util/log.js';
import { defaultBridgeCandidates, formatIPv4, formatSubnet, overlaps, parseCIDR, parseIPv4, subnetSize, type Subnet } from './ipv4.js';
import { parseCIDR6 } from '../../util/ipv6.js';
import type { NetworkEntry } from './store.js';
import type { NetworkRecord } from './types.js';
import { ipv4Pool, ipv6Pool, PREDEFINED_NETWORKS, type NetworkContext, type PredefinedName } from './context.js';

const DRIVER_OF: Record<PredefinedName, string> = { bridge: 'bridge', host: 'host', none: 'null' };

/** Loads the store, creates the predefined networks once (stable ids), and builds the default bridge. */
export async function init(ctx: NetworkContext): Promise<void> {
  for (const entry of await ctx.store.load()) ctx.entries.set(entry.network.Id, entry);
  for (const name of PREDEFINED_NETWORKS) {
    if (ctx.byName(name)) continue;
    const entry: NetworkEntry = { network: newPredefined(ctx, name), endpoints: new Map() };
    ctx.entries.set(entry.network.Id, entry);
    await ctx.store.save(entry);
  }
  await setUpDefaultBridge(ctx);
  for (const entry of ctx.entries.values()) {
    if (entry.network.Driver !== 'bridge' || ctx.isPredefined(entry)) continue;
    // One network that cannot come up (its range now taken by the host, say) does not stop the engine.
    await setUpBridge(ctx, entry).catch((err) => {
      log.error('cannot bring up the bridge of a network', { network: entry.network.Name, bridge: entry.bridge, error: errorMessage(err) });
    });
  }
}

/** Brings up the bridge of a user-defined network and installs its rules (idempotent). */
export async function setUpBridge(ctx: NetworkContext, entry: NetworkEntry): Promise<void> {
  const pool = ipv4Pool(entry.network)!;
  const parsed = parseCIDR(pool.Subnet)!;
  const pool6 = entry.network.EnableIPv6 ? ipv6Pool(entry.network) : undefined;
  await ctx.host.ensureBridge({
    name: entry.bridge!,
    gateway: pool.Gateway!,
    prefixLen: parsed.subnet.prefix,
    subnet: pool.Subnet,
    mtu: ctx.mtuOf(entry),
    ...(pool6 ? { ipv6: { gateway: pool6.Gateway!, prefixLen: parseCIDR6(pool6.Subnet)!.subnet.prefix, subnet: pool6.Subnet } } : {}),
  });
  // As dockerd: IPv6 forwarding is turned on (for the whole host) when a network needs it.
  if (pool6) await ctx.host.enableIPv6Forwarding();
  if (ctx.opts.iptables) {
    await ctx.host.ensureNat({
      bridge: entry.bridge!,
      subnet: pool.Subnet,
      ...(pool6 ? { subnet6: pool6.Subnet } : {}),
      masquerade: entry.network.Options['com.docker.network.bridge.enable_ip_masquerade'] !== 'false',
      internal: entry.network.Internal,
      isolateFrom: isolationOf(ctx, entry),
      icc: entry.network.Options['com.docker.network.bridge.enable_icc'] !== 'false',
    });
  }
}

/**
 * The bridges a network's containers must not reach, as Docker isolates networks from each other:
 * every `br-` bridge (user-defined networks of any engine) and this engine's other bridges.
 */
function isolationOf(ctx: NetworkContext, entry: NetworkEntry): string[] {
  const others = [...ctx.entries.values()]
    .filter((e) => e !== entry && e.bridge && !e.bridge.startsWith('br-'))
    .map((e) => e.bridge!);
  return ['br-+', ...others];
}

function newPredefined(ctx: NetworkContext, name: PredefinedName): NetworkRecord {
  return {
    Name: name,
    Id: newId(),
    Created: rfc3339Nano(nowNano()),
    Scope: 'local',
    Driver: DRIVER_OF[name],
    EnableIPv4: true,
    EnableIPv6: false,
    IPAM: { Driver: 'default', Options: {}, Config: [] },
    Internal: false,
    Attachable: false,
    Ingress: false,
    ConfigFrom: { Network: '' },
    ConfigOnly: false,
    Options: {},
    Labels: {},
  };
}

/** Picks the bridge's subnet, brings the bridge up and installs its rules. */
async function setUpDefaultBridge(ctx: NetworkContext): Promise<void> {
  const entry = ctx.byName('bridge')!;
  const name = ctx.opts.bridgeName;
  let gateway: number;
  let subnet: Subnet;
  for (let attempt = 1; ; attempt++) {
    const choice = await chooseBridgeAddress(ctx, entry);
    ({ gateway, subnet } = choice);
    await ctx.host.ensureBridge({ name, gateway: formatIPv4(gateway), prefixLen: subnet.prefix, subnet: formatSubnet(subnet), mtu: ctx.mtu });
    if (!choice.picked) break;
    // Another engine starting at the same moment may have picked the same free range: check again now
    // that ours is in place, and let the later one move on after a random pause.
    const clash = (await ctx.host.usedSubnets(name)).some((s) => {
      const other = parseCIDR(s)?.subnet;
      return other !== undefined && overlaps(other, subnet);
    });
    if (!clash) break;
    if (attempt >= 5) throw new Conflict(`the address range ${formatSubnet(subnet)} of bridge ${name} is also used by another interface; set one with --bip`);
    log.warn('another interface took the same address range; choosing again', { bridge: name, subnet: formatSubnet(subnet) });
    await ctx.host.removeBridge(name);
    await new Promise((resolve) => setTimeout(resolve, 20 + Math.random() * 200));
  }
  await ctx.host.enableForwarding();
  entry.bridge = name;
  if (ctx.opts.iptables) await ctx.host.ensureNat({ bridge: name, subnet: formatSubnet(subnet), isolateFrom: isolationOf(ctx, entry) });

  entry.network.IPAM.Config = [{ Subnet: formatSubnet(subnet), Gateway: formatIPv4(gateway) }];
  entry.network.Options = {
    'com.docker.network.bridge.default_bridge': 'true',
    'com.docker.network.bridge.enable_icc': 'true',
    'com.docker.network.bridge.enable_ip_masquerade': 'true',
    'com.docker.network.bridge.host_binding_ipv4': '0.0.0.0',
    'com.docker.network.bridge.name': name,
    'com.docker.network.driver.mtu': String(ctx.mtu),
  };
  await ctx.store.save(entry);
  log.info('default bridge ready', { bridge: name, subnet: formatSubnet(subnet), gateway: formatIPv4(gateway) });
}

/** The bridge's address: from --bip, from the existing bridge, or `picked` among the free ranges. */
async function chooseBridgeAddress(ctx: NetworkContext, entry: NetworkEntry): Promise<{ gateway: number; subnet: Subnet; picked?: boolean }> {
  const name = ctx.opts.bridgeName;
  if (ctx.opts.bridgeCidr) {
    const parsed = parseCIDR(ctx.opts.bridgeCidr);
    if (!parsed || parsed.subnet.prefix > 30 || parsed.subnet.prefix < 8) {
      throw new InvalidParameter(`invalid --bip ${JSON.stringify(ctx.opts.bridgeCidr)}: expected an address and prefix such as 172.20.0.1/16 (prefix 8 to 30)`);
    }
    const { address, subnet } = parsed;
    const broadcast = subnet.base + subnetSize(subnet) - 1;
    const gateway = address === subnet.base ? subnet.base + 1 : address;
    if (gateway === broadcast) throw new InvalidParameter(`invalid --bip ${ctx.opts.bridgeCidr}: the broadcast address cannot be the bridge's address`);
    return { gateway, subnet };
  }
  // A bridge that already has an address (ours, from an earlier run) keeps it.
  const existing = await ctx.host.bridgeAddress(name);
  if (existing) {
    const parsed = parseCIDR(existing)!;
    return { gateway: parsed.address, subnet: parsed.subnet };
  }
  const used = (await ctx.host.usedSubnets(name)).map((s) => parseCIDR(s)?.subnet).filter((s): s is Subnet => s !== undefined);
  const free = (s: Subnet) => !used.some((u) => overlaps(u, s));
  const previous = entry.network.IPAM.Config[0];
  if (previous?.Subnet && previous.Gateway) {
    const subnet = parseCIDR(previous.Subnet)?.subnet;
    const gateway = parseIPv4(previous.Gateway);
    if (subnet && gateway !== undefined && free(subnet)) return { gateway, subnet, picked: true };
  }
  const subnet = defaultBridgeCandidates().find(free);
  if (!subnet) throw new Conflict('no free address range for the default bridge: every candidate overlaps a route of the host; set one with --bip');
  return { gateway: subnet.base + 1, subnet, picked: true };
}

/** The default bridge's name, subnet and gateway (for /info and tests). */
export function defaultBridge(ctx: NetworkContext): { name: string; subnet: string; gateway: string } {
  const pool = ipv4Pool(ctx.byName('bridge')!.network)!;
  return { name: ctx.opts.bridgeName, subnet: pool.Subnet, gateway: pool.Gateway ?? '' };
}

/** Removes the default bridge and its firewall rules from the host (used by tests and uninstall). */
export async function removeDefaultBridge(ctx: NetworkContext): Promise<void> {
  await ctx.host.removeNat(ctx.opts.bridgeName);
  await ctx.host.removeBridge(ctx.opts.bridgeName);
}

