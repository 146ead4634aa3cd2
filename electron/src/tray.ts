/** The tray menu: the engine's state, start/stop, the window, quit. Built as data so it is tested without Electron. */
import type { MenuItemConstructorOptions } from 'electron';
import type { EngineState } from './engine-host.js';

export interface TrayActions {
  show(): void;
  start(): void;
  stop(): void;
  quit(): void;
}

const LABELS: Record<EngineState, string> = {
  stopped: 'Engine stopped',
  starting: 'Engine starting…',
  running: 'Engine running',
  stopping: 'Engine stopping…',
  error: 'Engine failed',
};

export function trayTemplate(state: EngineState, detail: { mode: 'embedded' | 'socket' | 'tcp'; socketPath: string; address?: string; error?: string }, actions: TrayActions): MenuItemConstructorOptions[] {
  const busy = state === 'starting' || state === 'stopping';
  return [
    { label: LABELS[state] + (state === 'error' && detail.error ? `: ${detail.error}` : ''), enabled: false },
    { label: detail.mode === 'embedded' ? `Embedded engine on ${detail.socketPath}` : `Connected to ${detail.address ?? detail.socketPath}`, enabled: false },
    { type: 'separator' },
    { label: 'Start engine', enabled: !busy && state !== 'running', click: actions.start },
    { label: detail.mode === 'embedded' ? 'Stop engine' : 'Disconnect', enabled: state === 'running', click: actions.stop },
    { type: 'separator' },
    { label: 'Open Berth', click: actions.show },
    { label: 'Quit', role: 'quit', click: actions.quit },
  ];
}

export function trayTooltip(state: EngineState): string {
  return `Berth — ${LABELS[state]}`;
}
