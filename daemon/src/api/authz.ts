/**
 * The API side of authorization plugins (engine/plugins/authz.ts): only built when the daemon has one, so
 * that a daemon without them serves requests as before. A JSON request body up to 1 MiB is read ahead (and
 * given back to the stream for the handler) to be shown to the plugins; the handler's whole answers (JSON,
 * text, status only) are held until the plugins allowed them, streams and hijacked connections go out as
 * they come, and the plugins see their status and headers after.
 */
import type { IncomingMessage } from 'node:http';
import type { TLSSocket } from 'node:tls';
import type { Authorizer, AuthzRequest } from '../engine/plugins/authz.js';
import { errorMessage } from '../errors.js';
import { log } from '../util/log.js';
import { ApiResponse, mediaType, readUpgradeBody, type ApiRequest } from './http.js';

/** The largest body (request or response) shown to the plugins, as dockerd. */
const MAX_SHOWN_BODY = 1 << 20;

/** Headers that carry credentials: never shown to a plugin. */
const SECRET_HEADERS = new Set(['authorization', 'x-registry-auth', 'x-registry-config', 'cookie']);

/** Header names as the client sent them, values of a repeated header joined with commas. */
function headersOf(rawHeaders: string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (let i = 0; i + 1 < rawHeaders.length; i += 2) {
    const name = rawHeaders[i]!;
    if (SECRET_HEADERS.has(name.toLowerCase())) continue;
    out[name] = name in out ? `${out[name]},${rawHeaders[i + 1]}` : rawHeaders[i + 1]!;
  }
  return out;
}

/** The user a request comes from, as dockerd tells the plugins: the common name of a TLS client's certificate. */
function userOf(raw: IncomingMessage): Pick<AuthzRequest, 'User' | 'UserAuthNMethod'> {
  const socket = raw.socket as Partial<TLSSocket>;
  if (typeof socket.getPeerCertificate !== 'function') return {};
  const cn = socket.getPeerCertificate()?.subject?.CN;
  return typeof cn === 'string' && cn !== '' ? { User: cn, UserAuthNMethod: 'TLS' } : {};
}

/** The body of an upgrade request, read as its handler reads it and left in front of the rest for it. */
async function peekUpgradeBody(raw: IncomingMessage, res: ApiResponse): Promise<Buffer> {
  const asRequest = { raw, header: (name: string) => [raw.headers[name.toLowerCase()]].flat()[0] } as unknown as ApiRequest;
  const body = await readUpgradeBody(asRequest, res, MAX_SHOWN_BODY);
  res.upgradeHead = Buffer.concat([body, res.upgradeHead ?? Buffer.alloc(0)]);
  return body;
}

/** Reads `length` bytes of the body ahead and puts them back in front of the stream. */
function peekBody(raw: IncomingMessage, length: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const done = (buf: Buffer) => {
      raw.off('readable', onReadable);
      raw.off('end', onEnd);
      raw.off('error', reject);
      if (buf.length > 0) raw.unshift(buf);
      resolve(buf);
    };
    // read(n) answers null until n bytes are there (or the stream ended): it never reads past the body's end.
    const onReadable = () => {
      const chunk = raw.read(length) as Buffer | null;
      if (chunk !== null) done(chunk);
    };
    const onEnd = () => done(Buffer.alloc(0));
    raw.on('readable', onReadable);
    raw.on('end', onEnd);
    raw.on('error', reject);
  });
}

/**
 * A response whose whole answers, once `hold` is called, wait for the plugins (`flush`), or go out at once
 * after `release`.
 */
export class AuthzResponse extends ApiResponse {
  private holding = false;
  private held: { status: number; headers: Record<string, string | number>; body?: string; send: () => void } | undefined;

  override json(status: number, body: unknown, headers: Record<string, string> = {}): void {
    if (!this.holding) return super.json(status, body, headers);
    this.held = { status, headers: { 'Content-Type': 'application/json', ...headers }, body: JSON.stringify(body) + '\n', send: () => super.json(status, body, headers) };
  }

  override text(status: number, body: string, contentType?: string): void {
    if (!this.holding) return super.text(status, body, contentType);
    this.held = { status, headers: { 'Content-Type': contentType ?? 'text/plain; charset=utf-8' }, send: () => super.text(status, body, contentType) };
  }

  override status(status: number, headers: Record<string, string | number> = {}): void {
    if (!this.holding) return super.status(status, headers);
    this.held = { status, headers, send: () => super.status(status, headers) };
  }

  hold(): void {
    this.holding = true;
  }

  get holds(): boolean {
    return this.held !== undefined;
  }

  /** Drops what is held: errors go out directly. */
  release(): void {
    this.holding = false;
    this.held = undefined;
  }

  /** What the plugins are shown of the answer. */
  shown(): Pick<AuthzRequest, 'ResponseStatusCode' | 'ResponseBody' | 'ResponseHeaders'> {
    if (!this.held) return { ResponseStatusCode: this.raw.statusCode, ResponseHeaders: headersOf(Object.entries(this.raw.getHeaders()).flatMap(([k, v]) => [k, String(v)])) };
    const { status, headers, body } = this.held;
    const json = mediaType(String(headers['Content-Type'] ?? '')).endsWith('json');
    const shownBody = json && body !== undefined && Buffer.byteLength(body) <= MAX_SHOWN_BODY ? Buffer.from(body).toString('base64') : undefined;
    return { ResponseStatusCode: status, ResponseBody: shownBody, ResponseHeaders: headersOf(Object.entries(headers).flatMap(([k, v]) => [k, String(v)])) };
  }

  flush(): void {
    const held = this.held;
    this.release();
    held?.send();
  }
}

/** Serves a request through the plugins: asked first, then the handler, then its answer asked about. */
export async function serveAuthorized(
  authz: Authorizer,
  raw: IncomingMessage,
  res: ApiResponse,
  upgrade: boolean,
  handler: () => Promise<void> | void,
): Promise<void> {
  const held = res instanceof AuthzResponse ? res : undefined;
  try {
    const length = Number(raw.headers['content-length'] ?? NaN);
    const json = mediaType(raw.headers['content-type']) === 'application/json';
    const shown = json && Number.isInteger(length) && length > 0 && length <= MAX_SHOWN_BODY;
    // An upgrade request's body (exec start) comes with its head and on the socket, not in the request stream.
    const body = !shown ? undefined : upgrade ? await peekUpgradeBody(raw, res) : await peekBody(raw, length);
    const request: AuthzRequest = {
      ...userOf(raw),
      RequestMethod: raw.method ?? 'GET',
      RequestUri: raw.url ?? '/',
      RequestBody: body && body.length > 0 ? body.toString('base64') : undefined,
      RequestHeaders: headersOf(raw.rawHeaders),
    };
    try {
      await authz.request(request);
    } catch (err) {
      raw.resume();
      throw err;
    }
    held?.hold();
    await handler();
    if (!held) return;
    if (!held.holds) {
      // A stream or a hijacked connection went out as it came: the plugins are told, and cannot take it back.
      await authz.response({ ...request, ...held.shown() }).catch((err: unknown) => log.warn('authorization of a streamed response', { uri: request.RequestUri, error: errorMessage(err) }));
      return;
    }
    await authz.response({ ...request, ...held.shown() });
    held.flush();
  } catch (err) {
    held?.release();
    throw err;
  }
}
