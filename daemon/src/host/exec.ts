/**
 * The exec part of the Host: extra processes in a running container, each under its own monitor
 * (host/linux/runtime implements it).
 */
import type { AttachStreams } from './runtime.js';

/** A started exec process, as the Host runs it. */
export interface ExecProcess {
  pid: number;
  streams: AttachStreams;
  /** Resolves with the exit code once all output is in `streams.output`. */
  exit: Promise<number>;
  resize(height: number, width: number): Promise<void>;
  /** Sends a signal to the process (health probes that exceed their timeout are killed). */
  kill?(signal: number): Promise<void>;
}

/** What exec needs of the Host. */
export interface ExecHost {
  /** `detach`: nobody reads the output (the Host then keeps a monitor for the process). */
  exec(containerId: string, execId: string, process: object, io: { tty: boolean; openStdin: boolean; detach?: boolean }): Promise<ExecProcess>;
  releaseExec(execId: string): Promise<void>;
  readFileFromLayers(lowerDirs: string[], path: string): Promise<Buffer | undefined>;
}
