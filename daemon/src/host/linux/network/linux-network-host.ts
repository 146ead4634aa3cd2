/**
 * NetworkHost on this machine: Linux bridges and veth pairs with iproute2 (`ip -batch`, `nsenter -n`),
 * NAT with iptables. Work is batched so that giving a container its network costs two process spawns.
 *
 * Firewall rules carry the comment `berth:<bridge>`, so that removing a bridge's rules removes exactly
 * ours and nothing another engine (or another daemon with another bridge) installed.
 *
 * Frames between two containers of one bridge whose rules let them through (icc) skip the bridge: a u32
 * filter on the sender's veth hands each to the receiver's veth (the netns addon's directDelivery). The
 * kernel would otherwise run the whole netfilter path (conntrack, the FORWARD chain) for every bridged
 * frame wherever bridge-nf-call-iptables is on, its default. A connection that was DNATed to a container of
 * the bridge from another of its containers (a published port reached through a host address) is
 * masqueraded to the gateway, so that its replies come back through the host and its NAT, not straight to
 * the sender.
 */
import dgram from 'node:dgram';
import { promises as fs } from 'node:fs';
import net from 'node:net';
import { Conflict, errorMessage, InvalidParameter } from '../../../errors.js';
import { DnsServers } from './dns/server.js';
import {
  checkInterfaceName,
  deleteRules,
  IP6TABLES,
  IPTABLES,
  IPV4,
  IPV6,
  portComment,
  portRules,
  portRules6,
  replaceBridgeRules,
  routeLocalnetToward,
  ruleComment,
  rulesTaggedFor,
  taggedLines,
} from './firewall.js';
import { adoptInterface } from './adopt.js';
import { netnsAddon } from './netns.js';
import { CommandError, run } from './run.js';
import { log } from '../../../util/log.js';
import type { AdoptSpec, BridgeRules, BridgeSpec, DnsAnswers, DnsObserver, NetworkHost, PortProto, PublishSpec, VethSpec } from '../../host.js';

export { rulesTaggedFor } from './firewall.js';

interface IpLink {
  ifname: string;
  linkinfo?: { info_kind?: string };
  addr_info?: Array<{ family: string; local: string; prefixlen: number; scope?: string }>;
}

interface IpRoute {
  dst: string;
  dev?: string;
}

function isMissingDevice(err: unknown): boolean {
  return err instanceof CommandError && /does not exist|Cannot find device/i.test(err.stderr);
}

const IPV6_CIDR = /^[0-9a-f:]{2,39}\/\d{1,3}$/;

/** Addresses of the host's own links that never make a subnet another network could clash with. */
function isLinkScoped6(address: string): boolean {
  const a = address.toLowerCase();
  return a === '::1' || a.startsWith('fe8') || a.startsWith('fe9') || a.startsWith('fea') || a.startsWith('feb') || a.startsWith('ff');
}

export class LinuxNetworkHost implements NetworkHost {
  async usedSubnets(exceptDevice?: string): Promise<string[]> {
    const [routes, links] = await Promise.all([run('ip', ['-j', '-4', 'route', 'show']), run('ip', ['-j', '-4', 'addr', 'show'])]);
    const out = new Set<string>();
    for (const route of JSON.parse(routes || '[]') as IpRoute[]) {
      if (route.dst === 'default' || route.dev === exceptDevice) continue;
      out.add(route.dst.includes('/') ? route.dst : `${route.dst}/32`);
    }
    for (const link of JSON.parse(links || '[]') as IpLink[]) {
      if (link.ifname === exceptDevice) continue;
      for (const a of link.addr_info ?? []) if (a.family === 'inet') out.add(`${a.local}/${a.prefixlen}`);
    }
    return [...out];
  }

  async usedIPv6Subnets(): Promise<string[]> {
    const [routes, links] = await Promise.all([run('ip', ['-j', '-6', 'route', 'show']), run('ip', ['-j', '-6', 'addr', 'show'])]);
    const out = new Set<string>();
    for (const route of JSON.parse(routes || '[]') as IpRoute[]) {
      if (route.dst === 'default' || isLinkScoped6(route.dst)) continue;
      out.add(route.dst.includes('/') ? route.dst : `${route.dst}/128`);
    }
    for (const link of JSON.parse(links || '[]') as IpLink[]) {
      for (const a of link.addr_info ?? []) if (a.family === 'inet6' && !isLinkScoped6(a.local)) out.add(`${a.local}/${a.prefixlen}`);
    }
    return [...out];
  }

  async bridgeAddress(name: string): Promise<string | null | undefined> {
    checkInterfaceName(name);
    let text: string;
    try {
      text = await run('ip', ['-j', '-d', '-4', 'addr', 'show', 'dev', name]);
    } catch (err) {
      if (isMissingDevice(err)) return undefined;
      throw err;
    }
    const [link] = JSON.parse(text || '[]') as IpLink[];
    if (!link) return undefined;
    if (link.linkinfo?.info_kind !== 'bridge') throw new Conflict(`the interface ${name} exists and is not a bridge`);
    const addr = link.addr_info?.find((a) => a.family === 'inet');
    return addr ? `${addr.local}/${addr.prefixlen}` : null;
  }

  async ensureBridge(spec: BridgeSpec): Promise<void> {
    checkInterfaceName(spec.name);
    const wanted = `${spec.gateway}/${spec.prefixLen}`;
    const wanted6 = spec.ipv6 ? `${spec.ipv6.gateway}/${spec.ipv6.prefixLen}` : undefined;
    if (wanted6 && !IPV6_CIDR.test(wanted6)) throw new Error(`invalid IPv6 gateway ${JSON.stringify(wanted6)}`);
    const lines: string[] = [];
    let current: IpLink | undefined;
    try {
      [current] = JSON.parse((await run('ip', ['-j', '-d', ...(wanted6 ? [] : ['-4']), 'addr', 'show', 'dev', spec.name])) || '[]') as IpLink[];
    } catch (err) {
      if (!isMissingDevice(err)) throw err;
    }
    if (!current) {
      lines.push(`link add name ${spec.name} mtu ${spec.mtu} type bridge`);
    } else if (current.linkinfo?.info_kind !== 'bridge') {
      throw new Conflict(`the interface ${spec.name} exists and is not a bridge`);
    }
    const addresses = (current?.addr_info ?? []).filter((a) => a.family === 'inet').map((a) => `${a.local}/${a.prefixlen}`);
    for (const a of addresses) if (a !== wanted) lines.push(`addr del ${a} dev ${spec.name}`);
    if (!addresses.includes(wanted)) lines.push(`addr add ${wanted} dev ${spec.name}`);
    if (wanted6) {
      // The gateway's address without duplicate address detection: it is ours, and usable at once.
      const global6 = (current?.addr_info ?? []).filter((a) => a.family === 'inet6' && a.scope === 'global').map((a) => `${a.local}/${a.prefixlen}`);
      if (!global6.includes(wanted6)) {
        if (current) await this.allowIPv6(spec.name);
        lines.push(`addr add ${wanted6} dev ${spec.name} nodad`);
      }
    }
    lines.push(`link set ${spec.name} up`);
    await run('ip', ['-batch', '-'], lines.join('\n') + '\n');
  }

  /** Clears disable_ipv6 on an interface where something set it (an IPv6 address cannot be added otherwise). */
  private async allowIPv6(name: string): Promise<void> {
    const file = `/proc/sys/net/ipv6/conf/${name}/disable_ipv6`;
    const value = await fs.readFile(file, 'utf8').catch(() => '0');
    if (value.trim() !== '0') await fs.writeFile(file, '0\n');
  }

  async removeBridge(name: string): Promise<void> {
    await this.removeInterface(name);
  }

  async enableForwarding(): Promise<void> {
    const file = '/proc/sys/net/ipv4/ip_forward';
    if ((await fs.readFile(file, 'utf8')).trim() !== '1') await fs.writeFile(file, '1\n');
  }

  async enableIPv6Forwarding(): Promise<void> {
    const all = '/proc/sys/net/ipv6/conf/all/forwarding';
    if ((await fs.readFile(all, 'utf8')).trim() === '1') return;
    // The kernel stops accepting router advertisements on interfaces whose accept_ra is 1 once forwarding is
    // on (2 keeps them): say which, as the host's own IPv6 configuration may depend on them.
    const interfaces = await fs.readdir('/proc/sys/net/ipv6/conf').catch(() => [] as string[]);
    const accepting: string[] = [];
    for (const name of interfaces) {
      if (['all', 'default', 'lo'].includes(name)) continue;
      const value = await fs.readFile(`/proc/sys/net/ipv6/conf/${name}/accept_ra`, 'utf8').catch(() => '0');
      if (value.trim() === '1') accepting.push(name);
    }
    await fs.writeFile('/proc/sys/net/ipv6/conf/default/forwarding', '1\n');
    await fs.writeFile(all, '1\n');
    log.warn('IPv6 forwarding enabled for the IPv6 networks (net.ipv6.conf.all.forwarding=1)', {
      ...(accepting.length > 0 ? { routerAdvertisementsIgnoredOn: accepting.join(','), hint: 'set accept_ra=2 on them to keep accepting router advertisements' } : {}),
    });
  }

  async ensureNat(spec: BridgeRules): Promise<void> {
    checkInterfaceName(spec.bridge);
    const br = spec.bridge;
    const comment = `-m comment --comment ${ruleComment(br)}`;
    if (spec.subnet6 !== undefined && !IPV6_CIDR.test(spec.subnet6)) throw new Error(`invalid IPv6 subnet ${JSON.stringify(spec.subnet6)}`);
    // -I puts each rule first, so the last inserted rule is the first to match.
    const forward = spec.internal
      ? [
          `-I FORWARD -o ${br} ! -i ${br} ${comment} -j DROP`,
          `-I FORWARD -i ${br} ! -o ${br} ${comment} -j DROP`,
          `-I FORWARD -i ${br} -o ${br} ${comment} -j ACCEPT`,
        ]
      : [
          // Final order (each -I goes first): traffic within the bridge; nothing toward the bridges it is
          // isolated from; anything else leaving the bridge (outbound); replies coming back.
          `-I FORWARD -o ${br} -m conntrack --ctstate RELATED,ESTABLISHED ${comment} -j ACCEPT`,
          `-I FORWARD -i ${br} ${comment} -j ACCEPT`,
          ...(spec.isolateFrom ?? []).filter((other) => other !== br).map((other) => `-I FORWARD -i ${br} -o ${other} ${comment} -j DROP`),
          ...((spec.isolateFrom ?? []).length > 0 || spec.icc === false ? [`-I FORWARD -i ${br} -o ${br} ${comment} -j ${spec.icc === false ? 'DROP' : 'ACCEPT'}`] : []),
        ];
    for (const other of spec.isolateFrom ?? []) {
      if (!/^[A-Za-z0-9_.-]{1,15}\+?$/.test(other)) throw new Error(`invalid interface name ${JSON.stringify(other)}`);
    }
    const nat = spec.masquerade === false || spec.internal ? [] : [`-I POSTROUTING -s ${spec.subnet} ! -o ${br} ${comment} -j MASQUERADE`];
    // Published ports reached from the host's loopback: the DNATed packets leave through the bridge with a
    // 127.0.0.0/8 source, which route_localnet lets through and the masquerade gives the bridge's address.
    if (nat.length > 0) nat.push(`-I POSTROUTING -s 127.0.0.0/8 -o ${br} ${comment} -j MASQUERADE`);
    // A published port reached from a container of the same bridge (hairpin): replies come back through the
    // host, whose NAT gives them the published address (direct delivery would hand them to the sender as they are).
    const hairpin = (subnet: string) => `-I POSTROUTING -s ${subnet} -o ${br} -m conntrack --ctstate DNAT ${comment} -j MASQUERADE`;
    if (!spec.internal) nat.push(hairpin(spec.subnet));
    await replaceBridgeRules(IPTABLES, br, nat, forward);
    if (spec.subnet6) {
      // The same forward rules for IPv6, and the masquerade of the IPv6 subnet (no loopback case: ::1 is never routed).
      const nat6 = spec.masquerade === false || spec.internal ? [] : [`-I POSTROUTING -s ${spec.subnet6} ! -o ${br} ${comment} -j MASQUERADE`];
      if (!spec.internal) nat6.push(hairpin(spec.subnet6));
      await replaceBridgeRules(IP6TABLES, br, nat6, forward);
    }
    if (!spec.internal) {
      // Rules may be installed before their bridge exists: route_localnet then waits for the bridge's next ensureNat.
      await fs.writeFile(`/proc/sys/net/ipv4/conf/${br}/route_localnet`, '1\n').catch((err: NodeJS.ErrnoException) => {
        if (err.code !== 'ENOENT') throw err;
      });
    }
  }

  async ephemeralPortRange(): Promise<{ first: number; last: number }> {
    const [first, last] = (await fs.readFile('/proc/sys/net/ipv4/ip_local_port_range', 'utf8')).trim().split(/\s+/).map(Number);
    if (!(first > 0 && last >= first && last <= 65535)) return { first: 32768, last: 60999 };
    return { first, last };
  }

  hostPortFree(proto: PortProto, hostIp: string, port: number): Promise<boolean> {
    const address = hostIp || '0.0.0.0';
    const v6 = address.includes(':');
    // Node has no SCTP sockets: an SCTP port is taken only by another container's rules.
    if (proto === 'sctp') return Promise.resolve(true);
    return new Promise((resolve, reject) => {
      // Taken is false; an address the host does not have is the client's mistake.
      const failed = (err: NodeJS.ErrnoException) => {
        if (err.code === 'EADDRNOTAVAIL') {
          const shown = v6 ? `[${address}]` : address;
          reject(new InvalidParameter(`Bind for ${shown}:${port} failed: ${address} is not an address of this host`));
        }
        else resolve(false);
      };
      if (proto === 'udp') {
        const socket = dgram.createSocket({ type: v6 ? 'udp6' : 'udp4', reuseAddr: false, ipv6Only: v6 });
        socket.once('error', (err) => {
          socket.close();
          failed(err);
        });
        socket.bind({ port, address, exclusive: true }, () => socket.close(() => resolve(true)));
        return;
      }
      const server = net.createServer();
      server.once('error', failed);
      server.listen({ port, host: address, exclusive: true, ipv6Only: v6 }, () => server.close(() => resolve(true)));
    });
  }

  async publishPorts(spec: PublishSpec): Promise<void> {
    if (spec.ports.length === 0) return;
    if (spec.routed) await routeLocalnetToward(spec.address);
    for (const [rules, fw] of [[portRules(spec), IPTABLES], [portRules6(spec), IP6TABLES]] as const) {
      if (rules.nat.length === 0) continue;
      const input = ['*nat', ...rules.nat.map((r) => `-A ${r}`), 'COMMIT', '*filter', ...rules.filter.map((r) => `-I ${r}`), 'COMMIT', ''].join('\n');
      await run(fw.restore, ['--noflush', '--wait'], input);
    }
  }

  async unpublishPorts(spec: PublishSpec): Promise<void> {
    if (spec.ports.length === 0) return;
    for (const [rules, fw] of [[portRules(spec), IPTABLES], [portRules6(spec), IP6TABLES]] as const) {
      if (rules.nat.length === 0) continue;
      const input = ['*nat', ...rules.nat.map((r) => `-D ${r}`), 'COMMIT', '*filter', ...rules.filter.map((r) => `-D ${r}`), 'COMMIT', ''].join('\n');
      try {
        await run(fw.restore, ['--noflush', '--wait'], input);
      } catch {
        // Some rule was gone already (removed by hand, or half installed): remove what carries the tag.
        const tag = portComment(spec.bridge, spec.containerId);
        await deleteRules(fw, taggedLines(await run(fw.save, []), (t) => t === tag));
      }
    }
  }

  async removeStalePortRules(bridge: string, keepContainerIds: ReadonlySet<string>, opts: { ipv6?: boolean } = {}): Promise<void> {
    checkInterfaceName(bridge);
    const keep = new Set([...keepContainerIds].map((id) => portComment(bridge, id)));
    const prefix = `berth:${bridge}:`;
    for (const fw of opts.ipv6 ? [IPTABLES, IP6TABLES] : [IPTABLES]) {
      await deleteRules(fw, taggedLines(await run(fw.save, []), (tag) => tag.startsWith(prefix) && !keep.has(tag)));
    }
  }

  private readonly dns = new DnsServers();

  startDns(containerId: string, pid: number, answers: DnsAnswers): Promise<void> {
    return this.dns.start(containerId, pid, answers);
  }

  stopDns(containerId: string): void {
    this.dns.stop(containerId);
  }

  /** Sets the function told of the embedded DNS server's answers with addresses (sandbox policies). */
  observeDns(observer: DnsObserver): void {
    this.dns.observer = observer;
  }

  async removeNat(bridge: string): Promise<void> {
    checkInterfaceName(bridge);
    for (const fw of [IPTABLES, IP6TABLES]) await deleteRules(fw, rulesTaggedFor(await run(fw.save, []), bridge));
  }

  async attachVeth(spec: VethSpec): Promise<void> {
    checkInterfaceName(spec.hostInterface);
    checkInterfaceName(spec.containerInterface);
    checkInterfaceName(spec.bridge);
    if (!Number.isInteger(spec.pid) || spec.pid <= 0) throw new Error(`invalid pid ${spec.pid}`);
    if (!/^([0-9a-f]{2}:){5}[0-9a-f]{2}$/i.test(spec.macAddress)) throw new Error(`invalid MAC address ${JSON.stringify(spec.macAddress)}`);
    if (spec.ipv6) {
      const { address, prefixLen, gateway } = spec.ipv6;
      if (!IPV6.test(address) || !Number.isInteger(prefixLen) || prefixLen < 1 || prefixLen > 128 || (gateway !== undefined && !IPV6.test(gateway))) {
        throw new Error(`invalid IPv6 configuration ${JSON.stringify(spec.ipv6)}`);
      }
    }
    for (const a of spec.linkLocal ?? []) {
      if (!IPV6.test(a) && !IPV4.test(a)) throw new Error(`invalid link-local address ${JSON.stringify(a)}`);
    }
    await this.attachVeth4(spec);
    if (spec.ipv6 || (spec.linkLocal ?? []).length > 0) {
      try {
        if (spec.ipv6) await this.configureIPv6(spec.pid, spec.containerInterface, spec.ipv6);
        if (spec.linkLocal && spec.linkLocal.length > 0) await this.addLinkLocal(spec.pid, spec.containerInterface, spec.linkLocal);
      } catch (err) {
        await this.removeInterface(spec.hostInterface).catch(() => undefined);
        throw err;
      }
    }
    if (spec.direct) this.deliverDirectly(spec);
  }

  /**
   * The other containers' frames for this one skip the bridge (see the netns addon's directDelivery). The
   * bridge still carries them where the host cannot do it (no addon, no u32 or mirred in the kernel): a
   * failure is logged, not thrown.
   */
  private deliverDirectly(spec: VethSpec): void {
    const addon = netnsAddon();
    if (!addon?.directDelivery) return;
    try {
      addon.directDelivery(spec.hostInterface, spec.bridge, spec.macAddress);
    } catch (err) {
      log.warn('frames between containers go through the bridge', { interface: spec.hostInterface, error: errorMessage(err) });
    }
  }

  async dropDirectDelivery(bridge: string, macAddress: string): Promise<void> {
    checkInterfaceName(bridge);
    const addon = netnsAddon();
    if (addon?.dropDirectDelivery) addon.dropDirectDelivery(bridge, macAddress);
  }

  /**
   * The container end's IPv6 address (without duplicate address detection, as Docker: the engine hands out
   * each address once, and a tentative address would not answer for a second) and its default route.
   */
  private async configureIPv6(pid: number, ifname: string, v6: NonNullable<VethSpec['ipv6']>): Promise<void> {
    const addon = netnsAddon();
    if (addon?.configureIPv6) {
      addon.configureIPv6(pid, ifname, v6.address, v6.prefixLen, v6.gateway ?? '');
      return;
    }
    const lines = [`addr add ${v6.address}/${v6.prefixLen} dev ${ifname} nodad`];
    if (v6.gateway) lines.push(`route add default via ${v6.gateway} dev ${ifname}`);
    await run('nsenter', ['-t', String(pid), '-n', 'ip', '-6', '-batch', '-'], lines.join('\n') + '\n');
  }

  /** The interface's link-local addresses (IPAMConfig.LinkLocalIPs), with Docker's prefixes: /16 and /64. */
  private async addLinkLocal(pid: number, ifname: string, addresses: readonly string[]): Promise<void> {
    const lines = addresses.map((a) => (a.includes(':') ? `addr add ${a}/64 dev ${ifname} nodad` : `addr add ${a}/16 dev ${ifname}`));
    await run('nsenter', ['-t', String(pid), '-n', 'ip', '-batch', '-'], lines.join('\n') + '\n');
  }

  private async attachVeth4(spec: VethSpec): Promise<void> {
    const addon = netnsAddon();
    // The container end is created directly inside the namespace, so its name never meets the host's.
    if (addon) addon.createVeth(spec.hostInterface, spec.bridge, spec.mtu, spec.containerInterface, spec.macAddress, spec.pid);
    else {
      await run(
        'ip',
        ['-batch', '-'],
        `link add name ${spec.hostInterface} mtu ${spec.mtu} master ${spec.bridge} up type veth peer name ${spec.containerInterface} mtu ${spec.mtu} address ${spec.macAddress} netns ${spec.pid}\n`,
      );
    }
    if (addon) {
      try {
        addon.configureInterface(spec.pid, spec.containerInterface, spec.address, spec.prefixLen, spec.gateway ?? '');
      } catch (err) {
        await this.removeInterface(spec.hostInterface).catch(() => undefined);
        throw err;
      }
      return;
    }
    try {
      await run(
        'nsenter',
        ['-t', String(spec.pid), '-n', 'ip', '-batch', '-'],
        [
          'link set lo up',
          `addr add ${spec.address}/${spec.prefixLen} dev ${spec.containerInterface}`,
          `link set ${spec.containerInterface} up`,
          ...(spec.gateway ? [`route add default via ${spec.gateway} dev ${spec.containerInterface}`] : []),
          '',
        ].join('\n'),
      );
    } catch (err) {
      await this.removeInterface(spec.hostInterface).catch(() => undefined);
      throw err;
    }
  }

  adoptInterface(spec: AdoptSpec): Promise<void> {
    return adoptInterface(spec);
  }

  async removeInterface(name: string): Promise<void> {
    checkInterfaceName(name);
    try {
      await fs.access(`/sys/class/net/${name}`);
    } catch {
      return;
    }
    try {
      await run('ip', ['link', 'del', 'dev', name]);
    } catch (err) {
      if (!isMissingDevice(err)) throw err;
    }
  }

  async bridgePorts(bridge: string): Promise<string[]> {
    checkInterfaceName(bridge);
    try {
      return await fs.readdir(`/sys/class/net/${bridge}/brif`);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
      throw err;
    }
  }
}
