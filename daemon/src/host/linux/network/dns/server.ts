/**
 * The embedded DNS server: for each container on a user-defined network, one UDP and one TCP listener on
 * 127.0.0.11:53 inside the container's network namespace (the sockets are opened there by the `netns`
 * addon and served by this process). Names the engine knows are answered from the engine's table;
 * others are forwarded to the upstream resolvers from the daemon's own namespace, so that a host
 * resolver on loopback serves containers too.
 *
 * The listeners hold the namespace open: `stop` is called when the container stops, and `start` again for
 * the live containers when the daemon starts.
 */
import dgram from 'node:dgram';
import { closeSync, readFileSync } from 'node:fs';
import net from 'node:net';
import { log } from '../../../../util/log.js';
import { netnsAddon } from '../netns.js';
import { type AddressRecord, buildAnswer, buildError, CLASS_IN, parseAnswerAddresses, parseQuery, RCODE_FORMERR, RCODE_SERVFAIL, TYPE_A, TYPE_AAAA } from './message.js';
import type { DnsAnswers, DnsObserver } from '../../../host.js';

export const EMBEDDED_DNS_ADDRESS = '127.0.0.11';

const ANY = 255;
const UPSTREAM_TIMEOUT_MS = 3000;
const TCP_IDLE_MS = 10_000;
const MAX_TCP_MESSAGE = 65535;

interface Listener {
  udp: dgram.Socket;
  tcp: net.Server;
  connections: Set<net.Socket>;
}

function splitUpstream(upstream: string): { host: string; port: number } {
  const m = /^(\d{1,3}(?:\.\d{1,3}){3})(?::(\d{1,5}))?$/.exec(upstream);
  return m ? { host: m[1], port: m[2] ? Number(m[2]) : 53 } : { host: upstream, port: 53 };
}

/** Sends a query to one upstream over UDP and resolves with its answer (undefined on timeout or error). */
function forwardUdp(query: Buffer, upstream: string): Promise<Buffer | undefined> {
  const { host, port } = splitUpstream(upstream);
  return new Promise((resolve) => {
    const socket = dgram.createSocket('udp4');
    const done = (answer: Buffer | undefined) => {
      clearTimeout(timer);
      socket.close();
      resolve(answer);
    };
    const timer = setTimeout(() => done(undefined), UPSTREAM_TIMEOUT_MS);
    socket.on('error', () => done(undefined));
    socket.on('message', (msg) => {
      // Only the answer to this query (same id) counts.
      if (msg.length >= 2 && msg.readUInt16BE(0) === query.readUInt16BE(0)) done(msg);
    });
    socket.send(query, port, host, (err) => {
      if (err) done(undefined);
    });
  });
}

/** Sends a query to one upstream over TCP (2-byte length framing). */
function forwardTcp(query: Buffer, upstream: string): Promise<Buffer | undefined> {
  const { host, port } = splitUpstream(upstream);
  return new Promise((resolve) => {
    const socket = net.connect({ host, port });
    let buffered = Buffer.alloc(0);
    const done = (answer: Buffer | undefined) => {
      clearTimeout(timer);
      socket.destroy();
      resolve(answer);
    };
    const timer = setTimeout(() => done(undefined), UPSTREAM_TIMEOUT_MS);
    socket.on('error', () => done(undefined));
    socket.on('close', () => done(undefined));
    socket.on('connect', () => {
      const len = Buffer.alloc(2);
      len.writeUInt16BE(query.length, 0);
      socket.write(Buffer.concat([len, query]));
    });
    socket.on('data', (chunk: Buffer) => {
      buffered = Buffer.concat([buffered, chunk]);
      if (buffered.length >= 2 && buffered.length >= 2 + buffered.readUInt16BE(0)) done(buffered.subarray(2, 2 + buffered.readUInt16BE(0)));
    });
  });
}

/**
 * The machine's resolvers (BERTH_DNS_UPSTREAM, a comma-separated list of ip[:port], overrides
 * /etc/resolv.conf's IPv4 nameservers), read at each forward: resolv.conf may change while containers run.
 */
export function machineResolvers(): string[] {
  const env = process.env.BERTH_DNS_UPSTREAM;
  if (env) return env.split(',').map((s) => s.trim()).filter(Boolean);
  try {
    return readFileSync('/etc/resolv.conf', 'utf8')
      .split('\n')
      .map((l) => l.trim().split(/\s+/))
      .filter(([k, v]) => k === 'nameserver' && v && !v.includes(':'))
      .map(([, v]) => v);
  } catch {
    return [];
  }
}

/** The answer to one query: from the engine's names, else from the first upstream that answers. */
export async function answerQuery(query: Buffer, answers: DnsAnswers, transport: 'udp' | 'tcp'): Promise<Buffer | undefined> {
  const q = parseQuery(query);
  if (!q) return buildError(query, RCODE_FORMERR);
  if (q.qclass === CLASS_IN && (q.type === TYPE_A || q.type === TYPE_AAAA || q.type === ANY)) {
    // Awaited: behind an agent, the engine's answers come back over the connection as promises.
    const addresses = await answers.lookup(q.name);
    // A known name is answered here even when it has no address of the asked family (an empty answer, not a
    // forward): AAAA with the IPv6 addresses of containers on IPv6 networks, A with the IPv4 ones.
    if (addresses) {
      const wanted = q.type === ANY ? addresses : addresses.filter((a) => a.includes(':') === (q.type === TYPE_AAAA));
      return buildAnswer(query, q, wanted);
    }
  }
  // Over a remote Host the engine's answers come back as promises.
  for (const upstream of (await answers.upstreams()) ?? machineResolvers()) {
    const answer = await (transport === 'tcp' ? forwardTcp(query, upstream) : forwardUdp(query, upstream));
    if (answer) return answer;
  }
  return buildError(query, RCODE_SERVFAIL);
}

export class DnsServers {
  private readonly listeners = new Map<string, Listener>();
  observer: DnsObserver | undefined;

  /** The answer, once the observer has seen its addresses (an observer's failure is logged, the answer goes). */
  private async observed(containerId: string, answer: Buffer | undefined): Promise<Buffer | undefined> {
    const observer = this.observer;
    if (!answer || !observer) return answer;
    const parsed = parseAnswerAddresses(answer);
    if (!parsed || parsed.records.length === 0) return answer;
    await observer(containerId, parsed.name, parsed.records).catch((err: unknown) => {
      log.warn('a DNS answer could not be given to the sandbox policy', { id: containerId, error: err instanceof Error ? err.message : String(err) });
    });
    return answer;
  }

  /** Opens the container's listeners (replacing earlier ones of the same container). */
  async start(containerId: string, pid: number, answers: DnsAnswers): Promise<void> {
    this.stop(containerId);
    const sys = netnsAddon();
    if (!sys) throw new Error('the embedded DNS server needs the netns addon (daemon/native/netns): build it with npm run build:native');
    const udpFd = sys.bindInNetns(pid, false, EMBEDDED_DNS_ADDRESS, 53);
    let tcpFd: number;
    try {
      tcpFd = sys.bindInNetns(pid, true, EMBEDDED_DNS_ADDRESS, 53);
    } catch (err) {
      closeFd(udpFd);
      throw err;
    }
    const udp = dgram.createSocket('udp4');
    const tcp = net.createServer();
    const connections = new Set<net.Socket>();
    const listener: Listener = { udp, tcp, connections };
    this.listeners.set(containerId, listener);
    try {
      await new Promise<void>((resolve, reject) => {
        udp.once('error', reject);
        udp.bind({ fd: udpFd }, () => {
          udp.off('error', reject);
          resolve();
        });
      });
      await new Promise<void>((resolve, reject) => {
        tcp.once('error', reject);
        tcp.listen({ fd: tcpFd }, () => {
          tcp.off('error', reject);
          resolve();
        });
      });
    } catch (err) {
      this.stop(containerId);
      throw err;
    }
    udp.on('error', (err) => log.warn('embedded DNS (udp) error', { id: containerId, error: err.message }));
    udp.on('message', (msg, rinfo) => {
      void answerQuery(msg, answers, 'udp').then((answer) => this.observed(containerId, answer)).then((answer) => {
        if (answer && this.listeners.get(containerId) === listener) udp.send(answer, rinfo.port, rinfo.address, () => undefined);
      });
    });
    tcp.on('error', (err) => log.warn('embedded DNS (tcp) error', { id: containerId, error: err.message }));
    tcp.on('connection', (socket) => this.serveTcp(containerId, socket, answers, connections));
  }

  private serveTcp(containerId: string, socket: net.Socket, answers: DnsAnswers, connections: Set<net.Socket>): void {
    connections.add(socket);
    socket.setTimeout(TCP_IDLE_MS, () => socket.destroy());
    socket.on('error', () => socket.destroy());
    socket.on('close', () => connections.delete(socket));
    let buffered = Buffer.alloc(0);
    socket.on('data', (chunk: Buffer) => {
      buffered = Buffer.concat([buffered, chunk]);
      if (buffered.length > MAX_TCP_MESSAGE + 2) return socket.destroy();
      while (buffered.length >= 2 && buffered.length >= 2 + buffered.readUInt16BE(0)) {
        const query = buffered.subarray(2, 2 + buffered.readUInt16BE(0));
        buffered = buffered.subarray(2 + query.length);
        void answerQuery(Buffer.from(query), answers, 'tcp').then((answer) => this.observed(containerId, answer)).then((answer) => {
          if (!answer || socket.destroyed) return;
          const len = Buffer.alloc(2);
          len.writeUInt16BE(answer.length, 0);
          socket.write(Buffer.concat([len, answer]));
        });
      }
    });
  }

  /** Closes the container's listeners (and with them the daemon's hold on its namespace). */
  stop(containerId: string): void {
    const listener = this.listeners.get(containerId);
    if (!listener) return;
    this.listeners.delete(containerId);
    try {
      listener.udp.close();
    } catch {
      // not bound yet: nothing to close
    }
    listener.tcp.close();
    for (const socket of listener.connections) socket.destroy();
  }

  /** How many containers are served (for tests of leaks). */
  get size(): number {
    return this.listeners.size;
  }
}

function closeFd(fd: number): void {
  try {
    closeSync(fd);
  } catch {
    // already closed
  }
}
