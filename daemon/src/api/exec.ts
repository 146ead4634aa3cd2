/**
 * Exec endpoints: create, start (hijacked like attach: raw bytes with a TTY, multiplexed frames without),
 * resize and inspect.
 */
import type { Socket } from 'node:net';
import type { ExecProcess, ExecService } from '../engine/containers/exec.js';
import { parseConsoleSize } from '../engine/containers/validate.js';
import { errorMessage, InvalidParameter, TooLarge } from '../engine/errors.js';
import { shape } from './compat.js';
import { EXEC_CREATE, EXEC_START } from './bodies.js';
import { parseJsonBody, type ApiRequest, type ApiResponse } from './http.js';
import { terminalSize } from './params.js';
import type { Router } from './router.js';
import { DEFAULT_DETACH_KEYS, frame, MEDIA_MULTIPLEXED, MEDIA_RAW, parseDetachKeys, pumpStdin, writeWithBackpressure } from './streams.js';

/** What the exec endpoints need of the engine. */
export type ExecBackend = Pick<ExecService, 'create' | 'start' | 'checkStart' | 'inspect' | 'resize' | 'get'> & {
  /** Publishes exec_detach for the exec's container. */
  detached(execId: string): void;
};

interface StartBody {
  Detach: boolean;
  Tty: boolean | undefined;
  ConsoleSize: [number, number] | null;
}

const MAX_START_BODY = 64 * 1024;

/**
 * The JSON body of an upgrade request: Node hands the bytes after the headers to the upgrade handler, not
 * to the request stream. They are taken from the head (and the socket when the body came later), and what
 * follows the body stays for the hijacked stream.
 */
async function upgradeBody(req: ApiRequest, res: ApiResponse): Promise<unknown> {
  const length = Number(req.header('content-length') ?? 0);
  if (!Number.isInteger(length) || length < 0) throw new InvalidParameter('invalid Content-Length');
  if (length > MAX_START_BODY) throw new TooLarge(`request body of ${length} bytes exceeds the limit of ${MAX_START_BODY} bytes`);
  let buffered = res.upgradeHead ?? Buffer.alloc(0);
  if (buffered.length < length) {
    const socket = req.raw.socket;
    buffered = await new Promise<Buffer>((resolve, reject) => {
      const parts = [buffered];
      let size = buffered.length;
      const onData = (chunk: Buffer) => {
        parts.push(chunk);
        size += chunk.length;
        if (size >= length) finish();
      };
      const onEnd = () => {
        cleanup();
        reject(new InvalidParameter('request body was truncated'));
      };
      const cleanup = () => {
        socket.off('data', onData);
        socket.off('end', onEnd);
        socket.off('close', onEnd);
      };
      const finish = () => {
        cleanup();
        socket.pause();
        resolve(Buffer.concat(parts));
      };
      socket.on('data', onData);
      socket.once('end', onEnd);
      socket.once('close', onEnd);
      socket.resume();
    });
  }
  res.upgradeHead = buffered.subarray(length);
  return parseJsonBody(buffered.subarray(0, length).toString('utf8'), EXEC_START);
}

async function startBody(req: ApiRequest, res: ApiResponse): Promise<StartBody> {
  const raw = req.upgrade ? await upgradeBody(req, res) : await req.json(EXEC_START);
  if (raw === undefined || raw === null) return { Detach: false, Tty: undefined, ConsoleSize: null };
  if (typeof raw !== 'object' || Array.isArray(raw)) throw new InvalidParameter('invalid exec start request: the body must be a JSON object');
  const b = raw as Record<string, unknown>;
  for (const key of ['Detach', 'Tty']) {
    if (b[key] !== undefined && b[key] !== null && typeof b[key] !== 'boolean') throw new InvalidParameter(`invalid value for ${key}: expected a boolean, got ${JSON.stringify(b[key])}`);
  }
  const consoleSize = parseConsoleSize(b.ConsoleSize);
  return { Detach: b.Detach === true, Tty: typeof b.Tty === 'boolean' ? b.Tty : undefined, ConsoleSize: consoleSize };
}

export function registerExecRoutes(router: Router, execs: ExecBackend): void {
  router.post('/containers/:id/exec', async (req, res) => {
    const body = await req.json(EXEC_CREATE);
    const keys = (body as { DetachKeys?: unknown } | undefined)?.DetachKeys;
    if (typeof keys === 'string' && keys !== '') parseDetachKeys(keys);
    res.json(201, execs.create(req.params.id, body));
  });

  router.get('/exec/:id/json', (req, res) => {
    res.json(200, shape('exec.inspect', req.version, execs.inspect(req.params.id)));
  });

  router.post('/exec/:id/resize', async (req, res) => {
    const { height, width } = terminalSize(req);
    await execs.resize(req.params.id, height, width);
    res.text(201, '');
  });

  router.post('/exec/:id/start', async (req, res) => {
    const body = await startBody(req, res);
    const config = execs.get(req.params.id).config;
    const detachKeys = parseDetachKeys(config.DetachKeys || DEFAULT_DETACH_KEYS);
    if (body.Detach) {
      const { process: proc } = await execs.start(req.params.id, { consoleSize: body.ConsoleSize, detach: true });
      // Nobody reads the output: drain it so that the process never blocks on a full pipe.
      proc.streams.output.resume();
      proc.streams.output.on('error', () => undefined);
      res.status(200);
      return;
    }
    // Unknown exec (404), a container stopped or paused, a second start (409): answered as statuses.
    execs.checkStart(req.params.id);
    // The framing follows the start request (as in Docker); the process's terminal follows the exec's.
    const tty = body.Tty ?? config.Tty;
    const conn = res.hijack(tty ? MEDIA_RAW : MEDIA_MULTIPLEXED);
    conn.on('error', () => undefined);
    // A client without stdin closes its side at once (CloseWrite): the output must still reach it.
    (conn as Socket).allowHalfOpen = true;
    let proc: ExecProcess;
    try {
      ({ process: proc } = await execs.start(req.params.id, { consoleSize: body.ConsoleSize }));
    } catch (err) {
      // As Docker: once the connection is taken over, a failure to run the process (no such command or
      // user) is told on the stream; the exec's exit code says 126.
      const text = Buffer.from(`${errorMessage(err)}\r\n`);
      conn.end(tty ? text : frame('stdout', text));
      return;
    }
    const streams = proc.streams;
    let clientGone = false;
    conn.once('close', () => {
      clientGone = true;
      streams.close();
    });
    if (config.OpenStdin) {
      pumpStdin(conn, streams.input, detachKeys, {
        detach: () => {
          execs.detached(req.params.id);
          streams.close();
          conn.end();
        },
        // The client closed its side: so does the exec's stdin.
        clientEnded: () => streams.input.end(),
      });
    }
    // Without stdin the monitor's socket stays open both ways: shutting its write side would end the session.
    else conn.resume();
    try {
      for await (const chunk of streams.output as AsyncIterable<{ stream: 'stdout' | 'stderr'; data: Buffer }>) {
        if (!(chunk.stream === 'stdout' ? config.OpenStdout : config.OpenStderr)) continue;
        if (!(await writeWithBackpressure(conn, tty ? chunk.data : frame(chunk.stream, chunk.data)))) break;
      }
      // The exit code is recorded before the stream ends: a client inspects the exec right after.
      if (!clientGone) await proc.exit.catch(() => undefined);
      conn.end();
    } catch {
      conn.destroy();
    }
  });
}

