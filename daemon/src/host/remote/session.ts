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
import { type Duplex } from 'node:stream';
import { FrameReader, Kind, MAGIC, ProtocolError, frame } from './frames.js';
import { PROTOCOL_VERSION, type Hello, type SessionOptions } from './options.js';
import { SessionCodec } from './codec.js';
import { Unavailable } from '../../errors.js';

export { PROTOCOL_VERSION, INITIAL_WINDOW, type Hello, type CallHandler, type CustomType, type SessionOptions } from './options.js';
export { Flag, Sink, markHandle, markSink } from './codec.js';

export class Session extends SessionCodec {
  readonly ready: Promise<Hello>;
  private resolveReady!: (hello: Hello) => void;
  private rejectReady!: (err: Error) => void;
  private peer?: Hello;
  private readonly sessionId: string;
  private readonly reader: FrameReader;

  constructor(stream: Duplex, opts: SessionOptions) {
    super(stream, opts);
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
}
