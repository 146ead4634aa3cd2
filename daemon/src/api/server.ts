import http from 'node:http';
import { createRequire } from 'node:module';
import type { Duplex } from 'node:stream';
import { errorMessage } from '../engine/errors.js';
import { log } from '../util/log.js';
import { ApiRequest, ApiResponse } from './http.js';
import { statusOf } from './httpstatus.js';
import { statusAt } from './compat.js';
import type { ApiMinor } from './version.js';
import type { Router } from './router.js';
import { MAX_API_MINOR, MAX_API_VERSION, MIN_API_MINOR, MIN_API_VERSION } from './version.js';
import { ENGINE_VERSION } from '../version.js';

export interface ServerOptions {
  /** Value of Access-Control-Allow-Origin; CORS is off when unset or blank. */
  corsOrigin?: string;
  tls?: { key: Buffer; cert: Buffer; ca?: Buffer; verifyClients: boolean };
}

const VERSION_PREFIX = /^\/v(\d+)\.(\d+)(\/.*)?$/;

/** Splits `/v1.44/containers/json` into 44 and `/containers/json`; a path with no prefix is the newest version. */
export function splitVersion(pathname: string): { minor: number; path: string } | { error: string } | undefined {
  const m = VERSION_PREFIX.exec(pathname);
  if (!m) return { minor: MAX_API_MINOR, path: pathname };
  const major = Number(m[1]);
  const minor = Number(m[2]);
  const text = `${m[1]}.${m[2]}`;
  if (major < 1 || (major === 1 && minor < MIN_API_MINOR)) {
    return { error: `client version ${text} is too old. Minimum supported API version is ${MIN_API_VERSION}, please upgrade your client to a newer version` };
  }
  if (major > 1 || minor > MAX_API_MINOR) {
    return { error: `client version ${text} is too new. Maximum supported API version is ${MAX_API_VERSION}` };
  }
  return { minor, path: m[3] ?? '/' };
}

function writeError(res: ApiResponse, method: string, err: unknown, version: ApiMinor | undefined): void {
  const status = statusAt(err, statusOf(err), version);
  if (status >= 500) log.error('handler failed', { error: errorMessage(err), stack: (err as Error)?.stack });
  if (res.started) {
    // The status line is gone already; all that is left is to end the stream.
    res.raw.destroy();
    return;
  }
  if (status === 304) {
    res.status(304);
    return;
  }
  if (method === 'HEAD') {
    res.status(status);
    return;
  }
  res.json(status, { message: errorMessage(err) });
}

/**
 * Builds the request handler shared by every listener: version prefix, routing, CORS, the request log,
 * error mapping, and cancellation when the client goes away.
 */
export function createDispatcher(router: Router, opts: ServerOptions) {
  // As from dockerd, every answer names the newest API version, the OS and the engine.
  const corsHeaders: Record<string, string> = { 'Api-Version': MAX_API_VERSION, OSType: 'linux', Server: `Berth/${ENGINE_VERSION} (linux)` };
  if (opts.corsOrigin && opts.corsOrigin.trim() !== '') {
    corsHeaders['Access-Control-Allow-Origin'] = opts.corsOrigin;
    corsHeaders['Access-Control-Allow-Headers'] = 'Origin, X-Requested-With, Content-Type, Accept, X-Registry-Auth';
    corsHeaders['Access-Control-Allow-Methods'] = 'HEAD, GET, POST, DELETE, PUT, OPTIONS';
  }

  return async function dispatch(rawReq: http.IncomingMessage, rawRes: http.ServerResponse, upgradeHead?: Buffer): Promise<void> {
    const started = process.hrtime.bigint();
    const method = rawReq.method ?? 'GET';
    const url = new URL(rawReq.url ?? '/', 'http://engine');
    const res = new ApiResponse(rawRes, rawReq, upgradeHead, corsHeaders);
    const controller = new AbortController();
    const onGone = () => {
      if (!rawRes.writableFinished) controller.abort();
    };
    rawRes.on('close', onGone);
    // The socket outlives the request on a kept-alive connection: its listener goes once the response is done
    // (a hijacked connection keeps it, and is aborted when the socket closes).
    const socket = rawReq.socket;
    socket.on('close', onGone);
    rawRes.once('finish', () => socket.off('close', onGone));
    if (log.enabled('debug')) {
      rawRes.on('finish', () => {
        const ms = Number(process.hrtime.bigint() - started) / 1e6;
        log.debug(`Calling ${method} ${url.pathname}`, { status: rawRes.statusCode, ms: Math.round(ms * 100) / 100 });
      });
    }
    let version: ApiMinor | undefined;
    try {
      if (method === 'OPTIONS' && corsHeaders['Access-Control-Allow-Origin']) {
        res.status(200);
        return;
      }
      const split = splitVersion(url.pathname);
      if (!split || 'error' in split) {
        rawReq.resume();
        res.json(400, { message: split ? split.error : 'invalid API version' });
        return;
      }
      // A trailing slash names the same resource (GET /networks/ lists networks).
      version = split.minor;
      const path = split.path.length > 1 ? split.path.replace(/\/+$/, '') : split.path;
      const match = router.match(method, path);
      if (!match) {
        rawReq.resume();
        res.json(404, { message: 'page not found' });
        return;
      }
      const req = new ApiRequest(rawReq, path, split.minor, match.params, url.searchParams, controller.signal, upgradeHead !== undefined);
      await match.handler(req, res);
    } catch (err) {
      writeError(res, method, err, version);
    }
  };
}

/** An http.Server (or https.Server) serving the API, hijacks included. */
export function createApiServer(router: Router, opts: ServerOptions): http.Server {
  const dispatch = createDispatcher(router, opts);
  // TLS is loaded only when a listener uses it: a daemon on its unix socket does not carry it.
  const server = opts.tls
    ? (createRequire(import.meta.url)('node:https') as typeof import('node:https')).createServer({
        key: opts.tls.key,
        cert: opts.tls.cert,
        ca: opts.tls.ca,
        requestCert: opts.tls.verifyClients,
        rejectUnauthorized: opts.tls.verifyClients,
      })
    : http.createServer();
  server.on('request', (req, res) => void dispatch(req, res));
  // Attach and exec ask for `Upgrade: tcp`; they are served by the same handlers, which hijack the socket.
  server.on('upgrade', (req: http.IncomingMessage, socket: Duplex, head: Buffer) => {
    const res = new http.ServerResponse(req);
    res.assignSocket(socket as import('node:net').Socket);
    res.shouldKeepAlive = false;
    void dispatch(req, res, head);
  });
  // Long uploads (image load, build contexts) and streams must not be cut by Node's default timeouts.
  server.requestTimeout = 0;
  server.timeout = 0;
  server.keepAliveTimeout = 60_000;
  return server;
}
