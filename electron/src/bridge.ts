/**
 * The main-process side of the renderer's bridge. The preload exposes only `request` and a way to open
 * streams; everything the renderer asks is checked here against an allow-list of Engine API operations
 * (method + path pattern) before it reaches the engine socket. Streams (logs, events, stats, pull progress)
 * and terminals (exec, attach) travel over a MessagePort: `{type: 'data', data: Uint8Array}` each way,
 * `{type: 'end'}` / `{type: 'error', status, message}` from the engine side, `{type: 'close'}` from the renderer.
 *
 * Paths are not enough: a create body can ask for a privileged container or one that mounts `/`. Such
 * bodies (see hostAccessOf) go through only after the user allowed them in a dialog of the main process,
 * which page script can neither draw nor press.
 */
import http from 'node:http';
import https from 'node:https';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { BridgeError } from './bridge-error.js';
import { hostAccessOf } from './host-access.js';

export { BridgeError, hostAccessOf };

/** daemon/src/ui/terminal.ts: the terminal proxy the UI server uses too; kept structural so this package compiles on its own. */
interface TerminalModule {
  hijackHeaders(body: string): Record<string, string>;
  proxyTerminal(
    request: http.ClientRequest,
    body: string,
    sink: {
      data(bytes: Buffer): void;
      end(): void;
      broken(err: Error): void;
      refused(status: number | undefined, message: string): void;
      unreachable(err: Error): void;
    },
  ): { write(bytes: Buffer): void; close(): void };
}
/** The repository (or package) root: this file runs from electron/dist/src. */
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
const { hijackHeaders, proxyTerminal } = (await import(pathToFileURL(path.join(root, 'daemon', 'dist', 'src', 'ui', 'terminal.js')).href)) as TerminalModule;

/**
 * The engine the bridge talks to: a unix socket, or TCP (with TLS: the CA to trust, the client's own
 * certificate). `token`: the bearer token the engine knows the app by (the local session of the daemon the
 * app hosts), sent with every request; the paths beside the engine API (sandbox policies) need one.
 */
export type EngineEndpoint = ({ socketPath: string } | { host: string; port: number; tls?: { ca?: Buffer; cert?: Buffer; key?: Buffer } }) & { token?: string };

/** A request to the engine, over whichever transport the endpoint names. */
export function engineRequest(engine: EngineEndpoint, options: http.RequestOptions): http.ClientRequest {
  if (engine.token) options = { ...options, headers: { ...(options.headers as Record<string, string> | undefined), Authorization: `Bearer ${engine.token}` } };
  if ('socketPath' in engine) return http.request({ ...options, socketPath: engine.socketPath });
  const host = engine.host.replace(/^\[(.*)\]$/, '$1');
  // The Host header names the engine's address: TLS checks the engine's certificate against it.
  const headers = { ...(options.headers as Record<string, string> | undefined), Host: `${engine.host}:${engine.port}` };
  if (!engine.tls) return http.request({ ...options, headers, host, port: engine.port });
  return https.request({ ...options, headers, host, port: engine.port, ca: engine.tls.ca, cert: engine.tls.cert, key: engine.tls.key });
}

const ID = '[A-Za-z0-9][A-Za-z0-9_.-]*';
const IMAGE = '[A-Za-z0-9][A-Za-z0-9_.:/@-]*';
const V = '/v1\\.\\d+';

/** The operations the renderer may ask for. Anything else is refused with 403. */
export const ALLOWED: Array<[string, RegExp]> = [
  ['GET', new RegExp(`^/_ping$`)],
  ['GET', new RegExp(`^${V}/(version|info|events|system/df)$`)],
  ['GET', new RegExp(`^${V}/containers/json$`)],
  ['GET', new RegExp(`^${V}/containers/${ID}/(json|logs|stats|top)$`)],
  ['POST', new RegExp(`^${V}/containers/create$`)],
  ['POST', new RegExp(`^${V}/containers/${ID}/(start|stop|restart|pause|unpause|kill|resize|exec|rename)$`)],
  ['POST', new RegExp(`^${V}/containers/prune$`)],
  ['DELETE', new RegExp(`^${V}/containers/${ID}$`)],
  ['POST', new RegExp(`^${V}/exec/${ID}/resize$`)],
  ['GET', new RegExp(`^${V}/exec/${ID}/json$`)],
  ['GET', new RegExp(`^${V}/images/json$`)],
  ['GET', new RegExp(`^${V}/images/${IMAGE}/(json|history)$`)],
  ['POST', new RegExp(`^${V}/images/(create|prune)$`)],
  ['POST', new RegExp(`^${V}/images/${IMAGE}/(tag|push)$`)],
  ['DELETE', new RegExp(`^${V}/images/${IMAGE}$`)],
  ['GET', new RegExp(`^${V}/volumes(/${ID})?$`)],
  ['POST', new RegExp(`^${V}/volumes/(create|prune)$`)],
  ['DELETE', new RegExp(`^${V}/volumes/${ID}$`)],
  ['GET', new RegExp(`^${V}/networks(/${ID})?$`)],
  ['POST', new RegExp(`^${V}/networks/(create|prune)$`)],
  ['POST', new RegExp(`^${V}/networks/${ID}/(connect|disconnect)$`)],
  ['DELETE', new RegExp(`^${V}/networks/${ID}$`)],
  ['GET', new RegExp(`^${V}/(nodes|services|tasks)(/${ID})?$`)],
  ['GET', new RegExp(`^${V}/(secrets|configs)$`)],
  ['GET', new RegExp(`^${V}/services/${ID}/logs$`)],
  ['POST', new RegExp(`^${V}/swarm/init$`)],
  ['POST', new RegExp(`^${V}/(services|nodes)/${ID}/update$`)],
  ['POST', new RegExp(`^${V}/services/create$`)],
  ['DELETE', new RegExp(`^${V}/services/${ID}$`)],
  ['GET', new RegExp(`^${V}/plugins(/privileges)?$`)],
  ['POST', new RegExp(`^${V}/plugins/pull$`)],
  ['POST', new RegExp(`^${V}/plugins/${IMAGE}/(enable|disable)$`)],
  ['DELETE', new RegExp(`^${V}/plugins/${IMAGE}$`)],
  // A sandbox's network policy, beside the engine API (no version prefix).
  ['GET', new RegExp(`^/v1/sandboxes/${ID}/network-policies$`)],
  ['PUT', new RegExp(`^/v1/sandboxes/${ID}/network-policies$`)],
];


/** Checks one request of the renderer; returns the path to send, or throws BridgeError(403/400). */
export function checkRequest(method: unknown, target: unknown): { method: string; path: string } {
  if (typeof method !== 'string' || typeof target !== 'string') throw new BridgeError(400, 'a request needs a method and a path');
  const malformed = () => new BridgeError(400, `malformed path ${JSON.stringify(target)}`);
  if (!target.startsWith('/') || target.startsWith('//')) throw malformed();
  // Dot segments (plain or encoded) would climb out of a pattern once normalised: refused before parsing.
  let decoded: string;
  try {
    decoded = decodeURIComponent(target.split('?')[0]!);
  } catch {
    throw malformed();
  }
  if (/(^|\/)\.\.?(\/|$)/.test(decoded) || decoded.includes('\\')) throw malformed();
  let url: URL;
  try {
    url = new URL(target, 'http://engine');
  } catch {
    throw malformed();
  }
  if (url.host !== 'engine') throw malformed();
  const upper = method.toUpperCase();
  if (!ALLOWED.some(([m, re]) => m === upper && re.test(url.pathname))) throw new BridgeError(403, `${upper} ${url.pathname} is not an operation the app may use`);
  return { method: upper, path: url.pathname + url.search };
}

/**
 * Asks the user whether a request that reaches beyond a container's isolation may go on (the app's own
 * dialog); resolves true only when they allowed it.
 */
export type ConfirmHostAccess = (ask: { method: string; path: string; reasons: string[] }) => Promise<boolean>;

/** Refuses (403) a request that reaches the host unless `confirm` says the user allowed it. */
async function checkHostAccess(method: string, path: string, body: string | undefined, confirm: ConfirmHostAccess | undefined): Promise<void> {
  const reasons = hostAccessOf(method, path, body);
  if (!reasons.length) return;
  if (confirm && (await confirm({ method, path, reasons }))) return;
  throw new BridgeError(403, `refused without the user's consent: the request ${reasons.join('; ')}`);
}

export interface BridgeRequest {
  method: string;
  path: string;
  body?: string;
  headers?: Record<string, string>;
}

const PASSED_HEADERS = new Set(['x-registry-auth', 'content-type']);

function headersOf(req: BridgeRequest): Record<string, string> {
  const out: Record<string, string> = { Host: 'engine' };
  for (const [k, v] of Object.entries(req.headers ?? {})) if (PASSED_HEADERS.has(k.toLowerCase()) && typeof v === 'string') out[k] = v;
  if (req.body !== undefined) {
    out['Content-Type'] = 'application/json';
    out['Content-Length'] = String(Buffer.byteLength(req.body));
  }
  return out;
}

/** One request to the engine; the body is read whole (small JSON answers). */
export async function forwardRequest(engine: EngineEndpoint, req: BridgeRequest, confirm?: ConfirmHostAccess): Promise<{ status: number; body: string }> {
  const { method, path } = checkRequest(req.method, req.path);
  if (req.body !== undefined && typeof req.body !== 'string') return Promise.reject(new BridgeError(400, 'the body must be a string'));
  await checkHostAccess(method, path, req.body, confirm);
  return new Promise((resolve, reject) => {
    const r = engineRequest(engine, { method, path, headers: headersOf(req) });
    r.on('response', (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 500, body: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    });
    r.on('error', (err) => reject(new BridgeError(502, `the engine did not answer: ${err.message}`)));
    r.end(req.body);
  });
}

/** The part of Electron's MessagePortMain the bridge uses. */
export interface PortLike {
  postMessage(message: unknown): void;
  on(event: 'message', listener: (ev: { data: any }) => void): unknown;
  on(event: 'close', listener: () => void): unknown;
  start(): void;
  close(): void;
}

function errorMessage(status: number, text: string): string {
  try {
    return (JSON.parse(text) as { message?: string }).message ?? text;
  } catch {
    return text || `the engine answered ${status}`;
  }
}

/** A streamed request (logs, events, stats, pull): engine chunks go to the port until either side ends. */
export async function openStream(engine: EngineEndpoint, req: BridgeRequest, port: PortLike, confirm?: ConfirmHostAccess): Promise<void> {
  let checked: { method: string; path: string };
  try {
    checked = checkRequest(req.method, req.path);
    if (req.body !== undefined && typeof req.body !== 'string') throw new BridgeError(400, 'the body must be a string');
    await checkHostAccess(checked.method, checked.path, req.body, confirm);
  } catch (err) {
    port.postMessage({ type: 'error', status: (err as BridgeError).status ?? 400, message: (err as Error).message });
    port.close();
    return;
  }
  const r = engineRequest(engine, { method: checked.method, path: checked.path, headers: headersOf(req) });
  r.on('response', (res) => {
    if ((res.statusCode ?? 500) >= 400) {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        port.postMessage({ type: 'error', status: res.statusCode, message: errorMessage(res.statusCode ?? 500, Buffer.concat(chunks).toString('utf8')) });
        port.close();
      });
      return;
    }
    res.on('data', (c: Buffer) => port.postMessage({ type: 'data', data: new Uint8Array(c) }));
    res.on('end', () => {
      port.postMessage({ type: 'end' });
      port.close();
    });
  });
  r.on('error', (err) => {
    port.postMessage({ type: 'error', status: 502, message: `the engine did not answer: ${err.message}` });
    port.close();
  });
  port.on('message', (ev) => {
    if (ev.data?.type === 'close') r.destroy();
  });
  port.on('close', () => r.destroy());
  port.start();
  r.end(req.body);
}

export type TerminalTarget = { kind: 'attach'; containerId: string } | { kind: 'exec'; execId: string };

/** A terminal: a hijacked exec start or attach (TTY, raw bytes) bridged to the port. */
export function openTerminal(engine: EngineEndpoint, target: TerminalTarget, version: string, port: PortLike): void {
  if (!/^1\.\d+$/.test(version)) version = '1.53';
  const idOk = (id: unknown) => typeof id === 'string' && new RegExp(`^${ID}$`).test(id);
  let path: string;
  let body = '';
  if (target?.kind === 'exec' && idOk(target.execId)) {
    path = `/v${version}/exec/${target.execId}/start`;
    body = JSON.stringify({ Detach: false, Tty: true });
  } else if (target?.kind === 'attach' && idOk(target.containerId)) {
    path = `/v${version}/containers/${target.containerId}/attach?stream=1&stdin=1&stdout=1&stderr=1`;
  } else {
    port.postMessage({ type: 'error', status: 400, message: 'unknown terminal target' });
    port.close();
    return;
  }
  const request = engineRequest(engine, { method: 'POST', path, headers: { Host: 'engine', ...hijackHeaders(body) } });
  const terminal = proxyTerminal(request, body, {
    data: (bytes) => port.postMessage({ type: 'data', data: new Uint8Array(bytes) }),
    end: () => {
      port.postMessage({ type: 'end', message: 'exited' });
      port.close();
    },
    broken: () => port.close(),
    refused: (status, message) => {
      port.postMessage({ type: 'error', status, message: message || `the engine answered ${status ?? 500}` });
      port.close();
    },
    unreachable: (err) => {
      port.postMessage({ type: 'error', status: 502, message: `the engine did not answer: ${err.message}` });
      port.close();
    },
  });
  port.on('message', (ev) => {
    const msg = ev.data as { type?: string; data?: Uint8Array };
    if (msg?.type === 'close') terminal.close();
    else if (msg?.type === 'data' && msg.data instanceof Uint8Array) terminal.write(Buffer.from(msg.data));
  });
  port.on('close', () => terminal.close());
  port.start();
}

/** The build options the app sends; others (a host network for RUN, cgroup parents...) are refused. */
const BUILD_PARAMS = new Set(['dockerfile', 't', 'nocache', 'q', 'rm', 'forcerm', 'pull', 'labels', 'buildargs']);
/** How much of an upload may be on its way to the engine before the page waits for acknowledgements. */
export const UPLOAD_WINDOW = 4 * 1024 * 1024;

/** Checks an upload (only a build from a tar context); returns the path to send, or throws BridgeError. */
export function checkUpload(method: unknown, target: unknown): string {
  if (method !== 'POST' || typeof target !== 'string' || !/^\/v1\.\d+\/build(\?|$)/.test(target)) throw new BridgeError(403, 'only a build takes an upload');
  const url = new URL(target, 'http://engine');
  if (url.host !== 'engine') throw new BridgeError(400, `malformed path ${JSON.stringify(target)}`);
  for (const key of url.searchParams.keys()) if (!BUILD_PARAMS.has(key)) throw new BridgeError(403, `the build option ${key} is not one the app may use`);
  return url.pathname + url.search;
}

/**
 * A request whose body the page sends in chunks over the port (a build context): `{type: 'data', data}`
 * each, then `{type: 'end-upload'}`. Each chunk is acknowledged (`{type: 'ack', bytes}`) once the engine's
 * connection took it, so that the page sends no more than UPLOAD_WINDOW ahead. The answer streams back as
 * openStream's does.
 */
export function openUpload(engine: EngineEndpoint, req: { method: string; path: string }, port: PortLike): void {
  let path: string;
  try {
    path = checkUpload(req.method, req.path);
  } catch (err) {
    port.postMessage({ type: 'error', status: (err as BridgeError).status ?? 400, message: (err as Error).message });
    port.close();
    return;
  }
  let done = false;
  const finish = (message: { type: string; status?: number; message?: string }) => {
    if (done) return;
    done = true;
    port.postMessage(message);
    port.close();
  };
  const r = engineRequest(engine, { method: 'POST', path, headers: { Host: 'engine', 'Content-Type': 'application/x-tar', 'Transfer-Encoding': 'chunked' } });
  r.on('response', (res) => {
    if ((res.statusCode ?? 500) >= 400) {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => finish({ type: 'error', status: res.statusCode, message: errorMessage(res.statusCode ?? 500, Buffer.concat(chunks).toString('utf8')) }));
      return;
    }
    res.on('data', (c: Buffer) => !done && port.postMessage({ type: 'data', data: new Uint8Array(c) }));
    res.on('end', () => finish({ type: 'end' }));
  });
  r.on('error', (err) => finish({ type: 'error', status: 502, message: `the engine did not answer: ${err.message}` }));
  port.on('message', (ev) => {
    const msg = ev.data as { type?: string; data?: Uint8Array };
    if (msg?.type === 'data' && msg.data instanceof Uint8Array) {
      const bytes = msg.data.byteLength;
      r.write(Buffer.from(msg.data.buffer, msg.data.byteOffset, bytes), () => !done && port.postMessage({ type: 'ack', bytes }));
    } else if (msg?.type === 'end-upload') r.end();
    else if (msg?.type === 'close') r.destroy();
  });
  port.on('close', () => r.destroy());
  port.start();
}
