/**
 * HTTP for the registry client, on node:http/https with kept-alive connections (bodies stay streams:
 * a blob is never held in memory). Redirects of GET and HEAD are followed (blob storage often answers
 * elsewhere); the Authorization header is dropped when a redirect leaves the registry's origin.
 */
import http, { type IncomingMessage } from 'node:http';
import type { Agent as TlsAgent, request as tlsRequest } from 'node:https';
import type { Readable } from 'node:stream';

const MAX_REDIRECTS = 5;
const plainAgent = new http.Agent({ keepAlive: true, maxSockets: 16 });

/** node:https (and with it TLS) is loaded at the first https request: an idle daemon does not carry it. */
let tls: { request: typeof tlsRequest; agent: TlsAgent; agentNoVerify: TlsAgent } | undefined;
async function tlsClient(): Promise<NonNullable<typeof tls>> {
  if (!tls) {
    const https = (await import('node:https')).default;
    tls = {
      request: https.request,
      agent: new https.Agent({ keepAlive: true, maxSockets: 16 }),
      agentNoVerify: new https.Agent({ keepAlive: true, maxSockets: 16, rejectUnauthorized: false }),
    };
  }
  return tls;
}

export interface HttpOptions {
  method: string;
  url: string;
  headers?: Record<string, string>;
  /** A buffer, or a stream sent with chunked transfer encoding. */
  body?: Buffer | string | Readable;
  signal?: AbortSignal;
  /** Do not verify the server's certificate (insecure registries). */
  skipVerify?: boolean;
  /** Follow redirects (default for GET and HEAD). */
  followRedirects?: boolean;
}

/** A network-level failure (connection refused, TLS handshake, reset): the registry could not be reached. */
export class TransportError extends Error {
  constructor(
    message: string,
    readonly url: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'TransportError';
  }
}

async function once(opts: HttpOptions, url: URL): Promise<IncomingMessage> {
  const isTls = url.protocol === 'https:';
  const client = isTls ? await tlsClient() : undefined;
  return new Promise((resolve, reject) => {
    const headers: Record<string, string | number> = { 'User-Agent': 'berth/1 (registry client)', ...opts.headers };
    if (Buffer.isBuffer(opts.body) || typeof opts.body === 'string') headers['Content-Length'] = Buffer.byteLength(opts.body);
    const req = (client ? client.request : http.request)(url, {
      method: opts.method,
      headers,
      agent: client ? (opts.skipVerify ? client.agentNoVerify : client.agent) : plainAgent,
      signal: opts.signal,
    });
    req.once('response', (res: IncomingMessage) => {
      // Readers see a reset through their own pipeline or iterator; this keeps one on an unread body from going unhandled.
      res.on('error', () => undefined);
      resolve(res);
    });
    // `on`, not `once`: a request can fail again after its answer arrived (a reset mid-body).
    req.on('error', (err: NodeJS.ErrnoException) => {
      if (err.name === 'AbortError') return reject(err);
      const what = err.code === 'ECONNREFUSED' ? 'connection refused' : err.message;
      reject(new TransportError(`${opts.method} ${JSON.stringify(url.toString())}: ${what}`, url.toString(), { cause: err }));
    });
    const body = opts.body;
    if (body === undefined) req.end();
    else if (Buffer.isBuffer(body) || typeof body === 'string') req.end(body);
    else {
      body.once('error', (err) => req.destroy(err));
      body.pipe(req);
    }
  });
}

/** Sends one request; the caller reads or discards the response body. */
export async function send(opts: HttpOptions): Promise<IncomingMessage> {
  let url = new URL(opts.url);
  const follow = opts.followRedirects ?? (opts.method === 'GET' || opts.method === 'HEAD');
  let headers = opts.headers;
  for (let hop = 0; ; hop++) {
    const res = await once({ ...opts, headers }, url);
    const status = res.statusCode ?? 0;
    if (!follow || ![301, 302, 303, 307, 308].includes(status) || !res.headers.location) return res;
    res.resume();
    if (hop >= MAX_REDIRECTS) throw new TransportError(`${opts.method} ${url}: too many redirects`, url.toString());
    const next = new URL(res.headers.location, url);
    if (next.origin !== url.origin && headers) {
      headers = Object.fromEntries(Object.entries(headers).filter(([k]) => k.toLowerCase() !== 'authorization'));
    }
    url = next;
  }
}

/** Reads a small response body whole (manifests, JSON errors, tokens), refusing more than `limit` bytes. */
export async function readSmall(res: IncomingMessage, limit = 4 * 1024 * 1024): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of res) {
    size += (chunk as Buffer).length;
    if (size > limit) {
      res.destroy();
      throw new Error(`response larger than ${limit} bytes`);
    }
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks);
}

/** Discards a response body (keeps the connection reusable). */
export function discard(res: IncomingMessage): void {
  res.resume();
}
