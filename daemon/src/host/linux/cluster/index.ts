/**
 * Swarm mode on this machine: the node's state and certificates under <data-root>/swarm, its etcd member's
 * data in <data-root>/swarm/etcd, and the files of its tasks' secrets and configs on the exec root's tmpfs
 * (<exec-root>/swarm/tasks/<task id>), so that secrets never reach a disk.
 */
import { existsSync, mkdirSync, promises as fs, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { ClusterHost, EtcdMember, EtcdMemberOptions, ManagerKeys, NodeCertificates, NodeState } from '../../cluster.js';
import type { OverlayHost } from '../../overlay.js';
import { LinuxOverlayHost } from '../overlay/index.js';
import { writeFileAtomic } from '../../../util/atomic.js';
import { EtcdProcess } from './etcd.js';
import { createKeyAndRequest, createRootCA, crossSignRootCA, signNodeCertificate } from './pki.js';

export class LinuxClusterHost implements ClusterHost {
  private readonly dir: string;
  private readonly certDir: string;
  private readonly etcdDir: string;
  private readonly taskDir: string;
  /** On the exec root: the etcd member's copy of the node's TLS key. */
  private readonly runDir: string;
  readonly overlay: OverlayHost;

  constructor(dataRoot: string, execRoot: string) {
    this.overlay = new LinuxOverlayHost(execRoot);
    this.dir = path.join(dataRoot, 'swarm');
    this.certDir = path.join(this.dir, 'certificates');
    this.etcdDir = path.join(this.dir, 'etcd');
    this.taskDir = path.join(execRoot, 'swarm', 'tasks');
    this.runDir = path.join(execRoot, 'swarm');
  }

  async loadState(): Promise<NodeState | undefined> {
    try {
      return JSON.parse(await fs.readFile(path.join(this.dir, 'state.json'), 'utf8')) as NodeState;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw err;
    }
  }

  async saveState(state: NodeState): Promise<void> {
    await fs.mkdir(this.dir, { recursive: true, mode: 0o700 });
    await writeFileAtomic(path.join(this.dir, 'state.json'), JSON.stringify(state, null, 2), { mode: 0o600 });
  }

  async wipe(): Promise<void> {
    await fs.rm(this.dir, { recursive: true, force: true });
    await fs.rm(this.taskDir, { recursive: true, force: true });
    await fs.rm(path.join(this.runDir, 'etcd-node.key'), { force: true });
    await fs.rm(path.join(this.runDir, 'etcd-node.crt'), { force: true });
  }

  createRootCA = createRootCA;
  crossSignRootCA = crossSignRootCA;
  createKeyAndRequest = createKeyAndRequest;
  signNodeCertificate = signNodeCertificate;

  certificateFiles() {
    return {
      ca: path.join(this.certDir, 'swarm-root-ca.crt'),
      cert: path.join(this.certDir, 'swarm-node.crt'),
      key: path.join(this.certDir, 'swarm-node.key'),
    };
  }

  /**
   * The node's key and certificate are replaced as a pair: both are first written in one file beside them,
   * then each in its place, then that file goes. A daemon that stopped in between finds the pair there and
   * finishes the replacement when it loads them.
   */
  private pairFile(): string {
    return path.join(this.certDir, 'swarm-node.next');
  }

  async loadCertificates(): Promise<(NodeCertificates & ManagerKeys) | undefined> {
    const files = this.certificateFiles();
    const pending = await fs
      .readFile(this.pairFile(), 'utf8')
      .then((t) => JSON.parse(t) as { cert?: unknown; key?: unknown })
      .catch(() => undefined);
    if (pending && typeof pending.cert === 'string' && typeof pending.key === 'string') {
      await writeFileAtomic(files.key, pending.key, { mode: 0o600 });
      await writeFileAtomic(files.cert, pending.cert, { mode: 0o644 });
    }
    await fs.rm(this.pairFile(), { force: true });
    try {
      const [ca, cert, key] = await Promise.all([files.ca, files.cert, files.key].map((f) => fs.readFile(f, 'utf8')));
      const caKey = await fs.readFile(path.join(this.certDir, 'swarm-root-ca.key'), 'utf8').catch(() => undefined);
      const dataKey = await fs.readFile(path.join(this.certDir, 'swarm-data.key'), 'utf8').catch(() => undefined);
      return { ca: ca!, cert: cert!, key: key!, caKey, dataKey };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw err;
    }
  }

  async saveCertificates(certs: NodeCertificates & ManagerKeys): Promise<void> {
    await fs.mkdir(this.certDir, { recursive: true, mode: 0o700 });
    const files = this.certificateFiles();
    await writeFileAtomic(files.ca, certs.ca, { mode: 0o644 });
    await writeFileAtomic(this.pairFile(), JSON.stringify({ cert: certs.cert, key: certs.key }), { mode: 0o600 });
    await writeFileAtomic(files.key, certs.key, { mode: 0o600 });
    await writeFileAtomic(files.cert, certs.cert, { mode: 0o644 });
    await fs.rm(this.pairFile(), { force: true });
    const caKeyFile = path.join(this.certDir, 'swarm-root-ca.key');
    if (certs.caKey) await writeFileAtomic(caKeyFile, certs.caKey, { mode: 0o600 });
    else await fs.rm(caKeyFile, { force: true });
    const dataKeyFile = path.join(this.certDir, 'swarm-data.key');
    if (certs.dataKey) await writeFileAtomic(dataKeyFile, certs.dataKey, { mode: 0o600 });
    else await fs.rm(dataKeyFile, { force: true });
  }

  startEtcd(opts: EtcdMemberOptions): EtcdMember {
    const files = { dataDir: this.etcdDir, ...this.certificateFiles() };
    if (opts.tlsKey !== undefined) {
      // The member's own copies of the node's key and certificate: renewals replace both (see renewCertificate).
      mkdirSync(this.runDir, { recursive: true, mode: 0o700 });
      files.key = path.join(this.runDir, 'etcd-node.key');
      writeFileSync(files.key, opts.tlsKey, { mode: 0o600 });
      const cert = path.join(this.runDir, 'etcd-node.crt');
      writeFileSync(cert, readFileSync(files.cert));
      files.cert = cert;
    }
    return new EtcdProcess(opts, files);
  }

  async wipeEtcd(): Promise<void> {
    await fs.rm(this.etcdDir, { recursive: true, force: true });
    await fs.rm(path.join(this.runDir, 'etcd-node.key'), { force: true });
    await fs.rm(path.join(this.runDir, 'etcd-node.crt'), { force: true });
  }

  async hasEtcdData(): Promise<boolean> {
    return existsSync(path.join(this.etcdDir, 'member'));
  }

  defaultAdvertiseAddr(): string | undefined {
    // As dockerd: the one address of the machine that is not loopback; none when there are several or none.
    const found: string[] = [];
    for (const addrs of Object.values(os.networkInterfaces())) {
      for (const a of addrs ?? []) if (a.family === 'IPv4' && !a.internal) found.push(a.address);
    }
    return found.length >= 1 ? found[0] : undefined;
  }

  isLocalAddress(ip: string): boolean {
    if (ip.startsWith('127.') || ip === '::1') return true;
    return Object.values(os.networkInterfaces()).some((addrs) => (addrs ?? []).some((a) => a.address === ip));
  }

  interfaceAddresses(name: string): string[] | undefined {
    const addrs = os.networkInterfaces()[name];
    return addrs && addrs.filter((a) => a.family === 'IPv4').map((a) => a.address);
  }

  hostname(): string {
    return os.hostname();
  }

  async writeTaskFiles(taskId: string, files: Array<{ name: string; data: Buffer; mode: number }>): Promise<Map<string, string>> {
    if (!/^[a-z0-9]+$/.test(taskId)) throw new Error(`invalid task id ${JSON.stringify(taskId)}`);
    const dir = path.join(this.taskDir, taskId);
    await fs.mkdir(dir, { recursive: true, mode: 0o700 });
    const paths = new Map<string, string>();
    let i = 0;
    for (const file of files) {
      // Each file under a name of its own: secret and config names may hold characters a path must not.
      const p = path.join(dir, `f${i++}`);
      await fs.writeFile(p, file.data, { mode: file.mode });
      await fs.chmod(p, file.mode);
      paths.set(file.name, p);
    }
    return paths;
  }

  async removeTaskFiles(taskId: string): Promise<void> {
    if (!/^[a-z0-9]+$/.test(taskId)) return;
    await fs.rm(path.join(this.taskDir, taskId), { recursive: true, force: true });
  }

  async taskFileIds(): Promise<string[]> {
    return fs.readdir(this.taskDir).catch(() => []);
  }
}
