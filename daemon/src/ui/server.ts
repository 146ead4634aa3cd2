/**
 * `berthd --ui`: serves the desktop app's renderer to a browser on a loopback address, and forwards the
 * renderer's API calls and websockets to the engine.
 *
 * The UI gives full control of the engine, so every request must carry a random token, printed once at
 * start. A first visit with `?token=...` stores it in an HttpOnly, SameSite=Strict cookie and redirects to
 * the same page without it. Requests from another origin are refused: the Host header must name a loopback
 * address (a DNS-rebinding page would name its own host), and an Origin header, when present, must be this
 * server's own origin (browsers always send it on websockets and on cross-origin requests).
 *
 * Paths:
 * - `/api/<engine path>`: forwarded to the engine (`/api/v1.53/containers/json` -> `/v1.53/containers/json`),
 *   streamed both ways; upgrades (the engine's websocket attach) are piped byte for byte.
 * - `/ui/exec/<exec id>/ws`: a websocket over a hijacked `POST /exec/<id>/start` (TTY, raw bytes): binary
 *   frames carry the terminal's bytes each way. Resizes go through `/api/.../exec/<id>/resize`.
 * - anything else: the built renderer (index.html for unknown paths, so client routes reload).
 */
import { createReadStream, promises as fs } from 'node:fs';
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import type { Duplex } from 'node:stream';
import { WebSocketServer, type WebSocket } from 'ws';
import { isLoopbackHost } from '../api/listen.js';
import { log } from '../util/log.js';
import { engineErrorText, hijackHeaders, proxyTerminal } from './terminal.js';

/** Where the engine answers: a unix socket, or a plain TCP address on this machine. */
export type EngineEndpoint = { socketPath: string } | { host: string; port: number };

export interface UiServerOptions {
  engine: EngineEndpoint;
  /** The built renderer (index.html and assets/). */
  staticDir: string;
  host?: string;
  /** 0 picks a free port. */
  port?: number;
  /** Fixed token (tests); a random one by default. */
  token?: string;
  /**
   * The bearer token the engine knows this UI by (the daemon's local session): sent with every request
   * forwarded to the engine, so that the UI's user may use the paths that need a token (sandbox policies).
   */
  engineToken?: string;
}

export interface UiServer {
  readonly url: string;
  /** The URL to open once: it carries the token. */
  readonly loginUrl: string;
  readonly token: string;
  readonly port: number;
  close(): Promise<void>;
}

export const UI_COOKIE = 'berth_ui_token';
export const DEFAULT_UI_PORT = 2380;

const CONTENT_TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.json': 'application/json',
  '.woff2': 'font/woff2',
  '.map': 'application/json',
};

/** Parses `--ui [ADDRESS]`: `PORT`, `HOST:PORT`, `[::1]:PORT` or empty; only loopback hosts are accepted. */
export function parseUiAddress(text: string | undefined): { host: string; port: number } {
  if (!text) return { host: '127.0.0.1', port: DEFAULT_UI_PORT };
  let host = '127.0.0.1';
  let portText = text;
  const bracket = /^\[([^\]]+)\]:(\d+)$/.exec(text);
  if (bracket) {
    host = bracket[1]!;
    portText = bracket[2]!;
  } else if (text.includes(':')) {
    const at = text.lastIndexOf(':');
    host = text.slice(0, at);
    portText = text.slice(at + 1);
  }
  const port = Number(portText);
  if (!/^\d+$/.test(portText) || port > 65535) throw new Error(`invalid --ui address ${JSON.stringify(text)}: expected [HOST:]PORT`);
  if (!isLoopbackHost(host)) throw new Error(`refusing to serve the UI on ${host}: only loopback addresses (127.0.0.1, ::1, localhost) are allowed`);
  return { host, port };
}

/** Compares in constant time, whatever the lengths: digests of equal size are compared, not the texts. */
function sameToken(given: string | undefined, token: string): boolean {
  if (given === undefined) return false;
  const digest = (text: string) => createHash('sha256').update(text, 'utf8').digest();
  return timingSafeEqual(digest(given), digest(token));
}

/** The request target as a URL of this server; `//` and other odd targets stay paths, or give undefined. */
function requestUrl(target: string | undefined): URL | undefined {
  const text = target ?? '/';
  try {
    return text.startsWith('/') ? new URL(`http://ui${text}`) : undefined;
  } catch {
    return undefined;
  }
}

function cookieValue(header: string | undefined, name: string): string | undefined {
  if (!header) return undefined;
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === name) return decodeURIComponent(part.slice(eq + 1).trim());
  }
  return undefined;
}

/** Host header check: a loopback name with this server's port. */
function allowedHost(hostHeader: string | undefined, port: number): boolean {
  if (!hostHeader) return false;
  const m = /^(\[[^\]]+\]|[^:]+)(?::(\d+))?$/.exec(hostHeader);
  if (!m) return false;
  const name = m[1]!.replace(/^\[|\]$/g, '');
  return isLoopbackHost(name) && Number(m[2] ?? 80) === port;
}

function allowedOrigin(origin: string | undefined, hostHeader: string | undefined): boolean {
  if (origin === undefined) return true;
  return origin === `http://${hostHeader}`;
}

const CSP = "default-src 'self'; connect-src 'self' ws: wss:; style-src 'self' 'unsafe-inline'; img-src 'self' data:; frame-ancestors 'none'";

/**
 * The policy for one HTML page: its own inline classic scripts (the renderer's boot script) are allowed by
 * their sha256, nothing else inline.
 */
export function pageCsp(html: string): string {
  const hashes: string[] = [];
  for (const m of html.matchAll(/<script(\s[^>]*)?>([\s\S]*?)<\/script>/gi)) {
    if (/\ssrc\s*=/i.test(m[1] ?? '') || !m[2]!.trim()) continue;
    hashes.push(`'sha256-${createHash('sha256').update(m[2]!, 'utf8').digest('base64')}'`);
  }
  return hashes.length ? `${CSP}; script-src 'self' ${hashes.join(' ')}` : CSP;
}

function sendError(res: http.ServerResponse, status: number, message: string): void {
  const body = JSON.stringify({ message });
  res.writeHead(status, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body), 'Cache-Control': 'no-store' });
  res.end(body);
}

/** Reads an engine response that did not upgrade and gives its message (the JSON `message`, or the text). */
function engineMessage(res: http.IncomingMessage, done: (message: string) => void): void {
  const chunks: Buffer[] = [];
  res.on('data', (c: Buffer) => chunks.push(c));
  res.on('end', () => done(engineErrorText(Buffer.concat(chunks).toString('utf8'))));
}

function refuseUpgrade(socket: Duplex, status: number, message: string): void {
  const body = JSON.stringify({ message });
  socket.end(`HTTP/1.1 ${status} ${http.STATUS_CODES[status]}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`);
}

/**
 * Headers that must not reach the engine: the UI's own credentials and the browser's origin. The engine is
 * told who asks by the UI's own engine token, never by one the page sent.
 */
function engineHeaders(headers: http.IncomingHttpHeaders, engineToken: string | undefined): http.OutgoingHttpHeaders {
  const out: http.OutgoingHttpHeaders = { ...headers };
  delete out.cookie;
  delete out.origin;
  delete out.referer;
  delete out.authorization;
  if (engineToken) out.authorization = `Bearer ${engineToken}`;
  out.host = 'localhost';
  return out;
}

function engineRequestOptions(engine: EngineEndpoint): http.RequestOptions {
  return 'socketPath' in engine ? { socketPath: engine.socketPath } : { host: engine.host, port: engine.port };
}

export async function startUiServer(opts: UiServerOptions): Promise<UiServer> {
  const token = opts.token ?? randomBytes(24).toString('base64url');
  const staticRoot = path.resolve(opts.staticDir);
  // One engine connection per request: over a unix socket it costs next to nothing, and a long-lived UI
  // session does not pile per-request listeners onto one kept-alive engine socket.
  const agent = new http.Agent({ keepAlive: false });
  let port = 0;

  /** Decides whether a request may go on; answers it (or the upgrade socket) when it may not. */
  function check(req: http.IncomingMessage, url: URL): { ok: true } | { ok: false; status: number; message: string } {
    if (!allowedHost(req.headers.host, port)) return { ok: false, status: 403, message: `host ${JSON.stringify(req.headers.host ?? '')} is not allowed: open the UI on a loopback address` };
    if (!allowedOrigin(req.headers.origin, req.headers.host)) return { ok: false, status: 403, message: `cross-origin request from ${req.headers.origin} refused` };
    if (req.headers['sec-fetch-site'] === 'cross-site') return { ok: false, status: 403, message: 'cross-site request refused' };
    const bearer = /^Bearer (.+)$/.exec(req.headers.authorization ?? '')?.[1];
    if (sameToken(cookieValue(req.headers.cookie, UI_COOKIE), token) || sameToken(bearer, token)) return { ok: true };
    // The token in the query is accepted on page loads only, and turned into the cookie by the caller.
    if (url.searchParams.has('token') && sameToken(url.searchParams.get('token') ?? undefined, token)) return { ok: true };
    return { ok: false, status: 401, message: 'a valid token is required: open the address berthd printed at start (it ends with ?token=...)' };
  }

  async function serveStatic(req: http.IncomingMessage, res: http.ServerResponse, pathname: string): Promise<void> {
    if (req.method !== 'GET' && req.method !== 'HEAD') return sendError(res, 405, `${req.method} is not allowed here`);
    let rel: string;
    try {
      rel = decodeURIComponent(pathname);
    } catch {
      return sendError(res, 400, 'malformed path');
    }
    let file = path.resolve(staticRoot, '.' + path.posix.normalize('/' + rel));
    if (file !== staticRoot && !file.startsWith(staticRoot + path.sep)) return sendError(res, 403, 'path outside the UI folder');
    let stat = await fs.stat(file).catch(() => undefined);
    if (!stat || stat.isDirectory()) {
      // Client-side routes load the app; a missing asset is a 404.
      if (rel.startsWith('/assets/')) return sendError(res, 404, `${rel} not found`);
      file = path.join(staticRoot, 'index.html');
      stat = await fs.stat(file).catch(() => undefined);
      if (!stat) return sendError(res, 503, `the UI is not built: ${file} is missing (run npm run build -w renderer)`);
    }
    const ext = path.extname(file);
    const headers: http.OutgoingHttpHeaders = {
      'Content-Type': CONTENT_TYPES[ext] ?? 'application/octet-stream',
      'Content-Length': stat.size,
      'Cache-Control': file.includes(`${path.sep}assets${path.sep}`) ? 'public, max-age=31536000, immutable' : 'no-cache',
      'X-Content-Type-Options': 'nosniff',
      'X-Frame-Options': 'DENY',
      'Content-Security-Policy': CSP,
      'Referrer-Policy': 'no-referrer',
    };
    if (ext === '.html') {
      // Pages are small: read whole, so that the policy can name their inline script.
      const page = await htmlPage(file, stat);
      headers['Content-Security-Policy'] = page.csp;
      headers['Content-Length'] = page.body.length;
      headers.ETag = page.etag;
      if (req.headers['if-none-match'] === page.etag) {
        delete headers['Content-Length'];
        res.writeHead(304, headers);
        return void res.end();
      }
      res.writeHead(200, headers);
      return void res.end(req.method === 'HEAD' ? undefined : page.body);
    }
    res.writeHead(200, headers);
    if (req.method === 'HEAD') return void res.end();
    createReadStream(file).pipe(res);
  }

  /** index.html as last read, kept while its file is unchanged. */
  const pages = new Map<string, { mtimeMs: number; size: number; body: Buffer; csp: string; etag: string }>();
  async function htmlPage(file: string, stat: { mtimeMs: number; size: number }) {
    const known = pages.get(file);
    if (known && known.mtimeMs === stat.mtimeMs && known.size === stat.size) return known;
    const body = await fs.readFile(file);
    const page = { mtimeMs: stat.mtimeMs, size: stat.size, body, csp: pageCsp(body.toString('utf8')), etag: `"${createHash('sha256').update(body).digest('base64url').slice(0, 22)}"` };
    pages.set(file, page);
    return page;
  }

  function proxy(req: http.IncomingMessage, res: http.ServerResponse, enginePath: string): void {
    const upstream = http.request(
      { ...engineRequestOptions(opts.engine), agent, method: req.method, path: enginePath, headers: engineHeaders(req.headers, opts.engineToken) },
      (engineRes) => {
        res.writeHead(engineRes.statusCode ?? 502, engineRes.headers);
        res.flushHeaders();
        engineRes.pipe(res);
        engineRes.on('error', () => res.destroy());
      },
    );
    upstream.on('error', (err) => {
      if (!res.headersSent) sendError(res, 502, `the engine did not answer: ${err.message}`);
      else res.destroy();
    });
    // A client that leaves (a closed log follow or event stream) ends the engine request too.
    res.on('close', () => {
      if (!res.writableFinished) upstream.destroy();
    });
    req.pipe(upstream);
  }

  const server = http.createServer((req, res) => {
    try {
      handleRequest(req, res);
    } catch (err) {
      // A failure serving one request ends that request, never the daemon.
      log.error('UI request failed', { error: (err as Error)?.message });
      if (!res.headersSent) sendError(res, 500, 'internal error');
      else res.destroy();
    }
  });

  function handleRequest(req: http.IncomingMessage, res: http.ServerResponse): void {
    const url = requestUrl(req.url);
    if (!url) return sendError(res, 400, 'malformed request target');
    const verdict = check(req, url);
    if (!verdict.ok) {
      if (verdict.status === 401 && req.method === 'GET' && !url.pathname.startsWith('/api/')) {
        const body = `<!doctype html><meta charset="utf-8"><title>Berth</title><p style="font:16px system-ui;margin:3em">Open the address <code>berthd --ui</code> printed at start (it ends with <code>?token=</code>).</p>`;
        res.writeHead(401, { 'Content-Type': 'text/html; charset=utf-8', 'Content-Length': Buffer.byteLength(body) });
        return void res.end(body);
      }
      return sendError(res, verdict.status, verdict.message);
    }
    if (url.searchParams.has('token')) {
      url.searchParams.delete('token');
      res.writeHead(302, {
        'Set-Cookie': `${UI_COOKIE}=${encodeURIComponent(token)}; HttpOnly; SameSite=Strict; Path=/`,
        Location: url.pathname + url.search,
        'Cache-Control': 'no-store',
      });
      return void res.end();
    }
    if (url.pathname.startsWith('/api/')) return proxy(req, res, url.pathname.slice('/api'.length) + url.search);
    serveStatic(req, res, url.pathname).catch((err: Error) => {
      if (!res.headersSent) sendError(res, 500, err.message);
      else res.destroy();
    });
  }

  const wss = new WebSocketServer({ noServer: true, maxPayload: 1 << 20 });

  function execSocket(ws: WebSocket, execId: string): void {
    const startBody = JSON.stringify({ Detach: false, Tty: true });
    const upstream = http.request({
      ...engineRequestOptions(opts.engine),
      method: 'POST',
      path: `/exec/${encodeURIComponent(execId)}/start`,
      headers: {
        Host: 'localhost',
        ...hijackHeaders(startBody),
        ...(opts.engineToken ? { Authorization: `Bearer ${opts.engineToken}` } : {}),
      },
    });
    const terminal = proxyTerminal(upstream, startBody, {
      data: (bytes) => ws.send(bytes),
      end: () => ws.close(1000, 'exited'),
      broken: () => ws.close(1011, 'engine stream failed'),
      // The engine answered without upgrading: an error (unknown exec, already started...).
      refused: (status, message) => ws.close(4000 + Math.min(status ?? 500, 999) % 1000, message.slice(0, 120)),
      unreachable: (err) => ws.close(1011, `the engine did not answer: ${err.message}`.slice(0, 120)),
    });
    ws.on('message', (data: Buffer | ArrayBuffer | Buffer[]) => terminal.write(Array.isArray(data) ? Buffer.concat(data) : Buffer.from(data as Buffer)));
    ws.on('close', () => terminal.close());
  }

  server.on('upgrade', (req: http.IncomingMessage, socket: Duplex, head: Buffer) => {
    socket.on('error', () => undefined);
    try {
      handleUpgrade(req, socket, head);
    } catch (err) {
      log.error('UI upgrade failed', { error: (err as Error)?.message });
      socket.destroy();
    }
  });

  function handleUpgrade(req: http.IncomingMessage, socket: Duplex, head: Buffer): void {
    const url = requestUrl(req.url);
    if (!url) return refuseUpgrade(socket, 400, 'malformed request target');
    const verdict = check(req, url);
    if (!verdict.ok) return refuseUpgrade(socket, verdict.status, verdict.message);
    const exec = /^\/ui\/exec\/([A-Za-z0-9_.-]+)\/ws$/.exec(url.pathname);
    if (exec) {
      wss.handleUpgrade(req, socket, head, (ws) => execSocket(ws, exec[1]!));
      return;
    }
    if (!url.pathname.startsWith('/api/')) return refuseUpgrade(socket, 404, `no websocket at ${url.pathname}`);
    // The engine's own websocket (attach/ws): forward the handshake, then pipe bytes both ways.
    const upstream = http.request({
      ...engineRequestOptions(opts.engine),
      method: req.method,
      path: url.pathname.slice('/api'.length) + url.search,
      headers: engineHeaders(req.headers, opts.engineToken),
    });
    upstream.on('upgrade', (res, engineSocket, engineHead) => {
      let head = `HTTP/1.1 ${res.statusCode} ${res.statusMessage}\r\n`;
      for (let i = 0; i < res.rawHeaders.length; i += 2) head += `${res.rawHeaders[i]}: ${res.rawHeaders[i + 1]}\r\n`;
      socket.write(head + '\r\n');
      if (engineHead.length) socket.write(engineHead);
      engineSocket.on('error', () => socket.destroy());
      engineSocket.pipe(socket).pipe(engineSocket);
      socket.on('close', () => engineSocket.destroy());
    });
    upstream.on('response', (res) => {
      engineMessage(res, (message) => {
        refuseUpgrade(socket, res.statusCode ?? 502, message);
      });
    });
    upstream.on('error', (err) => refuseUpgrade(socket, 502, `the engine did not answer: ${err.message}`));
    if (head.length) upstream.write(head);
    upstream.end();
  }

  const host = opts.host ?? '127.0.0.1';
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port ?? DEFAULT_UI_PORT, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  port = (server.address() as AddressInfo).port;
  const urlHost = host.includes(':') ? `[${host}]` : host;
  const url = `http://${urlHost}:${port}/`;
  log.debug('UI listening', { url });
  return {
    url,
    loginUrl: `${url}?token=${token}`,
    token,
    port,
    async close() {
      for (const client of wss.clients) client.terminate();
      server.close();
      server.closeAllConnections();
      agent.destroy();
    },
  };
}
