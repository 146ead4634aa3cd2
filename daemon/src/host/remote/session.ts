/**
 * One session of the agent protocol over a byte stream (frames.ts): the handshake, calls with ids and typed
 * errors, and values that cross by reference: byte and value streams (multiplexed as channels with
 * credit-based flow control), async iterables, abort signals, callbacks and flags.
 *
 * Values are encoded as JSON in which objects tagged with the key `$$` stand for what JSON cannot carry
 * (undefined, bigint, buffers, typed arrays, dates, errors, maps, sets, streams, iterables, signals,
 * functions, flags, and the custom types a session is given). So any method whose arguments and results are
 * made of these can be called remotely without a description of its streams.
 *
 * Flow control: each side may send INITIAL_WINDOW bytes on a stream before it hears a Credit; the receiver
 * gives credit back as its consumer takes what arrived. What a slow consumer leaves unread stays queued on its
 * own stream (at most a window), and frames of every other stream keep flowing.
 *
 * Lifetimes: a function, signal or flag sent to the peer is held until the peer's proxy of it is collected
 * (Release) or the session closes. Streams end with End or Reset from either side. When the session closes,
 * pending calls fail with Unavailable, streams are destroyed, and signals given to the peer's calls abort.
 */
import { randomBytes } from 'node:crypto';
import { EventEmitter } from 'node:events';
import { Readable, Writable, type Duplex } from 'node:stream';
import { FrameReader, Kind, MAGIC, MAX_DATA, ProtocolError, frame } from './frames.js';
import { decodeError, encodeError, type ErrorFields } from './errors.js';
import { Unavailable } from '../../errors.js';

export const PROTOCOL_VERSION = 1;
export const INITIAL_WINDOW = 256 * 1024;

export interface Hello {
  protocol: number;
  /** The software version of the side that sent it (the agent's: berthd's version). */
  version: string;
  /** Chosen by the client for each connection; the server echoes it, so a stale answer is told apart. */
  session: string;
  [field: string]: unknown;
}

/** Runs a call of the peer's. `target` is the method's name; a rejection crosses as a typed error. */
export type CallHandler = (target: string, args: unknown[], signal: AbortSignal) => unknown;

/** A type that crosses as data: `encode` gives something encodable, `decode` the value again. */
export interface CustomType {
  name: string;
  test(value: unknown): boolean;
  encode(value: any): unknown;
  decode(data: any): unknown;
}

export interface SessionOptions {
  role: 'client' | 'server';
  version: string;
  /** More fields of this side's hello (the agent's boot id, its kernel...). */
  hello?: Record<string, unknown>;
  handler?: CallHandler;
  types?: CustomType[];
}

/**
 * A synchronous predicate that crosses as a flag: the peer's copy answers from a boolean that this side
 * sets once `predicate` says true (it asks every `pollMs`). For options such as a log reader's `until`,
 * read synchronously on the other side.
 */
export class Flag {
  constructor(readonly predicate: () => boolean, readonly pollMs = 200) {}
}

/**
 * Marks a stream that is written to on the other side. A stream that is only Writable crosses as a sink by
 * itself; a Duplex (a PassThrough, a socket) crosses as a Readable unless marked so.
 */
export class Sink {
  constructor(readonly stream: Writable) {}
}

const markedSinks = new WeakSet<object>();
const markedHandles = new WeakSet<object>();
/** The id a handle of the peer's carries here (not enumerable: it does not show in the handle's data). */
const HANDLE = Symbol('berth.handle');

/**
 * Marks an object as a handle: it crosses as a copy of its data, and when that copy comes back in a later
 * call, the other side gets this very object again (a staged layer that the store knows by identity).
 */
export function markHandle(object: object): void {
  markedHandles.add(object);
}

/** Marks a stream as a Sink wherever it is encoded (without replacing it in the object that holds it). */
export function markSink(stream: Writable): void {
  markedSinks.add(stream);
}

type Tagged = { $$: string; [k: string]: unknown };

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

const finalizer = new FinalizationRegistry<{ session: WeakRef<Session>; id: number; generation: number }>(({ session, id, generation }) => {
  session.deref()?.release(id, generation);
});

export class Session extends EventEmitter {
  readonly ready: Promise<Hello>;
  private resolveReady!: (hello: Hello) => void;
  private rejectReady!: (err: Error) => void;
  private peer?: Hello;
  private readonly sessionId: string;
  private readonly reader: FrameReader;
  private nextId: number;
  private closedWith?: Error;
  private readonly self = new WeakRef(this);
  /** Counts the peers a server session has served over one stream (a serial port outlives its clients). */
  private generation = 0;

  private readonly pending = new Map<number, PendingCall>();
  private readonly incoming = new Map<number, AbortController>();
  private readonly channels = new Map<number, Channel>();
  private readonly functions = new Map<number, (...args: unknown[]) => unknown>();
  private readonly handles = new Map<number, object>();
  private readonly signals = new Map<number, { signal: AbortSignal; listener: () => void }>();
  private readonly remoteSignals = new Map<number, AbortController>();
  private readonly flags = new Map<number, NodeJS.Timeout>();
  private readonly remoteFlags = new Map<number, { value: boolean }>();

  constructor(private readonly stream: Duplex, private readonly opts: SessionOptions) {
    super();
    this.nextId = opts.role === 'client' ? 1 : 2;
    this.sessionId = randomBytes(8).toString('hex');
    this.ready = new Promise((resolve, reject) => {
      this.resolveReady = resolve;
      this.rejectReady = reject;
    });
    this.ready.catch(() => {});
    this.reader = new FrameReader((channel, kind, payload) => this.onFrame(channel, kind, payload));
    stream.on('data', (chunk: Buffer) => {
      try {
        this.reader.push(chunk);
      } catch (err) {
        this.close(err as Error);
      }
    });
    stream.on('end', () => this.close(new Unavailable('the agent connection ended')));
    stream.on('close', () => this.close(new Unavailable('the agent connection closed')));
    stream.on('error', (err) => this.close(new Unavailable(`the agent connection failed: ${err.message}`, { cause: err })));
    if (opts.role === 'client') this.sendHello({ session: this.sessionId });
  }

  get closed(): boolean {
    return this.closedWith !== undefined;
  }

  get peerHello(): Hello | undefined {
    return this.peer;
  }

  /** Calls `target` on the peer. With `signal`, an abort cancels the call there and rejects here. */
  async call(target: string | number, args: unknown[], signal?: AbortSignal): Promise<unknown> {
    await this.ready;
    if (this.closedWith) throw this.closedWith;
    signal?.throwIfAborted();
    const id = this.allocate();
    const after: Array<() => void> = [];
    const payload = this.encode({ t: target, a: args }, after);
    return new Promise((resolve, reject) => {
      let onAbort: (() => void) | undefined;
      const done = () => {
        this.pending.delete(id);
        if (onAbort) signal!.removeEventListener('abort', onAbort);
      };
      this.pending.set(id, {
        resolve: (v) => { done(); resolve(v); },
        reject: (e) => { done(); reject(e); },
      });
      if (signal) {
        onAbort = () => {
          this.send(id, Kind.Cancel);
          done();
          reject(signal.reason);
        };
        signal.addEventListener('abort', onAbort, { once: true });
      }
      this.send(id, Kind.Call, payload);
      for (const start of after) start();
    });
  }

  /** Ends the session: pending calls fail, streams are destroyed, the byte stream is closed. */
  close(err: Error = new Unavailable('the agent session was closed')): void {
    if (this.closedWith) return;
    this.closedWith = err;
    this.rejectReady(err);
    this.drop(err);
    this.stream.destroy();
    this.emit('close', err);
  }

  /** Lets go of everything the session holds for its peer: calls, streams, callbacks, signals, flags. */
  private drop(err: Error): void {
    for (const call of [...this.pending.values()]) call.reject(err);
    this.pending.clear();
    for (const controller of this.incoming.values()) controller.abort(err);
    this.incoming.clear();
    for (const channel of [...this.channels.values()]) this.closeChannel(channel, err);
    this.channels.clear();
    this.functions.clear();
    this.handles.clear();
    for (const { signal, listener } of this.signals.values()) signal.removeEventListener('abort', listener);
    this.signals.clear();
    for (const controller of this.remoteSignals.values()) controller.abort(err);
    this.remoteSignals.clear();
    for (const timer of this.flags.values()) clearInterval(timer);
    this.flags.clear();
    this.remoteFlags.clear();
  }

  /** Called when a proxy of the peer's function, signal or flag was collected. */
  release(id: number, generation: number): void {
    if (generation !== this.generation) return;
    this.remoteSignals.delete(id);
    this.remoteFlags.delete(id);
    if (!this.closedWith) this.send(id, Kind.Release);
  }

  // --- frames in -------------------------------------------------------------------------------------------

  private onFrame(channel: number, kind: Kind, payload: Buffer): void {
    if (this.closedWith) return;
    if (!this.peer) {
      if (kind === Kind.Hello) this.onHello(payload);
      // Anything else before the handshake is left over from an earlier connection.
      return;
    }
    switch (kind) {
      case Kind.Call:
        return this.onCall(channel, payload);
      case Kind.Result:
      case Kind.Error: {
        const call = this.pending.get(channel);
        if (!call) return;
        const value = this.decode(payload);
        if (kind === Kind.Result) call.resolve(value);
        else call.reject(value instanceof Error ? value : new Error(String(value)));
        return;
      }
      case Kind.Cancel:
        this.incoming.get(channel)?.abort(new Unavailable('the caller cancelled the call'));
        this.incoming.delete(channel);
        return;
      case Kind.Data: {
        const ch = this.channels.get(channel);
        if (ch?.kind === 'in') ch.onData(payload);
        return;
      }
      case Kind.Credit: {
        const ch = this.channels.get(channel);
        if (ch?.kind === 'out') {
          ch.credit += payload.readUInt32BE(0);
          const waiters = ch.waiters.splice(0);
          for (const wake of waiters) wake();
        }
        return;
      }
      case Kind.End: {
        const ch = this.channels.get(channel);
        if (ch?.kind === 'in') {
          this.channels.delete(channel);
          ch.onEnd();
        }
        return;
      }
      case Kind.Reset: {
        const ch = this.channels.get(channel);
        if (!ch) return;
        this.channels.delete(channel);
        const err = payload.length ? (this.decode(payload) as Error) : undefined;
        this.closeChannel(ch, err);
        return;
      }
      case Kind.Abort: {
        const controller = this.remoteSignals.get(channel);
        this.remoteSignals.delete(channel);
        controller?.abort(payload.length ? this.decode(payload) : undefined);
        return;
      }
      case Kind.Release: {
        this.functions.delete(channel);
        this.handles.delete(channel);
        const sig = this.signals.get(channel);
        if (sig) sig.signal.removeEventListener('abort', sig.listener);
        this.signals.delete(channel);
        const timer = this.flags.get(channel);
        if (timer) clearInterval(timer);
        this.flags.delete(channel);
        return;
      }
      case Kind.Set: {
        const flag = this.remoteFlags.get(channel);
        if (flag) flag.value = true;
        return;
      }
      case Kind.Hello:
        // A second hello on the same stream: on a serial port, a new daemon came while the old one's end went
        // unnoticed. The server starts over with it; a client has no reason to see one.
        if (this.opts.role === 'client') return this.close(new ProtocolError('the agent said hello twice'));
        this.generation++;
        this.drop(new Unavailable('another daemon connected'));
        this.peer = undefined;
        this.nextId = 2;
        return this.onHello(payload);
      default:
        return this.close(new ProtocolError(`unknown frame kind ${kind}`));
    }
  }

  private onHello(payload: Buffer): void {
    let hello: Hello;
    try {
      hello = JSON.parse(payload.toString('utf8')) as Hello;
    } catch {
      this.reader.synced = false;
      return;
    }
    if (this.opts.role === 'client') {
      // A hello for another session is an answer to an earlier connection: look for the next one.
      if (hello.session !== this.sessionId) {
        this.reader.synced = false;
        return;
      }
      if (hello.protocol !== PROTOCOL_VERSION) {
        return this.close(new Unavailable(`the agent (version ${hello.version}) speaks protocol ${hello.protocol}; this daemon speaks ${PROTOCOL_VERSION}`));
      }
      if (typeof hello.error === 'string') return this.close(new Unavailable(`the agent refused the session: ${hello.error}`));
      this.peer = hello;
      this.resolveReady(hello);
      return;
    }
    if (hello.protocol !== PROTOCOL_VERSION) {
      this.sendHello({ session: hello.session, error: `protocol ${hello.protocol} is not spoken here (${PROTOCOL_VERSION} is)` });
      return this.close(new Unavailable(`the daemon (version ${hello.version}) speaks protocol ${hello.protocol}`));
    }
    this.peer = hello;
    this.sendHello({ session: hello.session });
    this.resolveReady(hello);
    this.emit('hello', hello);
  }

  private sendHello(fields: Record<string, unknown>): void {
    const hello = { ...this.opts.hello, protocol: PROTOCOL_VERSION, version: this.opts.version, ...fields };
    this.stream.write(Buffer.concat([MAGIC, frame(0, Kind.Hello, Buffer.from(JSON.stringify(hello)))]));
  }

  private onCall(id: number, payload: Buffer): void {
    const controller = new AbortController();
    this.incoming.set(id, controller);
    let target: string | number;
    let args: unknown[];
    try {
      ({ t: target, a: args } = this.decode(payload) as { t: string | number; a: unknown[] });
    } catch (err) {
      this.incoming.delete(id);
      this.send(id, Kind.Error, this.encode(err, []));
      return;
    }
    const run = async (): Promise<unknown> => {
      if (typeof target === 'number') {
        const fn = this.functions.get(target);
        if (!fn) throw new Unavailable('the callback was released');
        return fn(...args);
      }
      if (!this.opts.handler) throw new Unavailable('this side serves no calls');
      return this.opts.handler(target, args, controller.signal);
    };
    run().then(
      (result) => {
        if (this.incoming.get(id) !== controller || this.closedWith) return;
        this.incoming.delete(id);
        const after: Array<() => void> = [];
        const encoded = this.encode(result, after);
        this.send(id, Kind.Result, encoded);
        for (const start of after) start();
      },
      (err) => {
        if (this.incoming.get(id) !== controller || this.closedWith) return;
        this.incoming.delete(id);
        this.send(id, Kind.Error, this.encode(err instanceof Error ? err : new Error(String(err)), []));
      },
    );
  }

  // --- frames out ------------------------------------------------------------------------------------------

  private send(channel: number, kind: Kind, payload?: Buffer): void {
    if (this.closedWith) return;
    this.stream.write(frame(channel, kind, payload));
  }

  private allocate(): number {
    const id = this.nextId;
    this.nextId += 2;
    return id;
  }

  private closeChannel(channel: Channel, err?: Error): void {
    if (channel.kind === 'out') {
      channel.closed = true;
      const waiters = channel.waiters.splice(0);
      for (const wake of waiters) wake();
    }
    channel.onReset(err);
  }

  /** Sends one payload on an outbound stream once it has credit (a payload may overdraw it; never split here). */
  private async sendOn(id: number, channel: OutboundChannel, payload: Buffer): Promise<boolean> {
    while (!channel.closed && channel.credit <= 0) await new Promise<void>((wake) => channel.waiters.push(wake));
    if (channel.closed || this.closedWith) return false;
    channel.credit -= payload.length;
    this.send(id, Kind.Data, payload);
    return true;
  }

  private async sendBytes(id: number, channel: OutboundChannel, chunk: Buffer): Promise<boolean> {
    for (let at = 0; at < chunk.length; at += MAX_DATA) {
      if (!(await this.sendOn(id, channel, chunk.subarray(at, at + MAX_DATA)))) return false;
    }
    return true;
  }

  private outbound(id: number): OutboundChannel {
    const channel: OutboundChannel = { kind: 'out', credit: INITIAL_WINDOW, closed: false, waiters: [], onReset: () => {} };
    this.channels.set(id, channel);
    return channel;
  }

  private finishOutbound(id: number, channel: OutboundChannel, err?: unknown): void {
    if (channel.closed) return;
    channel.closed = true;
    this.channels.delete(id);
    if (err === undefined) this.send(id, Kind.End);
    else this.send(id, Kind.Reset, this.encode(err instanceof Error ? err : new Error(String(err)), []));
  }

  /** Sends what `source` yields on stream `id` (bytes, or encoded values in object mode). */
  private pump(id: number, channel: OutboundChannel, source: AsyncIterable<unknown>, objectMode: boolean, stop: () => void): void {
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
  private inboundReadable(id: number, objectMode: boolean): Readable {
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
  private inboundSink(id: number, sink: Writable, objectMode: boolean): void {
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
  private outboundWritable(id: number, objectMode: boolean): Writable {
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

  // --- values ----------------------------------------------------------------------------------------------

  private encodeValue(value: unknown): Buffer {
    const after: Array<() => void> = [];
    const encoded = this.encode(value, after);
    // Streams inside stream items start once the item is out.
    if (after.length) queueMicrotask(() => { for (const start of after) start(); });
    return encoded;
  }

  /**
   * A value's payload: its JSON, or, when it holds buffers, a 0 byte, the JSON's length (u32), the JSON, and
   * the buffers' bytes one after the other (a `b` tag names its buffer's place), so that bytes are not
   * base64 in JSON.
   */
  private encode(value: unknown, after: Array<() => void>): Buffer {
    const outer = this.attaching;
    const bins = { bufs: [] as Buffer[], length: 0 };
    this.attaching = bins;
    try {
      const json = Buffer.from(JSON.stringify(this.enc(value, after)));
      if (bins.bufs.length === 0) return json;
      const head = Buffer.allocUnsafe(5);
      head.writeUInt8(0, 0);
      head.writeUInt32BE(json.length, 1);
      return Buffer.concat([head, json, ...bins.bufs]);
    } finally {
      this.attaching = outer;
    }
  }

  private decode(payload: Buffer): unknown {
    if (payload.length === 0 || payload[0] !== 0) return this.dec(JSON.parse(payload.toString('utf8')));
    const jsonLength = payload.readUInt32BE(1);
    const outer = this.attached;
    this.attached = { bytes: payload.subarray(5 + jsonLength) };
    try {
      return this.dec(JSON.parse(payload.subarray(5, 5 + jsonLength).toString('utf8')));
    } finally {
      this.attached = outer;
    }
  }

  /** Buffers of the value being encoded, and the bytes of those of the value being decoded. */
  private attaching?: { bufs: Buffer[]; length: number };
  private attached?: { bytes: Buffer };

  private enc(v: unknown, after: Array<() => void>): unknown {
    switch (typeof v) {
      case 'undefined':
        return { $$: 'u' };
      case 'boolean':
      case 'string':
        return v;
      case 'number':
        return Number.isFinite(v) ? v : { $$: 'num', v: String(v) };
      case 'bigint':
        return { $$: 'n', v: v.toString() };
      case 'function': {
        const id = this.allocate();
        this.functions.set(id, v as (...args: unknown[]) => unknown);
        return { $$: 'f', id };
      }
      case 'symbol':
        return { $$: 'u' };
    }
    if (v === null) return null;
    const obj = v as object;
    if (Buffer.isBuffer(obj)) {
      if (!this.attaching || obj.length < 48) return { $$: 'b', v: obj.toString('base64') };
      const offset = this.attaching.length;
      this.attaching.bufs.push(obj);
      this.attaching.length += obj.length;
      return { $$: 'b', o: offset, n: obj.length };
    }
    if (ArrayBuffer.isView(obj)) {
      const bytes = Buffer.from(obj.buffer, obj.byteOffset, obj.byteLength);
      return { $$: 'ta', k: obj.constructor.name, v: bytes.toString('base64') };
    }
    for (const type of this.opts.types ?? []) {
      if (type.test(obj)) return { $$: 'x', k: type.name, v: this.enc(type.encode(obj), after) };
    }
    if (obj instanceof Error) {
      const { name, message, fields } = encodeError(obj);
      const encodedFields: Record<string, unknown> = {};
      for (const [k, f] of Object.entries(fields)) encodedFields[k] = this.enc(f, after);
      return { $$: 'e', name, message, fields: encodedFields, cause: obj.cause instanceof Error ? this.enc(obj.cause, after) : undefined };
    }
    if (obj instanceof Date) return { $$: 'd', v: obj.toISOString() };
    if (obj instanceof Promise) {
      // Settles on the other side as a call would: the id takes a Result or an Error frame.
      const id = this.allocate();
      after.push(() => {
        obj.then(
          (value) => {
            const more: Array<() => void> = [];
            const encoded = this.encode(value, more);
            this.send(id, Kind.Result, encoded);
            for (const start of more) start();
          },
          (err) => this.send(id, Kind.Error, this.encode(err instanceof Error ? err : new Error(String(err)), [])),
        );
      });
      return { $$: 'pr', id };
    }
    if (obj instanceof AbortSignal) {
      if (obj.aborted) return { $$: 's', aborted: true, reason: this.enc(obj.reason, after) };
      const id = this.allocate();
      const listener = () => {
        this.signals.delete(id);
        this.send(id, Kind.Abort, this.encode(obj.reason, []));
      };
      obj.addEventListener('abort', listener, { once: true });
      this.signals.set(id, { signal: obj, listener });
      return { $$: 's', id };
    }
    if (obj instanceof Flag) {
      const id = this.allocate();
      if (obj.predicate()) return { $$: 'p', set: true };
      const timer = setInterval(() => {
        if (!obj.predicate()) return;
        clearInterval(timer);
        this.flags.delete(id);
        this.send(id, Kind.Set);
      }, obj.pollMs);
      timer.unref();
      this.flags.set(id, timer);
      return { $$: 'p', id };
    }
    if (obj instanceof Sink) return this.encSink(obj.stream, after);
    const handleId = (obj as { [HANDLE]?: number })[HANDLE];
    if (handleId !== undefined) return { $$: 'hr', id: handleId };
    if (markedHandles.has(obj)) {
      const id = this.allocate();
      this.handles.set(id, obj);
      const data: Record<string, unknown> = {};
      for (const key of Object.keys(obj)) data[key] = this.enc((obj as Record<string, unknown>)[key], after);
      return { $$: 'h', id, v: data };
    }
    if (markedSinks.has(obj)) return this.encSink(obj as Writable, after);
    // A stream of another implementation (streamx, as tar-stream's entries are) crosses as bytes.
    if (!(obj instanceof Readable) && typeof (obj as Readable).pipe === 'function' && typeof (obj as Readable).read === 'function' && Symbol.asyncIterator in obj) {
      return this.enc(Readable.from(obj as AsyncIterable<Buffer>, { objectMode: false }), after);
    }
    if (obj instanceof Readable) {
      const id = this.allocate();
      const channel = this.outbound(id);
      const objectMode = obj.readableObjectMode;
      after.push(() => this.pump(id, channel, obj, objectMode, () => obj.destroy()));
      return { $$: 'r', id, o: objectMode };
    }
    if (obj instanceof Writable) return this.encSink(obj, after);
    if (Array.isArray(obj)) return obj.map((item) => this.enc(item, after));
    if (obj instanceof Map) return { $$: 'm', v: [...obj].map(([k, item]) => [this.enc(k, after), this.enc(item, after)]) };
    if (obj instanceof Set) return { $$: 'set', v: [...obj].map((item) => this.enc(item, after)) };
    if (Symbol.asyncIterator in obj) {
      const id = this.allocate();
      const channel = this.outbound(id);
      const iterator = (obj as AsyncIterable<unknown>)[Symbol.asyncIterator]();
      const iterable = { [Symbol.asyncIterator]: () => iterator };
      after.push(() => this.pump(id, channel, iterable, true, () => void iterator.return?.()));
      return { $$: 'i', id };
    }
    const out: Record<string, unknown> = {};
    for (const key of Object.keys(obj)) out[key] = this.enc((obj as Record<string, unknown>)[key], after);
    // Methods of a class instance (an AttachStreams with close(), say) cross as callbacks bound to it.
    for (let proto = Object.getPrototypeOf(obj); proto && proto !== Object.prototype; proto = Object.getPrototypeOf(proto)) {
      for (const key of Object.getOwnPropertyNames(proto)) {
        if (key === 'constructor' || key in out) continue;
        const desc = Object.getOwnPropertyDescriptor(proto, key);
        if (desc && typeof desc.value === 'function') out[key] = this.enc(desc.value.bind(obj), after);
        else if (desc?.get) out[key] = this.enc((obj as Record<string, unknown>)[key], after);
      }
    }
    return '$$' in obj ? { $$: 'o', v: out } : out;
  }

  private encSink(sink: Writable, _after: Array<() => void>): Tagged {
    const id = this.allocate();
    this.inboundSink(id, sink, sink.writableObjectMode);
    return { $$: 'w', id, o: sink.writableObjectMode };
  }

  private dec(v: unknown): unknown {
    if (v === null || typeof v !== 'object') return v;
    if (Array.isArray(v)) return v.map((item) => this.dec(item));
    const tagged = v as Tagged;
    if (typeof tagged.$$ !== 'string') {
      const out: Record<string, unknown> = {};
      for (const [k, item] of Object.entries(tagged)) out[k] = this.dec(item);
      return out;
    }
    switch (tagged.$$) {
      case 'u':
        return undefined;
      case 'num':
        return Number(tagged.v);
      case 'n':
        return BigInt(tagged.v as string);
      case 'b': {
        if (typeof tagged.v === 'string') return Buffer.from(tagged.v, 'base64');
        const attached = this.attached;
        if (!attached) throw new ProtocolError('a buffer outside the value that carries it');
        const offset = tagged.o as number;
        // A copy: the receiver owns what it gets (a log block's consumer may write into its buffer).
        return Buffer.from(attached.bytes.subarray(offset, offset + (tagged.n as number)));
      }
      case 'ta': {
        const bytes = Buffer.from(tagged.v as string, 'base64');
        const Ctor = (globalThis as unknown as Record<string, new (b: ArrayBuffer, o: number, n: number) => ArrayBufferView>)[tagged.k as string];
        if (typeof Ctor !== 'function') return bytes;
        const aligned = new Uint8Array(bytes.length);
        aligned.set(bytes);
        const per = (Ctor as unknown as { BYTES_PER_ELEMENT: number }).BYTES_PER_ELEMENT;
        return new Ctor(aligned.buffer, 0, bytes.length / per);
      }
      case 'd':
        return new Date(tagged.v as string);
      case 'o': {
        const out: Record<string, unknown> = {};
        for (const [k, item] of Object.entries(tagged.v as object)) out[k] = this.dec(item);
        return out;
      }
      case 'm':
        return new Map((tagged.v as Array<[unknown, unknown]>).map(([k, item]) => [this.dec(k), this.dec(item)]));
      case 'set':
        return new Set((tagged.v as unknown[]).map((item) => this.dec(item)));
      case 'x': {
        const type = this.opts.types?.find((t) => t.name === tagged.k);
        if (!type) throw new ProtocolError(`unknown type ${String(tagged.k)}`);
        return type.decode(this.dec(tagged.v));
      }
      case 'e': {
        const fields: ErrorFields = {};
        for (const [k, item] of Object.entries((tagged.fields as object) ?? {})) fields[k] = this.dec(item);
        const cause = tagged.cause ? this.dec(tagged.cause) : undefined;
        return decodeError(tagged.name as string, tagged.message as string, fields, cause);
      }
      case 'h': {
        const copy = this.dec(tagged.v) as object;
        Object.defineProperty(copy, HANDLE, { value: tagged.id, enumerable: false });
        finalizer.register(copy, { session: this.self, id: tagged.id as number, generation: this.generation });
        return copy;
      }
      case 'hr': {
        const original = this.handles.get(tagged.id as number);
        if (!original) throw new Unavailable('the handle was released');
        return original;
      }
      case 'pr': {
        const settled = new Promise((resolve, reject) => this.pending.set(tagged.id as number, {
          resolve: (v) => { this.pending.delete(tagged.id as number); resolve(v); },
          reject: (e) => { this.pending.delete(tagged.id as number); reject(e); },
        }));
        if (this.closedWith) this.pending.get(tagged.id as number)!.reject(this.closedWith);
        // Nobody may wait for it (an exec's exit after a detach): its failure is not unhandled.
        settled.catch(() => {});
        return settled;
      }
      case 'f': {
        const id = tagged.id as number;
        const proxy = (...args: unknown[]) => this.call(id, args);
        finalizer.register(proxy, { session: this.self, id, generation: this.generation });
        return proxy;
      }
      case 's': {
        if (tagged.aborted) return AbortSignal.abort(this.dec(tagged.reason));
        const controller = new AbortController();
        const id = tagged.id as number;
        if (this.closedWith) controller.abort(this.closedWith);
        else this.remoteSignals.set(id, controller);
        finalizer.register(controller.signal, { session: this.self, id, generation: this.generation });
        return controller.signal;
      }
      case 'p': {
        if (tagged.set) return () => true;
        const id = tagged.id as number;
        const state = { value: false };
        this.remoteFlags.set(id, state);
        const predicate = () => state.value;
        finalizer.register(predicate, { session: this.self, id, generation: this.generation });
        return predicate;
      }
      case 'r':
      case 'i':
        return this.inboundReadable(tagged.id as number, tagged.$$ === 'i' || Boolean(tagged.o));
      case 'w':
        return this.outboundWritable(tagged.id as number, Boolean(tagged.o));
      default:
        throw new ProtocolError(`unknown tag ${tagged.$$}`);
    }
  }
}
