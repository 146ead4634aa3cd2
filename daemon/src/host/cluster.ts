/**
 * What swarm mode needs of the machine: its persistent state files, the swarm's certificates, the etcd member
 * a manager runs, and the files a task's containers mount (secrets and configs). The engine's cluster code
 * (engine/cluster) never spawns processes nor touches files itself; host/linux/cluster implements this.
 */
import type { OverlayHost } from './overlay.js';

/** What this node keeps of its swarm membership across daemon restarts. */
export interface NodeState {
  nodeId: string;
  clusterId: string;
  role: 'manager' | 'worker';
  /** host:port the swarm port listens on. */
  listenAddr: string;
  /** The address other nodes reach this one at (no port). */
  advertiseAddr: string;
  /** The swarm port (2377 unless ListenAddr says otherwise). */
  swarmPort: number;
  /** The underlay address of this node's VXLAN tunnels, when it is not the advertise address (DataPathAddr). */
  dataPathAddr?: string;
  /** The managers' swarm addresses (host:port) this node knew last. */
  managers: string[];
  /** The etcd client URLs of the managers this node knew last (managers only). */
  etcdEndpoints: string[];
}

/** PEM text of the swarm's certificates as one node holds them. */
export interface NodeCertificates {
  /** The swarm's root CA certificate. */
  ca: string;
  cert: string;
  key: string;
}

/** What only managers keep: the root CA's key, and the swarm's data key that seals secrets in the store. */
export interface ManagerKeys {
  caKey?: string;
  /** Base64 of 32 bytes. */
  dataKey?: string;
}

export interface CertificateSubject {
  nodeId: string;
  role: 'manager' | 'worker';
  clusterId: string;
  /** IP addresses the certificate is valid for (the node's advertise address). */
  ips: string[];
  /** How long the certificate lasts from now, in seconds (the swarm's NodeCertExpiry; 90 days if unset). */
  expirySeconds?: number;
}

export interface EtcdMemberOptions {
  /** The member's name (the node id). */
  name: string;
  /** The IP address the member's client and peer URLs bind and advertise. */
  address: string;
  clientPort: number;
  peerPort: number;
  /** `new`: the first member of a new cluster; `existing`: a member added to a running one. */
  initialState: 'new' | 'existing';
  /** name=peerURL pairs of the cluster the member joins (with itself). */
  initialCluster: string;
  clusterToken: string;
  /** Start as the one member of the cluster, keeping the data (`--force-new-cluster`): quorum lost for good. */
  forceNewCluster?: boolean;
  /**
   * The node's TLS key (PEM) for the member, written where only it reads it, off the data root (the key files
   * there may be sealed under the swarm's unlock key).
   */
  tlsKey?: string;
}

/** A supervised etcd member. */
export interface EtcdMember {
  readonly clientUrl: string;
  readonly peerUrl: string;
  /** Resolves once the member answers on its client URL; rejects if it exits first. */
  ready(): Promise<void>;
  /**
   * The node's renewed certificate and key for the member: its files are replaced, and etcd reads them again
   * at each new TLS handshake (peers and clients), so the member goes on running.
   */
  renewCertificate(cert: string, key: string): Promise<void>;
  stop(): Promise<void>;
}

export interface ClusterHost {
  /** The data plane of the swarm's overlay networks on this node. */
  readonly overlay: OverlayHost;

  /** The node's saved membership, or undefined outside a swarm. */
  loadState(): Promise<NodeState | undefined>;
  saveState(state: NodeState): Promise<void>;
  /** Forgets the swarm: state, certificates, the etcd member's data, task files. */
  wipe(): Promise<void>;

  /** A new root CA (key and certificate); a rotation's root gets a tag in its subject. */
  createRootCA(tag?: string): Promise<{ cert: string; key: string }>;
  /** A rotation's new root signed by the current root (the cross-signed certificate, PEM). */
  crossSignRootCA(current: { cert: string; key: string }, newRoot: string): Promise<string>;
  /** A new key and a certificate request for it. */
  createKeyAndRequest(): Promise<{ key: string; csr: string }>;
  /** Signs a certificate request with the root CA, with the subject and names of a swarm node. */
  signNodeCertificate(ca: { cert: string; key: string }, csr: string, subject: CertificateSubject): Promise<string>;
  /** The node's certificates on disk (the CA key too on managers). */
  loadCertificates(): Promise<(NodeCertificates & ManagerKeys) | undefined>;
  saveCertificates(certs: NodeCertificates & ManagerKeys): Promise<void>;
  /** Paths of the certificate files (etcd reads them itself). */
  certificateFiles(): { ca: string; cert: string; key: string };

  /** Starts (and keeps running) this node's etcd member. */
  startEtcd(opts: EtcdMemberOptions): EtcdMember;
  /** Removes the etcd member's data (after it left the cluster). */
  wipeEtcd(): Promise<void>;
  /** Whether the etcd member has data (it was started before). */
  hasEtcdData(): Promise<boolean>;

  /** The address other nodes should reach this one at, when none was given. */
  defaultAdvertiseAddr(): string | undefined;
  /** Whether `ip` is one of this machine's addresses. */
  isLocalAddress(ip: string): boolean;
  /** The IPv4 addresses of the network interface `name`; undefined when there is no such interface. */
  interfaceAddresses(name: string): string[] | undefined;
  /** The machine's hostname. */
  hostname(): string;

  /**
   * Writes the files of a task's secrets and configs (on a tmpfs under the exec root) and answers their
   * host paths by name, for bind mounts.
   */
  writeTaskFiles(taskId: string, files: Array<{ name: string; data: Buffer; mode: number }>): Promise<Map<string, string>>;
  removeTaskFiles(taskId: string): Promise<void>;
  /** The task ids that have files (to remove those of tasks that are gone). */
  taskFileIds(): Promise<string[]>;
}
