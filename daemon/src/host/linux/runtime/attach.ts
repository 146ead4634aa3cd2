/**
 * Attaching to a container through conmon's attach socket (SOCK_SEQPACKET). Each packet conmon sends is one
 * byte naming the stream (2 stdout, 3 stderr) followed by the data; each packet written is stdin data. Ending
 * the input shuts the socket down for writing, which makes conmon close the container's stdin unless it runs
 * with --leave-stdin-open.
 */
import { Readable, Writable } from 'node:stream';
import { SeqpacketSocket } from 'node-unix-socket';
import type { AttachStreams } from '../../host.js';

const STDOUT = 2;
const STDERR = 3;
/** conmon reads stdin packets into a buffer of this size: larger packets would be cut. */
const MAX_INPUT_PACKET = 8192;

export interface ConmonAttachStreams extends AttachStreams {
  /** Resolves once conmon closed the socket: every packet it sent has been pushed to `output`. */
  remoteEnded: Promise<void>;
}

export function connectAttach(socketPath: string): Promise<ConmonAttachStreams> {
  return new Promise<ConmonAttachStreams>((resolve, reject) => {
    const socket = new SeqpacketSocket();
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
    const close = () => {
      if (closed) return;
      closed = true;
      socket.destroy();
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
      closed = true;
      outputEnded = true;
      output.destroy(err);
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
