/**
 * The container runtime of the Linux host: overlay root filesystems, OCI bundles, and containers created by
 * conmon with crun (or runc), so that they keep running while the daemon restarts. Files and folders are
 * described in layout.ts.
 *
 * Start: write the bundle, launch conmon (which runs `<runtime> create`), wait for its sync message with the
 * container's pid, run the caller's afterCreate hook (network setup), then `<runtime> start`. Nothing else
 * spawns a process on that path: the pid comes from conmon, exits from conmon's exit file. With crun, `start` and
 * the delete after an exit are done directly on crun's state (direct.ts), sparing two runtime processes.
 *
 * Beside it: the containers' folders, overlay roots and removal (files.ts), conmon's pids (monitor.ts), the
 * sealed copy of the runtime's binary (sealed.ts), exec sessions (exec.ts, execdirect.ts), the log reader
 * (logreader.ts, logformat.ts).
 */
import { constants, existsSync, promises as fs } from 'node:fs';
import type { AttachStreams, ContainerIO, ContainerRuntimeHost, ExitInfo, LogRecord, LogRecordBlock, StartHooks } from '../../host.js';
import { Conflict, InvalidParameter, NotFound } from '../../../errors.js';
import { connectAttach } from './attach.js';
import { ContainerFiles } from './files.js';
import { DirectUnavailable, removeStopped, startCreated } from './direct.js';
import { RuntimeControl } from './control.js';
import { launchConmon } from './conmon.js';
import { releaseExec, startExec, type ExecEnvironment, type ExecSession } from './exec.js';
import { runtimeStartError } from './errors.js';
import { ExitWatcher, readExitFile, type ExitSource } from './exits.js';
import { RuntimeLayout, UNIX_PATH_MAX, checkId } from './layout.js';
import { readConmonLog, readConmonLogBatches, readConmonLogBlocks } from './logreader.js';
import { OciRuntime, RuntimeCommandError, findExecutable, selectRuntime, type RuntimeName } from './ociruntime.js';
import { mountOf, parseMountinfo } from '../mountinfo.js';
import { alive, monitorAlive, readPid } from './monitor.js';
import { sealedRuntimeCopy, sealedRuntimeOpen, type SealedRuntime } from './sealed.js';
import { SeccompProgramCache } from './seccompcache.js';
import { AttachLockWarmer } from '../cgroups/attachlock.js';
import { log } from '../../../util/log.js';
import { fsSteps, type FsStep } from '../sys.js';
import path from 'node:path';

export interface LinuxRuntimeOptions {
  dataRoot: string;
  execRoot: string;
  /** The preferred OCI runtime; the other one is used (with `warning` set) when it cannot work here. */
  runtime: RuntimeName;
  conmonPath?: string;
  /** Where the cgroup hierarchies are mounted (for the runtime's compatibility check). */
  cgroupRoot?: string;
}

function errno(err: unknown): string | undefined {
  return (err as NodeJS.ErrnoException | undefined)?.code;
}

export class LinuxContainerRuntime implements ContainerRuntimeHost {
  readonly layout: RuntimeLayout;
  readonly oci: OciRuntime;
  /** Set when the preferred runtime could not be used on this host. */
  readonly runtimeWarning: string | undefined;
  private readonly conmonPath: string;
  private readonly exits: ExitWatcher;
  private readonly exitSource: ExitSource;
  private readonly pids = new Map<string, number>();
  private readonly files: ContainerFiles;
  private readonly control: RuntimeControl;
  /** The runtime's sealed copy that conmon runs for creates and execs (see sealedRuntimeCopy). */
  private sealedRuntime: SealedRuntime | undefined;
  /** Seccomp programs crun compiled, reused by later containers with the same filter (crun only). */
  private readonly seccompPrograms = new SeccompProgramCache();
  private readonly attachLock = new AttachLockWarmer();

  constructor(opts: LinuxRuntimeOptions) {
    this.layout = new RuntimeLayout(path.resolve(opts.dataRoot), path.resolve(opts.execRoot));
    this.files = new ContainerFiles(this.layout);
    const choice = selectRuntime(opts.runtime, opts.cgroupRoot);
    this.runtimeWarning = choice.warning;
    this.oci = new OciRuntime(choice.name, choice.path, this.layout.runtimeState);
    this.sealedRuntime = sealedRuntimeCopy(choice.path);
    const conmon = opts.conmonPath ?? findExecutable('conmon');
    if (!conmon) throw new Error('conmon is not installed');
    this.conmonPath = conmon;
    const source: ExitSource = (this.exitSource = {
      exitFile: (id) => this.layout.exitFile(id),
      oomFiles: (id) => [path.join(this.layout.persistDir(id), 'oom'), path.join(this.layout.bundle(id), 'oom')],
      monitorAlive: (id) => this.monitorAlive(id),
    });
    this.exits = new ExitWatcher(this.layout.exitDir, source);
    this.control = new RuntimeControl(this.oci, this.layout.execDir);
  }

  get runtimeName(): RuntimeName {
    return this.oci.name;
  }

  /** Stops the exit watcher; containers keep running. */
  close(): void {
    this.exits.close();
  }

  private ensureDirs(): Promise<void> {
    return this.files.ensureDirs();
  }

  /** See cgroups/attachlock.ts. */
  startBeginning(): void {
    this.attachLock.warm();
  }

  // -- root filesystem --

  mountRootfs(id: string, lowerDirs: string[]): Promise<string> {
    return this.files.mountRootfs(id, lowerDirs);
  }

  writableLayerSize(id: string): Promise<number> {
    return this.files.writableLayerSize(id);
  }

  unmountRootfs(id: string): Promise<void> {
    return this.files.unmountRootfs(id);
  }

  /** See ContainerFiles.remove. */
  async removeContainerFiles(id: string): Promise<void> {
    await this.files.unmountForRemoval(id);
    this.pids.delete(id);
    await this.files.remove(id);
  }

  readFileFromLayers(lowerDirs: string[], file: string): Promise<Buffer | undefined> {
    return this.files.readFileFromLayers(lowerDirs, file);
  }

  // -- lifecycle --

  async start(id: string, spec: object, io: ContainerIO, hooks?: StartHooks): Promise<{ pid: number }> {
    checkId(id);
    const l = this.layout;
    const socketPath = l.attachSocket(id);
    if (Buffer.byteLength(socketPath) >= UNIX_PATH_MAX) {
      throw new Error(`the exec root ${l.execRoot} is too long: the attach socket path ${socketPath} exceeds ${UNIX_PATH_MAX - 1} bytes`);
    }
    await this.ensureDirs();
    const bundle = l.bundle(id);
    const merged = l.merged(id);
    const files = l.conmonFiles(id);
    const persist = l.persistDir(id);
    // Checks read synchronously (they take microseconds); the changes below go as one task of the pool.
    if (!existsSync(merged)) throw new Conflict(`the root filesystem of container ${id} is not mounted`);
    // The conmon of a previous run writes the exit file a moment before it removes its socket link and exits:
    // a restart must not race it, or the old conmon would remove the new one's link.
    await this.waitMonitorGone(id, 2000);
    // A previous run of this container that nobody cleaned up (e.g. the daemon crashed before cleanup).
    if (existsSync(path.join(l.runtimeState, id))) await this.oci.delete(id);
    const seccompKey = this.oci.name === 'crun' ? this.seccompPrograms.keyOf(spec) : undefined;
    await fsSteps([
      ['unlink', l.exitFile(id)],
      ['mkdir', bundle, 0o700],
      ...(io.noLog ? [] : [['mkdir', path.dirname(io.logPath), 0o755] as FsStep]),
      ['mkdir', files, 0o700],
      ['unlink', path.join(files, 'pid')],
      ['mkdir', persist, 0o700],
      ['unlink', path.join(persist, 'exit')],
      ['unlink', path.join(persist, 'oom')],
      ['unlink', path.join(bundle, 'oom')],
      // Not written atomically on purpose: the bundle is rewritten before every start and read only by create.
      // A new file (not a truncation in place, which ext4 flushes when it is closed).
      ['write', path.join(bundle, 'config.json'), Buffer.from(JSON.stringify(withRoot(this.seccompPrograms.withProgram(spec, seccompKey), merged, io.tty))), 0o600],
    ]);

    const sync = await launchConmon(
      this.conmonPath,
      {
        id,
        socketKey: l.socketKey(id),
        runtimePath: this.launchPath(),
        runtimeState: l.runtimeState,
        bundle,
        containerPidFile: path.join(files, 'pid'),
        conmonPidFile: path.join(files, 'conmon.pid'),
        exitDir: l.exitDir,
        persistDir: persist,
        socketDir: l.socketDir,
        logPath: io.noLog ? undefined : io.logPath,
        tty: io.tty,
        openStdin: io.openStdin,
        stdinOnce: io.stdinOnce,
      },
      path.join(files, 'conmon.err'),
    );
    if ('error' in sync) {
      await this.oci.delete(id).catch(() => undefined);
      throw runtimeStartError(sync.error);
    }
    const pid = sync.pid;
    this.pids.set(id, pid);
    if (seccompKey !== undefined && !this.seccompPrograms.has(seccompKey)) void this.seccompPrograms.learn(seccompKey, path.join(l.runtimeState, id));
    try {
      await hooks?.afterCreate?.(pid);
      await this.startCreated(id, spec);
    } catch (err) {
      await this.oci.delete(id).catch(() => undefined);
      if (err instanceof RuntimeCommandError) throw runtimeStartError(err.stderr || err.message);
      throw err;
    }
    return { pid };
  }

  /** `<runtime> start`, or its direct equivalent with crun when the spec has no hooks to run. */
  private async startCreated(id: string, spec: object): Promise<void> {
    if (this.oci.name === 'crun' && !(spec as { hooks?: unknown }).hooks) {
      try {
        startCreated(this.layout.runtimeState, id);
        return;
      } catch (err) {
        if (!(err instanceof DirectUnavailable)) throw err;
        // crun start says what is wrong.
      }
    }
    await this.oci.start(id);
  }

  private async containerPid(id: string): Promise<number | undefined> {
    const cached = this.pids.get(id);
    if (cached) return cached;
    const pid = await readPid(path.join(this.layout.conmonFiles(id), 'pid'));
    if (pid) this.pids.set(id, pid);
    return pid;
  }

  private async waitMonitorGone(id: string, timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (await this.monitorAlive(id)) {
      if (Date.now() > deadline) throw new Conflict(`container ${id} is still running under its previous monitor`);
      await new Promise((r) => setTimeout(r, 5));
    }
  }

  private monitorAlive(id: string): Promise<boolean> {
    return monitorAlive(this.layout.conmonFiles(id), id);
  }

  async signal(id: string, signal: number): Promise<void> {
    const pid = await this.containerPid(id);
    if (!pid) throw new NotFound(`no such container in the runtime: ${id}`);
    if (await fs.access(this.layout.exitFile(id)).then(() => true, () => false)) {
      throw new Conflict(`container ${id} is not running`);
    }
    // The init process is conmon's child until conmon reaps it and writes the exit file: its pid cannot be
    // reused before that, so signalling it directly is safe and spares a runtime process.
    try {
      process.kill(pid, signal);
    } catch (err) {
      if (errno(err) === 'ESRCH') throw new Conflict(`container ${id} is not running`);
      if (errno(err) === 'EINVAL') throw new InvalidParameter(`invalid signal ${signal}`);
      throw err;
    }
  }

  async waitExit(id: string): Promise<ExitInfo> {
    checkId(id);
    const known = await readExitFile(this.exitSource, id);
    if (known) return known;
    return this.exits.wait(id);
  }

  /**
   * Releases the runtime's hold on the container. A container the runtime does not know needs nothing; with
   * crun, one whose exit conmon recorded (so its init is gone) is deleted directly; else `<runtime> delete`.
   */
  async cleanup(id: string): Promise<void> {
    checkId(id);
    this.pids.delete(id);
    if (!existsSync(path.join(this.layout.runtimeState, id))) return;
    if (this.oci.name === 'crun' && existsSync(this.layout.exitFile(id))) {
      try {
        await removeStopped(this.layout.runtimeState, id);
        return;
      } catch (err) {
        if (!(err instanceof DirectUnavailable)) throw err;
        log.debug('deleting the container with the runtime', { id, reason: err.message });
      }
    }
    await this.oci.delete(id);
  }

  async isRunning(id: string): Promise<{ running: boolean; pid: number }> {
    checkId(id);
    const pid = await this.containerPid(id);
    if (!pid) return { running: false, pid: 0 };
    if (await fs.access(this.layout.exitFile(id)).then(() => true, () => false)) return { running: false, pid: 0 };
    if (!alive(pid) || !(await this.monitorAlive(id))) return { running: false, pid: 0 };
    return { running: true, pid };
  }

  async listRuntimeContainers(): Promise<string[]> {
    // Asked at every start of the daemon: the folders of removed containers that a stop left aside go too.
    await this.ensureDirs().catch(() => undefined);
    try {
      const entries = await fs.readdir(this.layout.runtimeState, { withFileTypes: true });
      return entries.filter((e) => e.isDirectory()).map((e) => e.name);
    } catch (err) {
      if (errno(err) === 'ENOENT') return [];
      throw err;
    }
  }

  async sourceMount(hostPath: string): Promise<{ mountPoint: string; shared: boolean; slave: boolean }> {
    const resolved = await fs.realpath(hostPath);
    const entry = mountOf(parseMountinfo(await fs.readFile('/proc/self/mountinfo', 'utf8')), resolved);
    if (!entry) throw new Error(`Can't find mount point of ${hostPath}`);
    return {
      mountPoint: entry.mountPoint,
      shared: entry.optional.some((o) => o.startsWith('shared:')),
      slave: entry.optional.some((o) => o.startsWith('master:')),
    };
  }

  // -- stdio --

  async attach(id: string): Promise<AttachStreams> {
    checkId(id);
    try {
      return await connectAttach(this.layout.attachSocket(id));
    } catch (err) {
      throw new Conflict(`cannot attach to container ${id}: it is not running (${(err as Error).message})`);
    }
  }

  async resize(id: string, height: number, width: number): Promise<void> {
    checkId(id);
    if (!Number.isInteger(height) || !Number.isInteger(width) || height < 0 || width < 0 || height > 65535 || width > 65535) {
      throw new InvalidParameter(`invalid terminal size ${height}x${width}`);
    }
    let handle;
    try {
      handle = await fs.open(this.layout.ctlFifo(id), constants.O_WRONLY | constants.O_NONBLOCK);
    } catch (err) {
      if (errno(err) === 'ENXIO' || errno(err) === 'ENOENT') throw new Conflict(`container ${id} is not running`);
      throw err;
    }
    try {
      await handle.write(`1 ${height} ${width}\n`);
    } finally {
      await handle.close();
    }
  }

  // -- pause, update, processes (control.ts) --

  /** Freezes every process of the container (cgroup freezer). */
  pause(id: string): Promise<void> {
    checkId(id);
    return this.control.pause(id);
  }

  /** Thaws a frozen container. */
  resume(id: string): Promise<void> {
    checkId(id);
    return this.control.resume(id);
  }

  /** Applies OCI `linux.resources` to the running container's cgroup. */
  updateResources(id: string, resources: object): Promise<void> {
    checkId(id);
    return this.control.update(id, resources);
  }

  /** The host's `ps` table (with `psArgs`) and the pids of the container's processes. */
  async listProcesses(id: string, psArgs: string[]): Promise<{ table: string; pids: number[] }> {
    checkId(id);
    const pids = await this.control.pids(id);
    return { table: await this.control.processTable(psArgs), pids };
  }

  // -- exec sessions --

  /**
   * Runs a process in the running container under its own conmon (`docker exec`), attached from the start.
   * `process` is an OCI runtime-spec process object. Call releaseExec once the session is over.
   */
  async exec(id: string, execId: string, process: object, io: { tty: boolean; openStdin: boolean; detach?: boolean }): Promise<ExecSession> {
    checkId(id);
    await this.ensureDirs();
    try {
      return await startExec(this.execEnvironment(), { containerId: id, execId, process, tty: io.tty, openStdin: io.openStdin, detach: io.detach });
    } catch (err) {
      // Asked only when the exec failed (the engine checked the container before): a stopped container says so.
      if (!(await this.isRunning(id)).running) throw new Conflict(`container ${id} is not running`);
      throw err;
    }
  }

  /** Removes the files of an exec session. */
  releaseExec(execId: string): Promise<void> {
    return releaseExec(this.execEnvironment(), execId);
  }

  /**
   * The runtime's binary as conmon runs it: its sealed copy, or its path without the addon. The copy is checked
   * to be still open under its number (a stray close elsewhere in the daemon would otherwise hand conmon another
   * file), and made again when it is not.
   */
  private launchPath(): string {
    const sealed = this.sealedRuntime;
    if (!sealed) return this.oci.path;
    if (sealedRuntimeOpen(sealed)) return sealed.path;
    log.warn(`runtime: the sealed copy of ${this.oci.path} is no longer open as fd ${sealed.fd}; making it again`);
    this.sealedRuntime = sealedRuntimeCopy(this.oci.path);
    return this.sealedRuntime?.path ?? this.oci.path;
  }

  private execEnvironment(): ExecEnvironment {
    return {
      conmonPath: this.conmonPath,
      runtimePath: this.launchPath(),
      runtimeName: this.oci.name,
      runtimeState: this.layout.runtimeState,
      execDir: this.layout.execDir,
      socketDir: this.layout.socketDir,
    };
  }

  readLog(logPath: string, opts: { follow: boolean; signal: AbortSignal; tail?: number; until?: () => boolean }): AsyncIterable<LogRecord> {
    return readConmonLog(logPath, opts);
  }

  /** readLog in batches of records (one per chunk read): the fast path for big logs. */
  readLogBatches(logPath: string, opts: { follow: boolean; signal: AbortSignal; tail?: number; until?: () => boolean }): AsyncIterable<LogRecord[]> {
    return readConmonLogBatches(logPath, opts);
  }

  /** readLog in column blocks (no object per record): what `logs` is served from. */
  readLogBlocks(logPath: string, opts: { follow: boolean; signal: AbortSignal; tail?: number; until?: () => boolean }): AsyncIterable<LogRecordBlock> {
    return readConmonLogBlocks(logPath, opts);
  }
}

/** The spec with `root.path` set to the mounted rootfs and `process.terminal` matching the container's tty. */
export function withRoot(spec: object, rootPath: string, tty: boolean): object {
  const s = spec as { root?: Record<string, unknown>; process?: Record<string, unknown> };
  return {
    ...s,
    root: { ...(s.root ?? {}), path: rootPath },
    ...(s.process ? { process: { ...s.process, terminal: tty } } : {}),
  };
}

