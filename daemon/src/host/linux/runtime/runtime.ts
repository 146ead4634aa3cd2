/**
 * The container runtime of the Linux host: overlay root filesystems, OCI bundles, and containers created by
 * conmon with crun (or runc), so that they keep running while the daemon restarts. Files and folders are
 * described in layout.ts.
 *
 * Start: write the bundle, launch conmon (which runs `<runtime> create`), wait for its sync message with the
 * container's pid, run the caller's afterCreate hook (network setup), then `<runtime> start`. Nothing else
 * spawns a process on that path: the pid comes from conmon, exits from conmon's exit file. With crun, `start` and
 * the delete after an exit are done directly on crun's state (direct.ts), sparing two runtime processes.
 */
import { constants, existsSync, promises as fs, readdirSync, readFileSync, readlinkSync } from 'node:fs';
import type { AttachStreams, ContainerIO, ContainerRuntimeHost, ExitInfo, LogRecord, LogRecordBlock, StartHooks } from '../../host.js';
import { Conflict, errorMessage, InvalidParameter, NotFound } from '../../../errors.js';
import { connectAttach } from './attach.js';
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
import { diskUsage, mountOverlay, readFileFromLayers, unmountOverlay } from './rootfs.js';
import { SeccompProgramCache } from './seccompcache.js';
import { AttachLockWarmer } from '../cgroups/attachlock.js';
import { log } from '../../../util/log.js';
import { fsStepResults, fsSteps, linuxSys, removeTree, type FsStep } from '../sys.js';
import { removeLater } from '../../../util/later.js';
import os from 'node:os';
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

const LAYER_FILE_CACHE_ENTRIES = 64;
const LAYER_FILE_CACHE_MAX_BYTES = 64 * 1024;

/** Names of container folders being deleted in the background (never a container id: ids start with [A-Za-z0-9_]). */
const REMOVING_PREFIX = '.removing-';

const ENOENT = os.constants.errno.ENOENT;

function errno(err: unknown): string | undefined {
  return (err as NodeJS.ErrnoException | undefined)?.code;
}

/** A pid file's content as a pid, or undefined. */
function parsePid(text: string): number | undefined {
  const pid = Number(text.trim());
  return Number.isInteger(pid) && pid > 0 ? pid : undefined;
}

async function readPid(file: string): Promise<number | undefined> {
  try {
    return parsePid(await fs.readFile(file, 'utf8'));
  } catch (err) {
    if (errno(err) === 'ENOENT') return undefined;
    throw err;
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return errno(err) === 'EPERM';
  }
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
  /** Small files read from image layers, least recently used first. */
  private readonly layerFiles = new Map<string, { data: Buffer | undefined }>();
  /** Containers whose root filesystem this daemon unmounted and has not mounted since (spares a second unmount). */
  private readonly unmounted = new Set<string>();
  private dirsReady: Promise<void> | undefined;
  private readonly control: RuntimeControl;
  /** The runtime's sealed copy that conmon runs for creates and execs (see sealedRuntimeCopy). */
  private sealedRuntime: SealedRuntime | undefined;
  /** Seccomp programs crun compiled, reused by later containers with the same filter (crun only). */
  private readonly seccompPrograms = new SeccompProgramCache();
  private readonly attachLock = new AttachLockWarmer();

  constructor(opts: LinuxRuntimeOptions) {
    this.layout = new RuntimeLayout(path.resolve(opts.dataRoot), path.resolve(opts.execRoot));
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
    this.dirsReady ??= (async () => {
      const l = this.layout;
      await fs.mkdir(l.containersDir, { recursive: true, mode: 0o710 });
      for (const dir of [l.runtimeState, l.exitDir, l.socketDir, l.conmonDir, l.execDir, l.bundlesDir]) await fs.mkdir(dir, { recursive: true, mode: 0o700 });
      // Folders of removed containers whose deletion a stop of the daemon interrupted.
      for (const dir of [l.containersDir, l.conmonDir, l.bundlesDir]) {
        for (const name of readdirSync(dir)) {
          if (name.startsWith(REMOVING_PREFIX)) void removeTree(path.join(dir, name)).catch(() => undefined);
        }
      }
    })().catch((err) => {
      this.dirsReady = undefined;
      throw err;
    });
    return this.dirsReady;
  }

  /** See cgroups/attachlock.ts. */
  startBeginning(): void {
    this.attachLock.warm();
  }

  // -- root filesystem --

  async mountRootfs(id: string, lowerDirs: string[]): Promise<string> {
    this.unmounted.delete(id);
    await this.ensureDirs();
    return mountOverlay(this.layout.containerDir(id), lowerDirs);
  }

  async writableLayerSize(id: string): Promise<number> {
    return diskUsage(path.join(this.layout.containerDir(checkId(id)), 'upper'));
  }

  async unmountRootfs(id: string): Promise<void> {
    await unmountOverlay(this.layout.containerDir(id));
    this.unmounted.add(id);
  }

  /**
   * Unmounts and removes the container's files. Its folders are renamed aside at once and deleted later, in a
   * batch (util/later.ts): a writable layer can hold many files, and the removal need not wait for them.
   */
  async removeContainerFiles(id: string): Promise<void> {
    const dir = this.layout.containerDir(id);
    if (!this.unmounted.has(id)) {
      try {
        await unmountOverlay(dir);
      } catch (err) {
        throw new Conflict(`the root filesystem of container ${id} is still mounted: ${(err as Error).message}`);
      }
    }
    this.unmounted.delete(id);
    this.pids.delete(id);
    const asides = [
      [dir, path.join(this.layout.containersDir, `${REMOVING_PREFIX}${id}`)],
      [this.layout.conmonFiles(id), path.join(this.layout.conmonDir, `${REMOVING_PREFIX}${id}`)],
      [this.layout.bundle(id), path.join(this.layout.bundlesDir, `${REMOVING_PREFIX}${id}`)],
    ] as const;
    // One task of the pool for the unlink and the renames; a folder that cannot be renamed is removed in place.
    const results = await fsStepResults([['unlink', this.layout.exitFile(id)], ...asides.map(([from, aside]): FsStep => ['rename', from, aside])]);
    for (const [i, [from, aside]] of asides.entries()) {
      const moved = results[i + 1];
      if (moved === 0) removeLater(aside, removeTree, (err) => log.warn('cannot delete the files of a removed container', { id, error: (err as Error).message }));
      else if (moved !== ENOENT) await removeTree(from);
    }
  }

  /**
   * A file as the image's layers show it. Layer folders never change once unpacked (they are named by their
   * content's chain id), so small files (/etc/passwd and /etc/group, read at every start) are kept, a few.
   */
  async readFileFromLayers(lowerDirs: string[], file: string): Promise<Buffer | undefined> {
    const key = `${file}\0${lowerDirs.join('\0')}`;
    const known = this.layerFiles.get(key);
    if (known) {
      this.layerFiles.delete(key);
      this.layerFiles.set(key, known);
      return known.data;
    }
    const data = await readFileFromLayers(lowerDirs, file);
    if (data === undefined || data.length <= LAYER_FILE_CACHE_MAX_BYTES) {
      this.layerFiles.set(key, { data });
      if (this.layerFiles.size > LAYER_FILE_CACHE_ENTRIES) this.layerFiles.delete(this.layerFiles.keys().next().value!);
    }
    return data;
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

  /** Read synchronously: a few bytes of a local file and of procfs, on the path of every start. */
  private async monitorAlive(id: string): Promise<boolean> {
    let pid: number | undefined;
    try {
      pid = parsePid(readFileSync(path.join(this.layout.conmonFiles(id), 'conmon.pid'), 'utf8'));
    } catch {
      return false;
    }
    if (!pid || !alive(pid)) return false;
    // The pid may have been reused since (after a reboot or a crash): it must be conmon, for this container.
    let cmdline = '';
    try {
      cmdline = readFileSync(`/proc/${pid}/cmdline`, 'latin1');
    } catch {
      return false;
    }
    return cmdline.includes(`\0-c\0${id}\0`);
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

/**
 * `/proc/<daemon pid>/fd/N` of a sealed in-memory copy of the OCI runtime's binary, or undefined without the
 * addon. crun and runc protect the host's binary from the container (CVE-2019-5736) by running from a copy of
 * themselves unless they already run from a sealed memfd; making that copy costs every create and exec a bind
 * mount and a lazy unmount, which waits for an RCU grace period (milliseconds, more under load). The copy made
 * once here gives the same protection: nothing can write to it. The daemon holds it open while it runs; conmon
 * runs the runtime only while the daemon waits for it.
 */
export function sealedRuntimeCopy(file: string): SealedRuntime | undefined {
  const sys = linuxSys();
  if (!sys?.sealedCopy) return undefined;
  try {
    const fd = sys.sealedCopy(file);
    return { fd, path: `/proc/${process.pid}/fd/${fd}` };
  } catch (err) {
    log.warn(`runtime: no sealed copy of ${file}, containers' creates run it from its path: ${errorMessage(err)}`);
    return undefined;
  }
}

export interface SealedRuntime {
  fd: number;
  /** `/proc/<daemon pid>/fd/<fd>`, what conmon executes. */
  path: string;
}

const SEALED_NAME = '/memfd:berth-runtime';

/** Whether the daemon's fd still is the sealed copy. */
export function sealedRuntimeOpen(sealed: SealedRuntime): boolean {
  try {
    return readlinkSync(`/proc/self/fd/${sealed.fd}`).startsWith(SEALED_NAME);
  } catch {
    return false;
  }
}
