/**
 * The files the engine makes for a container and bind-mounts into it: /etc/hostname, /etc/hosts and
 * /etc/resolv.conf, as Docker writes them. Their content is made here; the Host writes them on its machine at
 * the paths of the container's record (ContainerFilesHost.writeEtcFiles).
 */
import type { ContainerFilesHost, ProbeHost } from '../../host/host.js';
import type { ContainerRecord } from './model.js';

/** Where the container's files are written and read: the Host's files part. */
export type EtcFilesHost = Pick<ContainerFilesHost, 'writeEtcFiles' | 'readEtcFile'>;

const HOSTS_HEADER = [
  '127.0.0.1\tlocalhost',
  '::1\tlocalhost ip6-localhost ip6-loopback',
  'fe00::0\tip6-localnet',
  'ff00::0\tip6-mcastprefix',
  'ff02::1\tip6-allnodes',
  'ff02::2\tip6-allrouters',
];

/** An /etc/hosts line of a legacy link (`--link other:alias` on the default bridge). */
export interface LinkEntry {
  address: string;
  names: string[];
}

/** The address of the embedded DNS server inside a container's namespace. */
export const EMBEDDED_DNS = '127.0.0.11';

export function hostsFile(record: ContainerRecord, address: string | readonly string[] | undefined, hostGateway?: string, links: readonly LinkEntry[] = []): string {
  const lines = [...HOSTS_HEADER];
  for (const link of links) lines.push(`${link.address}\t${link.names.join(' ')}`);
  for (const entry of (record.HostConfig.ExtraHosts as string[] | null) ?? []) {
    const sep = entry.search(/[:=]/);
    const name = entry.slice(0, sep);
    let ip = entry.slice(sep + 1);
    if (ip === 'host-gateway' && hostGateway) ip = hostGateway;
    lines.push(`${ip}\t${name}`);
  }
  const { Hostname, Domainname } = record.Config;
  // One line per address of the container (IPv4, then IPv6 on a network that has it), as dockerd writes them.
  const addresses = typeof address === 'string' ? [address] : address ?? [];
  if (Hostname) for (const a of addresses) if (a) lines.push(`${a}\t${Domainname ? `${Hostname}.${Domainname} ` : ''}${Hostname}`);
  return lines.join('\n') + '\n';
}

/** What the container's files start from: the machine's /etc/resolv.conf and /etc/hosts. */
export type EtcFiles = Pick<ProbeHost, 'etcFile'>;

/**
 * The container's resolv.conf: the machine's (`hostResolv`), with loopback nameservers left out (they are not
 * reachable from a container's namespace), and Dns, DnsSearch and DnsOptions applied.
 */
export function resolvConf(record: ContainerRecord, hostResolv: string | undefined, opts: { embeddedDns?: boolean } = {}): string {
  const text = hostResolv ?? '';
  const hc = record.HostConfig as Record<string, any>;
  const shareHost = hc.NetworkMode === 'host';
  let nameservers: string[] = [];
  let search: string[] = [];
  let options: string[] = [];
  for (const raw of text.split('\n')) {
    const [key, ...rest] = raw.trim().split(/\s+/);
    if (key === 'nameserver' && rest[0]) nameservers.push(rest[0]);
    else if (key === 'search' || key === 'domain') search = rest;
    else if (key === 'options') options.push(...rest);
  }
  if (!shareHost) nameservers = nameservers.filter((ns) => !/^127\./.test(ns) && ns !== '::1');
  if ((hc.Dns ?? []).length > 0) nameservers = hc.Dns;
  if ((hc.DnsSearch ?? []).length > 0) search = hc.DnsSearch;
  if ((hc.DnsOptions ?? []).length > 0) options = hc.DnsOptions;
  const lines: string[] = [];
  if (opts.embeddedDns) {
    // As Docker writes it on user-defined networks: the embedded server, which forwards what it does not
    // know to the servers named in the comment.
    lines.push(`nameserver ${EMBEDDED_DNS}`);
    if (search.length > 0) lines.push(`search ${search.join(' ')}`);
    lines.push(`options ${(options.some((o) => o.startsWith('ndots:')) ? options : ['ndots:0', ...options]).join(' ')}`);
    lines.push('', '# Based on host file: \'/etc/resolv.conf\' (internal resolver)', `# ExtServers: [${nameservers.join(' ')}]`);
    return lines.join('\n') + '\n';
  }
  for (const ns of nameservers) lines.push(`nameserver ${ns}`);
  if (search.length > 0) lines.push(`search ${search.join(' ')}`);
  if (options.length > 0) lines.push(`options ${options.join(' ')}`);
  return lines.join('\n') + '\n';
}

/** Rewrites /etc/hosts in place (same inode, so that the container's bind mount sees the new content). */
export async function writeHostsFile(
  files: EtcFilesHost,
  record: ContainerRecord,
  address: string | readonly string[] | undefined,
  hostGateway?: string,
  links: readonly LinkEntry[] = [],
): Promise<void> {
  if (record.HostConfig.NetworkMode === 'host') return;
  await files.writeEtcFiles([{ file: record.HostsPath, data: hostsFile(record, address, hostGateway, links) }], 'inPlace');
}

/** Rewrites resolv.conf in place (same inode: the container's bind mount sees the new content), when it changes. */
export async function rewriteResolvConf(files: EtcFilesHost, record: ContainerRecord, machine: EtcFiles, opts: { embeddedDns?: boolean } = {}): Promise<void> {
  const next = resolvConf(record, await machine.etcFile('resolv.conf'), opts);
  const current = await files.readEtcFile(record.ResolvConfPath).catch(() => undefined);
  if (current !== next) await files.writeEtcFiles([{ file: record.ResolvConfPath, data: next }], 'inPlace');
}

/**
 * Gives the /etc/hosts lines whose first name is `name` the address `address`, or removes them (undefined),
 * in place (same inode: the container's bind mount sees the change).
 */
export async function replaceHostsEntry(files: EtcFilesHost, file: string, name: string, address: string | undefined): Promise<void> {
  const text = await files.readEtcFile(file);
  if (text === undefined) return;
  const out: string[] = [];
  for (const line of text.split('\n')) {
    const [ip, first, ...rest] = line.trim().split(/\s+/);
    if (first !== name || ip.startsWith('#')) {
      out.push(line);
      continue;
    }
    // An IPv6 line of the same names goes with the old address: the new one is the IPv4 address alone.
    if (address !== undefined && !ip.includes(':')) out.push(`${address}\t${[first, ...rest].join(' ')}`);
  }
  const next = out.join('\n');
  if (next !== text) await files.writeEtcFiles([{ file, data: next }], 'inPlace');
}

/** The files are written anew before the runtime bind-mounts them (the Host's `fresh` writes). */
export async function writeContainerFiles(
  files: EtcFilesHost,
  record: ContainerRecord,
  machine: EtcFiles,
  address: string | undefined,
  hostGateway?: string,
  opts: { embeddedDns?: boolean } = {},
): Promise<void> {
  const hostname = record.Config.Hostname || 'localhost';
  const hostNetwork = record.HostConfig.NetworkMode === 'host';
  const [hostResolv, machineHosts] = await Promise.all([machine.etcFile('resolv.conf'), hostNetwork ? machine.etcFile('hosts') : undefined]);
  // On the host's network the container sees the machine's /etc/hosts.
  const hosts = hostNetwork ? (machineHosts ?? hostsFile(record, undefined)) : hostsFile(record, address, hostGateway);
  await files.writeEtcFiles(
    [
      { file: record.HostsPath, data: hosts },
      { file: record.HostnamePath, data: `${hostname}\n` },
      { file: record.ResolvConfPath, data: resolvConf(record, hostResolv, opts) },
    ],
    'fresh',
  );
}

/**
 * Before a container's first start its engine files do not exist yet. As dockerd's init layer shows them
 * then, they are empty files of mode 0755, made here for a copy to or from the container; the start writes
 * them anew (writeContainerFiles).
 */
export async function ensurePlaceholderFiles(files: EtcFilesHost, record: ContainerRecord): Promise<void> {
  const paths = [record.HostsPath, record.HostnamePath, record.ResolvConfPath].filter(Boolean);
  await files.writeEtcFiles(paths.map((file) => ({ file, data: '' })), 'placeholder');
}
