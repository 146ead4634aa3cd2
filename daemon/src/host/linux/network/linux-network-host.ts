/**
 * NetworkHost on this machine: Linux bridges and veth pairs with iproute2 (`ip -batch`, `nsenter -n`),
 * NAT with iptables. Work is batched so that giving a container its network costs two process spawns.
 *
 * Firewall rules carry the comment `berth:<bridge>`, so that removing a bridge's rules removes exactly
 * ours and nothing another engine (or another daemon with another bridge) installed.
 */
import { linuxSys } from '../sys.js';
import { promises as fs } from 'node:fs';
import { Conflict } from '../../../engine/errors.js';
import type { BridgeRules, BridgeSpec, NetworkHost, VethSpec } from '../../../engine/networks/types.js';
import { CommandError, run } from './run.js';

interface IpLink {
  ifname: string;
  linkinfo?: { info_kind?: string };
  addr_info?: Array<{ family: string; local: string; prefixlen: number }>;
}

interface IpRoute {
  dst: string;
  dev?: string;
}

const INTERFACE_NAME = /^[A-Za-z0-9_.-]{1,15}$/;

function checkInterfaceName(name: string): void {
  if (!INTERFACE_NAME.test(name)) throw new Error(`invalid interface name ${JSON.stringify(name)}`);
}

function isMissingDevice(err: unknown): boolean {
  return err instanceof CommandError && /does not exist|Cannot find device/i.test(err.stderr);
}

function ruleComment(bridge: string): string {
  return `berth:${bridge}`;
}

/** Lines of `iptables-save` output (`-A CHAIN ...`) that carry the bridge's comment, per table. */
export function rulesTaggedFor(saved: string, bridge: string): Map<string, string[]> {
  const tag = new RegExp(`--comment "?${ruleComment(bridge).replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}"?(\\s|$)`);
  const byTable = new Map<string, string[]>();
  let table = '';
  for (const line of saved.split('\n')) {
    if (line.startsWith('*')) table = line.slice(1).trim();
    else if (line.startsWith('-A ') && tag.test(line)) byTable.set(table, [...(byTable.get(table) ?? []), line]);
  }
  return byTable;
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
    const lines: string[] = [];
    let current: IpLink | undefined;
    try {
      [current] = JSON.parse((await run('ip', ['-j', '-d', '-4', 'addr', 'show', 'dev', spec.name])) || '[]') as IpLink[];
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
    lines.push(`link set ${spec.name} up`);
    await run('ip', ['-batch', '-'], lines.join('\n') + '\n');
  }

  async removeBridge(name: string): Promise<void> {
    await this.removeInterface(name);
  }

  async enableForwarding(): Promise<void> {
    const file = '/proc/sys/net/ipv4/ip_forward';
    if ((await fs.readFile(file, 'utf8')).trim() !== '1') await fs.writeFile(file, '1\n');
  }

  async ensureNat(spec: BridgeRules): Promise<void> {
    checkInterfaceName(spec.bridge);
    const br = spec.bridge;
    const comment = `-m comment --comment ${ruleComment(br)}`;
    const old = rulesTaggedFor(await run('iptables-save', []), br);
    const del = (table: string) => (old.get(table) ?? []).map((line) => line.replace(/^-A /, '-D '));
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
          ...((spec.isolateFrom ?? []).length > 0 ? [`-I FORWARD -i ${br} -o ${br} ${comment} -j ACCEPT`] : []),
        ];
    for (const other of spec.isolateFrom ?? []) {
      if (!/^[A-Za-z0-9_.-]{1,15}\+?$/.test(other)) throw new Error(`invalid interface name ${JSON.stringify(other)}`);
    }
    const nat = spec.masquerade === false || spec.internal ? [] : [`-I POSTROUTING -s ${spec.subnet} ! -o ${br} ${comment} -j MASQUERADE`];
    const input = ['*nat', ...del('nat'), ...nat, 'COMMIT', '*filter', ...del('filter'), ...forward, 'COMMIT', ''].join('\n');
    await run('iptables-restore', ['--noflush', '--wait'], input);
  }

  async removeNat(bridge: string): Promise<void> {
    checkInterfaceName(bridge);
    const old = rulesTaggedFor(await run('iptables-save', []), bridge);
    if (old.size === 0) return;
    const input: string[] = [];
    for (const [table, lines] of old) input.push(`*${table}`, ...lines.map((l) => l.replace(/^-A /, '-D ')), 'COMMIT');
    await run('iptables-restore', ['--noflush', '--wait'], input.join('\n') + '\n');
  }

  async attachVeth(spec: VethSpec): Promise<void> {
    checkInterfaceName(spec.hostInterface);
    checkInterfaceName(spec.containerInterface);
    checkInterfaceName(spec.bridge);
    if (!Number.isInteger(spec.pid) || spec.pid <= 0) throw new Error(`invalid pid ${spec.pid}`);
    // The container end is created directly inside the namespace, so its name never meets the host's.
    await run(
      'ip',
      ['-batch', '-'],
      `link add name ${spec.hostInterface} mtu ${spec.mtu} master ${spec.bridge} up type veth peer name ${spec.containerInterface} mtu ${spec.mtu} address ${spec.macAddress} netns ${spec.pid}\n`,
    );
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

  async setupLoopback(pid: number): Promise<void> {
    if (!Number.isInteger(pid) || pid <= 0) throw new Error(`invalid pid ${pid}`);
    const sys = linuxSys();
    if (sys) sys.loopbackUp(pid);
    else await run('nsenter', ['-t', String(pid), '-n', 'ip', 'link', 'set', 'lo', 'up']);
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
