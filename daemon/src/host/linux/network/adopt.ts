/**
 * A network plugin's interface moved into a container's namespace (NetworkHost.adoptInterface): the plugin
 * made it on the host (the container end of its pair) and named it in its Join answer; here it goes into the
 * namespace, takes the container's name for it, its MAC and IPv4 address, its routes, and comes up.
 */
import { InvalidParameter } from '../../../errors.js';
import type { AdoptSpec } from '../../host.js';
import { checkInterfaceName, IPV4 } from './firewall.js';
import { run } from './run.js';

const MAC = /^([0-9a-f]{2}:){5}[0-9a-f]{2}$/i;
const CIDR4 = /^\d{1,3}(\.\d{1,3}){3}\/\d{1,2}$/;

function check(spec: AdoptSpec): void {
  checkInterfaceName(spec.hostName);
  checkInterfaceName(spec.containerInterface);
  if (!Number.isInteger(spec.pid) || spec.pid <= 0) throw new InvalidParameter(`invalid pid ${spec.pid}`);
  if (!IPV4.test(spec.address) || !Number.isInteger(spec.prefixLen) || spec.prefixLen < 0 || spec.prefixLen > 32) {
    throw new InvalidParameter(`invalid address ${JSON.stringify(`${spec.address}/${spec.prefixLen}`)}`);
  }
  if (spec.macAddress !== undefined && !MAC.test(spec.macAddress)) throw new InvalidParameter(`invalid MAC address ${JSON.stringify(spec.macAddress)}`);
  if (spec.gateway !== undefined && !IPV4.test(spec.gateway)) throw new InvalidParameter(`invalid gateway ${JSON.stringify(spec.gateway)}`);
  for (const r of spec.routes ?? []) {
    if (!CIDR4.test(r.destination) || (r.nextHop !== undefined && !IPV4.test(r.nextHop))) throw new InvalidParameter(`invalid static route ${JSON.stringify(r)}`);
  }
}

export async function adoptInterface(spec: AdoptSpec): Promise<void> {
  check(spec);
  const dev = spec.containerInterface;
  await run('ip', ['link', 'set', 'dev', spec.hostName, 'netns', String(spec.pid)]);
  const lines = [
    'link set lo up',
    `link set dev ${spec.hostName} down`,
    ...(spec.hostName !== dev ? [`link set dev ${spec.hostName} name ${dev}`] : []),
    ...(spec.macAddress ? [`link set dev ${dev} address ${spec.macAddress}`] : []),
    `addr add ${spec.address}/${spec.prefixLen} dev ${dev}`,
    `link set dev ${dev} up`,
    ...(spec.routes ?? []).map((r) => (r.nextHop ? `route add ${r.destination} via ${r.nextHop} dev ${dev}` : `route add ${r.destination} dev ${dev}`)),
    ...(spec.gateway ? [`route add default via ${spec.gateway} dev ${dev}`] : []),
    '',
  ];
  await run('nsenter', ['-t', String(spec.pid), '-n', 'ip', '-batch', '-'], lines.join('\n'));
}
