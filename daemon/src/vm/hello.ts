/**
 * The guest's line handshake on the agent's channel, spoken by an image without the guest agent
 * (daemon/vm/guest/init): it proves the channel, the shares and the clock setting end to end. The guest
 * writes `berth-guest hello key=value...` when the host connects, then answers one line per command.
 */
import net from 'node:net';

export interface GuestHello {
  kernel: string;
  /** Seconds since the guest's kernel started, when it said hello. */
  uptime: number;
  /** Stages init went through before the channel was ready. */
  steps: number;
  modules: number;
  /** tag -> guest path of the mounted shares. */
  mounts: Record<string, string>;
  /** File system of the data disk. */
  data: string;
}

export function parseHello(line: string): GuestHello {
  if (!line.startsWith('berth-guest hello ')) throw new Error(`not a guest hello: ${line.slice(0, 200)}`);
  const kv: Record<string, string> = {};
  for (const word of line.slice('berth-guest hello '.length).trim().split(/\s+/)) {
    const eq = word.indexOf('=');
    if (eq > 0) kv[word.slice(0, eq)] = word.slice(eq + 1);
  }
  const mounts: Record<string, string> = {};
  for (const m of (kv.mounts ?? '').split(',').filter(Boolean)) {
    const colon = m.indexOf(':');
    mounts[m.slice(0, colon)] = m.slice(colon + 1);
  }
  return { kernel: kv.kernel ?? '', uptime: Number(kv.uptime), steps: Number(kv.steps), modules: Number(kv.modules), mounts, data: kv.data ?? '' };
}

export class GuestLineChannel {
  private buf = '';
  private waiters: Array<(line: string) => void> = [];
  private lines: string[] = [];
  private closed?: Error;

  private constructor(private readonly sock: net.Socket) {
    sock.setEncoding('utf8');
    sock.on('data', (chunk: string) => {
      this.buf += chunk;
      let nl: number;
      while ((nl = this.buf.indexOf('\n')) >= 0) {
        const line = this.buf.slice(0, nl);
        this.buf = this.buf.slice(nl + 1);
        const w = this.waiters.shift();
        if (w) w(line);
        else this.lines.push(line);
      }
    });
    sock.on('close', () => {
      this.closed = new Error('the guest channel closed');
    });
    sock.on('error', (err) => {
      this.closed = err;
    });
  }

  /** Connects to the host end of the agent's port (QEMU listens on it as soon as it starts). */
  static async connect(socketPath: string): Promise<GuestLineChannel> {
    const sock = net.connect(socketPath);
    await new Promise<void>((resolve, reject) => {
      sock.once('connect', resolve);
      sock.once('error', reject);
    });
    return new GuestLineChannel(sock);
  }

  readLine(timeoutMs: number): Promise<string> {
    const queued = this.lines.shift();
    if (queued !== undefined) return Promise.resolve(queued);
    if (this.closed) return Promise.reject(this.closed);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiters = this.waiters.filter((w) => w !== waiter);
        reject(new Error(`no line from the guest in ${timeoutMs} ms`));
      }, timeoutMs);
      const waiter = (line: string) => {
        clearTimeout(timer);
        resolve(line);
      };
      this.waiters.push(waiter);
    });
  }

  async hello(timeoutMs: number): Promise<GuestHello> {
    return parseHello(await this.readLine(timeoutMs));
  }

  async call(command: string, timeoutMs = 30_000): Promise<string> {
    this.sock.write(command + '\n');
    return await this.readLine(timeoutMs);
  }

  close(): void {
    this.sock.destroy();
  }
}
