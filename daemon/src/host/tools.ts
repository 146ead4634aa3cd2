/**
 * The tools part of the Host: programs of the machine run as stream stages, for the formats Node cannot
 * decode itself (host/linux/tools.ts runs them as child processes).
 */
import type { Duplex, Readable } from 'node:stream';

/** Compression formats decoded by a tool of the machine. */
export type ToolCompression = 'bzip2' | 'xz' | 'zstd';

export interface ToolsHost {
  /**
   * A stream through the format's decompressor (`bzip2 -dc`, `xz -dc`, `zstd -dc`): compressed bytes
   * written, plain bytes read. It fails with a ToolFailure (errors.ts) when the tool cannot run or ends with
   * an exit code other than 0; aborting `signal` ends the tool and fails the stream with the abort.
   */
  decompressor(format: ToolCompression, signal?: AbortSignal): Duplex;
  /**
   * A tar of the folder `dir` of the machine (numeric owners), by the machine's tar; the stream fails with a
   * ToolFailure when tar does.
   */
  packFolder(dir: string, signal?: AbortSignal): Readable;
  /**
   * Unpacks the tar stream `tar` into the folder `dir` of the machine, by the machine's tar (which refuses
   * members that leave the folder); fails with a ToolFailure when tar does.
   */
  unpackInto(dir: string, tar: Readable, signal?: AbortSignal): Promise<void>;
}
