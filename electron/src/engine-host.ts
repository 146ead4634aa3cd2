/**
 * The engine the app uses: either berthd started inside the main process (embedded), or an engine that
 * already serves a unix socket or a TCP address (with TLS certificates). Reports its state to listeners
 * (tray, window title).
 */
import { promises as fs } from 'node:fs';
import { engineRequest, type EngineEndpoint } from './bridge.js';
import type { Settings } from './settings.js';

export type EngineState = 'stopped' | 'starting' | 'running' | 'stopping' | 'error';

/** What the embedded mode needs from the daemon package: `startDaemon` of daemon/src/daemon.ts. */
export interface EmbeddedDaemon {
  shutdown(): Promise<void>;
  /** The bearer token of the daemon's local session: the app's requests act as the local user's. */
  localToken?: string;
  /** Where it serves, when not at the settings' socket path (Windows: the named pipe). */
  socketPath?: string;
}
/** Starts the app's own engine on `socketPath`, as the settings say (the VM's resources). */
export type DaemonStarter = (socketPath: string, settings: Settings) => Promise<EmbeddedDaemon>;

/** Asks the engine's /_ping; resolves with why it did not answer OK, or undefined when it did. */
export function pingEngine(endpoint: EngineEndpoint, timeoutMs = 2000): Promise<string | undefined> {
  return new Promise((resolve) => {
    const req = engineRequest(endpoint, { method: 'GET', path: '/_ping', timeout: timeoutMs, headers: { Host: 'engine' } });
    req.on('response', (res) => {
      res.resume();
      resolve(res.statusCode === 200 ? undefined : `/_ping answered ${res.statusCode}`);
    });
    req.on('timeout', () => req.destroy(new Error(`no answer within ${timeoutMs} ms`)));
    req.on('error', (err) => resolve(err.message));
    req.end();
  });
}

/** Where the settings point: the socket, or the TCP address with the TLS files read. */
export async function endpointOf(engine: Settings['engine']): Promise<EngineEndpoint> {
  if (engine.mode !== 'tcp') return { socketPath: engine.socketPath };
  const { host, port, tls } = engine.tcp;
  if (!tls) return { host, port };
  const read = async (what: string, file: string) => {
    if (!file) return undefined;
    try {
      return await fs.readFile(file);
    } catch (err) {
      throw new Error(`cannot read the TLS ${what} ${file}: ${(err as Error).message}`);
    }
  };
  const [ca, cert, key] = [await read('CA', engine.tcp.ca), await read('certificate', engine.tcp.cert), await read('key', engine.tcp.key)];
  if (!!cert !== !!key) throw new Error('a client certificate needs its key, and a key its certificate');
  return { host, port, tls: { ca, cert, key } };
}

/** How the tray and the settings name the engine's address. */
export function addressOf(engine: Settings['engine']): string {
  if (engine.mode !== 'tcp') return engine.socketPath;
  return `${engine.tcp.tls ? 'https' : 'tcp'}://${engine.tcp.host}:${engine.tcp.port}`;
}

export class EngineHost {
  private stateValue: EngineState = 'stopped';
  private errorText = '';
  private daemon?: EmbeddedDaemon;
  private endpointValue?: EngineEndpoint;
  private listeners = new Set<(state: EngineState) => void>();

  constructor(
    private readonly settings: () => Settings,
    private readonly startEmbedded: DaemonStarter,
    private readonly ping: (endpoint: EngineEndpoint) => Promise<string | undefined> = (e) => pingEngine(e),
  ) {}

  get state(): EngineState {
    return this.stateValue;
  }
  get error(): string {
    return this.errorText;
  }
  get socketPath(): string {
    return this.settings().engine.socketPath;
  }
  /** The endpoint of the engine while it runs (the one it was started or connected with). */
  get endpoint(): EngineEndpoint | undefined {
    return this.stateValue === 'running' ? this.endpointValue : undefined;
  }
  get address(): string {
    return addressOf(this.settings().engine);
  }
  get mode(): Settings['engine']['mode'] {
    return this.settings().engine.mode;
  }

  onChange(cb: (state: EngineState) => void): () => void {
    this.listeners.add(cb);
    return () => void this.listeners.delete(cb);
  }

  private set(state: EngineState, error = ''): void {
    this.stateValue = state;
    this.errorText = error;
    for (const cb of this.listeners) cb(state);
  }

  async start(): Promise<void> {
    if (this.stateValue === 'running' || this.stateValue === 'starting') return;
    this.set('starting');
    const engine = this.settings().engine;
    try {
      let endpoint = await endpointOf(engine);
      if (engine.mode === 'embedded') {
        this.daemon = await this.startEmbedded(engine.socketPath, this.settings());
        if (this.daemon.socketPath) endpoint = { socketPath: this.daemon.socketPath };
        if (this.daemon.localToken) endpoint = { ...endpoint, token: this.daemon.localToken };
      } else {
        const problem = await this.ping(endpoint);
        if (problem) throw new Error(`no engine answers on ${addressOf(engine)}: ${problem}`);
      }
      this.endpointValue = endpoint;
      this.set('running');
    } catch (err) {
      this.daemon = undefined;
      this.endpointValue = undefined;
      this.set('error', (err as Error).message);
    }
  }

  /** Stops the embedded daemon (containers keep running under conmon); a connected engine is only let go. */
  async stop(): Promise<void> {
    if (this.stateValue !== 'running') return;
    this.set('stopping');
    try {
      await this.daemon?.shutdown();
      this.daemon = undefined;
      this.set('stopped');
    } catch (err) {
      this.set('error', (err as Error).message);
    }
  }
}
