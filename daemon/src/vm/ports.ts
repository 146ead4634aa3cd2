/**
 * Published ports of the containers in the VM, reached on the host's loopback: `-p 8080:80` answers on the
 * host's 127.0.0.1:8080 as it does on a Linux host. The daemon (on the host, with --agent) knows every
 * container's published ports; this reads them from its API and keeps the VM driver's forwards to the guest
 * in step, at once and at each container event.
 */
import http from 'node:http';
import { Passes } from '../util/passes.js';
import type { PortForward, VmDriver } from './driver.js';

export interface ContainerPorts {
  Ports?: Array<{ IP?: string; PrivatePort: number; PublicPort?: number; Type: string }>;
}

/** The forwards that the containers' published ports ask for (host port = guest port = the published one). */
export function forwardsOf(containers: ContainerPorts[]): PortForward[] {
  const seen = new Map<string, PortForward>();
  for (const c of containers) {
    for (const p of c.Ports ?? []) {
      if (!p.PublicPort || (p.Type !== 'tcp' && p.Type !== 'udp')) continue;
      // Ports published on a particular address of the guest other than "any" or loopback stay in the guest.
      if (p.IP && !['0.0.0.0', '::', '127.0.0.1', '::1'].includes(p.IP)) continue;
      seen.set(`${p.Type}/${p.PublicPort}`, { protocol: p.Type, hostPort: p.PublicPort, guestPort: p.PublicPort });
    }
  }
  return [...seen.values()];
}

function key(f: PortForward): string {
  return `${f.protocol}/${f.hostPort}`;
}

export class PublishedPorts {
  private readonly current = new Map<string, PortForward>();
  private readonly passes = new Passes(() => this.pass());

  constructor(
    private readonly engineSocket: string,
    private readonly driver: Required<Pick<VmDriver, 'forwardPort' | 'unforwardPort'>>,
    private readonly onError: (err: unknown) => void = () => undefined,
  ) {}

  /** The forwards now in place. */
  get forwards(): PortForward[] {
    return [...this.current.values()];
  }

  /** Brings the forwards in step with the running containers (one pass at a time; a call during one runs again after it). */
  sync(): Promise<void> {
    return this.passes.run();
  }

  private async pass(): Promise<void> {
    const containers = JSON.parse(await this.get('/containers/json')) as ContainerPorts[];
    const want = new Map(forwardsOf(containers).map((f) => [key(f), f]));
    for (const [k, f] of this.current) {
      if (want.has(k)) continue;
      await this.driver.unforwardPort(f).catch(this.onError);
      this.current.delete(k);
    }
    for (const [k, f] of want) {
      if (this.current.has(k)) continue;
      try {
        await this.driver.forwardPort(f);
        this.current.set(k, f);
      } catch (err) {
        this.onError(err); // the host port is taken: the container's port stays reachable in the guest only
      }
    }
  }

  /** Syncs now and after every container start and stop, until the returned function is called. */
  watch(): () => void {
    const filters = encodeURIComponent(JSON.stringify({ type: ['container'], event: ['start', 'die', 'destroy'] }));
    const req = http.request({ socketPath: this.engineSocket, path: `/events?filters=${filters}` }, (res) => {
      res.on('data', () => void this.sync().catch(this.onError));
    });
    req.on('error', (err) => this.onError(err));
    req.end();
    void this.sync().catch(this.onError);
    return () => req.destroy();
  }

  private get(p: string): Promise<string> {
    return new Promise((resolve, reject) => {
      const req = http.get({ socketPath: this.engineSocket, path: p }, (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (body += c));
        res.on('end', () => (res.statusCode === 200 ? resolve(body) : reject(new Error(`GET ${p} answered ${res.statusCode}: ${body}`))));
      });
      req.on('error', reject);
    });
  }
}
