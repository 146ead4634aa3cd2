/**
 * The swarm's addresses: "host:port" parsing, the ports of the swarm and of etcd, and the listen and advertise
 * addresses of an init or join by the spec's rules.
 */
import net from 'node:net';
import { InvalidParameter } from '../../errors.js';
import type { ClusterHost } from '../../host/cluster.js';
import type { Obj } from './types.js';

export const ETCD_CLIENT_PORT = 2379;
export const ETCD_PEER_PORT = 2380;
export const DEFAULT_SWARM_PORT = 2377;

/** Splits "host:port" (or "[v6]:port", or a bare host) with a default port. */
export function splitHostPort(value: string, defaultPort: number): { host: string; port: number } {
  const v6 = /^\[([^\]]+)\](?::(\d+))?$/.exec(value);
  if (v6) return { host: v6[1]!, port: v6[2] ? Number(v6[2]) : defaultPort };
  const i = value.lastIndexOf(':');
  if (i >= 0 && value.indexOf(':') === i) {
    const port = value.slice(i + 1);
    if (!/^\d{1,5}$/.test(port) || Number(port) < 1 || Number(port) > 65535) throw new InvalidParameter(`invalid port in address ${JSON.stringify(value)}`);
    return { host: value.slice(0, i), port: Number(port) };
  }
  return { host: value, port: defaultPort };
}

export const joinHostPort = (host: string, port: number) => (host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`);

/** The client URL of a manager's own etcd member. */
export const localEtcdEndpoint = (advertiseAddr: string) => `https://${joinHostPort(advertiseAddr, ETCD_CLIENT_PORT)}`;

/** ListenAddr and AdvertiseAddr by the spec's rules (an advertise address is needed when listening on all). */
export function addresses(req: Obj, host: Pick<ClusterHost, 'defaultAdvertiseAddr' | 'isLocalAddress'>): { listen: { host: string; port: number }; advertise: { host: string; port: number } } {
  if (req.ListenAddr !== undefined && typeof req.ListenAddr !== 'string') throw new InvalidParameter('ListenAddr must be a string');
  if (req.AdvertiseAddr !== undefined && typeof req.AdvertiseAddr !== 'string') throw new InvalidParameter('AdvertiseAddr must be a string');
  const listen = splitHostPort(req.ListenAddr || '0.0.0.0:2377', DEFAULT_SWARM_PORT);
  if (listen.host !== '' && net.isIP(listen.host) === 0) throw new InvalidParameter(`invalid ListenAddr ${JSON.stringify(req.ListenAddr)}: interface names are not supported by this engine, give an IP address`);
  if (listen.host === '') listen.host = '0.0.0.0';
  let advertise: { host: string; port: number };
  if (req.AdvertiseAddr) {
    advertise = splitHostPort(req.AdvertiseAddr, listen.port);
    if (net.isIP(advertise.host) === 0) throw new InvalidParameter(`invalid AdvertiseAddr ${JSON.stringify(req.AdvertiseAddr)}: interface names are not supported by this engine, give an IP address`);
  } else if (listen.host !== '0.0.0.0' && listen.host !== '::') {
    advertise = { host: listen.host, port: listen.port };
  } else {
    const found = host.defaultAdvertiseAddr();
    if (!found) throw new InvalidParameter('could not choose an IP address to advertise since this system has no usable address: specify one with --advertise-addr');
    advertise = { host: found, port: listen.port };
  }
  if (advertise.host === '0.0.0.0' || advertise.host === '::') throw new InvalidParameter(`advertise address must be a non-zero IP address`);
  if (!host.isLocalAddress(advertise.host)) throw new InvalidParameter(`advertise address ${advertise.host} is not an address of this machine`);
  return { listen, advertise };
}

export const DEFAULT_DATA_PATH_PORT = 4789;

/** The swarm's data path port of an init request: 0 or absent is the default, others must lie in 1024-49151. */
export function dataPathPort(req: Obj): number {
  const v = req.DataPathPort;
  if (v === undefined || v === null || v === 0) return DEFAULT_DATA_PATH_PORT;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 1024 || v > 49151) {
    throw new InvalidParameter(`invalid DataPathPort ${JSON.stringify(v)}: the data path port must be in the range 1024-49151 (or 0 for the default, ${DEFAULT_DATA_PATH_PORT})`);
  }
  return v;
}

/**
 * The node's data path address of an init or join request (the underlay address of its VXLAN tunnels): an
 * IPv4 address of this machine, or an interface's one address; undefined when none is given (the advertise
 * address serves then).
 */
export function dataPathAddr(req: Obj, host: Pick<ClusterHost, 'isLocalAddress' | 'interfaceAddresses'>): string | undefined {
  const v = req.DataPathAddr;
  if (v === undefined || v === null || v === '') return undefined;
  if (typeof v !== 'string') throw new InvalidParameter('DataPathAddr must be a string');
  if (net.isIP(v) === 0) {
    const found = /^[A-Za-z0-9_.@-]{1,15}$/.test(v) ? host.interfaceAddresses(v) : undefined;
    if (!found) throw new InvalidParameter(`invalid DataPathAddr ${JSON.stringify(v)}: the data path address must be an IP address or the name of a network interface (without a port)`);
    if (found.length === 0) throw new InvalidParameter(`interface ${v} has no IPv4 address to use as the data path address`);
    if (found.length > 1) throw new InvalidParameter(`interface ${v} has more than one IPv4 address (${found[0]} and ${found[1]}): give the data path address itself`);
    return found[0];
  }
  if (net.isIP(v) !== 4) throw new InvalidParameter(`invalid DataPathAddr ${JSON.stringify(v)}: overlay networks carry their traffic over IPv4, give an IPv4 address`);
  if (v === '0.0.0.0') throw new InvalidParameter('data path address must be a non-zero IP address');
  if (!host.isLocalAddress(v)) throw new InvalidParameter(`data path address ${v} is not an address of this machine`);
  return v;
}
