/**
 * Overlay networks on this machine (OverlayHost): each network is a namespace of its own (`ip netns`, named
 * from a digest of the daemon's exec root and the network's id, so that daemons sharing /run/netns never
 * collide), holding `br0` (the gateway's address) and `vxlan0`. The VXLAN device is made in the daemon's own
 * namespace and then moved into the network's, so that its UDP socket listens on the node's address there
 * (the kernel keeps a VXLAN socket in the namespace the device was created in). The device answers ARP from
 * its neighbour table (`proxy`) and learns nothing: every remote endpoint is a permanent neighbour and
 * forwarding entry the engine gives (setOverlayPeers).
 */
import { createHash, randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import { IPV4 } from '../network/firewall.js';
import { CommandError, run } from '../network/run.js';
import type { IngressSpec, OverlayAttachment, OverlayEncryption, OverlayHost, OverlayPeer, OverlaySpec, VipBackends } from '../../overlay.js';
import { EspTunnel, MAC } from './esp.js';

const NETNS_DIR = '/run/netns';
const ID = /^[a-z0-9]{1,64}$/;

interface FdbEntry { mac: string; dst?: string; flags?: string[] }
interface NeighEntry { dst: string; lladdr?: string; state?: string[] }

function checkId(id: string): void {
  if (!ID.test(id)) throw new Error(`invalid overlay network id ${JSON.stringify(id)}`);
}

export class LinuxOverlayHost implements OverlayHost {
  private readonly prefix: string;
  private readonly esp = new EspTunnel();

  constructor(execRoot: string) {
    this.prefix = `bov${createHash('sha256').update(execRoot).digest('hex').slice(0, 6)}-`;
  }

  /** The name of the network's namespace under /run/netns. */
  namespace(networkId: string): string {
    checkId(networkId);
    return this.prefix + networkId;
  }

  private async links(ns: string): Promise<string[]> {
    try {
      const out = await run('ip', ['-n', ns, '-j', 'link', 'show']);
      return (JSON.parse(out || '[]') as Array<{ ifname: string }>).map((l) => l.ifname);
    } catch {
      return [];
    }
  }

  async ensureOverlay(spec: OverlaySpec): Promise<void> {
    const ns = this.namespace(spec.networkId);
    if (!IPV4.test(spec.localAddr) || !IPV4.test(spec.gateway)) throw new Error('overlay addresses must be IPv4');
    if (spec.bridgeMac !== undefined && !MAC.test(spec.bridgeMac)) throw new Error(`invalid bridge MAC address ${JSON.stringify(spec.bridgeMac)}`);
    const present = await this.links(ns);
    if (present.includes('br0') && present.includes('vxlan0')) return;
    await this.removeOverlay(spec.networkId);
    await run('ip', ['netns', 'add', ns]);
    try {
      const vx = `vx-${spec.vni}`;
      await run('ip', ['link', 'del', vx]).catch(() => undefined);
      // A network removed a moment ago may still hold the VNI while its namespace is torn down.
      for (let attempt = 0; ; attempt++) {
        try {
          await run('ip', ['link', 'add', vx, 'mtu', String(spec.mtu), 'type', 'vxlan', 'id', String(spec.vni), 'dstport', String(spec.port),
            'local', spec.localAddr, 'proxy', 'nolearning', ...(spec.encrypted ? ['noudpcsum'] : [])]);
          break;
        } catch (err) {
          if (attempt >= 20 || !(err instanceof CommandError) || !/exists/i.test(err.stderr)) throw err;
          await new Promise((r) => setTimeout(r, 100));
        }
      }
      await run('ip', ['link', 'set', vx, 'netns', ns]);
      await run('ip', ['-n', ns, '-batch', '-'], [
        'link set lo up',
        `link add br0 mtu ${spec.mtu}${spec.bridgeMac ? ` address ${spec.bridgeMac}` : ''} type bridge`,
        `addr add ${spec.gateway}/${spec.prefixLen} dev br0`,
        `link set ${vx} name vxlan0`,
        'link set vxlan0 master br0',
        'link set vxlan0 up',
        'link set br0 up',
      ].join('\n') + '\n');
      // Frames bridged inside the sandbox (task to task, task to VXLAN) need no IP netfilter pass: none of the
      // sandbox's rules is for them, and the pass on each frame costs CPU on the data path.
      await run('nsenter', [`--net=${NETNS_DIR}/${ns}`, 'sysctl', '-qw', ...BRIDGE_NF_OFF]).catch(() => undefined);
    } catch (err) {
      await this.removeOverlay(spec.networkId).catch(() => undefined);
      throw err;
    }
  }

  async setOverlayPeers(networkId: string, peers: OverlayPeer[]): Promise<void> {
    const ns = this.namespace(networkId);
    for (const p of peers) {
      if (!IPV4.test(p.address) || !IPV4.test(p.node) || !MAC.test(p.mac)) throw new Error(`invalid overlay peer ${JSON.stringify(p)}`);
    }
    const [fdbOut, neighOut] = await Promise.all([
      run('bridge', ['-n', ns, '-j', 'fdb', 'show', 'dev', 'vxlan0']),
      run('ip', ['-n', ns, '-j', '-4', 'neigh', 'show', 'dev', 'vxlan0']),
    ]);
    const fdb = (JSON.parse(fdbOut || '[]') as FdbEntry[]).filter((e) => e.dst && e.mac !== '00:00:00:00:00:00');
    const neigh = (JSON.parse(neighOut || '[]') as NeighEntry[]).filter((e) => e.lladdr);
    const { ipCommands, bridgeCommands } = peerCommands(peers, fdb, neigh);
    if (bridgeCommands.length) await run('bridge', ['-n', ns, '-force', '-batch', '-'], bridgeCommands.join('\n') + '\n');
    if (ipCommands.length) await run('ip', ['-n', ns, '-force', '-batch', '-'], ipCommands.join('\n') + '\n');
  }

  async attachOverlay(spec: OverlayAttachment): Promise<void> {
    const ns = this.namespace(spec.networkId);
    if (!IPV4.test(spec.address) || !MAC.test(spec.macAddress) || !/^[A-Za-z0-9_.-]{1,15}$/.test(spec.ifname)) throw new Error('invalid overlay attachment');
    const hostEnd = `veo${randomBytes(5).toString('hex')}`;
    await run('ip', ['-n', ns, 'link', 'add', hostEnd, 'mtu', String(spec.mtu), 'type', 'veth', 'peer', 'name', spec.ifname,
      'address', spec.macAddress, 'mtu', String(spec.mtu), 'netns', String(spec.pid)]);
    await run('ip', ['-n', ns, 'link', 'set', hostEnd, 'master', 'br0', 'up']);
    await run('nsenter', ['-t', String(spec.pid), '-n', 'ip', '-batch', '-'], [
      `addr add ${spec.address}/${spec.prefixLen} dev ${spec.ifname}`,
      `link set ${spec.ifname} up`,
    ].join('\n') + '\n');
  }

  async detachOverlay(pid: number, ifname: string): Promise<void> {
    if (!/^[A-Za-z0-9_.-]{1,15}$/.test(ifname) || !Number.isInteger(pid) || pid <= 0) throw new Error('invalid overlay detachment');
    // Its peer in the network's sandbox goes with it.
    await run('nsenter', ['-t', String(pid), '-n', 'ip', 'link', 'del', ifname]);
  }

  async balanceVips(pid: number, vips: VipBackends[]): Promise<void> {
    for (const v of vips) if (![v.vip, ...v.backends].every((a) => IPV4.test(a))) throw new Error(`invalid VIP rule ${JSON.stringify(v)}`);
    await run('nsenter', ['-t', String(pid), '-n', 'nft', '-f', '-'], vipRuleset(vips));
  }

  async setIngress(spec: IngressSpec | undefined): Promise<void> {
    const nodeEnd = `bvi${this.prefix.slice(3, 9)}`;
    if (!spec) {
      await run('nft', ['delete', 'table', 'ip', INGRESS_TABLE]).catch(() => undefined);
      await run('ip', ['link', 'del', nodeEnd]).catch(() => undefined);
      return;
    }
    const ns = this.namespace(spec.networkId);
    if (!IPV4.test(spec.address)) throw new Error('invalid ingress address');
    for (const p of spec.ports) if (!p.backends.every((b) => IPV4.test(b))) throw new Error('invalid ingress backend');
    // The link between the node's namespace and the sandbox (gone with the sandbox when it is rebuilt).
    const present = await run('ip', ['link', 'show', nodeEnd]).then(() => true, () => false);
    if (!present) {
      await run('ip', ['link', 'add', nodeEnd, 'type', 'veth', 'peer', 'name', 'lb0', 'netns', ns]);
      await run('ip', ['-batch', '-'], `addr add ${LINK_NODE}/30 dev ${nodeEnd}\nlink set ${nodeEnd} up\n`);
      await run('ip', ['-n', ns, '-batch', '-'], `addr add ${LINK_SANDBOX}/30 dev lb0\nlink set lb0 up\nroute replace default via ${LINK_NODE}\n`);
      await run('nsenter', [`--net=${NETNS_DIR}/${ns}`, 'sysctl', '-qw', 'net.ipv4.ip_forward=1']);
      await run('sysctl', ['-qw', 'net.ipv4.ip_forward=1']);
    }
    const rules = ingressRulesets(spec);
    await run('nft', ['-f', '-'], rules.node);
    await run('nsenter', [`--net=${NETNS_DIR}/${ns}`, 'nft', '-f', '-'], rules.sandbox);
  }

  setOverlayEncryption(spec: OverlayEncryption | undefined): Promise<void> {
    return this.esp.set(spec);
  }

  async removeOverlay(networkId: string): Promise<void> {
    const ns = this.namespace(networkId);
    try {
      await fs.access(`${NETNS_DIR}/${ns}`);
    } catch {
      return;
    }
    await run('ip', ['netns', 'del', ns]);
  }

  async overlays(): Promise<string[]> {
    const names = await fs.readdir(NETNS_DIR).catch(() => [] as string[]);
    return names.filter((n) => n.startsWith(this.prefix)).map((n) => n.slice(this.prefix.length));
  }
}

/** The `ip` and `bridge` batch lines that turn the entries present into exactly those of `peers`. */
export function peerCommands(peers: OverlayPeer[], fdb: FdbEntry[], neigh: NeighEntry[]): { ipCommands: string[]; bridgeCommands: string[] } {
  const ipCommands: string[] = [];
  const bridgeCommands: string[] = [];
  const wantFdb = new Map(peers.map((p) => [p.mac, p.node]));
  const wantNeigh = new Map(peers.map((p) => [p.address, p.mac]));
  const haveFdb = new Map(fdb.map((e) => [e.mac, e.dst!]));
  const haveNeigh = new Map(neigh.map((e) => [e.dst, e.lladdr!]));
  for (const [mac, dst] of haveFdb) if (wantFdb.get(mac) !== dst) bridgeCommands.push(`fdb del ${mac} dev vxlan0 dst ${dst} self`);
  for (const [mac, node] of wantFdb) if (haveFdb.get(mac) !== node) bridgeCommands.push(`fdb append ${mac} dev vxlan0 dst ${node} self permanent`);
  for (const [ip, mac] of haveNeigh) if (!wantNeigh.has(ip)) ipCommands.push(`neigh del ${ip} dev vxlan0`);
  for (const [ip, mac] of wantNeigh) if (haveNeigh.get(ip) !== mac) ipCommands.push(`neigh replace ${ip} lladdr ${mac} dev vxlan0 nud permanent`);
  return { ipCommands, bridgeCommands };
}

/** The sysctls that turn the netfilter pass of bridged frames off in one namespace (when br_netfilter is loaded). */
const BRIDGE_NF_OFF = ['net.bridge.bridge-nf-call-iptables=0', 'net.bridge.bridge-nf-call-ip6tables=0', 'net.bridge.bridge-nf-call-arptables=0'];

const VIP_TABLE = 'berth_vip';

/**
 * The nftables script that replaces a container's VIP table: in the nat hook of its own output, each VIP
 * is DNATed to one of its backends picked by `numgen random` (a VIP without backends is left alone: nothing
 * answers it). Applied atomically by `nft -f`.
 */
export function vipRuleset(vips: VipBackends[]): string {
  const lines = [`table ip ${VIP_TABLE}`, `delete table ip ${VIP_TABLE}`];
  const rules = vips.filter((v) => v.backends.length > 0).map((v) => {
    const map = v.backends.map((b, i) => `${i} : ${b}`).join(', ');
    return `    ip daddr ${v.vip} dnat to numgen random mod ${v.backends.length} map { ${map} }`;
  });
  if (rules.length > 0) {
    lines.push(`table ip ${VIP_TABLE} {`, '  chain output {', '    type nat hook output priority -100; policy accept;', ...rules, '  }', '}');
  }
  return lines.join('\n') + '\n';
}

const INGRESS_TABLE = 'berth_ingress';
/** The two ends of the link from the node's namespace into the ingress sandbox. */
const LINK_NODE = '169.254.231.1';
const LINK_SANDBOX = '169.254.231.2';

/**
 * The routing mesh's nftables scripts: in the node's namespace, connections to its own addresses on a
 * published port are DNATed to the sandbox's end of the link (the port kept); in the sandbox, each published
 * port is DNATed to one of its backends (at random) on the target port, and what leaves into the overlay
 * takes the node's endpoint address, so that the replies come back here.
 */
export function ingressRulesets(spec: IngressSpec): { node: string; sandbox: string } {
  const head = [`table ip ${INGRESS_TABLE}`, `delete table ip ${INGRESS_TABLE}`, `table ip ${INGRESS_TABLE} {`];
  const toSandbox = spec.ports.map((p) => `    fib daddr type local ${p.proto} dport ${p.publishedPort} dnat to ${LINK_SANDBOX}`);
  const node = [
    ...head,
    '  chain prerouting {', '    type nat hook prerouting priority -100; policy accept;', ...toSandbox, '  }',
    '  chain output {', '    type nat hook output priority -100; policy accept;', ...toSandbox, '  }',
    '}',
  ];
  const spread = spec.ports.filter((p) => p.backends.length > 0).map((p) => {
    const map = p.backends.map((b, i) => `${i} : ${b} . ${p.targetPort}`).join(', ');
    return `    iifname "lb0" ${p.proto} dport ${p.publishedPort} dnat ip to numgen random mod ${p.backends.length} map { ${map} }`;
  });
  const sandbox = [
    ...head,
    '  chain prerouting {', '    type nat hook prerouting priority -100; policy accept;', ...spread, '  }',
    '  chain postrouting {', '    type nat hook postrouting priority 100; policy accept;', `    oifname "br0" ct status dnat snat ip to ${spec.address}`, '  }',
    '}',
  ];
  return { node: node.join('\n') + '\n', sandbox: sandbox.join('\n') + '\n' };
}
