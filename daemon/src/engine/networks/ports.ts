/**
 * Published ports: HostConfig.PortBindings and PublishAllPorts read into requests (at plan time), host
 * ports chosen for them (at connect time, ephemeral ones from the kernel's local port range), and the
 * NetworkSettings.Ports map shown back to clients.
 */
import { Conflict, InvalidParameter } from '../../errors.js';
import { parseIPv4 } from './ipv4.js';
import { formatIPv6, parseIPv6 } from '../../util/ipv6.js';
import type { PortRequest } from './types.js';
import type { PortMapping, PortProto } from '../../host/host.js';

const PORT_KEY = /^(\d{1,5})(?:-(\d{1,5}))?(?:\/([a-z]+))?$/;
const PROTOS: readonly PortProto[] = ['tcp', 'udp', 'sctp'];

function portNumber(text: string, field: string, allowZero: boolean): number {
  const n = Number(text);
  if (!/^\d{1,5}$/.test(text) || n > 65535 || (!allowZero && n === 0)) {
    throw new InvalidParameter(`invalid ${field}: ${JSON.stringify(text)} is not a port number between ${allowZero ? 0 : 1} and 65535`);
  }
  return n;
}

/** A port key such as `80`, `80/udp` or `8000-8010/tcp` as a protocol and a range of ports. */
export function parsePortKey(key: string, field: string): { proto: PortProto; first: number; last: number } {
  const m = PORT_KEY.exec(key);
  if (!m) throw new InvalidParameter(`invalid ${field}: ${JSON.stringify(key)} is not a port, expected <port>[/tcp|udp|sctp]`);
  const proto = (m[3] ?? 'tcp') as PortProto;
  if (!PROTOS.includes(proto)) throw new InvalidParameter(`invalid ${field}: unknown protocol ${JSON.stringify(m[3])} in ${JSON.stringify(key)}, expected tcp, udp or sctp`);
  const first = portNumber(m[1], field, false);
  const last = m[2] === undefined ? first : portNumber(m[2], field, false);
  if (last < first) throw new InvalidParameter(`invalid ${field}: the range ${JSON.stringify(key)} ends before it starts`);
  return { proto, first, last };
}

function hostIpOf(value: unknown, field: string): string {
  if (value === undefined || value === null || value === '') return '';
  if (typeof value !== 'string') throw new InvalidParameter(`${field}.HostIp must be a string`);
  if (value.includes(':')) {
    // An IPv6 host address ('::' for all of them): published to the container's IPv6 address.
    const v6 = parseIPv6(value);
    if (v6 === undefined) throw new InvalidParameter(`invalid ${field}.HostIp ${JSON.stringify(value)}: expected an IPv4 or IPv6 address`);
    return formatIPv6(v6);
  }
  if (parseIPv4(value) === undefined) throw new InvalidParameter(`invalid ${field}.HostIp ${JSON.stringify(value)}: expected an IPv4 or IPv6 address`);
  return value === '0.0.0.0' ? '' : value;
}

/**
 * The ports to publish: every binding of PortBindings, and with PublishAllPorts every exposed port that
 * has no binding (on an ephemeral host port). Throws InvalidParameter naming the bad field.
 */
export function parsePortRequests(portBindings: unknown, publishAll: boolean, exposedPorts: readonly string[]): PortRequest[] {
  const out: PortRequest[] = [];
  const bound = new Set<string>();
  if (portBindings !== undefined && portBindings !== null) {
    if (typeof portBindings !== 'object' || Array.isArray(portBindings)) throw new InvalidParameter('HostConfig.PortBindings must be an object of port keys to lists of bindings');
    for (const [key, raw] of Object.entries(portBindings as Record<string, unknown>)) {
      const field = `HostConfig.PortBindings.${key}`;
      const { proto, first, last } = parsePortKey(key, 'HostConfig.PortBindings');
      if (raw === null || raw === undefined) continue;
      if (!Array.isArray(raw)) throw new InvalidParameter(`${field} must be a list of {HostIp, HostPort}`);
      for (const b of raw as unknown[]) {
        const binding = (b ?? {}) as Record<string, unknown>;
        if (typeof binding !== 'object' || Array.isArray(binding)) throw new InvalidParameter(`${field} must be a list of {HostIp, HostPort}`);
        const hostIp = hostIpOf(binding.HostIp, field);
        const hostPortText = binding.HostPort ?? '';
        if (typeof hostPortText !== 'string' && typeof hostPortText !== 'number') throw new InvalidParameter(`${field}.HostPort must be a string`);
        let hostFirst = 0;
        let hostLast = 0;
        if (String(hostPortText) !== '') {
          const [a, z] = String(hostPortText).split('-');
          hostFirst = portNumber(a, `${field}.HostPort`, true);
          hostLast = z === undefined ? hostFirst : portNumber(z, `${field}.HostPort`, true);
          if (hostLast < hostFirst) throw new InvalidParameter(`invalid ${field}.HostPort: the range ${JSON.stringify(hostPortText)} ends before it starts`);
        }
        const count = last - first + 1;
        if (count > 1 && hostFirst !== 0 && hostLast - hostFirst + 1 !== count) {
          throw new InvalidParameter(`invalid ${field}.HostPort ${JSON.stringify(hostPortText)}: a range of ${count} container ports needs a host range of the same size`);
        }
        for (let i = 0; i < count; i++) {
          const containerPort = first + i;
          bound.add(`${containerPort}/${proto}`);
          if (count > 1 && hostFirst !== 0) out.push({ proto, containerPort, hostIp, hostPortFirst: hostFirst + i, hostPortLast: hostFirst + i });
          else out.push({ proto, containerPort, hostIp, hostPortFirst: hostFirst, hostPortLast: hostFirst === 0 ? 0 : hostLast });
        }
      }
    }
  }
  if (publishAll) {
    for (const key of exposedPorts) {
      const { proto, first, last } = parsePortKey(key, 'Config.ExposedPorts');
      for (let p = first; p <= last; p++) {
        if (bound.has(`${p}/${proto}`)) continue;
        bound.add(`${p}/${proto}`);
        out.push({ proto, containerPort: p, hostIp: '', hostPortFirst: 0, hostPortLast: 0 });
      }
    }
  }
  return out;
}

/** Whether a published port's host address is an IPv6 one ('::' for all of them). */
export function isIPv6HostIp(hostIp: string): boolean {
  return hostIp.includes(':');
}

/**
 * NetworkSettings.Ports of the published ports (exposed ports without binding are added by the view). A port
 * published on every host address of a container with IPv6 is shown twice, as Docker shows it: on 0.0.0.0
 * and on ::.
 */
export function portMap(mappings: readonly PortMapping[], opts: { ipv6?: boolean } = {}): Record<string, Array<{ HostIp: string; HostPort: string }>> {
  const out: Record<string, Array<{ HostIp: string; HostPort: string }>> = {};
  for (const m of mappings) {
    const key = `${m.containerPort}/${m.proto}`;
    (out[key] ??= []).push({ HostIp: m.hostIp || '0.0.0.0', HostPort: String(m.hostPort) });
    if (m.hostIp === '' && opts.ipv6) out[key].push({ HostIp: '::', HostPort: String(m.hostPort) });
  }
  return out;
}

/**
 * Whether two published ports would take the same host port: '' stands for every address of both families,
 * '::' for every IPv6 address.
 */
function clashes(a: { proto: string; hostIp: string; hostPort: number }, b: { proto: string; hostIp: string; hostPort: number }): boolean {
  if (a.proto !== b.proto || a.hostPort !== b.hostPort) return false;
  if (a.hostIp === '' || b.hostIp === '' || a.hostIp === b.hostIp) return true;
  return (a.hostIp === '::' && isIPv6HostIp(b.hostIp)) || (b.hostIp === '::' && isIPv6HostIp(a.hostIp));
}

export interface PortAllocatorDeps {
  /** The kernel's ephemeral range (ip_local_port_range). */
  range(): Promise<{ first: number; last: number }>;
  /** Whether the host port can be bound now (no other program listens on it). */
  isFree(proto: PortProto, hostIp: string, port: number): Promise<boolean>;
}

/**
 * Chooses a host port for each request, given the ports already taken by other containers. An explicit
 * port that is taken is a Conflict naming it, as Docker words it.
 */
export async function allocatePorts(requests: readonly PortRequest[], taken: readonly PortMapping[], deps: PortAllocatorDeps): Promise<PortMapping[]> {
  const chosen: PortMapping[] = [];
  const inUse = (m: { proto: string; hostIp: string; hostPort: number }) => taken.some((t) => clashes(t, m)) || chosen.some((c) => clashes(c, m));
  let ephemeral: { first: number; last: number } | undefined;
  for (const r of requests) {
    const shown = isIPv6HostIp(r.hostIp) ? `[${r.hostIp}]` : `${r.hostIp || '0.0.0.0'}`;
    if (r.hostPortFirst !== 0 && r.hostPortFirst === r.hostPortLast) {
      const candidate = { proto: r.proto, hostIp: r.hostIp, hostPort: r.hostPortFirst };
      if (inUse(candidate) || !(await deps.isFree(r.proto, r.hostIp, r.hostPortFirst))) {
        throw new Conflict(`Bind for ${shown}:${r.hostPortFirst} failed: port is already allocated`);
      }
      chosen.push({ ...candidate, containerPort: r.containerPort });
      continue;
    }
    let first = r.hostPortFirst;
    let last = r.hostPortLast;
    if (first === 0) {
      ephemeral ??= await deps.range();
      ({ first, last } = ephemeral);
    }
    // A random starting point: several engines on one host then rarely reach for the same port first.
    const size = last - first + 1;
    const start = Math.floor(Math.random() * size);
    let found: PortMapping | undefined;
    for (let i = 0; i < size && !found; i++) {
      const port = first + ((start + i) % size);
      const candidate = { proto: r.proto, hostIp: r.hostIp, hostPort: port };
      if (inUse(candidate)) continue;
      if (!(await deps.isFree(r.proto, r.hostIp, port))) continue;
      found = { ...candidate, containerPort: r.containerPort };
    }
    if (!found) {
      throw new Conflict(
        r.hostPortFirst === 0
          ? `Bind for ${shown} failed: no free ephemeral port for ${r.containerPort}/${r.proto}`
          : `Bind for ${shown}:${r.hostPortFirst}-${r.hostPortLast} failed: every port of the range is already allocated`,
      );
    }
    chosen.push(found);
  }
  return chosen;
}
