/**
 * The engine the app uses: either berthd started inside the main process (embedded), or an engine that
 * already serves a socket. Reports its state to listeners (tray, window title).
 */
import http from 'node:http';
import type { Settings } from './settings.js';

export type EngineState = 'stopped' | 'starting' | 'running' | 'stopping' | 'error';

/** What the embedded mode needs from the daemon package: `startDaemon` of daemon/src/daemon.ts. */
export interface EmbeddedDaemon {
  shutdown(): Promise<void>;
}
export type DaemonStarter = (socketPath: string) => Promise<EmbeddedDaemon>;

export function pingSocket(socketPath: string, timeoutMs = 2000): Promise<boolean> {
  return new Promise((resolve) => {
    const req = http.get({ socketPath, path: '/_ping', timeout: timeoutMs }, (res) => {
      res.resume();
      resolve(res.statusCode === 200);
    });
    req.on('timeout', () => req.destroy());
    req.on('error', () => resolve(false));
  });
}

export class EngineHost {
  private stateValue: EngineState = 'stopped';
  private errorText = '';
  private daemon?: EmbeddedDaemon;
  private listeners = new Set<(state: EngineState) => void>();

  constructor(
    private readonly settings: () => Settings,
    private readonly startEmbedded: DaemonStarter,
    private readonly ping: (socketPath: string) => Promise<boolean> = pingSocket,
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
    const { mode, socketPath } = this.settings().engine;
    try {
      if (mode === 'socket') {
        if (!(await this.ping(socketPath))) throw new Error(`no engine answers on ${socketPath}`);
      } else {
        this.daemon = await this.startEmbedded(socketPath);
      }
      this.set('running');
    } catch (err) {
      this.daemon = undefined;
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
