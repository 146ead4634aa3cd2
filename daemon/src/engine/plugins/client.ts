/**
 * The plugin client: HTTP/1.1 `POST /<Interface>.<Method>` with a JSON body to a plugin's socket (a unix
 * socket, or a TCP address of a legacy `.spec`/`.json` file), in the plugins' media type. A response that
 * carries `Err` is an error; a connection that fails (the plugin still starting) is retried with a growing
 * pause until the retry window ends. The connection is the Host's to make (`dial`): the plugin listens on
 * the Host's machine, which through an agent is not the daemon's.
 */
import http from 'node:http';
import type { Duplex } from 'node:stream';
import { EngineError, errorMessage } from '../../errors.js';

/** The media type of plugin requests and answers. */
export const PLUGIN_MEDIA_TYPE = 'application/vnd.docker.plugins.v1.2+json';
/** How long a call keeps trying to reach a plugin that refuses connections. */
export const DEFAULT_RETRY_WINDOW_MS = 30_000;
/** The longest answer read from a plugin (the protocols exchange small JSON documents). */
const MAX_ANSWER_BYTES = 16 << 20;

/** Where a plugin listens. */
export type PluginAddress = { socketPath: string } | { host: string; port: number };

/** Opens a connection to a plugin's address (the Host's `plugins.dial`); resolves once connected. */
export type PluginDialer = (address: PluginAddress) => Promise<Duplex>;

/** An error a plugin answered (its `Err`), as opposed to a failure to reach it. */
export class PluginError extends EngineError {}

/** The plugin could not be reached within the retry window. */
export class PluginUnreachable extends EngineError {}

const RETRYABLE = new Set(['ECONNREFUSED', 'ENOENT', 'ECONNRESET', 'EAGAIN', 'EPIPE']);

/** Parses an address as `.spec` files and plugin sockets give them: unix:///path, tcp://host:port, or a path. */
export function parsePluginAddress(address: string): PluginAddress {
  const text = address.trim();
  if (text.startsWith('/')) return { socketPath: text };
  const m = /^([a-z]+):\/\/(.*)$/.exec(text);
  if (!m) throw new EngineError(`invalid plugin address ${JSON.stringify(text)}: expected unix:///path or tcp://host:port`);
  const [, scheme, rest] = m;
  if (scheme === 'unix') {
    if (!rest.startsWith('/')) throw new EngineError(`invalid plugin address ${JSON.stringify(text)}: the socket path must be absolute`);
    return { socketPath: rest };
  }
  if (scheme === 'tcp' || scheme === 'http') {
    const hp = /^\[?([^\]]*?)\]?:(\d{1,5})\/?$/.exec(rest);
    if (!hp || Number(hp[2]) > 65535) throw new EngineError(`invalid plugin address ${JSON.stringify(text)}: expected tcp://host:port`);
    return { host: hp[1], port: Number(hp[2]) };
  }
  throw new EngineError(`invalid plugin address ${JSON.stringify(text)}: unsupported scheme ${scheme}`);
}

export class PluginClient {
  constructor(
    readonly address: PluginAddress,
    private readonly retryWindowMs = DEFAULT_RETRY_WINDOW_MS,
    /** Makes the connections; without it, they are made from the daemon's own process. */
    private readonly dial?: PluginDialer,
  ) {}

  /**
   * Calls `method` (`Interface.Method`) with `body`; answers the decoded JSON answer. An `Err` in the
   * answer throws PluginError: with the method's name before it when the status is not 200, as dockerd
   * words it. `retry: false` tries once (discovery of every plugin for a list).
   */
  async call<T = Record<string, unknown>>(method: string, body: unknown = {}, opts: { retry?: boolean } = {}): Promise<T> {
    const deadline = Date.now() + (opts.retry === false ? 0 : this.retryWindowMs);
    let pause = 100;
    for (;;) {
      try {
        return await this.once<T>(method, body);
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code;
        if (!(err instanceof Error) || err instanceof PluginError || !code || !RETRYABLE.has(code)) throw err;
        if (Date.now() + pause > deadline) throw new PluginUnreachable(`${method}: plugin not reachable: ${errorMessage(err)}`, { cause: err });
        await new Promise((resolve) => setTimeout(resolve, pause));
        pause = Math.min(pause * 2, 2000);
      }
    }
  }

  /** http's createConnection over the dialer: the socket given to the request once connected, or the error. */
  private connector(dial: PluginDialer): NonNullable<http.RequestOptions['createConnection']> {
    const address = this.address;
    return (_opts, done) => {
      dial(address).then(
        (socket) => done(null, socket),
        // No socket with an error: http reports the error on the request.
        (err: Error) => done(err, undefined as unknown as Duplex),
      );
      return undefined;
    };
  }

  private once<T>(method: string, body: unknown): Promise<T> {
    const payload = Buffer.from(JSON.stringify(body ?? {}));
    return new Promise<T>((resolve, reject) => {
      const req = http.request(
        {
          ...('socketPath' in this.address ? { socketPath: this.address.socketPath, host: 'plugin' } : { host: this.address.host, port: this.address.port }),
          // One connection per call (http's agent is left out so that createConnection is used).
          ...(this.dial ? { createConnection: this.connector(this.dial) } : { agent: false }),
          method: 'POST',
          path: `/${method}`,
          headers: { Accept: PLUGIN_MEDIA_TYPE, 'Content-Type': PLUGIN_MEDIA_TYPE, 'Content-Length': payload.length },
        },
        (res) => {
          const chunks: Buffer[] = [];
          let size = 0;
          res.on('data', (chunk: Buffer) => {
            size += chunk.length;
            if (size > MAX_ANSWER_BYTES) {
              res.destroy();
              reject(new PluginError(`${method}: the plugin's answer is larger than ${MAX_ANSWER_BYTES} bytes`));
              return;
            }
            chunks.push(chunk);
          });
          res.on('error', reject);
          res.on('end', () => {
            const text = Buffer.concat(chunks).toString('utf8');
            let decoded: any;
            try {
              decoded = text.trim() === '' ? {} : JSON.parse(text);
            } catch {
              if (res.statusCode !== 200) reject(new PluginError(`${method}: ${text.trim() || `status ${res.statusCode}`}`));
              else reject(new PluginError(`${method}: the plugin's answer is not JSON`));
              return;
            }
            const errText = decoded && typeof decoded === 'object' && typeof decoded.Err === 'string' ? decoded.Err : '';
            if (res.statusCode !== 200) {
              reject(new PluginError(`${method}: ${errText || `status ${res.statusCode}`}`));
              return;
            }
            if (errText) {
              reject(new PluginError(errText));
              return;
            }
            resolve(decoded as T);
          });
        },
      );
      req.on('error', reject);
      req.end(payload);
    });
  }
}
