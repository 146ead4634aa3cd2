/**
 * Attaching to a container through conmon's attach socket (SOCK_SEQPACKET). Each packet conmon sends is one
 * byte naming the stream (2 stdout, 3 stderr) followed by the data; each packet written is stdin data. Ending
 * the input shuts the socket down for writing, which makes conmon close the container's stdin unless it runs
 * with --leave-stdin-open.
 *
 * Node cannot open such a socket. The small addon in daemon/native/seqpacket connects one (close-on-exec)
 * and libuv then drives it as a pipe: one read or write call per packet, with real backpressure (a consumer
 * that does not read stops the reads, and conmon waits, as Docker's attach does). Without the addon, the
 * npm package node-unix-socket serves, with two flaws worked around below: its socket is not close-on-exec
 * (processes spawned meanwhile inherit it) and it cannot pause.
 */
import { closeSync } from 'node:fs';
import { createRequire } from 'node:module';
import net from 'node:net';
import path from 'node:path';
import { Readable, Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import type { SeqpacketSocket as SeqpacketSocketType } from 'node-unix-socket';
import type { AttachStreams } from '../../host.js';
import { log } from '../../../util/log.js';

const STDOUT = 2;
const STDERR = 3;
/** conmon reads stdin packets into a buffer of this size: larger packets would be cut. */
const MAX_INPUT_PACKET = 8192;
/**
 * The socket cannot be paused (conmon blocks on a full socket, and the binding always reads), so output a
 * consumer does not take accumulates here: past this many packets (at most 8 KiB each, 64 MiB in all) the
 * attachment is closed with an error rather than letting the daemon's memory grow without bound.
 */
const MAX_BUFFERED_PACKETS = 8192;

export interface ConmonAttachStreams extends AttachStreams {
  /** Resolves once conmon closed the socket: every packet it sent has been pushed to `output`. */
  remoteEnded: Promise<void>;
}

async function connectWithBinding(socketPath: string): Promise<ConmonAttachStreams> {
  // Loaded only on this fallback path, so that a daemon with the addon does not carry it.
  const { SeqpacketSocket } = (await import('node-unix-socket')) as { SeqpacketSocket: new () => SeqpacketSocketType };
  return new Promise<ConmonAttachStreams>((resolve, reject) => {
    const socket = new SeqpacketSocket();
    // Once both the peer's end and our shutdown are seen, the binding destroys the socket from inside its own
    // I/O callback, which can make that callback fail (EBADF, thrown as an uncaught exception). Destroy it
    // on a fresh turn of the event loop instead.
    const patched = socket as unknown as { isEnd: boolean; shutdown: boolean; checkClose(): void };
    patched.checkClose = () => {
      if (patched.isEnd && patched.shutdown) destroySocket();
    };
    let connected = false;
    let closed = false;
    let outputEnded = false;
    let remoteEnd!: () => void;
    const remoteEnded = new Promise<void>((r) => (remoteEnd = r));
    const endOutput = () => {
      if (outputEnded) return;
      outputEnded = true;
      output.push(null);
    };

    const output = new Readable({
      objectMode: true,
      read() {
        // conmon writes to attach sockets with blocking writes: we always read, and buffer here.
      },
    });
    // The binding aborts the process if its socket is destroyed while it is emitting packets (it emits the
    // packets of one wakeup in a row): destroy only from a fresh turn of the event loop.
    let destroyScheduled = false;
    const destroySocket = () => {
      if (destroyScheduled) return;
      destroyScheduled = true;
      setImmediate(() => socket.destroy());
    };
    const close = () => {
      if (closed) return;
      closed = true;
      destroySocket();
      endOutput();
      remoteEnd();
    };

    const input = new Writable({
      write(chunk: Buffer, _enc, cb) {
        if (closed) {
          cb();
          return;
        }
        try {
          for (let off = 0; off < chunk.length; off += MAX_INPUT_PACKET) {
            const part = chunk.subarray(off, Math.min(chunk.length, off + MAX_INPUT_PACKET));
            const last = off + MAX_INPUT_PACKET >= chunk.length;
            socket.write(part, 0, part.length, last ? () => cb() : undefined);
          }
          if (chunk.length === 0) cb();
        } catch (err) {
          cb(err as Error);
        }
      },
      final(cb) {
        if (closed) {
          cb();
          return;
        }
        try {
          socket.end(() => cb());
        } catch (err) {
          cb(err as Error);
        }
      },
    });

    socket.on('data', (packet: Buffer) => {
      if (packet.length < 1 || outputEnded) return;
      const kind = packet[0];
      if (kind !== STDOUT && kind !== STDERR) return;
      if (output.readableLength >= MAX_BUFFERED_PACKETS) {
        log.warn('attach: the client does not read the output; detached after 64 MiB were buffered', { socket: socketPath });
        closed = true;
        destroySocket();
        endOutput();
        remoteEnd();
        return;
      }
      output.push({ stream: kind === STDOUT ? 'stdout' : 'stderr', data: packet.subarray(1) });
    });
    socket.on('end', () => {
      // conmon closed its side: the container's output is over.
      endOutput();
      remoteEnd();
    });
    socket.on('error', (err: Error) => {
      if (!connected) {
        reject(err);
        return;
      }
      log.debug('attach socket closed with an error', { socket: socketPath, error: err.message });
      closed = true;
      destroySocket();
      endOutput();
      remoteEnd();
    });
    try {
      socket.connect(socketPath, () => {
        connected = true;
        resolve({ output, input, close, remoteEnded });
      });
    } catch (err) {
      reject(err);
    }
  });
}

interface SeqpacketAddon {
  connect(path: string): number;
  /** The packets still queued on the socket (read without blocking). */
  drain?(fd: number): Buffer[];
  /** A close-on-exec duplicate of the fd. */
  dup?(fd: number): number;
}

let addon: SeqpacketAddon | null | undefined;

function loadAddon(): SeqpacketAddon | null {
  if (addon !== undefined) return addon;
  addon = null;
  if (process.env.BERTH_SEQPACKET_ADDON === 'none') return addon;
  const here = path.dirname(fileURLToPath(import.meta.url));
  // daemon/ from dist/src/host/linux/runtime (compiled)
  const daemonDir = path.resolve(here, '..', '..', '..', '..', '..');
  const candidates = [process.env.BERTH_SEQPACKET_ADDON, path.join(daemonDir, 'native', 'seqpacket', 'build', 'Release', 'seqpacket.node')];
  const require = createRequire(import.meta.url);
  for (const candidate of candidates) {
    if (!candidate) continue;
    try {
      addon = require(candidate) as SeqpacketAddon;
      break;
    } catch {
      // try the next one
    }
  }
  return addon;
}

/** Whether attach uses the native addon (true) or the node-unix-socket fallback. */
export function attachUsesAddon(): boolean {
  return loadAddon() !== null;
}

interface PipeHandle {
  open(fd: number): number;
}
interface PipeWrapBinding {
  Pipe: new (type: number) => PipeHandle;
  constants: { SOCKET: number };
}

/** Packets buffered for a consumer before the socket stops reading (and conmon waits). */
const OUTPUT_HIGH_WATER = 1024;

function connectWithAddon(native: SeqpacketAddon, socketPath: string): Promise<ConmonAttachStreams> {
  let fd: number;
  try {
    fd = native.connect(socketPath);
  } catch (err) {
    return Promise.reject(err);
  }
  const { Pipe, constants } = (process as unknown as { binding(name: string): PipeWrapBinding }).binding('pipe_wrap');
  const handle = new Pipe(constants.SOCKET);
  const rc = handle.open(fd);
  if (rc !== 0) {
    closeSync(fd);
    return Promise.reject(new Error(`attach: cannot open the socket of ${socketPath} (libuv error ${rc})`));
  }
  const socket = new net.Socket({ handle, readable: true, writable: true, allowHalfOpen: true } as net.SocketConstructorOpts);
  // conmon closing the socket with stdin packets unread makes our next read fail with ECONNRESET, and libuv then
  // closes its fd, though the output packets conmon sent before are still queued: they are read through a
  // duplicate, kept until the socket closed.
  let spare = -1;
  try {
    spare = native.dup?.(fd) ?? -1;
  } catch {
    // without it, such a reset may cost the last packets
  }
  const releaseSpare = () => {
    if (spare < 0) return;
    closeSync(spare);
    spare = -1;
  };

  let remoteEnd!: () => void;
  const remoteEnded = new Promise<void>((r) => (remoteEnd = r));
  let outputEnded = false;
  const output = new Readable({
    objectMode: true,
    highWaterMark: OUTPUT_HIGH_WATER,
    read() {
      socket.resume();
    },
  });
  const endOutput = () => {
    if (outputEnded) return;
    outputEnded = true;
    output.push(null);
  };
  // Each 'data' chunk is one packet: the socket flows chunk by chunk, and libuv reads one packet per call.
  socket.on('data', (packet: Buffer) => {
    if (packet.length < 1 || outputEnded) return;
    const kind = packet[0];
    if (kind !== STDOUT && kind !== STDERR) return;
    if (!output.push({ stream: kind === STDOUT ? 'stdout' : 'stderr', data: packet.subarray(1) })) socket.pause();
  });
  /** Pushes the packets still queued on `from` (an open fd of the socket), then ends the output. */
  const drainAndEnd = (from: number) => {
    for (const packet of from >= 0 ? (native.drain?.(from) ?? []) : []) {
      const kind = packet[0];
      if (outputEnded || (kind !== STDOUT && kind !== STDERR)) continue;
      output.push({ stream: kind === STDOUT ? 'stdout' : 'stderr', data: packet.subarray(1) });
    }
    endOutput();
    remoteEnd();
  };
  // libuv reports the end after a short read and a hang-up, though packets may still be queued: read them.
  socket.on('end', () => drainAndEnd(fd));
  socket.on('close', () => {
    endOutput();
    remoteEnd();
    releaseSpare();
  });
  // A reset or a broken socket means conmon went away (the process ended): the output ends once what it sent
  // is read. Errors are never re-emitted on `output`, where a consumer without an error listener would crash
  // the daemon.
  socket.on('error', (err) => {
    log.debug('attach socket closed with an error', { socket: socketPath, error: err.message });
    drainAndEnd(spare);
    releaseSpare();
  });

  // One write in flight at a time, each at most one of conmon's input buffers: a merged or oversized packet
  // would be cut by conmon's fixed-size receive.
  const input = new Writable({
    write(chunk: Buffer, _enc, cb) {
      if (socket.destroyed) {
        cb();
        return;
      }
      let off = 0;
      const next = (err?: Error | null) => {
        if (err) {
          cb(err);
          return;
        }
        if (off >= chunk.length) {
          cb();
          return;
        }
        const part = chunk.subarray(off, Math.min(chunk.length, off + MAX_INPUT_PACKET));
        off += part.length;
        socket.write(part, next);
      };
      next();
    },
    final(cb) {
      if (socket.destroyed) cb();
      else socket.end(() => cb());
    },
  });
  input.on('error', () => undefined);

  const close = () => {
    socket.destroy();
    endOutput();
    remoteEnd();
  };
  return Promise.resolve({ output, input, close, remoteEnded });
}

/** Connects to conmon's attach socket at `socketPath`. */
export function connectAttach(socketPath: string): Promise<ConmonAttachStreams> {
  const native = loadAddon();
  if (native) return connectWithAddon(native, socketPath);
  if (!warnedFallback) {
    warnedFallback = true;
    log.warn('attach: the seqpacket addon is not built (npm run build:native -w daemon); using node-unix-socket, whose sockets leak into spawned processes and cannot apply backpressure');
  }
  return connectWithBinding(socketPath);
}

let warnedFallback = false;
