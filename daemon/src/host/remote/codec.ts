/**
 * How values cross the agent protocol (session.ts): JSON in which objects tagged with the key `$$` stand for
 * what JSON cannot carry (undefined, bigint, buffers, typed arrays, dates, errors, maps, sets, streams,
 * iterables, signals, functions, flags, and the custom types a session is given).
 */
import { Readable, Writable } from 'node:stream';
import { Kind, ProtocolError } from './frames.js';
import { decodeError, encodeError, type ErrorFields } from './errors.js';
import { SessionStreams } from './streams.js';
import { Unavailable } from '../../errors.js';

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

interface Releasing {
  release(id: number, generation: number): void;
}

const finalizer = new FinalizationRegistry<{ session: WeakRef<Releasing>; id: number; generation: number }>(({ session, id, generation }) => {
  session.deref()?.release(id, generation);
});

export abstract class SessionCodec extends SessionStreams {
  private readonly self = new WeakRef<Releasing>(this);

  /** Called when a proxy of the peer's function, signal or flag was collected. */
  abstract release(id: number, generation: number): void;
  /** Calls `target` on the peer (a function of the peer's crosses as a proxy that calls it by id). */
  abstract call(target: string | number, args: unknown[], signal?: AbortSignal): Promise<unknown>;

  protected encodeValue(value: unknown): Buffer {
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
  protected encode(value: unknown, after: Array<() => void>): Buffer {
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

  protected decode(payload: Buffer): unknown {
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
