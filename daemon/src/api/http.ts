import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Duplex, Readable, Writable } from 'node:stream';
import { InvalidParameter, TooLarge } from '../errors.js';
import { decodeAs, type Shape } from './bodies.js';
import type { ApiMinor } from './version.js';
import { formatVersion } from './version.js';

/** The largest JSON request body accepted; uploads (tars) are streamed and not bound by this. */
export const MAX_JSON_BODY = 4 * 1024 * 1024;

/** The media type of a Content-Type header, lowercased, without its parameters ('' when absent). */
export function mediaType(contentType: string | undefined): string {
  return (contentType ?? '').split(';')[0]!.trim().toLowerCase();
}

/**
 * The types a web page can send without a CORS preflight. A tar upload never comes with one of these from
 * a real client, so refusing them keeps a page from posting a body the engine would take.
 */
const SIMPLE_FORM_TYPES = new Set(['text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data']);

/**
 * The deepest nesting of objects and lists a JSON body may have. No request type nests beyond a handful of
 * levels; a body nested thousands deep would overflow the stack of whatever walks it later.
 */
export const MAX_JSON_DEPTH = 100;

/** True when the JSON text nests objects and lists deeper than `limit` (strings are skipped). */
function nestedDeeperThan(text: string, limit: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c) i++; // a backslash escapes the next character
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x7b || c === 0x5b) {
      if (++depth > limit) return true;
    } else if (c === 0x7d || c === 0x5d) depth--;
  }
  return false;
}

/**
 * Parses a JSON request body: empty text gives `undefined`; malformed or too deeply nested JSON is an
 * InvalidParameter. With a shape, the value is decoded as Docker's Go server decodes that body type
 * (bodies.ts).
 */
export function parseJsonBody(text: string, shape?: Shape): unknown {
  if (text.trim() === '') return undefined;
  if (nestedDeeperThan(text, MAX_JSON_DEPTH)) {
    throw new InvalidParameter(`invalid JSON in request body: objects and lists are nested deeper than ${MAX_JSON_DEPTH} levels`);
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw new InvalidParameter(`invalid JSON in request body: ${(err as Error).message}`, { cause: err });
  }
  return shape ? decodeAs(value, shape) : value;
}

/** One API request as a handler sees it: path parameters, query, version and the body. */
export class ApiRequest {
  constructor(
    readonly raw: IncomingMessage,
    /** The path without its version prefix. */
    readonly path: string,
    /** The API version the request asked for (minor number, see version.ts). */
    readonly version: ApiMinor,
    readonly params: Record<string, string>,
    readonly query: URLSearchParams,
    /** Aborted when the client goes away before the response is finished. */
    readonly signal: AbortSignal,
    /** True when the client asked to upgrade the connection (hijack). */
    readonly upgrade: boolean,
  ) {}

  get method(): string {
    return this.raw.method ?? 'GET';
  }

  get versionText(): string {
    return formatVersion(this.version);
  }

  header(name: string): string | undefined {
    const v = this.raw.headers[name.toLowerCase()];
    return Array.isArray(v) ? v[0] : v;
  }

  /** True when the request carries a body (a length above zero, or a chunked one). */
  get carriesBody(): boolean {
    const length = this.header('content-length');
    return this.header('transfer-encoding') !== undefined || (length !== undefined && Number(length) > 0);
  }

  /**
   * The request body as a stream (tar uploads). A body sent as a form or as text is refused: a web page can
   * send those without asking first, and `docker build`, `docker load` and the other clients send a tar type
   * or none. Uploads the Go client sends without a type of their own (it then says text/plain: `docker cp`,
   * `docker import`) pass `goClientText`; `docker cp` is a PUT, which no page sends without CORS.
   */
  body(opts: { goClientText?: boolean } = {}): Readable {
    const type = mediaType(this.header('content-type'));
    if (this.carriesBody && SIMPLE_FORM_TYPES.has(type) && !(opts.goClientText && type === 'text/plain')) {
      throw new InvalidParameter(`unsupported Content-Type header (${this.header('content-type')}): must be 'application/x-tar'`);
    }
    return this.raw;
  }

  /**
   * Reads and parses a JSON body, decoded as the body type `shape` when given (see parseJsonBody). An empty
   * body gives `undefined`; malformed JSON, a body over the limit and a body shorter than its Content-Length
   * are InvalidParameter / TooLarge errors.
   */
  async json<T = unknown>(shape?: Shape, limit = MAX_JSON_BODY): Promise<T | undefined> {
    // As dockerd: no Content-Type is fine with no body; a body must say it is JSON.
    if (this.carriesBody && mediaType(this.header('content-type')) !== 'application/json') {
      throw new InvalidParameter(`unsupported Content-Type header (${this.header('content-type') ?? ''}): must be 'application/json'`);
    }
    const declared = Number(this.header('content-length') ?? NaN);
    if (Number.isFinite(declared) && declared > limit) {
      this.raw.resume();
      throw new TooLarge(`request body of ${declared} bytes exceeds the limit of ${limit} bytes`);
    }
    const chunks: Buffer[] = [];
    let size = 0;
    await new Promise<void>((resolve, reject) => {
      this.raw.on('data', (chunk: Buffer) => {
        size += chunk.length;
        if (size > limit) {
          this.raw.removeAllListeners('data');
          this.raw.resume();
          reject(new TooLarge(`request body exceeds the limit of ${limit} bytes`));
          return;
        }
        chunks.push(chunk);
      });
      this.raw.on('end', () => resolve());
      this.raw.on('aborted', () => reject(new InvalidParameter('request body was truncated')));
      this.raw.on('error', (err) => reject(new InvalidParameter(`cannot read request body: ${err.message}`, { cause: err })));
    });
    const text = Buffer.concat(chunks).toString('utf8');
    if (Number.isFinite(declared) && size < declared) throw new InvalidParameter('request body was truncated');
    return parseJsonBody(text, shape) as T | undefined;
  }
}

/** What a handler may do with the response. Errors are not written here: handlers throw them. */
export class ApiResponse {
  private hijacked = false;

  constructor(
    readonly raw: ServerResponse,
    private readonly request: IncomingMessage,
    /**
     * Bytes the client sent after the headers of its upgrade request: the start of the stream, or a request
     * body (exec start) that the handler consumes before the hijack.
     */
    public upgradeHead: Buffer | undefined,
    private readonly extraHeaders: Record<string, string>,
  ) {}

  get started(): boolean {
    return this.hijacked || this.raw.headersSent;
  }

  /** A JSON answer; `headers` may set another JSON content type (application/scim+json) or add headers. */
  json(status: number, body: unknown, headers: Record<string, string> = {}): void {
    const text = JSON.stringify(body) + '\n';
    this.raw.writeHead(status, {
      ...this.extraHeaders,
      'Content-Type': 'application/json',
      ...headers,
      'Content-Length': Buffer.byteLength(text),
    });
    this.raw.end(text);
  }

  text(status: number, body: string, contentType = 'text/plain; charset=utf-8'): void {
    this.raw.writeHead(status, { ...this.extraHeaders, 'Content-Type': contentType, 'Content-Length': Buffer.byteLength(body) });
    this.raw.end(body);
  }

  status(status: number, headers: Record<string, string | number> = {}): void {
    this.raw.writeHead(status, { ...this.extraHeaders, ...headers });
    this.raw.end();
  }

  noContent(): void {
    this.status(204);
  }

  /**
   * Starts a streamed response (chunked): the caller writes to the returned stream with backpressure
   * and ends it. Headers go out at once so that clients see the stream start.
   */
  stream(status: number, contentType: string, headers: Record<string, string | number> = {}): Writable {
    this.raw.writeHead(status, { ...this.extraHeaders, 'Content-Type': contentType, ...headers });
    this.raw.flushHeaders();
    return this.raw;
  }

  /**
   * Takes over the connection for a bidirectional raw stream (attach, exec start). With an
   * `Upgrade: tcp` request it answers `101 UPGRADED` and returns the socket; otherwise it answers 200 and
   * returns the socket after the headers, closing the connection at the end of the stream.
   */
  hijack(contentType: string): Duplex {
    if (this.hijacked) throw new Error('response already hijacked');
    this.hijacked = true;
    const socket = this.request.socket;
    const upgrade = /upgrade/i.test(String(this.request.headers.connection ?? '')) && this.request.headers.upgrade;
    const lines = upgrade
      ? ['HTTP/1.1 101 UPGRADED', `Content-Type: ${contentType}`, 'Connection: Upgrade', `Upgrade: ${this.request.headers.upgrade}`]
      : ['HTTP/1.1 200 OK', `Content-Type: ${contentType}`, 'Connection: close'];
    for (const [k, v] of Object.entries(this.extraHeaders)) lines.push(`${k}: ${v}`);
    socket.setTimeout(0);
    socket.setNoDelay(true);
    socket.write(lines.join('\r\n') + '\r\n\r\n');
    // Detach the socket from the HTTP machinery so that later bytes are the stream's, not a request's.
    this.raw.detachSocket(socket);
    if (this.upgradeHead && this.upgradeHead.length > 0) socket.unshift(this.upgradeHead);
    return socket;
  }
}

export type Handler = (req: ApiRequest, res: ApiResponse) => Promise<void> | void;

/**
 * The body of an upgrade request (attach and exec start: docker-modem sends its options as JSON there). Node
 * hands the bytes after the headers to the upgrade handler, not to the request stream: the body's
 * Content-Length bytes are taken from that head (and from the socket when the body came later), and only
 * what follows stays for the hijacked stream, so that a body never reaches a process's stdin.
 */
export async function readUpgradeBody(req: ApiRequest, res: ApiResponse, limit: number): Promise<Buffer> {
  const length = Number(req.header('content-length') ?? 0);
  if (!Number.isInteger(length) || length < 0) throw new InvalidParameter('invalid Content-Length');
  if (length > limit) throw new TooLarge(`request body of ${length} bytes exceeds the limit of ${limit} bytes`);
  let buffered = res.upgradeHead ?? Buffer.alloc(0);
  if (buffered.length < length) {
    const socket = req.raw.socket;
    buffered = await new Promise<Buffer>((resolve, reject) => {
      const parts = [buffered];
      let size = buffered.length;
      const onData = (chunk: Buffer) => {
        parts.push(chunk);
        size += chunk.length;
        if (size >= length) finish();
      };
      const onEnd = () => {
        cleanup();
        reject(new InvalidParameter('request body was truncated'));
      };
      const cleanup = () => {
        socket.off('data', onData);
        socket.off('end', onEnd);
        socket.off('close', onEnd);
      };
      const finish = () => {
        cleanup();
        socket.pause();
        resolve(Buffer.concat(parts));
      };
      socket.on('data', onData);
      socket.once('end', onEnd);
      socket.once('close', onEnd);
      socket.resume();
    });
  }
  res.upgradeHead = buffered.subarray(length);
  return buffered.subarray(0, length);
}
