/**
 * Exec endpoints: create, start (hijacked like attach: raw bytes with a TTY, multiplexed frames without),
 * resize and inspect.
 */
import type { Socket } from 'node:net';
import type { ExecProcess, ExecService } from '../engine/containers/exec.js';
import { parseConsoleSize } from '../engine/containers/validate.js';
import { errorMessage, InvalidParameter } from '../errors.js';
import { shape } from './compat.js';
import { EXEC_CREATE, EXEC_START } from './bodies.js';
import { parseJsonBody, readUpgradeBody, type ApiRequest, type ApiResponse } from './http.js';
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

async function startBody(req: ApiRequest, res: ApiResponse): Promise<StartBody> {
  const raw = req.upgrade ? parseJsonBody((await readUpgradeBody(req, res, MAX_START_BODY)).toString('utf8'), EXEC_START) : await req.json(EXEC_START);
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
      // As Docker: the detach keys apply with a TTY only; without one, every byte is the process's input.
      pumpStdin(conn, streams.input, tty ? detachKeys : Buffer.alloc(0), {
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

