/**
 * The firewall rules of the Linux network host, with iptables and ip6tables: a container's published ports,
 * and the rules of a bridge, each tagged with a `berth:<bridge>` comment (see linux-network-host.ts) and
 * swapped or deleted with one restore of the firewall.
 */
import { promises as fs } from 'node:fs';
import type { PublishSpec } from '../../host.js';
import { run } from './run.js';

const INTERFACE_NAME = /^[A-Za-z0-9_.-]{1,15}$/;

export function checkInterfaceName(name: string): void {
  if (!INTERFACE_NAME.test(name)) throw new Error(`invalid interface name ${JSON.stringify(name)}`);
}

export function ruleComment(bridge: string): string {
  return `berth:${bridge}`;
}

/** The tag of one container's port rules: the bridge's tag and the container's short id. */
export function portComment(bridge: string, containerId: string): string {
  return `berth:${bridge}:${containerId.slice(0, 12)}`;
}

export const IPV4 = /^\d{1,3}(\.\d{1,3}){3}$/;
export const IPV6 = /^[0-9a-f:]{2,39}$/;
/**
 * The rules forwarding a container's published ports (as Docker installs them with the userland proxy off):
 * DNAT of traffic to a local address and the host port, arriving from outside (PREROUTING) or sent by the
 * host itself (OUTPUT, which covers 127.0.0.1 with route_localnet on the bridge); the forward accept; and a
 * masquerade for the container reaching itself through its published port. Rules are the same text when
 * built again, so that `-D` of the same lines removes them.
 */
export function portRules(spec: PublishSpec): { nat: string[]; filter: string[] } {
  return forwardRules(spec, spec.address, false);
}

/**
 * The ip6tables rules of a container's published ports, for a container with an IPv6 address: those on every
 * host address ('') and on IPv6 ones ('::' for all of them), DNAT to the container's IPv6 address, as
 * portRules does for IPv4 (the host's own ::1 cannot be forwarded: the kernel never routes it out).
 */
export function portRules6(spec: PublishSpec): { nat: string[]; filter: string[] } {
  if (!spec.address6) return { nat: [], filter: [] };
  return forwardRules(spec, spec.address6, true);
}

/** The rules of portRules (IPv4) or portRules6 (v6) forwarding the ports of one family to `address`. */
function forwardRules(spec: PublishSpec, address: string, v6: boolean): { nat: string[]; filter: string[] } {
  const br = spec.bridge;
  checkInterfaceName(br);
  if (!(v6 ? IPV6 : IPV4).test(address)) throw new Error(`invalid container address ${JSON.stringify(address)}`);
  if (!/^[0-9a-f]{12,64}$/.test(spec.containerId)) throw new Error(`invalid container id ${JSON.stringify(spec.containerId)}`);
  const comment = `-m comment --comment ${portComment(br, spec.containerId)}`;
  const bits = v6 ? 128 : 32;
  const nat: string[] = [];
  const filter: string[] = [];
  for (const m of spec.ports) {
    if (!['tcp', 'udp', 'sctp'].includes(m.proto)) throw new Error(`invalid protocol ${JSON.stringify(m.proto)}`);
    // Each family forwards the ports on every host address ('') and those on its own host addresses.
    if (m.hostIp !== '') {
      if (IPV6.test(m.hostIp) !== v6) continue;
      if (!v6 && !IPV4.test(m.hostIp)) throw new Error(`invalid host address ${JSON.stringify(m.hostIp)}`);
    }
    for (const port of [m.hostPort, m.containerPort]) if (!Number.isInteger(port) || port < 1 || port > 65535) throw new Error(`invalid port ${port}`);
    const everyAddress = m.hostIp === '' || (v6 && m.hostIp === '::');
    const dst = everyAddress ? '-m addrtype --dst-type LOCAL' : `-d ${m.hostIp}/${bits}`;
    const to = `-j DNAT --to-destination ${v6 ? `[${address}]` : address}:${m.containerPort}`;
    nat.push(`PREROUTING ${dst} -p ${m.proto} -m ${m.proto} --dport ${m.hostPort} ${comment} ${to}`);
    nat.push(`OUTPUT ${dst} -p ${m.proto} -m ${m.proto} --dport ${m.hostPort} ${comment} ${to}`);
    nat.push(`POSTROUTING -s ${address}/${bits} -d ${address}/${bits} -p ${m.proto} -m ${m.proto} --dport ${m.containerPort} ${comment} -j MASQUERADE`);
    // Routed (a plugin's interface): the host's loopback as source, which no bridge rule of the engine masquerades.
    if (spec.routed && !v6) nat.push(`POSTROUTING -s 127.0.0.0/8 -d ${address}/${bits} -p ${m.proto} -m ${m.proto} --dport ${m.containerPort} ${comment} -j MASQUERADE`);
    const through = spec.routed ? '' : `! -i ${br} -o ${br} `;
    filter.push(`FORWARD -d ${address}/${bits} ${through}-p ${m.proto} -m ${m.proto} --dport ${m.containerPort} ${comment} -j ACCEPT`);
  }
  return { nat, filter };
}

/**
 * Lets packets from the host's loopback leave through the interface of the host's route to `address` (a
 * plugin's), as the engine's bridges do (route_localnet); the interface goes with its network.
 */
export async function routeLocalnetToward(address: string): Promise<void> {
  if (!IPV4.test(address)) throw new Error(`invalid container address ${JSON.stringify(address)}`);
  const dev = / dev (\S+)/.exec(await run('ip', ['-4', '-o', 'route', 'get', address]))?.[1];
  if (!dev || dev === 'lo') throw new Error(`no route of the host leads to ${address}`);
  checkInterfaceName(dev);
  await fs.writeFile(`/proc/sys/net/ipv4/conf/${dev}/route_localnet`, '1\n');
}

/** A family's firewall tools: iptables for IPv4, ip6tables for IPv6. */
export interface Firewall {
  save: string;
  restore: string;
}

export const IPTABLES: Firewall = { save: 'iptables-save', restore: 'iptables-restore' };
export const IP6TABLES: Firewall = { save: 'ip6tables-save', restore: 'ip6tables-restore' };

/** Lines of a save output (`-A CHAIN ...`) whose `berth:` comment `select` picks, per table. */
export function taggedLines(saved: string, select: (tag: string) => boolean): Map<string, string[]> {
  const byTable = new Map<string, string[]>();
  let table = '';
  for (const line of saved.split('\n')) {
    if (line.startsWith('*')) table = line.slice(1).trim();
    else if (line.startsWith('-A ')) {
      const tag = /--comment "?(berth:[^"\s]+)"?/.exec(line)?.[1];
      if (tag !== undefined && select(tag)) byTable.set(table, [...(byTable.get(table) ?? []), line]);
    }
  }
  return byTable;
}

/** Lines of `iptables-save` output (`-A CHAIN ...`) that carry the bridge's comment, per table. */
export function rulesTaggedFor(saved: string, bridge: string): Map<string, string[]> {
  const tag = ruleComment(bridge);
  return taggedLines(saved, (t) => t === tag);
}

/** The `-D` line that deletes the rule of a saved `-A` line. */
export function deletion(line: string): string {
  return line.replace(/^-A /, '-D ');
}

/** Deletes the rules of saved `-A` lines (per table) with one restore of the firewall. */
export async function deleteRules(fw: Firewall, byTable: Map<string, string[]>): Promise<void> {
  if (byTable.size === 0) return;
  const input: string[] = [];
  for (const [table, lines] of byTable) input.push(`*${table}`, ...lines.map(deletion), 'COMMIT');
  await run(fw.restore, ['--noflush', '--wait'], input.join('\n') + '\n');
}

/** Swaps the bridge's tagged rules for `nat` and `filter` (`-I` lines) in one restore of the firewall. */
export async function replaceBridgeRules(fw: Firewall, bridge: string, nat: readonly string[], filter: readonly string[]): Promise<void> {
  const old = rulesTaggedFor(await run(fw.save, []), bridge);
  const del = (table: string) => (old.get(table) ?? []).map(deletion);
  const input = ['*nat', ...del('nat'), ...nat, 'COMMIT', '*filter', ...del('filter'), ...filter, 'COMMIT', ''].join('\n');
  await run(fw.restore, ['--noflush', '--wait'], input);
}
