/**
 * The etcd member of a manager: Debian's `etcd` (3.4), started as the daemon's child with a clean environment
 * (etcd reads ETCD_* variables), mutual TLS from the swarm's CA on its client and peer URLs (only
 * `swarm-manager` certificates are let in), and restarted with a backoff when it exits on its own. It dies with
 * the daemon (parent-death signal through setpriv): the daemon starts it again when it comes back.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import net from 'node:net';
import type { EtcdMember, EtcdMemberOptions } from '../../cluster.js';
import { log } from '../../../util/log.js';
import { writeFileAtomic } from '../../../util/atomic.js';

export interface EtcdFiles {
  dataDir: string;
  ca: string;
  cert: string;
  key: string;
}

function urlHost(address: string): string {
  return address.includes(':') ? `[${address}]` : address;
}

export function etcdArgs(opts: EtcdMemberOptions, files: EtcdFiles): string[] {
  const host = urlHost(opts.address);
  const clientUrl = `https://${host}:${opts.clientPort}`;
  const peerUrl = `https://${host}:${opts.peerPort}`;
  return [
    '--name', opts.name,
    '--data-dir', files.dataDir,
    '--listen-client-urls', clientUrl,
    '--advertise-client-urls', clientUrl,
    '--listen-peer-urls', peerUrl,
    '--initial-advertise-peer-urls', peerUrl,
    '--initial-cluster', opts.initialCluster,
    '--initial-cluster-state', opts.initialState,
    '--initial-cluster-token', opts.clusterToken,
    '--cert-file', files.cert, '--key-file', files.key, '--trusted-ca-file', files.ca, '--client-cert-auth',
    '--client-cert-allowed-hostname', 'swarm-manager',
    '--peer-cert-file', files.cert, '--peer-key-file', files.key, '--peer-trusted-ca-file', files.ca, '--peer-client-cert-auth',
    '--peer-cert-allowed-hostname', 'swarm-manager',
    '--heartbeat-interval', '50', '--election-timeout', '500',
    '--pre-vote', '--experimental-enable-lease-checkpoint',
    '--snapshot-count', '10000',
    '--logger', 'zap', '--log-outputs', 'stderr', '--log-level', 'warn',
    ...(opts.forceNewCluster ? ['--force-new-cluster'] : []),
  ];
}

export class EtcdProcess implements EtcdMember {
  readonly clientUrl: string;
  readonly peerUrl: string;
  private child?: ChildProcess;
  private stopping = false;
  private restarts = 0;
  private readonly firstStart: Promise<void>;
  private tail: string[] = [];

  constructor(private readonly opts: EtcdMemberOptions, private readonly files: EtcdFiles) {
    const host = urlHost(opts.address);
    this.clientUrl = `https://${host}:${opts.clientPort}`;
    this.peerUrl = `https://${host}:${opts.peerPort}`;
    this.firstStart = new Promise((resolve, reject) => this.launch(resolve, reject));
    this.firstStart.catch(() => undefined);
  }

  private launch(onReady?: () => void, onFail?: (err: Error) => void): void {
    const args = ['--pdeathsig', 'SIGKILL', '--', 'etcd', ...etcdArgs(this.opts, this.files)];
    const child = spawn('setpriv', args, { stdio: ['ignore', 'ignore', 'pipe'], env: { PATH: process.env.PATH ?? '/usr/bin:/bin' } });
    this.child = child;
    child.stderr!.setEncoding('utf8');
    child.stderr!.on('data', (text: string) => {
      for (const line of text.split('\n')) {
        if (!line) continue;
        this.tail.push(line);
        if (this.tail.length > 20) this.tail.shift();
        if (log.enabled('debug')) log.debug('etcd', { line });
      }
    });
    child.on('error', (err) => log.warn('etcd could not start', { error: err.message }));
    let answered = false;
    child.once('exit', (code, signal) => {
      if (this.child === child) this.child = undefined;
      if (!answered && onFail) {
        answered = true;
        onFail(new Error(`etcd exited (code ${code}, signal ${signal}): ${this.tail.slice(-5).join(' | ')}`));
        return;
      }
      if (this.stopping) return;
      this.restarts++;
      const delay = Math.min(5000, 200 * 2 ** Math.min(this.restarts, 5));
      log.warn('etcd exited; starting it again', { code, signal, delayMs: delay, last: this.tail.slice(-3) });
      setTimeout(() => {
        if (!this.stopping) this.launch();
      }, delay).unref();
    });
    if (onReady) {
      void waitForPort(this.opts.address, this.opts.clientPort, 30_000, () => answered).then(
        () => {
          if (answered) return;
          answered = true;
          onReady();
        },
        (err: Error) => {
          if (answered) return;
          answered = true;
          onFail?.(err);
        },
      );
    }
  }

  ready(): Promise<void> {
    return this.firstStart;
  }

  async renewCertificate(cert: string, key: string): Promise<void> {
    // The key first: a handshake between the two writes fails once (etcd checks the pair), and is made again.
    await writeFileAtomic(this.files.key, key, { mode: 0o600 });
    await writeFileAtomic(this.files.cert, cert, { mode: 0o644 });
  }

  async stop(): Promise<void> {
    this.stopping = true;
    const child = this.child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const gone = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
    await gone;
    clearTimeout(timer);
  }
}

/** Resolves once a TCP connection to address:port succeeds. */
async function waitForPort(address: string, port: number, timeoutMs: number, cancelled: () => boolean): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (cancelled()) return;
    const ok = await new Promise<boolean>((resolve) => {
      const socket = net.connect({ host: address, port });
      socket.once('connect', () => {
        socket.destroy();
        resolve(true);
      });
      socket.once('error', () => resolve(false));
    });
    if (ok) return;
    if (Date.now() > deadline) throw new Error(`etcd did not listen on ${address}:${port} within ${timeoutMs / 1000} s`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
