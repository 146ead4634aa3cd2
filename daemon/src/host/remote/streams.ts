/**
 * The state a session of the agent protocol (session.ts) keeps for its peer, and its streams: channels
 * multiplexed over the one byte stream, with credit-based flow control (each side may send INITIAL_WINDOW
 * bytes on a stream before it hears a Credit; the receiver gives credit back as its consumer takes what
 * arrived).
 */
import { EventEmitter } from 'node:events';
import { Readable, Writable, type Duplex } from 'node:stream';
import { Kind, MAX_DATA, frame } from './frames.js';
import { INITIAL_WINDOW, type SessionOptions } from './options.js';
import { Unavailable } from '../../errors.js';

interface OutboundChannel {
  kind: 'out';
  credit: number;
  closed: boolean;
  waiters: Array<() => void>;
  onReset(err?: Error): void;
}
interface InboundChannel {
  kind: 'in';
  onData(payload: Buffer): void;
  onEnd(): void;
  onReset(err?: Error): void;
}
type Channel = OutboundChannel | InboundChannel;

interface PendingCall {
  resolve(value: unknown): void;
  reject(err: Error): void;
}

export abstract class SessionStreams extends EventEmitter {
  protected nextId: number;
  protected closedWith?: Error;
  /** Counts the peers a server session has served over one stream (a serial port outlives its clients). */
  protected generation = 0;

  protected readonly pending = new Map<number, PendingCall>();
  protected readonly incoming = new Map<number, AbortController>();
  protected readonly channels = new Map<number, Channel>();
  protected readonly functions = new Map<number, (...args: unknown[]) => unknown>();
  protected readonly handles = new Map<number, object>();
  protected readonly signals = new Map<number, { signal: AbortSignal; listener: () => void }>();
  protected readonly remoteSignals = new Map<number, AbortController>();
  protected readonly flags = new Map<number, NodeJS.Timeout>();
  protected readonly remoteFlags = new Map<number, { value: boolean }>();

  constructor(protected readonly stream: Duplex, protected readonly opts: SessionOptions) {
    super();
    this.nextId = opts.role === 'client' ? 1 : 2;
  }

  protected abstract encode(value: unknown, after: Array<() => void>): Buffer;
  protected abstract decode(payload: Buffer): unknown;
  protected abstract encodeValue(value: unknown): Buffer;

  // --- frames out ------------------------------------------------------------------------------------------

  protected send(channel: number, kind: Kind, payload?: Buffer): void {
    if (this.closedWith) return;
    this.stream.write(frame(channel, kind, payload));
  }

  protected allocate(): number {
    const id = this.nextId;
    this.nextId += 2;
    return id;
  }

  protected closeChannel(channel: Channel, err?: Error): void {
    if (channel.kind === 'out') {
      channel.closed = true;
      const waiters = channel.waiters.splice(0);
      for (const wake of waiters) wake();
    }
    channel.onReset(err);
  }

  /** Sends one payload on an outbound stream once it has credit (a payload may overdraw it; never split here). */
  protected async sendOn(id: number, channel: OutboundChannel, payload: Buffer): Promise<boolean> {
    while (!channel.closed && channel.credit <= 0) await new Promise<void>((wake) => channel.waiters.push(wake));
    if (channel.closed || this.closedWith) return false;
    channel.credit -= payload.length;
    this.send(id, Kind.Data, payload);
    return true;
  }

  protected async sendBytes(id: number, channel: OutboundChannel, chunk: Buffer): Promise<boolean> {
    for (let at = 0; at < chunk.length; at += MAX_DATA) {
      if (!(await this.sendOn(id, channel, chunk.subarray(at, at + MAX_DATA)))) return false;
    }
    return true;
  }

  protected outbound(id: number): OutboundChannel {
    const channel: OutboundChannel = { kind: 'out', credit: INITIAL_WINDOW, closed: false, waiters: [], onReset: () => {} };
    this.channels.set(id, channel);
    return channel;
  }

  protected finishOutbound(id: number, channel: OutboundChannel, err?: unknown): void {
    if (channel.closed) return;
    channel.closed = true;
    this.channels.delete(id);
    if (err === undefined) this.send(id, Kind.End);
    else this.send(id, Kind.Reset, this.encode(err instanceof Error ? err : new Error(String(err)), []));
  }

  /** Sends what `source` yields on stream `id` (bytes, or encoded values in object mode). */
  protected pump(id: number, channel: OutboundChannel, source: AsyncIterable<unknown>, objectMode: boolean, stop: () => void): void {
    channel.onReset = () => stop();
    (async () => {
      try {
        for await (const item of source) {
          if (channel.closed) break;
          const ok = objectMode
            ? await this.sendOn(id, channel, this.encodeValue(item))
            : await this.sendBytes(id, channel, typeof item === 'string' ? Buffer.from(item) : (item as Buffer));
          if (!ok) break;
        }
        this.finishOutbound(id, channel);
      } catch (err) {
        this.finishOutbound(id, channel, err);
      }
    })();
  }

  /** A Readable fed by stream `id`, giving credit back as its consumer reads. */
  protected inboundReadable(id: number, objectMode: boolean): Readable {
    const queue: Array<{ value: unknown; size: number }> = [];
    let wanted = false;
    let ended = false;
    let owed = 0;
    const giveCredit = (size: number) => {
      owed += size;
      if (owed >= INITIAL_WINDOW / 4 || (queue.length === 0 && owed > 0)) {
        const credit = Buffer.allocUnsafe(4);
        credit.writeUInt32BE(owed, 0);
        owed = 0;
        if (this.channels.has(id)) this.send(id, Kind.Credit, credit);
      }
    };
    const drain = () => {
      while (wanted && queue.length) {
        const item = queue.shift()!;
        wanted = readable.push(item.value);
        giveCredit(item.size);
      }
      if (ended && queue.length === 0) readable.push(null);
    };
    const readable = new Readable({
      objectMode,
      read() {
        wanted = true;
        drain();
      },
      destroy: (err, callback) => {
        if (!ended && this.channels.get(id) === channel) {
          this.channels.delete(id);
          this.send(id, Kind.Reset);
        }
        ended = true;
        queue.length = 0;
        callback(err);
      },
    });
    const channel: InboundChannel = {
      kind: 'in',
      onData: (payload) => {
        queue.push({ value: objectMode ? this.decode(payload) : payload, size: payload.length });
        drain();
      },
      onEnd: () => {
        ended = true;
        drain();
      },
      onReset: (err) => {
        ended = true;
        queue.length = 0;
        readable.destroy(err ?? new Unavailable('the agent abandoned the stream'));
      },
    };
    this.channels.set(id, channel);
    return readable;
  }

  /** Writes what arrives on stream `id` into `sink`, giving credit back as the sink takes it. */
  protected inboundSink(id: number, sink: Writable, objectMode: boolean): void {
    let done = false;
    const channel: InboundChannel = {
      kind: 'in',
      onData: (payload) => {
        const value = objectMode ? this.decode(payload) : payload;
        sink.write(value, () => {
          if (!this.channels.has(id)) return;
          const credit = Buffer.allocUnsafe(4);
          credit.writeUInt32BE(payload.length, 0);
          this.send(id, Kind.Credit, credit);
        });
      },
      onEnd: () => {
        done = true;
        sink.end();
      },
      onReset: () => {
        done = true;
        sink.destroy();
      },
    };
    this.channels.set(id, channel);
    const gone = () => {
      if (done) return;
      done = true;
      if (this.channels.get(id) === channel) {
        this.channels.delete(id);
        this.send(id, Kind.Reset);
      }
    };
    sink.once('close', gone);
    sink.once('error', gone);
  }

  /** A Writable whose writes go to the peer's sink on stream `id`. */
  protected outboundWritable(id: number, objectMode: boolean): Writable {
    const channel = this.outbound(id);
    const writable = new Writable({
      objectMode,
      write: (chunk: unknown, _encoding, callback) => {
        const sent = objectMode
          ? this.sendOn(id, channel, this.encodeValue(chunk))
          : this.sendBytes(id, channel, typeof chunk === 'string' ? Buffer.from(chunk) : (chunk as Buffer));
        sent.then(() => callback(), callback);
      },
      final: (callback) => {
        this.finishOutbound(id, channel);
        callback();
      },
      destroy: (err, callback) => {
        if (!channel.closed) this.finishOutbound(id, channel, err ?? new Unavailable('the writer abandoned the stream'));
        callback(err);
      },
    });
    channel.onReset = () => {
      if (!writable.destroyed) writable.destroy();
    };
    return writable;
  }
}
