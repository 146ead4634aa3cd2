/**
 * The preload: a narrow typed bridge on `window.berth`, nothing else. Requests go through one invoke that
 * the main process checks against its allow-list; streams and terminals use a MessagePort the page creates
 * and hands over with `window.postMessage({ berthOpen }, '*', [port])`, forwarded here to the main process.
 */
import { contextBridge, ipcRenderer } from 'electron';

interface BridgeRequest {
  method: string;
  path: string;
  body?: string;
  headers?: Record<string, string>;
}

contextBridge.exposeInMainWorld('berth', {
  version: '1',
  request: (req: BridgeRequest) =>
    ipcRenderer.invoke('berth:request', {
      method: String(req?.method),
      path: String(req?.path),
      body: typeof req?.body === 'string' ? req.body : undefined,
      headers: req?.headers && typeof req.headers === 'object' ? { ...req.headers } : undefined,
    }),
  settings: {
    get: () => ipcRenderer.invoke('berth:settings:get'),
    update: (patch: unknown) => ipcRenderer.invoke('berth:settings:update', JSON.parse(JSON.stringify(patch ?? {}))),
  },
  engine: {
    status: () => ipcRenderer.invoke('berth:engine:status'),
  },
  registries: {
    list: () => ipcRenderer.invoke('berth:registry:list'),
    login: (login: { serveraddress?: unknown; username?: unknown; password?: unknown }) =>
      ipcRenderer.invoke('berth:registry:login', { serveraddress: String(login?.serveraddress ?? ''), username: String(login?.username ?? ''), password: String(login?.password ?? '') }),
    logout: (serveraddress: unknown) => ipcRenderer.invoke('berth:registry:logout', String(serveraddress ?? '')),
  },
});

window.addEventListener('message', (event: MessageEvent) => {
  if (event.source !== window || !event.data || typeof event.data !== 'object' || !('berthOpen' in event.data)) return;
  if (event.ports.length !== 1) return;
  ipcRenderer.postMessage('berth:open', JSON.parse(JSON.stringify(event.data.berthOpen)), [event.ports[0]!]);
});
