/**
 * The runtime part of the Host: containers created, started, signalled and waited for under their monitor,
 * their root filesystems, attach and logs (host/linux/runtime implements it with crun or runc and conmon).
 */
import type { Readable, Writable } from 'node:stream';

/** The output side of a container's or exec's stdio, live. */
export interface AttachStreams {
  /** Live output, one chunk per packet, tagged with its stream. Ends when the process's stdio closes. */
  output: Readable; // objectMode: { stream: 'stdout' | 'stderr'; data: Buffer }
  /** Writes go to the process's stdin; ending it closes stdin (when the container allows that). */
  input: Writable;
  close(): void;
}

/** One line of a container log as conmon writes it. */
export interface LogRecord {
  /** RFC 3339 with nanoseconds, as written by conmon. */
  time: string;
  timeNano: bigint;
  stream: 'stdout' | 'stderr';
  /** False when the line continues in the next record (conmon's P flag). */
  complete: boolean;
  /** The bytes of the record WITHOUT a trailing newline; a complete record (F) implies one after `data`. */
  data: Buffer;
}

/**
 * Log records in columns, over the one buffer they were read into: no object per record, for logs served in
 * bulk. Record i's time starts at `offsets[3i]`, its data spans `offsets[3i+1]` to `offsets[3i+2]` (without
 * the newline); `flags[i]` holds LOG_STDERR and LOG_COMPLETE. The block is handed over: its consumer may write
 * into `buf` (the reader keeps nothing of it).
 */
export interface LogRecordBlock {
  readonly buf: Buffer;
  readonly count: number;
  readonly offsets: Int32Array;
  readonly flags: Uint8Array;
  /** Record i's time: whole seconds since the epoch. */
  seconds(i: number): number;
  /** Record i's time: nanoseconds within its second. */
  nanos(i: number): number;
}
export const LOG_STDERR = 1;
export const LOG_COMPLETE = 2;

export interface ContainerIO {
  tty: boolean;
  openStdin: boolean;
  stdinOnce: boolean;
  /** Where conmon writes the container's log. */
  logPath: string;
  /** LogConfig.Type none: no log is kept. */
  noLog?: boolean;
}

/** Work the engine does between the runtime's create and start (network set-up, early attach). */
export interface StartHooks {
  /** Called with the container's pid once created; a rejection aborts the start. */
  afterCreate?(pid: number): Promise<void>;
}

/** A running container's exit, as recorded by conmon. */
export interface ExitInfo {
  exitCode: number;
  /** When the process ended (nanoseconds since the epoch). */
  finishedAtNano: bigint;
  oomKilled: boolean;
}

/** What the container engine asks of the Host to run containers. */
export interface ContainerRuntimeHost {
  /**
   * Mounts the container's root filesystem (overlay of the given lower folders with the container's own upper).
   * `lowerDirs` are bottom-first, in the order the image lists its layers.
   */
  mountRootfs(id: string, lowerDirs: string[]): Promise<string>;
  unmountRootfs(id: string): Promise<void>;
  /** Says that a start is beginning (mount, then start follow): the host may prepare what the runtime will wait for. */
  startBeginning?(): void;
  /** Removes the container's writable layer and bundle. */
  removeContainerFiles(id: string): Promise<void>;
  /** Reads a file from an image's layers, bottom-first (for /etc/passwd lookups before the container exists). */
  readFileFromLayers(lowerDirs: string[], path: string): Promise<Buffer | undefined>;
  /**
   * Creates and starts the container under conmon with the given OCI runtime spec (root.path is filled in
   * by the host). Resolves with the container's pid once the process runs.
   */
  start(id: string, spec: object, io: ContainerIO, hooks?: StartHooks): Promise<{ pid: number }>;
  /** Sends a signal to the container's init process. */
  signal(id: string, signal: number): Promise<void>;
  /** Resolves when the container's process ended, with its exit code (also after a daemon restart). */
  waitExit(id: string): Promise<ExitInfo>;
  /** Releases what the runtime holds of an ended container (`crun delete`). */
  cleanup(id: string): Promise<void>;
  /** Whether the runtime still knows the container and its process is alive. */
  isRunning(id: string): Promise<{ running: boolean; pid: number }>;
  attach(id: string): Promise<AttachStreams>;
  resize(id: string, height: number, width: number): Promise<void>;
  /**
   * Reads the container's log from the start (or the `tail` last records); with follow, keeps reading until
   * `signal` aborts or, once at the end of the log, the hook `until` says the container will write no more.
   */
  readLog(logPath: string, opts: { follow: boolean; signal: AbortSignal; tail?: number; until?: () => boolean }): AsyncIterable<LogRecord>;
  /** readLog in batches of records (one per chunk read): what big logs are served from. */
  readLogBatches(logPath: string, opts: { follow: boolean; signal: AbortSignal; tail?: number; until?: () => boolean }): AsyncIterable<LogRecord[]>;
  /** readLog in columnar blocks (one per chunk read, no object per record): what `logs` is served from. */
  readLogBlocks(logPath: string, opts: { follow: boolean; signal: AbortSignal; tail?: number; until?: () => boolean }): AsyncIterable<LogRecordBlock>;
  /** Bytes of the container's own files (its writable layer): SizeRw. */
  writableLayerSize(id: string): Promise<number>;
  /** Freezes every process of the container (its cgroup's freezer). */
  pause(id: string): Promise<void>;
  /** Thaws what pause froze. */
  resume(id: string): Promise<void>;
  /** Applies OCI runtime-spec `linux.resources` to the running container's cgroup. */
  updateResources(id: string, resources: object): Promise<void>;
  /** The machine's `ps` output for `psArgs` and the pids (as the Host sees them) of the container's processes. */
  listProcesses(id: string, psArgs: string[]): Promise<{ table: string; pids: number[] }>;
  /** Ids of containers the runtime holds (for recovery). */
  listRuntimeContainers(): Promise<string[]>;
  /**
   * The mount a host path lies on (symlinks resolved) and its propagation: whether it is in a peer group
   * (shared) or receives from one (slave). Absent where the host cannot tell.
   */
  sourceMount?(hostPath: string): Promise<{ mountPoint: string; shared: boolean; slave: boolean }>;
}
