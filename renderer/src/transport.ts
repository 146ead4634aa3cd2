/**
 * Where the renderer talks to the engine. Two implementations behind one interface:
 * - the Electron bridge (`window.berth`, from the preload script): requests over an allow-listed invoke,
 *   byte streams and terminals over MessagePorts;
 * - HTTP and websockets to the page's own origin when served by `berthd --ui` (which forwards `/api/...`
 *   to the engine and offers `/ui/exec/<id>/ws` for exec terminals).
 * Views never know which one they have.
 */

export const API_VERSION = '1.53';

/**
 * The engine's other interfaces (`/v1/sandboxes/...`) sit beside the engine API and take no version prefix;
 * everything else is an engine path, asked at API_VERSION.
 */
export function versionedPath(path: string): string {
  return path.startsWith('/_ping') || /^\/v\d+\//.test(path) ? path : `/v${API_VERSION}${path}`;
}

/** An answer of the engine that is not 2xx; `message` is the engine's own. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

export interface RequestOptions {
  body?: unknown;
  headers?: Record<string, string>;
}

/** A bidirectional byte stream (terminal). */
export interface ByteSocket {
  send(data: string | Uint8Array): void;
  onData(cb: (bytes: Uint8Array) => void): void;
  onClose(cb: (reason: string) => void): void;
  close(): void;
}

export type TerminalTarget = { kind: 'attach'; containerId: string } | { kind: 'exec'; execId: string };

export interface Transport {
  readonly name: 'electron' | 'http';
  /** One request; resolves with the decoded JSON (or text) body, throws ApiError on 4xx/5xx. */
  request<T = unknown>(method: string, path: string, opts?: RequestOptions): Promise<T>;
  /** A streamed response: chunks until the engine ends it or `cancel` is called. Rejects on errors. */
  stream(method: string, path: string, onChunk: (bytes: Uint8Array) => void, opts?: RequestOptions & { signal?: AbortSignal }): Promise<void>;
  terminal(target: TerminalTarget): ByteSocket;
  /**
   * A request whose body is a large Blob (a build context), its upload's progress told as it goes, the
   * answer streamed as `stream` does. Absent where the transport cannot send one.
   */
  upload?(method: string, path: string, body: Blob, opts: UploadOptions): Promise<void>;
}

export interface UploadOptions {
  contentType: string;
  headers?: Record<string, string>;
  onUploaded(sent: number, total: number): void;
  onChunk(bytes: Uint8Array): void;
  signal?: AbortSignal;
}

/** The desktop app's settings (electron/src/settings.ts). */
export interface AppSettings {
  version: number;
  engine: { mode: 'embedded' | 'socket' | 'tcp'; socketPath: string; tcp: { host: string; port: number; tls: boolean; ca: string; cert: string; key: string } };
  /** The VM the bundled engine runs in on macOS and Windows. */
  vm?: { cpus: number; memoryMiB: number; diskGiB: number };
  theme: 'system' | 'light' | 'dark';
}

/** The app's engine as the main process reports it; `vmStatus` once a VM was started for it (electron/src/vm-engine.ts). */
export interface EngineStatus {
  state: string;
  error: string;
  mode: string;
  address: string;
  vm?: boolean;
  vmStatus?: { state: string; driver: string; resources: { cpus: number; memoryMiB: number; diskGiB: number }; error?: string; consoleLog?: string };
}

/** The preload's bridge (see electron/src/preload.cts). */
export interface BerthBridge {
  request(req: { method: string; path: string; body?: string; headers?: Record<string, string> }): Promise<{ status: number; body: string }>;
  version: string;
  settings?: { get(): Promise<AppSettings>; update(patch: unknown): Promise<AppSettings> };
  engine?: { status(): Promise<EngineStatus> };
  registries?: {
    list(): Promise<{ keychain: boolean; logins: Array<{ serveraddress: string; username: string }> }>;
    login(login: { serveraddress: string; username: string; password: string }): Promise<{ ok: boolean; message: string }>;
    logout(serveraddress: string): Promise<{ ok: boolean }>;
  };
}

declare global {
  interface Window {
    berth?: BerthBridge;
  }
}

function messageOf(status: number, text: string): string {
  try {
    const parsed = JSON.parse(text) as { message?: string };
    if (parsed && typeof parsed.message === 'string') return parsed.message;
  } catch {
    /* not JSON */
  }
  return text.trim() || `the engine answered ${status}`;
}

function decodeBody<T>(text: string): T {
  if (!text) return undefined as T;
  try {
    return JSON.parse(text) as T;
  } catch {
    return text as T;
  }
}

export class HttpTransport implements Transport {
  readonly name = 'http' as const;
  constructor(private readonly base = '/api') {}

  private url(path: string): string {
    return `${this.base}${versionedPath(path)}`;
  }

  private init(method: string, opts: RequestOptions & { signal?: AbortSignal } = {}): RequestInit {
    const headers: Record<string, string> = { ...opts.headers };
    let body: string | undefined;
    if (opts.body !== undefined) {
      body = JSON.stringify(opts.body);
      headers['Content-Type'] = 'application/json';
    }
    return { method, headers, body, signal: opts.signal, credentials: 'same-origin' };
  }

  async request<T>(method: string, path: string, opts?: RequestOptions): Promise<T> {
    const res = await fetch(this.url(path), this.init(method, opts));
    const text = await res.text();
    if (!res.ok) throw new ApiError(res.status, messageOf(res.status, text));
    return decodeBody<T>(text);
  }

  async stream(method: string, path: string, onChunk: (bytes: Uint8Array) => void, opts?: RequestOptions & { signal?: AbortSignal }): Promise<void> {
    const res = await fetch(this.url(path), this.init(method, opts));
    if (!res.ok) throw new ApiError(res.status, messageOf(res.status, await res.text()));
    if (!res.body) return;
    const reader = res.body.getReader();
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) return;
        onChunk(value);
      }
    } catch (err) {
      if (opts?.signal?.aborted) return;
      throw err;
    }
  }

  /** XMLHttpRequest: of the browser's clients, the one that tells an upload's progress. */
  upload(method: string, path: string, body: Blob, opts: UploadOptions): Promise<void> {
    return new Promise((resolve, reject) => {
      const xhr = new XMLHttpRequest();
      xhr.open(method, this.url(path));
      xhr.withCredentials = true;
      xhr.setRequestHeader('Content-Type', opts.contentType);
      for (const [k, v] of Object.entries(opts.headers ?? {})) xhr.setRequestHeader(k, v);
      const encoder = new TextEncoder();
      let seen = 0;
      const flush = () => {
        // The answer so far: only its new part is handed on (the engine's JSON lines).
        if (xhr.status !== 200) return;
        const text = xhr.responseText;
        if (text.length > seen) opts.onChunk(encoder.encode(text.slice(seen)));
        seen = text.length;
      };
      xhr.upload.onprogress = (ev) => opts.onUploaded(ev.loaded, ev.lengthComputable ? ev.total : body.size);
      xhr.upload.onload = () => opts.onUploaded(body.size, body.size);
      xhr.onprogress = flush;
      xhr.onload = () => {
        if (xhr.status >= 400) return reject(new ApiError(xhr.status, messageOf(xhr.status, xhr.responseText)));
        flush();
        resolve();
      };
      xhr.onerror = () => reject(new ApiError(0, 'the upload failed: the connection to the engine broke'));
      xhr.onabort = () => resolve();
      opts.signal?.addEventListener('abort', () => xhr.abort());
      xhr.send(body);
    });
  }

  terminal(target: TerminalTarget): ByteSocket {
    const proto = location.protocol === 'https:' ? 'wss:' : 'ws:';
    const path =
      target.kind === 'exec'
        ? `/ui/exec/${encodeURIComponent(target.execId)}/ws`
        : `${this.base}/v${API_VERSION}/containers/${encodeURIComponent(target.containerId)}/attach/ws?stream=1&stdin=1&stdout=1&stderr=1`;
    const ws = new WebSocket(`${proto}//${location.host}${path}`);
    ws.binaryType = 'arraybuffer';
    const queue: Array<string | Uint8Array> = [];
    const encoder = new TextEncoder();
    ws.addEventListener('open', () => {
      for (const item of queue.splice(0)) ws.send(item);
    });
    return {
      send(data) {
        // Binary frames: the engine takes bytes as they are (a text frame would be fine too, but keep one kind).
        const bytes = typeof data === 'string' ? encoder.encode(data) : data;
        if (ws.readyState === WebSocket.OPEN) ws.send(bytes);
        else if (ws.readyState === WebSocket.CONNECTING) queue.push(bytes);
      },
      onData(cb) {
        ws.addEventListener('message', (ev) => {
          if (typeof ev.data === 'string') cb(encoder.encode(ev.data));
          else cb(new Uint8Array(ev.data as ArrayBuffer));
        });
      },
      onClose(cb) {
        ws.addEventListener('close', (ev) => cb(ev.reason || (ev.code === 1000 ? 'ended' : `closed (${ev.code})`)));
      },
      close() {
        ws.close();
      },
    };
  }
}

/**
 * The Electron bridge: plain requests through `window.berth.request`; streams and terminals through a
 * MessageChannel whose far end the preload hands to the main process (window.postMessage with the port).
 */
export class ElectronTransport implements Transport {
  readonly name = 'electron' as const;
  constructor(private readonly bridge: BerthBridge) {}

  async request<T>(method: string, path: string, opts: RequestOptions = {}): Promise<T> {
    const res = await this.bridge.request({
      method,
      path: versionedPath(path),
      body: opts.body === undefined ? undefined : JSON.stringify(opts.body),
      headers: opts.headers,
    });
    if (res.status >= 400) throw new ApiError(res.status, messageOf(res.status, res.body));
    return decodeBody<T>(res.body);
  }

  private openPort(open: Record<string, unknown>): MessagePort {
    const channel = new MessageChannel();
    window.postMessage({ berthOpen: open }, '*', [channel.port2]);
    return channel.port1;
  }

  stream(method: string, path: string, onChunk: (bytes: Uint8Array) => void, opts: RequestOptions & { signal?: AbortSignal } = {}): Promise<void> {
    return new Promise((resolve, reject) => {
      const port = this.openPort({
        type: 'stream',
        method,
        path: `/v${API_VERSION}${path}`,
        body: opts.body === undefined ? undefined : JSON.stringify(opts.body),
        headers: opts.headers,
      });
      opts.signal?.addEventListener('abort', () => {
        port.postMessage({ type: 'close' });
        port.close();
        resolve();
      });
      port.onmessage = (ev: MessageEvent<{ type: string; data?: Uint8Array; status?: number; message?: string }>) => {
        const msg = ev.data;
        if (msg.type === 'data' && msg.data) onChunk(msg.data);
        else if (msg.type === 'end') {
          port.close();
          resolve();
        } else if (msg.type === 'error') {
          port.close();
          reject(new ApiError(msg.status ?? 500, msg.message ?? 'stream failed'));
        }
      };
      port.start();
    });
  }

  /**
   * The body goes over the port in chunks read from the Blob; the main process acknowledges each once the
   * engine's connection took it, and no more than UPLOAD_WINDOW bytes wait unacknowledged.
   */
  upload(method: string, path: string, body: Blob, opts: UploadOptions): Promise<void> {
    const UPLOAD_WINDOW = 4 * 1024 * 1024;
    return new Promise((resolve, reject) => {
      const port = this.openPort({ type: 'upload', method, path: `/v${API_VERSION}${path}` });
      let acked = 0;
      let sent = 0;
      let settled = false;
      let wake: (() => void) | undefined;
      const settle = (fn: () => void) => {
        if (settled) return;
        settled = true;
        wake?.();
        fn();
      };
      opts.signal?.addEventListener('abort', () => {
        port.postMessage({ type: 'close' });
        port.close();
        settle(resolve);
      });
      port.onmessage = (ev: MessageEvent<{ type: string; data?: Uint8Array; bytes?: number; status?: number; message?: string }>) => {
        const msg = ev.data;
        if (msg.type === 'ack') {
          acked += msg.bytes ?? 0;
          opts.onUploaded(acked, body.size);
          wake?.();
        } else if (msg.type === 'data' && msg.data) opts.onChunk(msg.data);
        else if (msg.type === 'end') {
          port.close();
          settle(resolve);
        } else if (msg.type === 'error') {
          port.close();
          settle(() => reject(new ApiError(msg.status ?? 500, msg.message ?? 'the upload failed')));
        }
      };
      port.start();
      void (async () => {
        const reader = body.stream().getReader();
        for (;;) {
          const { done, value } = await reader.read();
          if (settled) return void reader.cancel();
          if (done) break;
          // Within the window with this chunk too (a chunk larger than the window goes alone).
          while (sent > acked && sent - acked + value.byteLength > UPLOAD_WINDOW && !settled) await new Promise<void>((r) => (wake = r));
          sent += value.byteLength;
          port.postMessage({ type: 'data', data: value });
        }
        port.postMessage({ type: 'end-upload' });
      })().catch((err: unknown) => {
        port.postMessage({ type: 'close' });
        port.close();
        settle(() => reject(new ApiError(0, `the folder could not be read: ${(err as Error).message}`)));
      });
    });
  }

  terminal(target: TerminalTarget): ByteSocket {
    const port = this.openPort({ type: 'terminal', target, version: API_VERSION });
    const encoder = new TextEncoder();
    const dataCbs: Array<(b: Uint8Array) => void> = [];
    const closeCbs: Array<(r: string) => void> = [];
    port.onmessage = (ev: MessageEvent<{ type: string; data?: Uint8Array; message?: string }>) => {
      if (ev.data.type === 'data' && ev.data.data) for (const cb of dataCbs) cb(ev.data.data);
      else if (ev.data.type === 'end' || ev.data.type === 'error') for (const cb of closeCbs) cb(ev.data.message ?? 'ended');
    };
    port.start();
    return {
      send: (data) => port.postMessage({ type: 'data', data: typeof data === 'string' ? encoder.encode(data) : data }),
      onData: (cb) => void dataCbs.push(cb),
      onClose: (cb) => void closeCbs.push(cb),
      close: () => {
        port.postMessage({ type: 'close' });
        port.close();
      },
    };
  }
}

export function createTransport(): Transport {
  return window.berth ? new ElectronTransport(window.berth) : new HttpTransport();
}

/** Splits a byte stream into lines (JSON lines of /events and pulls). */
export function lineSplitter(onLine: (line: string) => void): (bytes: Uint8Array) => void {
  const decoder = new TextDecoder();
  let rest = '';
  return (bytes) => {
    rest += decoder.decode(bytes, { stream: true });
    let nl: number;
    while ((nl = rest.indexOf('\n')) >= 0) {
      const line = rest.slice(0, nl).trim();
      rest = rest.slice(nl + 1);
      if (line) onLine(line);
    }
  };
}

/** Demultiplexes the 8-byte framed stdout/stderr stream of logs and non-TTY attach. */
export function frameDemuxer(onFrame: (stream: 'stdout' | 'stderr', bytes: Uint8Array) => void): (bytes: Uint8Array) => void {
  let buf = new Uint8Array(0);
  return (bytes) => {
    const merged = new Uint8Array(buf.length + bytes.length);
    merged.set(buf);
    merged.set(bytes, buf.length);
    let off = 0;
    while (merged.length - off >= 8) {
      const size = ((merged[off + 4]! << 24) >>> 0) + (merged[off + 5]! << 16) + (merged[off + 6]! << 8) + merged[off + 7]!;
      if (merged.length - off - 8 < size) break;
      onFrame(merged[off] === 2 ? 'stderr' : 'stdout', merged.subarray(off + 8, off + 8 + size));
      off += 8 + size;
    }
    buf = merged.slice(off);
  };
}
