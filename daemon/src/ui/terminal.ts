/**
 * A terminal over a hijacked engine request (`POST /exec/<id>/start` or an attach, with a TTY: raw bytes
 * each way), for the clients that show one: the UI server's websockets (ui/server.ts) and the desktop app's
 * message ports (electron/src/bridge.ts, which loads this module from the daemon's build). It depends on
 * nothing but Node's http types, so that the desktop app can load it alone.
 */
import type http from 'node:http';
import type { Duplex } from 'node:stream';

/** Where a terminal's output and its end go. */
export interface TerminalSink {
  /** Bytes the terminal wrote (the engine's first bytes after the upgrade included). */
  data(bytes: Buffer): void;
  /** The engine ended the stream (the process exited or detached). */
  end(): void;
  /** The stream failed after the upgrade. */
  broken(err: Error): void;
  /**
   * The engine answered without upgrading: an error (unknown exec, already started...), with its status and
   * message (the JSON body's `message`, or the body's text).
   */
  refused(status: number | undefined, message: string): void;
  /** The engine did not answer. */
  unreachable(err: Error): void;
}

/** The client's side of an open terminal. */
export interface TerminalProxy {
  /** Keystrokes for the terminal; those written before the engine upgraded the connection wait for it. */
  write(bytes: Buffer): void;
  /** Ends the terminal (the engine connection is dropped). */
  close(): void;
}

/** The headers of a request that asks the engine to hijack its connection, sending `body` (JSON). */
export function hijackHeaders(body: string): Record<string, string> {
  return { 'Content-Type': 'application/json', 'Content-Length': String(Buffer.byteLength(body)), Connection: 'Upgrade', Upgrade: 'tcp' };
}

/** The message of an engine error body: its JSON `message`, or the text as it is. */
export function engineErrorText(text: string): string {
  try {
    return (JSON.parse(text) as { message?: string }).message ?? text;
  } catch {
    return text;
  }
}

/**
 * Sends `body` on `request` (made by the caller, with hijackHeaders among its headers) and bridges the
 * upgraded connection to `sink`.
 */
export function proxyTerminal(request: http.ClientRequest, body: string, sink: TerminalSink): TerminalProxy {
  let socket: Duplex | undefined;
  const pending: Buffer[] = [];
  request.on('upgrade', (_res: http.IncomingMessage, upgraded: Duplex, head: Buffer) => {
    socket = upgraded;
    if (head.length) sink.data(head);
    for (const bytes of pending.splice(0)) upgraded.write(bytes);
    upgraded.on('data', (chunk: Buffer) => sink.data(chunk));
    upgraded.on('end', () => sink.end());
    upgraded.on('error', (err: Error) => sink.broken(err));
  });
  request.on('response', (res: http.IncomingMessage) => {
    const chunks: Buffer[] = [];
    res.on('data', (c: Buffer) => chunks.push(c));
    res.on('end', () => sink.refused(res.statusCode, engineErrorText(Buffer.concat(chunks).toString('utf8'))));
  });
  request.on('error', (err: Error) => sink.unreachable(err));
  request.end(body);
  return {
    write(bytes) {
      if (socket) socket.write(bytes);
      else pending.push(bytes);
    },
    close() {
      socket?.destroy();
      request.destroy();
    },
  };
}
