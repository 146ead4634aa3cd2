/**
 * Container endpoints. Handlers parse and validate, call the engine, and shape the answer for the
 * request's API version.
 */
import type { Duplex } from 'node:stream';
import type { AttachStreams } from '../engine/containers/logs.js';
import { Conflict, InvalidParameter, NotImplemented } from '../errors.js';
import { humanStatus, type ContainerRecord } from '../engine/containers/model.js';
import type { ContainerStore } from '../engine/containers/store.js';
import { logBytes, type LogOptions } from '../engine/containers/logs.js';
import { containerInspect, containerSummary, listContainers, LIST_FILTERS } from '../engine/containers/views.js';
import type { ContainerService, WaitCondition } from '../engine/containers/service.js';
import { PRUNE_FILTERS, type ContainerPruneReport } from '../engine/containers/prune.js';
import type { LogRecordBlock } from '../engine/containers/logs.js';
import { parseTimestamp } from '../util/json.js';
import { CONTAINER_CREATE } from './bodies.js';
import { readRequest, shape } from './compat.js';
import { readUpgradeBody, type ApiRequest } from './http.js';
import { boolParam, filterParam, intParam, stringParam, terminalSize } from './params.js';
import type { Router } from './router.js';
import { DEFAULT_DETACH_KEYS, drained, frame, MEDIA_MULTIPLEXED, MEDIA_RAW, MULTIPLEXED_FRAMING, parseDetachKeys, pumpStdin, writeWithBackpressure } from './streams.js';

/** What the container endpoints need of the engine. */
export interface ContainersBackend {
  containers: Pick<ContainerService, 'create' | 'get' | 'all' | 'start' | 'stop' | 'kill' | 'restart' | 'wait' | 'remove' | 'rename' | 'attach' | 'attached' | 'detached' | 'resize' | 'removeLink'> & {
    /** Revisions of the records, against which the list keeps what it built of them. */
    readonly store: Pick<ContainerStore, 'revision'>;
  };
  /** Resolves an image reference to its id, or undefined when there is no such image. */
  imageId(ref: string): Promise<string | undefined>;
  readLog(record: ContainerRecord, opts: { follow: boolean; tail?: number; signal: AbortSignal }): AsyncIterable<LogRecordBlock>;
  /** SizeRw (the container's own files) and SizeRootFs (those and its image's), in bytes. */
  sizes(record: ContainerRecord): Promise<{ rw: number; rootFs: number }>;
  /** Removes the containers that do not run, as the filters (PRUNE_FILTERS) narrow them. */
  prune(filters: ReadonlyMap<string, string[]>): Promise<ContainerPruneReport>;
}

function logTimestamp(req: ApiRequest, name: string): bigint | undefined {
  const raw = stringParam(req, name);
  if (raw === undefined || raw === '' || raw === '0') return undefined;
  const nano = parseTimestamp(raw);
  if (nano === undefined) throw new InvalidParameter(`invalid value for ${name}: ${JSON.stringify(raw)} is not a Unix timestamp or RFC 3339 time`);
  return nano;
}

function tailParam(req: ApiRequest): number | undefined {
  const raw = stringParam(req, 'tail');
  if (raw === undefined || raw === '' || raw === 'all') return undefined;
  if (!/^-?\d+$/.test(raw)) throw new InvalidParameter(`invalid value for tail: ${JSON.stringify(raw)}, expected "all" or a number`);
  const n = Number(raw);
  return n < 0 ? undefined : n;
}

/** The largest body accepted with an attach request (its options, which are read from the query). */
const MAX_ATTACH_BODY = 64 * 1024;

/**
 * Resolves once what was written to the connection was handed to the system (or the connection is gone):
 * the container's waiters are answered after that (see ContainerService.attach).
 */
function flushed(conn: Duplex): Promise<void> {
  return new Promise((resolve) => {
    if (conn.destroyed || conn.writableEnded) {
      resolve();
      return;
    }
    conn.once('close', () => resolve());
    // Writes complete in order: the callback of an empty one runs after the earlier ones went out.
    conn.write(Buffer.alloc(0), () => resolve());
  });
}

/**
 * When an attached client ends its stdin and the container's stdin stays open, its attachment goes on until
 * the output was quiet this long after the input reached the container (or until the container's exit), so
 * that the answer to the last input is not lost (`echo cmd | docker attach` of a `docker run -d -i`).
 */
const STDIN_END_QUIET_MS = 500;

const FLUSH_BYTES = 256 * 1024;
const FLUSH_DELAY_MS = 5;

/**
 * Copies container output to the client: raw with a TTY, multiplexed frames without. Consecutive chunks of
 * one stream share a frame and writes go out in blocks (up to 256 KiB, or after 5 ms when output slows
 * down), so that a large log is not sent one line per write while a followed stream stays live.
 */
async function pumpOutput(chunks: AsyncIterable<{ stream: 'stdout' | 'stderr'; data: Buffer }>, out: Duplex | NodeJS.WritableStream, tty: boolean): Promise<boolean> {
  const sink = out as Duplex;
  let blocks: Buffer[] = [];
  let blockBytes = 0;
  let run: Buffer[] = [];
  let runBytes = 0;
  let runStream: 'stdout' | 'stderr' = 'stdout';
  let timer: NodeJS.Timeout | undefined;
  const closeRun = () => {
    if (runBytes === 0) return;
    const data = run.length === 1 ? run[0] : Buffer.concat(run, runBytes);
    const bytes = tty ? data : frame(runStream, data);
    blocks.push(bytes);
    blockBytes += bytes.length;
    run = [];
    runBytes = 0;
  };
  const take = (): Buffer | undefined => {
    closeRun();
    if (blockBytes === 0) return undefined;
    const data = blocks.length === 1 ? blocks[0] : Buffer.concat(blocks, blockBytes);
    blocks = [];
    blockBytes = 0;
    return data;
  };
  const flushSoon = () => {
    timer ??= setTimeout(() => {
      timer = undefined;
      const data = take();
      if (data && !sink.destroyed) sink.write(data);
    }, FLUSH_DELAY_MS);
  };
  try {
    for await (const chunk of chunks) {
      if (runBytes > 0 && chunk.stream !== runStream) closeRun();
      runStream = chunk.stream;
      run.push(chunk.data);
      runBytes += chunk.data.length;
      if (runBytes + blockBytes >= FLUSH_BYTES) {
        clearTimeout(timer);
        timer = undefined;
        if (!(await writeWithBackpressure(sink, take()!))) return false;
      } else {
        flushSoon();
      }
    }
  } finally {
    clearTimeout(timer);
  }
  const rest = take();
  return rest ? writeWithBackpressure(sink, rest) : !sink.destroyed;
}

/**
 * Writes the log's bytes with backpressure, one chunk ahead: the next chunk is read and built while the client
 * takes the last one (never more than one chunk beyond a full buffer). Stops reading (which closes the log)
 * once the client is gone.
 */
async function writeLog(chunks: AsyncIterable<Buffer>, out: Duplex | NodeJS.WritableStream): Promise<void> {
  const sink = out as Duplex;
  const it = chunks[Symbol.asyncIterator]();
  let next = it.next();
  try {
    for (;;) {
      const r = await next;
      if (r.done) return;
      if (sink.destroyed || sink.writableEnded) return;
      const room = sink.write(r.value);
      next = it.next();
      if (!room && !(await drained(sink))) return;
    }
  } finally {
    // A chunk being made when the client left is waited for, then the log is closed.
    await next.catch(() => undefined);
    await it.return?.(undefined);
  }
}

export function registerContainerRoutes(router: Router, backend: ContainersBackend): void {
  const { containers } = backend;

  /** Per record: its summary's JSON text without Status, by API version, for one revision of the record. */
  const summaryTexts = new WeakMap<ContainerRecord, { revision: number; byVersion: Map<number, string> }>();
  const summaryText = (record: ContainerRecord, version: number): string => {
    const revision = containers.store.revision(record);
    let cached = revision === undefined ? undefined : summaryTexts.get(record);
    if (cached && cached.revision !== revision) cached = undefined;
    const hit = cached?.byVersion.get(version);
    if (hit !== undefined) return hit;
    const { Status: _status, ...summary } = containerSummary(record, record.Config.Image);
    const text = JSON.stringify(shape('container.summary', version, summary));
    if (revision !== undefined) {
      if (!cached) {
        cached = { revision, byVersion: new Map() };
        summaryTexts.set(record, cached);
      }
      cached.byVersion.set(version, text);
    }
    return text;
  };

  router.post('/containers/prune', async (req, res) => {
    res.json(200, await backend.prune(filterParam(req, PRUNE_FILTERS)));
  });

  router.post('/containers/create', async (req, res) => {
    const body = await req.json(CONTAINER_CREATE);
    const platform = stringParam(req, 'platform');
    if (platform && !/^linux(\/(amd64|x86_64))?$/.test(platform)) {
      throw new InvalidParameter(`requested platform ${JSON.stringify(platform)} does not match this engine's platform linux/amd64`);
    }
    readRequest('container.create', req.version, body);
    const created = await containers.create(body, stringParam(req, 'name'));
    res.json(201, created);
  });

  router.get('/containers/json', async (req, res) => {
    const filters = filterParam(req, LIST_FILTERS);
    // The query parameters `before` and `since` (an id or a name) of API 1.24, as the filters of that name.
    for (const key of ['before', 'since']) {
      const ref = stringParam(req, key);
      if (ref) filters.set(key, [...(filters.get(key) ?? []), ref]);
    }
    const ancestors = new Map<string, string | undefined>();
    for (const a of filters.get('ancestor') ?? []) ancestors.set(a, await backend.imageId(a));
    const records = listContainers(containers.all(), {
      all: boolParam(req, 'all'),
      limit: intParam(req, 'limit', -1),
      size: boolParam(req, 'size'),
      filters,
      lookup: (ref) => containers.get(ref),
      matchesAncestor: (c, a) => c.Config.Image === a || c.Image === ancestors.get(a),
    });
    if (boolParam(req, 'size')) {
      const summaries = await Promise.all(records.map(async (c) => containerSummary(c, c.Config.Image, await backend.sizes(c))));
      res.json(200, shape('container.summary', req.version, summaries));
      return;
    }
    // Without sizes, each summary is the JSON text kept for the record's revision, with the one field that
    // changes with time alone (Status, "Up 5 minutes") written in front of it.
    const now = Date.now();
    const parts = records.map((c) => `{"Status":${JSON.stringify(humanStatus(c.State, now))},${summaryText(c, req.version).slice(1)}`);
    res.text(200, `[${parts.join(',')}]\n`, 'application/json');
  });

  router.get('/containers/:id/json', async (req, res) => {
    const record = containers.get(req.params.id);
    const sizes = boolParam(req, 'size') ? await backend.sizes(record) : undefined;
    res.json(200, shape('container.inspect', req.version, containerInspect(record, sizes)));
  });

  router.post('/containers/:id/start', async (req, res) => {
    if (stringParam(req, 'detachKeys')) parseDetachKeys(stringParam(req, 'detachKeys')!);
    await containers.start(req.params.id);
    res.noContent();
  });

  const stopOptions = (req: ApiRequest) => {
    const t = stringParam(req, 't');
    if (t !== undefined && t !== '' && !/^-?\d+$/.test(t)) throw new InvalidParameter(`invalid value for t: ${JSON.stringify(t)}, expected a number of seconds`);
    return { timeoutSeconds: t === undefined || t === '' ? undefined : Number(t), signal: stringParam(req, 'signal') || undefined };
  };

  router.post('/containers/:id/stop', async (req, res) => {
    await containers.stop(req.params.id, stopOptions(req));
    res.noContent();
  });

  router.post('/containers/:id/restart', async (req, res) => {
    await containers.restart(req.params.id, stopOptions(req));
    res.noContent();
  });

  router.post('/containers/:id/kill', async (req, res) => {
    await containers.kill(req.params.id, stringParam(req, 'signal') || 'SIGKILL');
    res.noContent();
  });

  router.post('/containers/:id/wait', async (req, res) => {
    const raw = stringParam(req, 'condition') || 'not-running';
    if (!['not-running', 'next-exit', 'removed'].includes(raw)) {
      throw new InvalidParameter(`invalid condition: ${JSON.stringify(raw)}, expected not-running, next-exit or removed`);
    }
    containers.get(req.params.id);
    const waiting = containers.wait(req.params.id, raw as WaitCondition, req.signal);
    // From 1.30 the headers go out at once, so that a client knows the wait is registered before it starts
    // the container.
    const out = res.stream(200, 'application/json');
    try {
      const result = await waiting;
      out.end(JSON.stringify(result.Error ? result : { StatusCode: result.StatusCode }) + '\n');
    } catch {
      out.end();
    }
  });

  // A legacy link is named by its parent and alias (`/containers/web/db?link=1`): the name may hold a slash.
  router.delete('/containers/:id*', async (req, res) => {
    if (boolParam(req, 'link')) {
      await containers.removeLink(req.params.id);
      res.noContent();
      return;
    }
    await containers.remove(req.params.id, { force: boolParam(req, 'force'), volumes: boolParam(req, 'v') });
    res.noContent();
  });

  router.post('/containers/:id/rename', async (req, res) => {
    await containers.rename(req.params.id, stringParam(req, 'name') ?? '');
    res.noContent();
  });

  router.post('/containers/:id/resize', async (req, res) => {
    const { height, width } = terminalSize(req);
    await containers.resize(req.params.id, height, width);
    res.text(200, '');
  });

  router.get('/containers/:id/logs', async (req, res) => {
    const record = containers.get(req.params.id);
    const opts: LogOptions = {
      stdout: boolParam(req, 'stdout'),
      stderr: boolParam(req, 'stderr'),
      timestamps: boolParam(req, 'timestamps'),
      follow: boolParam(req, 'follow'),
      sinceNano: logTimestamp(req, 'since'),
      untilNano: logTimestamp(req, 'until'),
      tail: tailParam(req),
    };
    boolParam(req, 'details');
    if (!opts.stdout && !opts.stderr) throw new InvalidParameter('Bad parameters: you must choose at least one stream');
    if ((record.HostConfig.LogConfig as { Type?: string } | undefined)?.Type === 'none') {
      throw new NotImplemented('configured logging driver does not support reading');
    }
    const tty = record.Config.Tty;
    const out = res.stream(200, tty ? MEDIA_RAW : MEDIA_MULTIPLEXED);
    const blocks = backend.readLog(record, { follow: opts.follow, tail: opts.tail, signal: req.signal });
    try {
      await writeLog(logBytes(blocks, opts, tty ? undefined : MULTIPLEXED_FRAMING), out);
    } finally {
      out.end();
    }
  });

  router.post('/containers/:id/attach', async (req, res) => {
    const record = containers.get(req.params.id);
    // As Docker: a container without OpenStdin takes no input from an attached client.
    const wantStdin = boolParam(req, 'stdin') && record.Config.OpenStdin;
    const wantStdout = boolParam(req, 'stdout');
    const wantStderr = boolParam(req, 'stderr');
    const stream = boolParam(req, 'stream');
    const logs = boolParam(req, 'logs');
    const detachKeys = parseDetachKeys(stringParam(req, 'detachKeys') || DEFAULT_DETACH_KEYS);
    if (record.State.Paused) throw new Conflict('You cannot attach to a paused container, unpause it first');
    // The options are the query's; a body (docker-modem sends them as JSON too) is read and dropped, never stdin.
    if (req.upgrade) await readUpgradeBody(req, res, MAX_ATTACH_BODY);
    const tty = record.Config.Tty;
    // As Docker: only the end of an attached client's stdin closes the container's, and only for StdinOnce
    // without a TTY. An attach without stdin, there, leaves the container's stdin open when its client goes:
    // it drains the output to the container's exit instead of closing conmon's socket, whose close would
    // close the container's stdin.
    const closesStdin = record.Config.StdinOnce && !tty;
    const drainsToExit = closesStdin && !wantStdin;
    const conn = res.hijack(tty ? MEDIA_RAW : MEDIA_MULTIPLEXED);
    conn.on('error', () => undefined);
    containers.attached(record);
    const closed = new AbortController();
    conn.once('close', () => closed.abort());
    let delivered!: () => void;
    const delivery = new Promise<void>((resolve) => (delivered = resolve));
    // Set once the client's stdin ended (and the container's stays open): restarts the quiet wait on output.
    let quietEnd: NodeJS.Timeout | undefined;
    let outputSeen: (() => void) | undefined;
    try {
      if (logs) {
        const past = backend.readLog(record, { follow: false, signal: closed.signal });
        await writeLog(logBytes(past, { stdout: wantStdout, stderr: wantStderr, timestamps: false, follow: false }, tty ? undefined : MULTIPLEXED_FRAMING), conn);
      }
      if (!stream || closed.signal.aborted) {
        conn.end();
        return;
      }
      let streams: AttachStreams;
      try {
        ({ streams } = await containers.attach(record.Id, closed.signal, delivery));
      } catch {
        conn.end();
        return;
      }
      if (!drainsToExit) closed.signal.addEventListener('abort', () => streams.close(), { once: true });
      // Drained to the end, the socket is closed once the container's output ended.
      else streams.output.once('end', () => streams.close());
      if (wantStdin) {
        // Detach keys apply with a TTY only, as in Docker: without one, every byte is the container's input.
        pumpStdin(conn, streams.input, tty ? detachKeys : Buffer.alloc(0), {
          detach: () => {
            containers.detached(record);
            streams.close();
            conn.end();
          },
          clientEnded: () => {
            // The client closed its stdin: StdinOnce without a TTY closes the container's and the output goes
            // on; otherwise the attachment ends, and the container's stdin stays open for a later one. Docker
            // ends it at once, which drops what the container writes in answer to the input just sent; here
            // the output goes on until it was quiet for a moment after that input was handed to the container.
            if (closesStdin) {
              streams.input.end();
              return;
            }
            const end = () => {
              streams.close();
              conn.end();
            };
            const arm = () => {
              clearTimeout(quietEnd);
              quietEnd = setTimeout(end, STDIN_END_QUIET_MS);
            };
            // An empty write's callback runs once the earlier input was written out (or the stream failed).
            streams.input.write(Buffer.alloc(0), () => {
              if (closed.signal.aborted) return;
              outputSeen = arm;
              arm();
            });
          },
        });
      }
      const output = (async function* () {
        const chunks = streams.output.iterator({ destroyOnReturn: !drainsToExit }) as AsyncIterable<{ stream: 'stdout' | 'stderr'; data: Buffer }>;
        for await (const chunk of chunks) {
          outputSeen?.();
          if (chunk.stream === 'stdout' ? wantStdout : wantStderr) yield chunk;
        }
      })();
      const complete = await pumpOutput(output, conn, tty);
      if (drainsToExit && !complete) streams.output.resume();
      if (complete) await flushed(conn);
      delivered();
      // As Docker: with StdinOnce and no TTY, the attachment ends once the container has stopped.
      if (complete && closesStdin) await containers.wait(record.Id, 'not-running', closed.signal).catch(() => undefined);
      conn.end();
    } catch {
      conn.destroy();
    } finally {
      clearTimeout(quietEnd);
      outputSeen = undefined;
      delivered();
    }
  });
}
