import http from 'node:http';
import { createRequire } from 'node:module';
import type { Duplex } from 'node:stream';
import { isIP, type Socket } from 'node:net';
import type { Permission, Principal } from '../engine/auth/store.js';
import { errorMessage, Forbidden, InvalidParameter, NotFound, Unauthorized } from '../errors.js';
import { log } from '../util/log.js';
import type { Authorizer } from '../engine/plugins/authz.js';
import { AuthzResponse, serveAuthorized } from './authz.js';
import { ApiRequest, ApiResponse } from './http.js';
import { errorBody, statusOf, type ErrorStyle } from './httpstatus.js';
import { statusAt } from './compat.js';
import type { ApiMinor } from './version.js';
import type { Router } from './router.js';
import { checkIntervalMs, connectionLimitsFromEnv, guardConnections, type ConnectionLimits } from './connections.js';
import { MAX_API_MINOR, MAX_API_VERSION, MIN_API_MINOR, MIN_API_VERSION } from './version.js';
import { ENGINE_VERSION } from '../version.js';

export interface ServerOptions {
  /** Value of Access-Control-Allow-Origin; CORS is off when unset or blank. */
  corsOrigin?: string;
  tls?: { key: Buffer; cert: Buffer; ca?: Buffer; verifyClients: boolean };
  /**
   * Bearer tokens: checked on the routes that name a permission (on every listener) and, with `engine`, on
   * the engine API too (GET and HEAD need engineRead, anything else engineWrite). Without it, routes that
   * name a permission answer 401.
   */
  auth?: { verify(token: string): Promise<Principal | undefined>; engine: boolean };
  /**
   * A plain TCP listener, which a web page can reach: requests must name the engine by an IP literal or a
   * loopback name (no DNS rebinding), and browsers' cross-origin requests are refused unless CORS allows them.
   */
  plainTcp?: boolean;
  /**
   * On a unix listener: whether the peer of a connection is the daemon's administrator (root, or the daemon's
   * own user), for the routes marked `localAdmin`. Unset (TCP listeners): those routes are refused.
   */
  localAdmin?: (socket: Socket) => boolean | Promise<boolean>;
  /** Timeouts and the cap of unfinished requests (defaults, or the environment's). */
  limits?: ConnectionLimits;
  /** Authorization plugins (`--authorization-plugin`): every request and its answer are put to them. */
  authz?: Authorizer;
}

/** Parses the request target; `//` and other odd targets are paths of the engine, never another origin. */
function requestUrl(target: string | undefined): URL {
  const text = target ?? '/';
  try {
    return text.startsWith('/') ? new URL(`http://engine${text}`) : new URL(text);
  } catch (err) {
    throw new InvalidParameter(`malformed request target ${JSON.stringify(text.slice(0, 200))}`, { cause: err });
  }
}

/**
 * Host names a client of this engine sends over TCP: an IP literal or a loopback name (the docker CLI sends
 * the host of DOCKER_HOST or `api.moby.localhost`, docker-py and dockerode the host they were given). A name
 * that a page's own DNS could point at this machine (rebinding) is none of these.
 */
export function allowedApiHost(header: string | undefined): boolean {
  if (header === undefined) return true; // HTTP/1.0 without Host: no browser sends that
  const m = /^(?:\[([0-9A-Fa-f:.]+(?:%[\w.-]+)?)\]|([^:\[\]]+))(?::(\d{1,5}))?$/.exec(header.trim());
  if (!m) return false;
  if (m[1] !== undefined) return isIP(m[1].replace(/%.*$/, '')) === 6;
  const name = m[2]!.toLowerCase().replace(/\.$/, '');
  return isIP(name) !== 0 || name === 'localhost' || name.endsWith('.localhost') || name === 'docker';
}

/** The websocket attach: a GET whose connection carries the container's input (always, before API 1.42). */
const ATTACH_WS = /^(?:\/v\d+\.\d+)?\/containers\/[^/]+\/attach\/ws\/*$/;

/** The permission an engine API call needs from a bearer token: reads need engineRead, anything that can change state engineWrite. */
export function enginePermission(method: string, pathname = ''): Permission {
  if (ATTACH_WS.test(pathname)) return 'engineWrite';
  return method === 'GET' || method === 'HEAD' ? 'engineRead' : 'engineWrite';
}

/** Whether a token's permissions include `needed` (engineWrite includes engineRead). */
export function grants(permissions: readonly Permission[], needed: Permission): boolean {
  return permissions.includes(needed) || (needed === 'engineRead' && permissions.includes('engineWrite'));
}

/** Checks the request's bearer token for a permission: Unauthorized without a valid token, Forbidden without the permission. */
async function authorize(rawReq: http.IncomingMessage, auth: ServerOptions['auth'], needed: Permission): Promise<Principal> {
  const header = rawReq.headers.authorization;
  const m = header ? /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(header) : null;
  if (!m) throw new Unauthorized('a bearer token is required (Authorization: Bearer <token>)');
  const principal = auth ? await auth.verify(m[1]!) : undefined;
  if (!principal) throw new Unauthorized('the bearer token is not valid (unknown, malformed or revoked)');
  if (!grants(principal.token.permissions, needed)) throw new Forbidden(`the token does not carry the permission ${needed}`);
  return principal;
}

/** The paths of the interfaces beside the engine API; never an engine path (those have no `/vN/` segment). */
const UNVERSIONED_NAMESPACE = /^\/v\d+\//;

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

function writeError(res: ApiResponse, method: string, err: unknown, version: ApiMinor | undefined, style: ErrorStyle = 'engine'): void {
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
  const headers: Record<string, string> = {};
  if (status === 401) headers['WWW-Authenticate'] = 'Bearer realm="berth"';
  if (method === 'HEAD') {
    res.status(status, headers);
    return;
  }
  const { body, contentType } = errorBody(style, status, errorMessage(err));
  res.json(status, body, { ...headers, 'Content-Type': contentType });
}

/**
 * Builds the request handler shared by every listener: version prefix, routing, CORS, the request log,
 * error mapping, and cancellation when the client goes away.
 */
export function createDispatcher(router: Router, opts: ServerOptions) {
  const corsOrigin = opts.corsOrigin?.trim() ? opts.corsOrigin : undefined;
  const authz = opts.authz;
  // As from dockerd, every answer names the newest API version, the OS and the engine.
  const corsHeaders: Record<string, string> = { 'Api-Version': MAX_API_VERSION, OSType: 'linux', Server: `Berth/${ENGINE_VERSION} (linux)` };
  if (opts.corsOrigin && opts.corsOrigin.trim() !== '') {
    corsHeaders['Access-Control-Allow-Origin'] = opts.corsOrigin;
    corsHeaders['Access-Control-Allow-Headers'] = 'Origin, X-Requested-With, Content-Type, Accept, X-Registry-Auth';
    corsHeaders['Access-Control-Allow-Methods'] = 'HEAD, GET, POST, DELETE, PUT, OPTIONS';
  }

  /** Refuses what a web page could send to a plain TCP listener (rebinding, cross-site requests). */
  function checkWebOrigin(rawReq: http.IncomingMessage): void {
    if (!allowedApiHost(rawReq.headers.host)) {
      throw new Forbidden(`host ${JSON.stringify(rawReq.headers.host)} is not allowed: address the engine by its IP address or as localhost`);
    }
    const origin = rawReq.headers.origin;
    if (origin !== undefined && corsOrigin !== '*' && origin !== corsOrigin) {
      throw new Forbidden(`cross-origin request from ${JSON.stringify(origin)} refused (see --api-cors-header)`);
    }
  }

  async function serve(rawReq: http.IncomingMessage, rawRes: http.ServerResponse, upgradeHead: Buffer | undefined, res: ApiResponse): Promise<void> {
    const started = process.hrtime.bigint();
    const method = rawReq.method ?? 'GET';
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
        log.debug(`Calling ${method} ${(rawReq.url ?? '/').split('?')[0]}`, { status: rawRes.statusCode, ms: Math.round(ms * 100) / 100 });
      });
    }
    let version: ApiMinor | undefined;
    let style: ErrorStyle = 'engine';
    try {
      if (opts.plainTcp) checkWebOrigin(rawReq);
      const url = requestUrl(rawReq.url);
      if (method === 'OPTIONS' && corsHeaders['Access-Control-Allow-Origin']) {
        res.status(200);
        return;
      }
      // The other interfaces (`/v1/sandboxes/...`, `/v2/scim/...`) are matched on the whole path, before the
      // engine's version prefix is looked at: `/v1/...` is no engine version, and `/v1.44/v2/...` no SCIM path.
      if (UNVERSIONED_NAMESPACE.test(url.pathname)) {
        const path = url.pathname.length > 1 ? url.pathname.replace(/\/+$/, '') : url.pathname;
        await router.waitFor(method, path, true);
        // The path's style first: errors of matching (a bad escape) and a method the path lacks are answered in it.
        style = router.unversionedPath(path)?.errorStyle ?? 'engine';
        const match = router.match(method, path, true);
        if (!match) {
          rawReq.resume();
          throw new NotFound('page not found');
        }
        style = match.options.errorStyle ?? 'engine';
        if (match.options.localAdmin) {
          const refusal = !opts.localAdmin
            ? 'this interface is served on the daemon\'s unix socket only'
            : !(await opts.localAdmin(rawReq.socket))
              ? 'only root (or the daemon\'s own user) may manage users and tokens'
              : undefined;
          if (refusal) {
            rawReq.resume();
            throw new Forbidden(refusal);
          }
        }
        if (match.options.permission) await authorize(rawReq, opts.auth, match.options.permission).catch((err: unknown) => {
          rawReq.resume();
          throw err;
        });
        const req = new ApiRequest(rawReq, path, MAX_API_MINOR, match.params, url.searchParams, controller.signal, upgradeHead !== undefined);
        if (authz) await serveAuthorized(authz, rawReq, res, upgradeHead !== undefined, () => match.handler(req, res));
        else await match.handler(req, res);
        return;
      }
      // With token authentication on this listener, nothing of the engine API is answered without a token.
      if (opts.auth?.engine) await authorize(rawReq, opts.auth, enginePermission(method, url.pathname)).catch((err: unknown) => {
        rawReq.resume();
        throw err;
      });
      const split = splitVersion(url.pathname);
      if (!split || 'error' in split) {
        rawReq.resume();
        res.json(400, { message: split ? split.error : 'invalid API version' });
        return;
      }
      // A trailing slash names the same resource (GET /networks/ lists networks).
      version = split.minor;
      const path = split.path.length > 1 ? split.path.replace(/\/+$/, '') : split.path;
      // While the engine restores its state, a request that needs it waits here.
      await router.waitFor(method, path);
      const match = router.match(method, path);
      if (!match) {
        rawReq.resume();
        res.json(404, { message: 'page not found' });
        return;
      }
      const req = new ApiRequest(rawReq, path, split.minor, match.params, url.searchParams, controller.signal, upgradeHead !== undefined);
      if (authz) await serveAuthorized(authz, rawReq, res, upgradeHead !== undefined, () => match.handler(req, res));
      else await match.handler(req, res);
    } catch (err) {
      writeError(res, method, err, version, style);
    }
  }

  return async function dispatch(rawReq: http.IncomingMessage, rawRes: http.ServerResponse, upgradeHead?: Buffer): Promise<void> {
    let res: ApiResponse | undefined;
    try {
      res = authz ? new AuthzResponse(rawRes, rawReq, upgradeHead, corsHeaders) : new ApiResponse(rawRes, rawReq, upgradeHead, corsHeaders);
      await serve(rawReq, rawRes, upgradeHead, res);
    } catch (err) {
      // Whatever escaped the error mapping ends this request, never the daemon.
      log.error('request failed', { method: rawReq.method, path: (rawReq.url ?? '/').split('?')[0], error: errorMessage(err), stack: (err as Error)?.stack });
      if (res && !res.started && !rawRes.writableEnded) {
        try {
          res.json(500, { message: errorMessage(err) });
          return;
        } catch {
          // fall through: the connection goes
        }
      }
      rawReq.socket.destroy();
    }
  };
}

/** An http.Server (or https.Server) serving the API, hijacks included. */
export function createApiServer(router: Router, opts: ServerOptions): http.Server {
  const dispatch = createDispatcher(router, opts);
  const limits = opts.limits ?? connectionLimitsFromEnv();
  // Node checks the head timeout at this interval (its default, 30 s, suits its default of 60 s).
  const connectionsCheckingInterval = checkIntervalMs(limits);
  // TLS is loaded only when a listener uses it: a daemon on its unix socket does not carry it.
  const server = opts.tls
    ? (createRequire(import.meta.url)('node:https') as typeof import('node:https')).createServer({
        key: opts.tls.key,
        cert: opts.tls.cert,
        ca: opts.tls.ca,
        requestCert: opts.tls.verifyClients,
        rejectUnauthorized: opts.tls.verifyClients,
        connectionsCheckingInterval,
      })
    : http.createServer({ connectionsCheckingInterval });
  server.on('request', (req, res) => void dispatch(req, res));
  // Attach and exec ask for `Upgrade: tcp`; they are served by the same handlers, which hijack the socket.
  server.on('upgrade', (req: http.IncomingMessage, socket: Duplex, head: Buffer) => {
    socket.on('error', () => undefined);
    try {
      const res = new http.ServerResponse(req);
      res.assignSocket(socket as import('node:net').Socket);
      res.shouldKeepAlive = false;
      void dispatch(req, res, head);
    } catch (err) {
      log.error('upgrade failed', { path: (req.url ?? '/').split('?')[0], error: errorMessage(err) });
      socket.destroy();
    }
  });
  // Head and body timeouts, idle kept-alive connections and the cap of unfinished requests. Responses that
  // have started (streams, hijacks) are never cut.
  guardConnections(server, limits, opts.tls !== undefined);
  return server;
}
