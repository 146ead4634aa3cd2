/**
 * Bounds on what slow or idle clients can hold: the time to receive a request's head, a body that stops
 * flowing, idle kept-alive connections, and the number of connections with an unfinished request.
 *
 * A connection is "unfinished" while it waits for a request head (a new or kept-alive connection) or while
 * its request body is still arriving. Once a request is whole it is the daemon's work, and once a response
 * has started (attach, logs with follow, events, wait, stats, hijacked exec) nothing here cuts it.
 */
import type http from 'node:http';
import type { Socket } from 'node:net';

export interface ConnectionLimits {
  /** Time to receive a request's head, from the connection or the previous response (Node's default, 60 s). */
  headersTimeoutMs: number;
  /** A request body that brings no byte for this long, while the daemon waits for one, is cut. */
  bodyIdleMs: number;
  /** An idle kept-alive connection is closed after this long. */
  keepAliveMs: number;
  /** Connections with an unfinished request; beyond it the oldest is closed (idle ones first). */
  maxUnfinished: number;
}

export const DEFAULT_CONNECTION_LIMITS: ConnectionLimits = {
  headersTimeoutMs: 60_000,
  bodyIdleMs: 120_000,
  keepAliveMs: 60_000,
  maxUnfinished: 512,
};

const ENV_NAMES: Record<keyof ConnectionLimits, string> = {
  headersTimeoutMs: 'BERTH_HTTP_HEADERS_TIMEOUT_MS',
  bodyIdleMs: 'BERTH_HTTP_BODY_IDLE_MS',
  keepAliveMs: 'BERTH_HTTP_KEEPALIVE_MS',
  maxUnfinished: 'BERTH_HTTP_MAX_UNFINISHED',
};

/** The limits, each overridable by an environment variable (the tests shorten them). */
export function connectionLimitsFromEnv(env: NodeJS.ProcessEnv = process.env): ConnectionLimits {
  const limits = { ...DEFAULT_CONNECTION_LIMITS };
  for (const key of Object.keys(ENV_NAMES) as Array<keyof ConnectionLimits>) {
    const text = env[ENV_NAMES[key]];
    if (text === undefined || text === '') continue;
    const value = Number(text);
    if (!Number.isInteger(value) || value <= 0) throw new Error(`${ENV_NAMES[key]} must be a positive integer, not ${JSON.stringify(text)}`);
    limits[key] = value;
  }
  return limits;
}

/** How often Node checks the head timeout, and this module the bodies: a fraction of the shortest limit. */
export function checkIntervalMs(limits: ConnectionLimits): number {
  return Math.max(100, Math.min(5_000, Math.floor(Math.min(limits.headersTimeoutMs, limits.bodyIdleMs) / 4)));
}

type Phase = 'waiting' | 'body' | 'busy';

interface Connection {
  socket: Socket;
  phase: Phase;
  request?: http.IncomingMessage;
  /** The current request's response is finished (its body may still be arriving, to be discarded). */
  answered: boolean;
  /** socket.bytesRead at the last check, and when it last grew (or the daemon was not waiting for bytes). */
  bytesRead: number;
  progressAt: number;
}

function carriesBody(req: http.IncomingMessage): boolean {
  const length = req.headers['content-length'];
  return req.headers['transfer-encoding'] !== undefined || (length !== undefined && Number(length) > 0);
}

/**
 * Applies the limits to a server: Node's own head and keep-alive timeouts, and a watch of unfinished
 * requests. `secure` servers count connections once their TLS handshake is done (Node bounds the handshake).
 */
export function guardConnections(server: http.Server, limits: ConnectionLimits, secure: boolean): void {
  server.headersTimeout = limits.headersTimeoutMs;
  server.keepAliveTimeout = limits.keepAliveMs;
  // A whole request has no deadline: image load, build contexts and archive uploads are long; a stalled
  // body is cut by the watch below instead.
  server.requestTimeout = 0;
  server.timeout = 0;

  const connections = new Map<Socket, Connection>();
  // Connections with an unfinished request, oldest first (a Set keeps insertion order).
  const unfinished = new Set<Connection>();

  const markUnfinished = (conn: Connection, phase: 'waiting' | 'body') => {
    unfinished.delete(conn);
    conn.phase = phase;
    if (phase === 'waiting') conn.request = undefined;
    conn.bytesRead = conn.socket.bytesRead;
    conn.progressAt = Date.now();
    unfinished.add(conn);
  };
  const markBusy = (conn: Connection) => {
    unfinished.delete(conn);
    conn.phase = 'busy';
    conn.request = undefined;
  };

  const evictOverflow = () => {
    while (unfinished.size > limits.maxUnfinished) {
      let victim: Connection | undefined;
      for (const conn of unfinished) {
        if (conn.phase === 'waiting') {
          victim = conn;
          break;
        }
      }
      victim ??= unfinished.values().next().value as Connection;
      unfinished.delete(victim);
      victim.socket.destroy();
    }
  };

  server.on(secure ? 'secureConnection' : 'connection', (socket: Socket) => {
    const conn: Connection = { socket, phase: 'waiting', answered: false, bytesRead: 0, progressAt: Date.now() };
    connections.set(socket, conn);
    markUnfinished(conn, 'waiting');
    socket.once('close', () => {
      connections.delete(socket);
      unfinished.delete(conn);
    });
    evictOverflow();
  });

  server.on('request', (req: http.IncomingMessage, res: http.ServerResponse) => {
    const conn = connections.get(req.socket as Socket);
    if (!conn) return;
    conn.answered = false;
    if (carriesBody(req) && !req.complete) {
      conn.request = req;
      markUnfinished(conn, 'body');
    } else {
      markBusy(conn);
    }
    res.once('finish', () => {
      if (conn.socket.destroyed || !connections.has(conn.socket)) return;
      conn.answered = true;
      // A body still arriving stays watched; otherwise the connection waits for its next request.
      if (conn.phase === 'body') return;
      markUnfinished(conn, 'waiting');
      evictOverflow();
    });
  });

  // An upgraded connection (attach, exec) belongs to its stream from now on.
  server.on('upgrade', (req: http.IncomingMessage) => {
    const conn = connections.get(req.socket as Socket);
    if (conn) markBusy(conn);
  });

  const watch = setInterval(() => {
    const now = Date.now();
    for (const conn of [...unfinished]) {
      if (conn.phase !== 'body' || !conn.request) continue;
      const req = conn.request;
      if (req.complete) {
        if (conn.answered) markUnfinished(conn, 'waiting');
        else markBusy(conn);
        continue;
      }
      const read = conn.socket.bytesRead;
      // Bytes arrived, or the daemon has not taken what it holds (its own backpressure: Node stops reading the
      // socket while the request's buffer is full): the client is not the one stalling.
      if (read !== conn.bytesRead || req.readableLength >= req.readableHighWaterMark) {
        conn.bytesRead = read;
        conn.progressAt = now;
        continue;
      }
      if (now - conn.progressAt >= limits.bodyIdleMs) {
        unfinished.delete(conn);
        conn.socket.destroy();
      }
    }
  }, checkIntervalMs(limits));
  watch.unref();
  server.once('close', () => clearInterval(watch));
}
