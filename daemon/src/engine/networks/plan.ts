/**
 * The plan of a container's networks from its NetworkMode and EndpointsConfig, checked at create and made
 * again at every start: which networks, which endpoint settings, which ports, whether the embedded DNS serves it.
 */
import { InvalidParameter, NotFound } from '../../errors.js';
import { contains, formatIPv4, parseCIDR, parseIPv4, parseMac, subnetSize } from './ipv4.js';
import { contains6, formatIPv6, parseCIDR6, parseIPv6 } from '../../util/ipv6.js';
import { isIPv6HostIp, parsePortRequests } from './ports.js';
import type { NetworkEntry } from './store.js';
import type { PlanExtras, PlanOptions, EndpointRequest, EndpointSettings, NetworkPlan } from './types.js';
import { DETACHED_KEY, ipv4Pool, ipv6Pool, type NetworkContext } from './context.js';
import { endpointSettings } from './endpoint.js';
import { checkSwarmPorts, mayBeSwarm, placeholder, sandboxOnSwarm } from './swarm.js';

export function planNetworks(ctx: NetworkContext, networkMode: string | undefined, networkingConfig: unknown, opts: PlanOptions = {}): NetworkPlan {
  const mode = networkMode === undefined || networkMode === '' || networkMode === 'default' ? 'bridge' : networkMode;
  const ports = parsePortRequests(opts.portBindings, opts.publishAllPorts === true, opts.exposedPorts ?? []);
  const bridgeNetwork = ctx.byName('bridge')?.network;
  const extras: PlanExtras = { hostGateway: bridgeNetwork ? ipv4Pool(bridgeNetwork)?.Gateway : undefined };
  if (opts.dns && opts.dns.length > 0) extras.dnsServers = [...opts.dns];
  if (mode.startsWith('container:')) {
    if (ports.length > 0) throw new InvalidParameter('conflicting options: port publishing and the container type network mode');
    const ref = mode.slice('container:'.length);
    if (ref === '') throw new InvalidParameter('invalid HostConfig.NetworkMode "container:": expected container:<name|id>');
    const endpoints = endpointsConfig(ctx, networkingConfig);
    for (const [key, value] of Object.entries(endpoints)) {
      if (key !== mode && !isEmptyObject(value)) {
        throw new InvalidParameter(`conflicting options: a container in network mode ${mode} cannot be given NetworkingConfig.EndpointsConfig.${key}`);
      }
    }
    if (opts.macAddress) throw new InvalidParameter(`conflicting options: MacAddress cannot be set with network mode ${mode}`);
    // In the namespace of a container the embedded DNS server serves (on a user-defined network, or a sandbox
    // on the default bridge), it listens for this one too.
    const name = ref.replace(/^\//, '');
    const ownerOnUserNetwork = [...ctx.entries.values()].some(
      (e) => [...e.endpoints.values()].some((ep) => ep.dns && (ep.containerName === name || ep.containerId.startsWith(name))),
    );
    if (ownerOnUserNetwork) extras.embeddedDns = true;
    return { ...extras, mode: 'container', container: ref };
  }
  let entry: NetworkEntry;
  const configured = endpointsConfig(ctx, networkingConfig);
  if (configured[DETACHED_KEY] === true) {
    // The NetworkMode's network was left: the first network of the EndpointsConfig is the first one now.
    const rest = Object.entries(configured).filter(([key]) => key !== DETACHED_KEY);
    if (rest.length === 0) return { ...extras, mode: 'none', networkId: '', networkName: '', endpoint: {}, detached: true };
    const [[first]] = rest;
    return planNetworks(ctx, first, { EndpointsConfig: Object.fromEntries(rest) }, opts);
  }
  try {
    entry = ctx.find(mode);
  } catch (err) {
    if (err instanceof NotFound) {
      // Docker creates the container and fails its start instead: a 404 from create makes the docker
      // CLI try to pull the image, hiding the real error. The engine chooses with deferUnknownNetwork.
      if (opts.deferUnknownNetwork) return { ...extras, mode: 'bridge', networkId: '', networkName: mode, endpoint: {} };
      // On a swarm node it may be a swarm network: the container asks for it when it joins (swarm.ts).
      if (!mayBeSwarm(ctx)) throw new NotFound(`network ${mode} not found`, { cause: err });
      entry = placeholder(mode);
    } else throw err;
  }
  const name = entry.network.Name;
  const kind: 'bridge' | 'host' | 'none' = entry.network.Driver === 'host' ? 'host' : entry.network.Driver === 'null' ? 'none' : 'bridge';
  const endpoint: EndpointRequest = {};
  if (opts.macAddress) endpoint.macAddress = parseMac(opts.macAddress, 'Config.MacAddress');
  const extra: Array<{ networkId: string; networkName: string; endpoint: EndpointRequest }> = [];
  const joined: NetworkEntry[] = [entry];

  for (const [key, raw] of Object.entries(configured)) {
    const field = `NetworkingConfig.EndpointsConfig.${key}`;
    let target: NetworkEntry;
    if (key === mode || (key === 'default' && entry.network.Name === 'bridge')) target = entry;
    else {
      try {
        target = ctx.find(key);
      } catch (err) {
        if (err instanceof NotFound && mayBeSwarm(ctx)) target = placeholder(key);
        else if (err instanceof NotFound) throw new NotFound(`network ${key} not found`, { cause: err });
        else throw err;
      }
    }
    if (target === entry) {
      Object.assign(endpoint, parseEndpoint(ctx, entry, raw, field));
      continue;
    }
    // A second network: only bridge and plugin networks combine, and each is joined once.
    if (kind !== 'bridge' || (target.network.Driver !== 'bridge' && target.network.Driver !== 'overlay' && !target.remote)) {
      if (isEmptyObject(raw)) continue;
      throw new InvalidParameter(`${field}: a container on network ${name} cannot also be connected to network ${target.network.Name}`);
    }
    if (extra.some((e) => (target.network.Id ? e.networkId === target.network.Id : e.networkName === target.network.Name))) continue;
    extra.push({ networkId: target.network.Id, networkName: target.network.Name, endpoint: parseEndpoint(ctx, target, raw, field) });
    joined.push(target);
  }
  if (kind !== 'bridge' && endpoint.macAddress) {
    throw new InvalidParameter(`conflicting options: a MAC address cannot be set with network mode ${name}`);
  }
  const plan: NetworkPlan = { ...extras, mode: kind, networkId: entry.network.Id, networkName: name, endpoint };
  if (extra.length > 0) plan.extra = extra;
  // Ports are published on bridge and plugin networks (to the endpoint's address); with host networking the
  // container's own sockets are the host's.
  if (kind === 'bridge' && entry.network.Driver === 'overlay') checkSwarmPorts(name, entry.network.Internal, ports.length);
  if (kind === 'bridge' && ports.length > 0) {
    // An IPv6 host address forwards to the container's IPv6 address: its first network must have IPv6.
    const v6Binding = ports.find((p) => isIPv6HostIp(p.hostIp));
    if (v6Binding && !ctx.hasIPv6(entry)) {
      throw new InvalidParameter(
        `invalid HostConfig.PortBindings ${v6Binding.containerPort}/${v6Binding.proto}: HostIp ${v6Binding.hostIp} publishes on IPv6 and network ${name} has no IPv6 (create it with --ipv6)`,
      );
    }
    plan.ports = ports;
  }
  const swarmNetwork = joined.find((e) => e.network.Driver === 'overlay');
  if (opts.sandbox && swarmNetwork) throw new InvalidParameter(sandboxOnSwarm(swarmNetwork.network.Name));
  if (kind === 'bridge' && (opts.sandbox || joined.some((e) => !ctx.isPredefined(e)))) plan.embeddedDns = true;
  return plan;
}

/** Validates one EndpointsConfig entry for the network it names. */
export function parseEndpoint(ctx: NetworkContext, entry: NetworkEntry, raw: unknown, field: string): EndpointRequest {
  const endpoint: EndpointRequest = {};
  if (raw === null || raw === undefined) return endpoint;
  if (typeof raw !== 'object' || Array.isArray(raw)) throw new InvalidParameter(`${field} must be an object`);
  const name = entry.network.Name;
  const settings = raw as Record<string, unknown>;
  const ipam = settings.IPAMConfig;
  if (ipam !== null && ipam !== undefined) {
    if (typeof ipam !== 'object' || Array.isArray(ipam)) throw new InvalidParameter(`${field}.IPAMConfig must be an object`);
    const { IPv4Address, IPv6Address, LinkLocalIPs } = ipam as Record<string, unknown>;
    if (IPv4Address !== undefined && IPv4Address !== '') {
      endpoint.ipv4Address = validateStaticIPv4(ctx, entry, IPv4Address, `${field}.IPAMConfig.IPv4Address`);
    }
    if (IPv6Address !== undefined && IPv6Address !== '') {
      endpoint.ipv6Address = validateStaticIPv6(ctx, entry, IPv6Address, `${field}.IPAMConfig.IPv6Address`);
    }
    if (LinkLocalIPs !== undefined && LinkLocalIPs !== null) {
      if (!Array.isArray(LinkLocalIPs)) throw new InvalidParameter(`${field}.IPAMConfig.LinkLocalIPs must be a list of addresses`);
      const addresses: string[] = [];
      for (const a of LinkLocalIPs) {
        // As Docker: any address but the unspecified ones (it is added to the interface with a /16 or /64).
        const v4 = typeof a === 'string' ? parseIPv4(a) : undefined;
        const v6 = typeof a === 'string' && v4 === undefined ? parseIPv6(a) : undefined;
        if ((v4 === undefined && v6 === undefined) || v4 === 0 || v6 === 0n) {
          throw new InvalidParameter(`${field}.IPAMConfig.LinkLocalIPs: invalid link-local IP address: ${typeof a === 'string' ? a : JSON.stringify(a)}`);
        }
        addresses.push(v4 !== undefined ? formatIPv4(v4) : formatIPv6(v6!));
      }
      if (addresses.length > 0) endpoint.linkLocalIPs = addresses;
    }
  }
  const links = settings.Links;
  if (links !== undefined && links !== null) {
    if (!Array.isArray(links) || links.some((l) => typeof l !== 'string')) throw new InvalidParameter(`${field}.Links must be a list of strings`);
    for (const l of links as string[]) {
      const parts = l.split(':');
      if (l === '' || parts.length > 2 || parts.some((p) => p === '')) throw new InvalidParameter(`${field}.Links: bad format for links: ${JSON.stringify(l)}`);
    }
    if (links.length > 0) endpoint.links = [...(links as string[])];
  }
  const driverOpts = settings.DriverOpts;
  if (driverOpts !== undefined && driverOpts !== null) {
    if (typeof driverOpts !== 'object' || Array.isArray(driverOpts) || Object.values(driverOpts).some((v) => typeof v !== 'string')) {
      throw new InvalidParameter(`${field}.DriverOpts must be an object of strings`);
    }
    if (Object.keys(driverOpts).length > 0) endpoint.driverOpts = { ...(driverOpts as Record<string, string>) };
  }
  const aliases = settings.Aliases;
  if (Array.isArray(aliases) && aliases.length > 0 && ctx.isPredefined(entry)) {
    throw new InvalidParameter(`${field}.Aliases: network-scoped aliases are supported only for containers in user-defined networks`);
  }
  if (aliases !== undefined && aliases !== null) {
    if (!Array.isArray(aliases) || aliases.some((a) => typeof a !== 'string')) throw new InvalidParameter(`${field}.Aliases must be a list of strings`);
    for (const a of aliases as string[]) {
      if (!/^[A-Za-z0-9_]([A-Za-z0-9_.-]{0,251}[A-Za-z0-9_])?$/.test(a)) throw new InvalidParameter(`${field}.Aliases: invalid alias ${JSON.stringify(a)}: expected a DNS name`);
    }
    if (aliases.length > 0) endpoint.aliases = [...new Set(aliases as string[])];
  }
  const mac = settings.MacAddress;
  if (mac !== undefined && mac !== '') {
    if (typeof mac !== 'string') throw new InvalidParameter(`${field}.MacAddress must be a string`);
    endpoint.macAddress = parseMac(mac, `${field}.MacAddress`);
  }
  return endpoint;
}

function endpointsConfig(ctx: NetworkContext, networkingConfig: unknown): Record<string, unknown> {
  if (networkingConfig === null || networkingConfig === undefined) return {};
  if (typeof networkingConfig !== 'object' || Array.isArray(networkingConfig)) throw new InvalidParameter('NetworkingConfig must be an object');
  const endpoints = (networkingConfig as { EndpointsConfig?: unknown }).EndpointsConfig;
  if (endpoints === null || endpoints === undefined) return {};
  if (typeof endpoints !== 'object' || Array.isArray(endpoints)) throw new InvalidParameter('NetworkingConfig.EndpointsConfig must be an object of network names to endpoint settings');
  return endpoints as Record<string, unknown>;
}

function validateStaticIPv4(ctx: NetworkContext, entry: NetworkEntry, value: unknown, field: string): string {
  const name = entry.network.Name;
  if (typeof value !== 'string') throw new InvalidParameter(`${field} must be a string`);
  const address = parseIPv4(value);
  if (address === undefined) throw new InvalidParameter(`${field}: invalid IPv4 address ${JSON.stringify(value)}`);
  if (entry.network.Driver !== 'bridge') throw new InvalidParameter(`${field}: a static address cannot be given on network ${name}`);
  const pool = ipv4Pool(entry.network);
  const subnet = pool ? parseCIDR(pool.Subnet)?.subnet : undefined;
  if (!pool || !subnet || !contains(subnet, address)) {
    throw new InvalidParameter(`${field}: ${value} is not in the subnet ${pool?.Subnet ?? '(none)'} of network ${name}`);
  }
  const broadcast = subnet.base + subnetSize(subnet) - 1;
  if (address === subnet.base || address === broadcast) throw new InvalidParameter(`${field}: ${value} is the network or broadcast address of ${pool.Subnet}`);
  if (pool.Gateway && address === parseIPv4(pool.Gateway)) throw new InvalidParameter(`${field}: ${value} is the gateway of network ${name}`);
  return value;
}

function validateStaticIPv6(ctx: NetworkContext, entry: NetworkEntry, value: unknown, field: string): string {
  const name = entry.network.Name;
  if (typeof value !== 'string') throw new InvalidParameter(`${field} must be a string`);
  const address = parseIPv6(value);
  if (address === undefined) throw new InvalidParameter(`${field}: invalid IPv6 address ${JSON.stringify(value)}`);
  const pool = entry.network.EnableIPv6 ? ipv6Pool(entry.network) : undefined;
  if (entry.network.Driver !== 'bridge' || !pool) throw new InvalidParameter(`${field}: IPv6 is not enabled on network ${name}`);
  if (entry.engineSubnet6) {
    throw new InvalidParameter(`${field}: user specified IP address is supported only when connecting to networks with user configured subnets (network ${name} has no IPv6 subnet of the user's)`);
  }
  const subnet = parseCIDR6(pool.Subnet)!.subnet;
  if (!contains6(subnet, address)) throw new InvalidParameter(`${field}: ${value} is not in the subnet ${pool.Subnet} of network ${name}`);
  if (address === subnet.base) throw new InvalidParameter(`${field}: ${value} is the network address of ${pool.Subnet}`);
  if (pool.Gateway && address === parseIPv6(pool.Gateway)) throw new InvalidParameter(`${field}: ${value} is the gateway of network ${name}`);
  return formatIPv6(address);
}

export function plannedNetworks(ctx: NetworkContext, plan: NetworkPlan): Record<string, EndpointSettings> {
  if (plan.mode === 'container' || plan.detached) return {};
  const out: Record<string, EndpointSettings> = { [plan.networkName]: endpointSettings(ctx, plan.networkId, undefined, plan.endpoint) };
  for (const e of plan.extra ?? []) out[e.networkName] = endpointSettings(ctx, e.networkId, undefined, e.endpoint);
  return out;
}

function isEmptyObject(value: unknown): boolean {
  if (value === null || value === undefined) return true;
  if (typeof value !== 'object') return false;
  return Object.values(value as Record<string, unknown>).every(
    (v) => v === null || v === undefined || v === '' || (Array.isArray(v) && v.length === 0) || (typeof v === 'object' && isEmptyObject(v)),
  );
}
