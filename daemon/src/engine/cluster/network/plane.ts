/**
 * The node's side of swarm networks: builds, through the Host, the overlay networks its tasks need with
 * their peers as the managers describe them (nodeNetworks), removes those no task needs any more, and joins
 * a task's container to its networks once it runs (one interface per network: eth1, eth2... beside the
 * default bridge's eth0, which keeps the container's way out).
 */
import { log } from '../../../util/log.js';
import type { OverlayAttachment, OverlayEncryption, OverlayHost } from '../../../host/overlay.js';
import type { Obj } from '../types.js';
import { macOf } from './allocator.js';
import type { NodeIngress, NodeNetwork } from './attachments.js';
import { vipsOf } from './dns.js';

export interface NodeNetworks {
  DataPathPort: number;
  LocalAddr: string;
  Networks: NodeNetwork[];
  /** The routing mesh this node serves (absent when no service publishes through it). */
  Ingress?: NodeIngress;
  /** The swarm's network keys (in clear), present when one of the networks is encrypted (keys.ts). */
  Keys?: Array<{ Tag: number; Key: string; Created?: number }>;
  PrimaryKey?: number;
}

export class OverlayPlane {
  /** Networks built, with the peers last programmed (JSON). */
  private readonly built = new Map<string, { spec: string; peers: string }>();
  private cleaned = false;
  /** The routing mesh as last installed (JSON; '' for none). */
  private ingress = '';
  /** Task containers' VIP rules as last applied (JSON), by container id. */
  private readonly balanced = new Map<string, string>();
  /** The encryption of encrypted networks as last installed (JSON; '' for none). */
  private encryption = '';
  /** False until the first reconcile asked the Host (an earlier run of the daemon may have left some). */
  private encryptionKnown = false;
  /** The last failure to set up the encryption (logged once). */
  private encryptionError = '';

  constructor(private readonly host: OverlayHost) {}

  /** Passes of reconcile, one at a time (the agent's, and those of containers joining a network not built yet). */
  private queue: Promise<unknown> = Promise.resolve();

  /** Brings the node's overlay networks to `want`. */
  reconcile(want: NodeNetworks | undefined): Promise<void> {
    const run = this.queue.then(() => this.reconcileNow(want));
    this.queue = run.catch(() => undefined);
    return run;
  }

  private async reconcileNow(want: NodeNetworks | undefined): Promise<void> {
    if (!want) return;
    const wanted = new Set(want.Networks.map((n) => n.ID));
    if (!this.cleaned) {
      // Sandboxes an earlier run of the daemon left: rebuilt from scratch when needed.
      this.cleaned = true;
      for (const id of await this.host.overlays()) if (!wanted.has(id)) await this.host.removeOverlay(id);
    }
    for (const [id] of this.built) {
      if (wanted.has(id)) continue;
      this.built.delete(id);
      await this.host.removeOverlay(id);
    }
    if (!want.LocalAddr) return;
    // Encryption that cannot be set up (port 4500 taken...) leaves the encrypted networks without peers, not the others.
    await this.encrypt(want).then(() => (this.encryptionError = ''), (err: unknown) => {
      const message = err instanceof Error ? err.message : String(err);
      if (message !== this.encryptionError) log.warn('swarm networks: the encryption of encrypted networks could not be set up', { error: message });
      this.encryptionError = message;
    });
    for (const n of want.Networks) {
      const spec = {
        networkId: n.ID,
        vni: n.VNI,
        port: want.DataPathPort,
        localAddr: want.LocalAddr,
        subnet: n.Subnet,
        gateway: n.Gateway,
        prefixLen: Number(n.Subnet.split('/')[1]),
        mtu: n.MTU,
        // In the ingress network the bridge holds the node's own endpoint, which the other nodes reach it at.
        ...(n.ID === want.Ingress?.NetworkID ? { bridgeMac: macOf(n.Gateway) } : {}),
        ...(n.Encrypted ? { encrypted: true } : {}),
      };
      const specText = JSON.stringify(spec);
      // An encrypted network gets no peers while its traffic cannot be encrypted (no keys yet): nothing in clear.
      const peers = n.Encrypted && !this.encryption ? [] : n.Peers;
      const peersText = JSON.stringify(peers);
      const had = this.built.get(n.ID);
      if (had?.spec !== specText) {
        if (had) await this.host.removeOverlay(n.ID);
        await this.host.ensureOverlay(spec);
        this.built.set(n.ID, { spec: specText, peers: '' });
        if (n.ID === want.Ingress?.NetworkID) this.ingress = '';
      }
      if (this.built.get(n.ID)!.peers !== peersText) {
        await this.host.setOverlayPeers(n.ID, peers);
        this.built.get(n.ID)!.peers = peersText;
      }
    }
    const mesh = want.Ingress && this.built.has(want.Ingress.NetworkID) ? want.Ingress : undefined;
    const meshText = mesh ? JSON.stringify(mesh) : '';
    if (meshText !== this.ingress) {
      await this.host.setIngress(mesh && {
        networkId: mesh.NetworkID,
        address: mesh.Address,
        ports: mesh.Ports.map((p) => ({ proto: p.Protocol === 'udp' ? 'udp' : 'tcp', publishedPort: p.PublishedPort, targetPort: p.TargetPort, backends: p.Backends })),
      });
      this.ingress = meshText;
    }
  }

  /**
   * Encrypts the VXLAN traffic of the node's encrypted networks to their peers' nodes under the swarm's keys
   * (sent under the primary one, received under any), or stops doing so when none is left.
   */
  private async encrypt(want: NodeNetworks): Promise<void> {
    const encrypted = want.Networks.filter((n) => n.Encrypted);
    const keys = want.Keys ?? [];
    const spec: OverlayEncryption | undefined = encrypted.length > 0 && keys.length > 0 ? {
      localAddr: want.LocalAddr,
      port: want.DataPathPort,
      keys: keys.map((k) => ({ tag: k.Tag, key: k.Key, ...(k.Created !== undefined ? { created: k.Created } : {}) })),
      primary: keys.some((k) => k.Tag === want.PrimaryKey) ? want.PrimaryKey! : keys[0]!.Tag,
      networks: encrypted.map((n) => ({ vni: n.VNI, peers: n.Peers.map((p) => ({ mac: p.mac, node: p.node })) })),
    } : undefined;
    const text = spec ? JSON.stringify(spec) : '';
    if (text === this.encryption && this.encryptionKnown) return;
    if (!spec) {
      // Peers first: no encrypted network's traffic may leave in clear once the encryption is gone.
      for (const n of encrypted) {
        const b = this.built.get(n.ID);
        if (!b) continue;
        await this.host.setOverlayPeers(n.ID, []);
        b.peers = '[]';
      }
    }
    try {
      await this.host.setOverlayEncryption(spec);
    } catch (err) {
      // Tried again at the next pass; meanwhile nothing of the encrypted networks leaves.
      this.encryption = '';
      this.encryptionKnown = false;
      throw err;
    }
    this.encryption = text;
    this.encryptionKnown = true;
  }

  /** Stops encrypting (the daemon stops), after any pass under way: the encrypted networks' peers are removed first. */
  stopEncryption(): Promise<void> {
    const run = this.queue.then(() => this.stopEncryptionNow());
    this.queue = run.catch(() => undefined);
    return run;
  }

  private async stopEncryptionNow(): Promise<void> {
    if (!this.encryption) return;
    const vnis = new Set((JSON.parse(this.encryption) as OverlayEncryption).networks.map((n) => n.vni));
    for (const [id, b] of this.built) if (vnis.has((JSON.parse(b.spec) as { vni: number }).vni)) await this.host.setOverlayPeers(id, []);
    await this.host.setOverlayEncryption(undefined);
    this.encryption = '';
  }

  /** Joins the running container of task `t` (init pid `pid`) to the task's networks. */
  async attach(t: Obj, pid: number, networks: NodeNetworks | undefined): Promise<void> {
    const attachments: Obj[] = t.NetworksAttachments ?? [];
    let index = 1;
    for (const a of attachments) {
      const id = a.Network?.ID as string;
      const n = networks?.Networks.find((x) => x.ID === id);
      if (!n) throw new Error(`network ${a.Network?.Spec?.Name ?? id} is not available on this node`);
      if (!this.built.has(id)) await this.reconcile(networks);
      const [address, prefix] = String(a.Addresses?.[0] ?? '').split('/');
      if (!address) continue;
      await this.host.attachOverlay({ networkId: id, pid, ifname: `eth${index++}`, address, prefixLen: Number(prefix), macAddress: macOf(address), mtu: n.MTU });
    }
  }

  /** Joins a standalone container to an attachable network this node builds (`networks` names it). */
  async plug(spec: Omit<OverlayAttachment, 'mtu'>, networks: NodeNetworks): Promise<void> {
    const n = networks.Networks.find((x) => x.ID === spec.networkId);
    if (!n) throw new Error(`network ${spec.networkId} is not available on this node`);
    if (!this.built.has(n.ID)) await this.reconcile(networks);
    await this.host.attachOverlay({ ...spec, mtu: n.MTU });
  }

  /** Takes a standalone container's interface off an overlay network. */
  unplug(pid: number, ifname: string): Promise<void> {
    return this.host.detachOverlay(pid, ifname);
  }

  /**
   * Brings the VIP rules of running task containers up to date with the services' running tasks. With
   * `complete` (the default) the list is every task container of the node: others are forgotten.
   */
  async balance(list: Array<{ task: Obj; containerId: string; pid: number }>, networks: NodeNetworks | undefined, complete = true): Promise<void> {
    if (complete) {
      const present = new Set(list.map((x) => x.containerId));
      for (const id of this.balanced.keys()) if (!present.has(id)) this.balanced.delete(id);
    }
    if (!networks) return;
    for (const { task, containerId, pid } of list) {
      if (!pid) continue;
      const ids = (task.NetworksAttachments ?? []).map((a: Obj) => a.Network?.ID as string);
      const vips = vipsOf(networks, ids);
      const text = JSON.stringify(vips);
      const had = this.balanced.get(containerId);
      if (had === text) continue;
      await this.host.balanceVips(pid, vips);
      this.balanced.set(containerId, text);
    }
  }

  /** Forgets a container that exited; true when it was a task container joined to swarm networks. */
  forget(containerId: string): boolean {
    return this.balanced.delete(containerId);
  }

  /** Removes every network this node built (the node left the swarm). */
  async removeAll(): Promise<void> {
    await this.host.setIngress(undefined).catch(() => undefined);
    await this.host.setOverlayEncryption(undefined).catch(() => undefined);
    this.encryption = '';
    this.ingress = '';
    for (const id of await this.host.overlays()) {
      await this.host.removeOverlay(id).catch((err: unknown) => log.warn('swarm networks: could not remove an overlay', { network: id, error: String(err) }));
    }
    this.built.clear();
  }
}
