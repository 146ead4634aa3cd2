/**
 * Attach over a websocket (`GET /containers/{id}/attach/ws`, RFC 6455 through the `ws` package): the
 * container's past log (logs=1) and live output (stream=1) go out as websocket messages, raw bytes with no
 * multiplexing; messages from the client go to the container's stdin. Text frames before API 1.28, binary
 * frames from 1.28; stdin, stdout and stderr select streams from 1.42 (earlier versions attach all three).
 */
import type { Duplex } from 'node:stream';
import type { WebSocket, WebSocketServer } from 'ws';
import type { ContainerRecord } from '../engine/containers/model.js';
import { logChunks } from '../engine/containers/logs.js';
import type { ContainerService } from '../engine/containers/service.js';
import { Conflict, InvalidParameter } from '../errors.js';
import type { AttachStreams, LogRecord } from '../engine/containers/logs.js';
import { supports } from './compat.js';
import type { ApiRequest } from './http.js';
import { boolParam, stringParam } from './params.js';
import type { Router } from './router.js';
import { DEFAULT_DETACH_KEYS, DetachKeyMatcher, parseDetachKeys } from './streams.js';

/** Output buffered towards a slow client beyond which reading the container's output waits. */
const HIGH_WATER = 1 << 20;

export interface AttachWsBackend {
  containers: Pick<ContainerService, 'get' | 'attach' | 'attached' | 'detached'>;
  readLog(record: ContainerRecord, opts: { follow: boolean; tail?: number; signal: AbortSignal }): AsyncIterable<LogRecord[]>;
}

/** The handshake checks of the ws package, made before the upgrade so that a refusal is a JSON 400. */
function checkHandshake(req: ApiRequest): void {
  if (!req.upgrade || (req.header('upgrade') ?? '').toLowerCase() !== 'websocket') {
    throw new InvalidParameter('attach/ws needs a websocket handshake (Connection: Upgrade, Upgrade: websocket)');
  }
  const key = req.header('sec-websocket-key') ?? '';
  if (!/^[+/0-9A-Za-z]{22}==$/.test(key)) throw new InvalidParameter('missing or invalid Sec-WebSocket-Key header');
  const version = req.header('sec-websocket-version');
  if (version !== '13' && version !== '8') throw new InvalidParameter('unsupported Sec-WebSocket-Version: use 13');
}

function sendAndWait(ws: WebSocket, data: Buffer, binary: boolean): Promise<boolean> {
  if (ws.readyState !== ws.OPEN) return Promise.resolve(false);
  return new Promise((resolve) => {
    ws.send(data, { binary }, (err) => resolve(!err));
    // Keep reading while little is queued; wait for the socket when a slow client lets output pile up.
    if (ws.bufferedAmount < HIGH_WATER) resolve(true);
  });
}

export function registerAttachWsRoutes(router: Router, backend: AttachWsBackend): void {
  // The websocket module is loaded on the first websocket attach: an idle daemon does not carry it.
  let server: Promise<WebSocketServer> | undefined;
  const websockets = () => (server ??= import('ws').then(({ WebSocketServer }) => new WebSocketServer({ noServer: true, perMessageDeflate: false })));

  router.get('/containers/:id/attach/ws', async (req, res) => {
    const record = backend.containers.get(req.params.id);
    checkHandshake(req);
    const selects = supports(req.version, 'attach.ws.streamSelection');
    const wantStdin = selects ? boolParam(req, 'stdin') : true;
    const wantStdout = selects ? boolParam(req, 'stdout') : true;
    const wantStderr = selects ? boolParam(req, 'stderr') : true;
    const logs = boolParam(req, 'logs');
    const stream = boolParam(req, 'stream');
    const detachKeys = parseDetachKeys(stringParam(req, 'detachKeys') || DEFAULT_DETACH_KEYS);
    if (record.State.Paused) throw new Conflict('You cannot attach to a paused container, unpause it first');
    const binary = supports(req.version, 'attach.ws.binaryFrames');

    const socket = req.raw.socket as Duplex;
    const wss = await websockets();
    const ws = await new Promise<WebSocket>((resolve) => wss.handleUpgrade(req.raw, socket, res.upgradeHead ?? Buffer.alloc(0), resolve));
    // From here on the connection is the websocket's: nothing may be written as HTTP (no throwing either).
    res.raw.detachSocket(socket as import('node:net').Socket);
    ws.on('error', () => undefined);
    backend.containers.attached(record);
    const closed = new AbortController();
    ws.once('close', () => closed.abort());
    let delivered!: () => void;
    const delivery = new Promise<void>((resolve) => (delivered = resolve));
    const pending: Buffer[] = [];
    let streams: AttachStreams | undefined;
    // As Docker: the detach keys apply with a TTY only.
    const matcher = new DetachKeyMatcher(record.Config.Tty ? detachKeys : Buffer.alloc(0));
    // Input that arrives before the live stream is connected waits for it.
    ws.on('message', (data: Buffer | ArrayBuffer | Buffer[]) => {
      if (!wantStdin) return;
      const bytes = Buffer.isBuffer(data) ? data : Array.isArray(data) ? Buffer.concat(data) : Buffer.from(data);
      const { data: pass, detached } = matcher.push(bytes);
      if (pass.length > 0) {
        if (streams) streams.input.write(pass);
        else pending.push(pass);
      }
      if (detached) {
        backend.containers.detached(record);
        ws.close(1000, 'detached');
      }
    });
    try {
      if (logs) {
        const past = backend.readLog(record, { follow: false, signal: closed.signal });
        for await (const chunk of logChunks(past, { stdout: wantStdout, stderr: wantStderr, timestamps: false, follow: false })) {
          if (!(await sendAndWait(ws, chunk.data, binary))) break;
        }
      }
      if (!stream || closed.signal.aborted) {
        ws.close(1000);
        return;
      }
      try {
        ({ streams } = await backend.containers.attach(record.Id, closed.signal, delivery));
      } catch {
        ws.close(1011, 'cannot attach to the container');
        return;
      }
      const live = streams;
      closed.signal.addEventListener(
        'abort',
        () => {
          if (record.Config.StdinOnce && !record.Config.Tty && wantStdin) live.input.end();
          live.close();
        },
        { once: true },
      );
      for (const p of pending.splice(0)) live.input.write(p);
      for await (const chunk of live.output as AsyncIterable<{ stream: 'stdout' | 'stderr'; data: Buffer }>) {
        if (!(chunk.stream === 'stdout' ? wantStdout : wantStderr)) continue;
        if (!(await sendAndWait(ws, chunk.data, binary))) break;
      }
      ws.close(1000);
    } catch {
      ws.terminate();
    } finally {
      delivered();
    }
  });
}
