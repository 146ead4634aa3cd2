/**
 * Exec: extra processes in a running container (`docker exec`). An exec is created (its configuration
 * checked and kept), then started once: the Host runs it under its own monitor, attached from the first
 * byte, and reports its exit code. Exec records live in memory, as in Docker: they go away when their
 * container stops (inspecting one then answers 404), and the container lists their ids in ExecIDs.
 */
import type { AttachStreams, ExecHost, ExecProcess } from '../../host/host.js';
import { Conflict, InvalidParameter, NotFound } from '../../errors.js';
import type { EventBus } from '../events.js';
import { newId } from '../../util/ids.js';
import type { ContainerRecord } from './model.js';
import { buildSpec, DEFAULT_PATH, resolveUser } from './ocispec.js';
import { CAPABILITIES, parseConsoleSize } from './validate.js';
import { capabilityHeld } from '../machine.js';

/** A started exec process, as the Host runs it. */
export type { ExecProcess };

/** What exec needs of the container engine. */
export interface ExecContainers {
  get(ref: string): ContainerRecord;
  find?(ref: string): ContainerRecord | undefined;
  containerEvent(record: ContainerRecord, action: string, extra?: Record<string, string>): void;
  /** The variables of the container's legacy links (its exec processes get them too). */
  linkEnv?(record: ContainerRecord): string[];
}

export interface ExecDeps {
  containers: ExecContainers;
  host: ExecHost;
  lowerDirs(chainIds: string[]): string[];
  events: EventBus;
}

export interface ExecConfig {
  ID: string;
  ContainerID: string;
  OpenStdin: boolean;
  OpenStdout: boolean;
  OpenStderr: boolean;
  Tty: boolean;
  DetachKeys: string;
  User: string;
  Privileged: boolean;
  Env: string[];
  WorkingDir: string;
  /** The command: its first word is the entrypoint of ProcessConfig, the rest its arguments. */
  Cmd: string[];
  ConsoleSize: [number, number] | null;
}

/** How the engine runs a command of its own in a container (ExecService.runInternal). */
export interface InternalExecOptions {
  /** Every chunk of output, stdout and stderr alike, in order. */
  onOutput(data: Buffer): void;
  /** Called once the process runs. */
  onStarted?(): void;
  /** Aborting it kills the process. */
  signal?: AbortSignal;
}

export type ExecState = 'created' | 'starting' | 'running' | 'exited';

export interface ExecInstance {
  config: ExecConfig;
  state: ExecState;
  pid: number;
  exitCode: number | null;
  process?: ExecProcess;
  /** Resolves once the process runs (or failed to start): resize waits on it. */
  started: Promise<void>;
  markStarted(): void;
}

function checkBool(body: Record<string, unknown>, key: string): boolean {
  const v = body[key];
  if (v === undefined || v === null) return false;
  if (typeof v !== 'boolean') throw new InvalidParameter(`invalid value for ${key}: expected a boolean, got ${JSON.stringify(v)}`);
  return v;
}

function checkString(body: Record<string, unknown>, key: string): string {
  const v = body[key];
  if (v === undefined || v === null) return '';
  if (typeof v !== 'string') throw new InvalidParameter(`invalid value for ${key}: expected a string, got ${JSON.stringify(v)}`);
  return v;
}

/** Checks an exec create body and returns its configuration (without ID and container). */
export function parseExecConfig(body: unknown): Omit<ExecConfig, 'ID' | 'ContainerID'> {
  if (body === undefined || body === null) throw new InvalidParameter('the exec request needs a JSON body with Cmd');
  if (typeof body !== 'object' || Array.isArray(body)) throw new InvalidParameter('invalid exec request: the body must be a JSON object');
  const b = body as Record<string, unknown>;
  let cmd: string[];
  if (typeof b.Cmd === 'string') cmd = b.Cmd.trim() === '' ? [] : b.Cmd.trim().split(/\s+/);
  else if (Array.isArray(b.Cmd)) {
    if (!b.Cmd.every((a) => typeof a === 'string')) throw new InvalidParameter('invalid value for Cmd: expected a list of strings');
    cmd = b.Cmd as string[];
  } else if (b.Cmd === undefined || b.Cmd === null) cmd = [];
  else throw new InvalidParameter(`invalid value for Cmd: expected a string or a list of strings, got ${JSON.stringify(b.Cmd)}`);
  if (cmd.length === 0 || cmd[0] === '') throw new InvalidParameter('No exec command specified');
  let env: string[] = [];
  if (b.Env !== undefined && b.Env !== null) {
    if (!Array.isArray(b.Env) || !b.Env.every((e) => typeof e === 'string')) throw new InvalidParameter('invalid value for Env: expected a list of "KEY=value" strings');
    env = b.Env as string[];
    for (const e of env) if (e === '' || e.startsWith('=')) throw new InvalidParameter(`invalid environment variable: ${JSON.stringify(e)}`);
  }
  const workingDir = checkString(b, 'WorkingDir');
  if (workingDir !== '' && !workingDir.startsWith('/')) throw new InvalidParameter(`the working directory '${workingDir}' is invalid, it needs to be an absolute path`);
  const user = checkString(b, 'User');
  if (user !== '' && !/^[^:\s]+(:[^:\s]*)?$/.test(user)) throw new InvalidParameter(`invalid User ${JSON.stringify(user)}: expected user, user:group, uid or uid:gid`);
  const consoleSize = parseConsoleSize(b.ConsoleSize);
  return {
    OpenStdin: checkBool(b, 'AttachStdin'),
    OpenStdout: checkBool(b, 'AttachStdout'),
    OpenStderr: checkBool(b, 'AttachStderr'),
    Tty: checkBool(b, 'Tty'),
    DetachKeys: checkString(b, 'DetachKeys'),
    User: user,
    Privileged: checkBool(b, 'Privileged'),
    Env: env,
    WorkingDir: workingDir,
    Cmd: cmd,
    ConsoleSize: consoleSize,
  };
}

/** Environment of the exec: the container's (with PATH, HOSTNAME, HOME) overlaid with the exec's own. */
function mergeEnv(base: string[], extra: string[]): string[] {
  const out = [...base];
  for (const e of extra) {
    const key = e.includes('=') ? e.slice(0, e.indexOf('=')) : e;
    const i = out.findIndex((x) => x === key || x.startsWith(`${key}=`));
    if (i >= 0) out[i] = e;
    else out.push(e);
  }
  return out;
}

/**
 * The capabilities of a privileged exec: all of them, less those the engine itself does not hold (a runtime
 * cannot grant what its caller lacks: capset fails).
 */
function privilegedCapabilities(): string[] {
  return CAPABILITIES.filter((_, bit) => capabilityHeld(bit)).map((x) => `CAP_${x}`);
}

export class ExecService {
  private readonly execs = new Map<string, ExecInstance>();

  constructor(private readonly deps: ExecDeps) {
    // Exec instances go with their container's process, as in Docker.
    deps.events.subscribe((event) => {
      if (event.Type !== 'container') return;
      if (event.Action === 'die' || event.Action === 'destroy' || event.Action === 'start') this.forgetContainer(event.Actor.ID);
    });
  }

  private forgetContainer(containerId: string): void {
    for (const [id, exec] of this.execs) {
      if (exec.config.ContainerID !== containerId || exec.state === 'running' || exec.state === 'starting') continue;
      this.execs.delete(id);
    }
    const record = this.deps.containers.find?.(containerId);
    if (record) record.ExecIDs = null;
  }

  private checkRunning(record: ContainerRecord): void {
    if (record.State.Paused) throw new Conflict(`Container ${record.Id} is paused, unpause the container before exec`);
    if (record.State.Restarting) throw new Conflict(`Container ${record.Id} is restarting, wait until the container is running`);
    if (!record.State.Running) throw new Conflict(`Container ${record.Id} is not running`);
  }

  create(ref: string, body: unknown): { Id: string; Warnings: string[] } {
    const record = this.deps.containers.get(ref);
    const parsed = parseExecConfig(body);
    this.checkRunning(record);
    const config: ExecConfig = { ...parsed, ID: newId(), ContainerID: record.Id };
    let markStarted!: () => void;
    const started = new Promise<void>((r) => (markStarted = r));
    this.execs.set(config.ID, { config, state: 'created', pid: 0, exitCode: null, started, markStarted });
    record.ExecIDs = [...(record.ExecIDs ?? []), config.ID];
    this.deps.containers.containerEvent(record, `exec_create: ${config.Cmd.join(' ')}`, { execID: config.ID });
    return { Id: config.ID, Warnings: [] };
  }

  get(id: string): ExecInstance {
    const exec = this.execs.get(id);
    if (!exec) throw new NotFound(`No such exec instance: ${id}`);
    return exec;
  }

  inspect(id: string): Record<string, unknown> {
    const exec = this.get(id);
    const c = exec.config;
    return {
      CanRemove: false,
      ContainerID: c.ContainerID,
      DetachKeys: c.DetachKeys,
      ExitCode: exec.exitCode,
      ID: c.ID,
      OpenStderr: c.OpenStderr,
      OpenStdin: c.OpenStdin,
      OpenStdout: c.OpenStdout,
      ProcessConfig: { arguments: c.Cmd.slice(1), entrypoint: c.Cmd[0], privileged: c.Privileged, tty: c.Tty, user: c.User },
      Running: exec.state === 'running',
      Pid: exec.pid,
    };
  }

  /**
   * Starts an exec (once). Everything that can be refused is checked before the process is launched, so
   * that the caller can still answer an error status.
   */
  async start(id: string, opts: { consoleSize?: [number, number] | null; detach?: boolean } = {}): Promise<{ exec: ExecInstance; record: ContainerRecord; process: ExecProcess }> {
    const { exec, record } = this.checkStart(id);
    exec.state = 'starting';
    try {
      if (opts.consoleSize) exec.config.ConsoleSize = opts.consoleSize;
      const processSpec = await this.processSpec(record, exec.config);
      const proc = await this.deps.host.exec(record.Id, id, processSpec, { tty: exec.config.Tty, openStdin: exec.config.OpenStdin, detach: opts.detach });
      // A reset of the monitor's socket after the stream was read to its end must not take the daemon down.
      proc.streams.output.on('error', () => undefined);
      exec.process = proc;
      exec.pid = proc.pid;
      // The runtime does not size an exec's terminal from the spec: the monitor sets it.
      const size = exec.config.ConsoleSize;
      if (exec.config.Tty && size && size[0] > 0 && size[1] > 0) await proc.resize(size[0], size[1]).catch(() => undefined);
      exec.state = 'running';
      this.deps.containers.containerEvent(record, `exec_start: ${exec.config.Cmd.join(' ')}`, { execID: id });
      void proc.exit.then(
        (code) => this.finished(exec, record, code),
        () => this.finished(exec, record, 126),
      );
      return { exec, record, process: proc };
    } catch (err) {
      // A failed start is final, as in Docker: the exec has run (with the runtime's status).
      exec.state = 'exited';
      exec.exitCode = 126;
      throw err;
    } finally {
      exec.markStarted();
    }
  }

  /** The refusals of start (404, 409), for a caller that must answer them before taking over the connection. */
  checkStart(id: string): { exec: ExecInstance; record: ContainerRecord } {
    const exec = this.get(id);
    const record = this.deps.containers.get(exec.config.ContainerID);
    if (exec.state === 'running' || exec.state === 'starting') throw new Conflict(`Error: Exec command ${id} is already running`);
    if (exec.state === 'exited') throw new Conflict(`Error: Exec command ${id} has already run`);
    this.checkRunning(record);
    return { exec, record };
  }

  private finished(exec: ExecInstance, record: ContainerRecord, code: number): void {
    exec.exitCode = code;
    exec.state = 'exited';
    exec.process = undefined;
    void this.deps.host.releaseExec(exec.config.ID).catch(() => undefined);
    this.deps.containers.containerEvent(record, 'exec_die', { execID: exec.config.ID, exitCode: String(code) });
  }

  /** Waits for the exec's exit code (after start). */
  async exitCode(id: string): Promise<number> {
    const exec = this.get(id);
    await exec.started;
    if (exec.process) return exec.process.exit;
    return exec.exitCode ?? 126;
  }

  async resize(id: string, height: number, width: number): Promise<void> {
    const exec = this.get(id);
    const record = this.deps.containers.get(exec.config.ContainerID);
    if (record.State.Paused) throw new Conflict(`Container ${record.Id} is paused, unpause the container before exec`);
    if (exec.state === 'created') {
      // The client may resize right after asking for the start: wait a little for the process.
      const ready = await Promise.race([exec.started.then(() => true), new Promise<boolean>((r) => setTimeout(() => r(false), 10_000).unref())]);
      if (!ready) throw new Conflict(`timeout waiting for exec session ${id} to start`);
    }
    await exec.started;
    if (!exec.config.Tty || !exec.process || exec.state !== 'running') return;
    await exec.process.resize(height, width).catch((err) => {
      // The process may have ended between the check and the write.
      if (exec.state === 'running') throw err;
    });
  }

  /**
   * Runs a command for the engine itself (health probes), as Docker does: announced with the exec events
   * (exec_create, exec_start, exec_die) but neither listed in the container's ExecIDs nor inspectable. It
   * runs as the container's user, in its working folder, with its environment. Both output streams go to
   * `onOutput`; `onStarted` is called once the process runs; aborting `signal` kills the process (SIGKILL).
   * Resolves with the exit code; rejects when the process cannot be started.
   */
  async runInternal(record: ContainerRecord, cmd: string[], opts: InternalExecOptions): Promise<number> {
    this.checkRunning(record);
    const config: ExecConfig = {
      ID: newId(), ContainerID: record.Id, OpenStdin: false, OpenStdout: true, OpenStderr: true, Tty: false,
      DetachKeys: '', User: '', Privileged: false, Env: [], WorkingDir: '', Cmd: cmd, ConsoleSize: null,
    };
    const { containers } = this.deps;
    containers.containerEvent(record, `exec_create: ${cmd.join(' ')}`, { execID: config.ID });
    let proc: ExecProcess;
    try {
      proc = await this.deps.host.exec(record.Id, config.ID, await this.processSpec(record, config), { tty: false, openStdin: false });
    } catch (err) {
      // As for Docker's execs: one that could not start has ended with 126.
      containers.containerEvent(record, 'exec_die', { execID: config.ID, exitCode: '126' });
      throw err;
    }
    const output = proc.streams.output;
    output.on('error', () => undefined);
    const ended = new Promise<void>((resolve) => {
      output.once('end', resolve);
      output.once('close', resolve);
    });
    output.on('data', (chunk: { data: Buffer }) => opts.onOutput(chunk.data));
    containers.containerEvent(record, `exec_start: ${cmd.join(' ')}`, { execID: config.ID });
    const kill = () => void proc.kill?.(9).catch(() => undefined);
    opts.signal?.addEventListener('abort', kill, { once: true });
    let code: number;
    try {
      if (opts.signal?.aborted) kill();
      else opts.onStarted?.();
      code = await proc.exit.catch(() => 126);
      // The exit is known once the output socket ended; what it still queues arrives at once.
      await Promise.race([ended, new Promise((r) => setTimeout(r, 1000).unref())]);
    } finally {
      opts.signal?.removeEventListener('abort', kill);
      proc.streams.close();
      void this.deps.host.releaseExec(config.ID).catch(() => undefined);
    }
    containers.containerEvent(record, 'exec_die', { execID: config.ID, exitCode: String(code) });
    return code;
  }

  private async processSpec(record: ContainerRecord, c: ExecConfig): Promise<object> {
    const lowerDirs = this.deps.lowerDirs(record.ImageChainIds);
    const [passwd, group] = await Promise.all([
      this.deps.host.readFileFromLayers(lowerDirs, '/etc/passwd'),
      this.deps.host.readFileFromLayers(lowerDirs, '/etc/group'),
    ]);
    const hc = record.HostConfig as Record<string, any>;
    const user = resolveUser(c.User || record.Config.User, passwd?.toString('utf8'), group?.toString('utf8'), (hc.GroupAdd as string[] | null) ?? []);
    // The container's own process settings (capabilities, rlimits, no-new-privileges, environment).
    const linkEnv = this.deps.containers.linkEnv?.(record) ?? [];
    const base = (buildSpec({ record, user, network: 'host', cgroupParent: '/', linkEnv }) as { process: Record<string, any> }).process;
    let env = (base.env as string[]).filter((e) => !e.startsWith('TERM='));
    if (!env.some((e) => e.startsWith('PATH='))) env.unshift(`PATH=${DEFAULT_PATH}`);
    if (c.Tty) env.push('TERM=xterm');
    env = mergeEnv(env, c.Env);
    const caps = c.Privileged ? privilegedCapabilities() : (base.capabilities as { bounding: string[] }).bounding;
    return {
      terminal: c.Tty,
      consoleSize: c.Tty && c.ConsoleSize && c.ConsoleSize[0] > 0 ? { height: c.ConsoleSize[0], width: c.ConsoleSize[1] } : undefined,
      user: base.user,
      args: c.Cmd,
      env,
      cwd: c.WorkingDir || record.Config.WorkingDir || '/',
      capabilities: { bounding: caps, effective: caps, permitted: caps },
      rlimits: base.rlimits,
      noNewPrivileges: c.Privileged ? false : base.noNewPrivileges,
    };
  }
}
