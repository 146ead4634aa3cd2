/**
 * The main-process side of the renderer's bridge. The preload exposes only `request` and a way to open
 * streams; everything the renderer asks is checked here against an allow-list of Engine API operations
 * (method + path pattern) before it reaches the engine socket. Streams (logs, events, stats, pull progress)
 * and terminals (exec, attach) travel over a MessagePort: `{type: 'data', data: Uint8Array}` each way,
 * `{type: 'end'}` / `{type: 'error', status, message}` from the engine side, `{type: 'close'}` from the renderer.
 */
import http from 'node:http';
import type { Duplex } from 'node:stream';

/** The engine the bridge talks to. */
export interface EngineEndpoint {
  socketPath: string;
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
  ['GET', new RegExp(`^${V}/(nodes|services|tasks)$`)],
];

export class BridgeError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

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
export async function forwardRequest(engine: EngineEndpoint, req: BridgeRequest): Promise<{ status: number; body: string }> {
  const { method, path } = checkRequest(req.method, req.path);
  if (req.body !== undefined && typeof req.body !== 'string') return Promise.reject(new BridgeError(400, 'the body must be a string'));
  return new Promise((resolve, reject) => {
    const r = http.request({ socketPath: engine.socketPath, method, path, headers: headersOf(req) }, (res) => {
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
export function openStream(engine: EngineEndpoint, req: BridgeRequest, port: PortLike): void {
  let checked: { method: string; path: string };
  try {
    checked = checkRequest(req.method, req.path);
  } catch (err) {
    port.postMessage({ type: 'error', status: (err as BridgeError).status ?? 400, message: (err as Error).message });
    port.close();
    return;
  }
  const r = http.request({ socketPath: engine.socketPath, method: checked.method, path: checked.path, headers: headersOf(req) }, (res) => {
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
  let socket: Duplex | undefined;
  const pending: Buffer[] = [];
  const r = http.request({
    socketPath: engine.socketPath,
    method: 'POST',
    path,
    headers: { Host: 'engine', Connection: 'Upgrade', Upgrade: 'tcp', 'Content-Type': 'application/json', 'Content-Length': String(Buffer.byteLength(body)) },
  });
  r.on('upgrade', (_res, s, head) => {
    socket = s;
    if (head.length) port.postMessage({ type: 'data', data: new Uint8Array(head) });
    for (const b of pending.splice(0)) s.write(b);
    s.on('data', (c: Buffer) => port.postMessage({ type: 'data', data: new Uint8Array(c) }));
    s.on('end', () => {
      port.postMessage({ type: 'end', message: 'exited' });
      port.close();
    });
    s.on('error', () => port.close());
  });
  r.on('response', (res) => {
    const chunks: Buffer[] = [];
    res.on('data', (c: Buffer) => chunks.push(c));
    res.on('end', () => {
      port.postMessage({ type: 'error', status: res.statusCode, message: errorMessage(res.statusCode ?? 500, Buffer.concat(chunks).toString('utf8')) });
      port.close();
    });
  });
  r.on('error', (err) => {
    port.postMessage({ type: 'error', status: 502, message: `the engine did not answer: ${err.message}` });
    port.close();
  });
  port.on('message', (ev) => {
    const msg = ev.data as { type?: string; data?: Uint8Array };
    if (msg?.type === 'close') {
      socket?.destroy();
      r.destroy();
    } else if (msg?.type === 'data' && msg.data instanceof Uint8Array) {
      const bytes = Buffer.from(msg.data);
      if (socket) socket.write(bytes);
      else pending.push(bytes);
    }
  });
  port.on('close', () => {
    socket?.destroy();
    r.destroy();
  });
  port.start();
  r.end(body);
}
