/**
 * Health checks: the monitor that runs a container's Config.Healthcheck probe while it runs, and keeps
 * State.Health (Status, FailingStreak, the Log of the last probes) as Docker does.
 *
 * - Test forms: `["CMD", args...]` runs the command as is; `["CMD-SHELL", command]` runs it with the
 *   container's shell (Config.Shell, `/bin/sh -c` by default); `["NONE"]` disables the check, also an
 *   image's; an empty Test takes the image's (mergeHealthcheck, at create).
 * - Timing: the first probe runs one interval after the start; the next one an interval after the end of
 *   the previous one. During the start period, while the status is still starting, StartInterval is used.
 *   A probe that runs longer than Timeout is killed and counts as a failure (exit code -1).
 * - Status: starting at every start; healthy after a success; unhealthy after Retries failures in a row.
 *   Failures during the start period do not count while the container has never been healthy. Each change
 *   of status publishes `health_status: <status>`. When probing stops (the container exits or is paused)
 *   the status becomes unhealthy, as dockerd does; it is starting again at the next start.
 * - Probes run as execs of the container (ExecService.runInternal): the exec events are published, the
 *   execs are not listed in ExecIDs. Output is kept up to 4096 bytes ("..." marks a cut).
 *
 * Persistence: State.Health is part of the container record (model.ts) and saved with every probe
 * result; a daemon restart keeps it, and a recovered running container resumes probing (recover()).
 */
import { nowNano, rfc3339Nano } from '../../util/json.js';
import { log } from '../../util/log.js';
import { errorMessage } from '../../errors.js';
import type { EngineEvent, EventBus } from '../events.js';
import type { InternalExecOptions } from './exec.js';
import type { ContainerConfig, ContainerRecord, HealthLogEntry } from './model.js';

export const DEFAULT_INTERVAL_NS = 30_000_000_000;
export const DEFAULT_TIMEOUT_NS = 30_000_000_000;
export const DEFAULT_START_INTERVAL_NS = 5_000_000_000;
export const DEFAULT_RETRIES = 3;
/** Probes kept in State.Health.Log. */
export const MAX_LOG_ENTRIES = 5;
/** Bytes of a probe's output kept in its Log entry. */
export const MAX_OUTPUT_BYTES = 4096;
/** How long starting a probe's exec may take before the probe counts as failed. */
const PROBE_START_LIMIT_MS = 30_000;

export type HealthStatus = 'starting' | 'healthy' | 'unhealthy';

export interface HealthConfig {
  Test?: string[];
  Interval?: number;
  Timeout?: number;
  StartPeriod?: number;
  StartInterval?: number;
  Retries?: number;
}

export interface Health {
  Status: string;
  FailingStreak: number;
  Log: HealthLogEntry[];
}

/**
 * The container's health check from the create body's and the image's, as Docker merges them: no check
 * of its own takes the image's; otherwise each field left empty (Test empty, durations and Retries 0)
 * takes the image's value.
 */
export function mergeHealthcheck(own: HealthConfig | null | undefined, image: HealthConfig | null | undefined): HealthConfig | undefined {
  if (!own) return image ?? undefined;
  if (!image) return own;
  const merged: HealthConfig = { ...own };
  if (!merged.Test || merged.Test.length === 0) merged.Test = image.Test;
  for (const key of ['Interval', 'Timeout', 'StartPeriod', 'StartInterval', 'Retries'] as const) {
    if (!merged[key] && image[key]) merged[key] = image[key];
  }
  return merged;
}

/** The command a probe runs, or undefined when the container has no health check (none, NONE, unknown form). */
export function probeCommand(config: Pick<ContainerConfig, 'Healthcheck' | 'Shell'>): string[] | undefined {
  const test = (config.Healthcheck as HealthConfig | undefined)?.Test;
  if (!test || test.length === 0) return undefined;
  switch (test[0]) {
    case 'CMD':
      return test.length > 1 ? test.slice(1) : undefined;
    case 'CMD-SHELL': {
      if (test.length < 2) return undefined;
      const shell = config.Shell && config.Shell.length > 0 ? config.Shell : ['/bin/sh', '-c'];
      return [...shell, ...test.slice(1)];
    }
    default:
      return undefined;
  }
}

function orDefault(ns: number | undefined, fallback: number): number {
  return typeof ns === 'number' && ns > 0 ? ns : fallback;
}

/** The timing of a container's probes, in nanoseconds, with Docker's defaults filled in. */
export function probeTiming(hc: HealthConfig | undefined): { intervalNs: number; timeoutNs: number; startPeriodNs: number; startIntervalNs: number; retries: number } {
  return {
    intervalNs: orDefault(hc?.Interval, DEFAULT_INTERVAL_NS),
    timeoutNs: orDefault(hc?.Timeout, DEFAULT_TIMEOUT_NS),
    startPeriodNs: orDefault(hc?.StartPeriod, 0),
    startIntervalNs: orDefault(hc?.StartInterval, DEFAULT_START_INTERVAL_NS),
    retries: orDefault(hc?.Retries, DEFAULT_RETRIES),
  };
}

/** A duration written as Go's time.Duration prints it ("30s", "100ms", "1m30s", "1.5s"), as in dockerd's messages. */
export function goDuration(ns: number): string {
  if (ns === 0) return '0s';
  const sign = ns < 0 ? '-' : '';
  let n = Math.abs(Math.trunc(ns));
  const fraction = (value: number, digits: number) => {
    const whole = Math.floor(value / 10 ** digits);
    const rest = String(value % 10 ** digits).padStart(digits, '0').replace(/0+$/, '');
    return rest ? `${whole}.${rest}` : String(whole);
  };
  if (n < 1_000) return `${sign}${n}ns`;
  if (n < 1_000_000) return `${sign}${fraction(n, 3)}µs`;
  if (n < 1_000_000_000) return `${sign}${fraction(n, 6)}ms`;
  let out = '';
  const hours = Math.floor(n / 3_600_000_000_000);
  n -= hours * 3_600_000_000_000;
  const minutes = Math.floor(n / 60_000_000_000);
  n -= minutes * 60_000_000_000;
  if (hours > 0) out += `${hours}h`;
  if (hours > 0 || minutes > 0) out += `${minutes}m`;
  return `${sign}${out}${fraction(n, 9)}s`;
}

/** A probe's output, cut at MAX_OUTPUT_BYTES ("..." says it was cut, as dockerd writes it). */
export class ProbeOutput {
  private readonly chunks: Buffer[] = [];
  private bytes = 0;
  private truncated = false;

  write(data: Buffer): void {
    const keep = Math.min(MAX_OUTPUT_BYTES - this.bytes, data.length);
    if (keep > 0) {
      this.chunks.push(keep === data.length ? data : data.subarray(0, keep));
      this.bytes += keep;
    }
    if (keep < data.length) this.truncated = true;
  }

  get length(): number {
    return this.bytes;
  }

  toString(): string {
    const text = Buffer.concat(this.chunks, this.bytes).toString('utf8');
    return this.truncated ? `${text}...` : text;
  }
}

/**
 * Adds one probe result to the health state (dockerd's rules). Returns whether the status changed.
 * `startedAtMs` is when the container started; a failure that began within the start period does not
 * count while the status is still starting.
 */
export function recordProbe(health: Health, result: HealthLogEntry & { startMs: number }, opts: { retries: number; startPeriodNs: number; startedAtMs: number }): boolean {
  const before = health.Status;
  const { startMs, ...entry } = result;
  health.Log = [...health.Log, entry].slice(-MAX_LOG_ENTRIES);
  if (result.ExitCode === 0) {
    health.FailingStreak = 0;
    health.Status = 'healthy';
  } else {
    const inStartPeriod = health.Status === 'starting' && (startMs - opts.startedAtMs) * 1_000_000 < opts.startPeriodNs;
    if (!inStartPeriod) {
      health.FailingStreak++;
      if (health.FailingStreak >= opts.retries) health.Status = 'unhealthy';
    }
  }
  return health.Status !== before;
}

/** What the monitor needs of the container engine. */
export interface HealthContainers {
  find(id: string): ContainerRecord | undefined;
  all(): ContainerRecord[];
  serialised<T>(id: string, fn: () => Promise<T>): Promise<T>;
  save(record: ContainerRecord): Promise<void>;
  containerEvent(record: ContainerRecord, action: string, extra?: Record<string, string>): void;
}

/** What the monitor needs to run a probe: a command in the container, killed when `signal` aborts. */
export interface ProbeRunner {
  runInternal(record: ContainerRecord, cmd: string[], opts: InternalExecOptions): Promise<number>;
}

export interface HealthDeps {
  containers: HealthContainers;
  execs: ProbeRunner;
  events: EventBus;
}

interface Monitor {
  /** Aborted when probing of this run of the container stops. */
  stop: AbortController;
  timer?: NodeJS.Timeout;
}

export class HealthMonitor {
  private readonly monitors = new Map<string, Monitor>();
  private readonly unsubscribe: () => void;

  constructor(private readonly deps: HealthDeps) {
    // The container's state changes drive probing: these events are published synchronously, inside the
    // state change, so that State.Health is already right when the API answers.
    this.unsubscribe = deps.events.subscribe((event) => this.onEvent(event));
  }

  private onEvent(event: EngineEvent): void {
    if (event.Type !== 'container') return;
    const id = event.Actor.ID;
    switch (event.Action) {
      case 'start':
        this.started(id);
        break;
      case 'unpause':
        this.resumed(id);
        break;
      case 'die':
      case 'pause':
        this.stopped(id);
        break;
      case 'destroy':
        this.halt(id);
        break;
      default:
    }
  }

  /** A started container: health starting again (the log of earlier probes kept), probing from now. */
  private started(id: string): void {
    const record = this.deps.containers.find(id);
    if (!record) return;
    this.halt(id);
    if (!probeCommand(record.Config)) {
      if (record.State.Health) {
        delete record.State.Health;
        this.persist(record);
      }
      return;
    }
    record.State.Health = { Status: 'starting', FailingStreak: 0, Log: record.State.Health?.Log ?? [] };
    this.persist(record);
    this.begin(record);
  }

  private resumed(id: string): void {
    const record = this.deps.containers.find(id);
    if (record && record.State.Running && !record.State.Paused && probeCommand(record.Config)) this.begin(record);
  }

  /**
   * Probing stops; dockerd then reports the container unhealthy. Also for a container found ended when the
   * daemon starts again, whose probing had stopped with the daemon.
   */
  private stopped(id: string): void {
    this.halt(id);
    const record = this.deps.containers.find(id);
    if (!record?.State.Health || record.State.Health.Status === 'unhealthy') return;
    record.State.Health.Status = 'unhealthy';
    this.persist(record);
  }

  /** Stops probing without touching the state; true when a monitor ran. */
  private halt(id: string): boolean {
    const monitor = this.monitors.get(id);
    if (!monitor) return false;
    this.monitors.delete(id);
    clearTimeout(monitor.timer);
    monitor.stop.abort();
    return true;
  }

  private persist(record: ContainerRecord): void {
    void this.deps.containers
      .serialised(record.Id, async () => {
        if (this.deps.containers.find(record.Id)) await this.deps.containers.save(record);
      })
      .catch((err) => log.warn('saving the health state failed', { id: record.Id, error: errorMessage(err) }));
  }

  /** After a daemon restart: running containers with a health check resume probing where they were. */
  recover(): void {
    for (const record of this.deps.containers.all()) {
      // Those the engine started again while loading are probed already.
      if (this.monitors.has(record.Id) || !record.State.Running || record.State.Paused || !probeCommand(record.Config)) continue;
      record.State.Health ??= { Status: 'starting', FailingStreak: 0, Log: [] };
      this.begin(record);
    }
  }

  /** At daemon shutdown: probing stops, the recorded health stays as it is. */
  close(): void {
    for (const id of [...this.monitors.keys()]) this.halt(id);
    this.unsubscribe();
  }

  private begin(record: ContainerRecord): void {
    this.halt(record.Id);
    const monitor: Monitor = { stop: new AbortController() };
    this.monitors.set(record.Id, monitor);
    this.schedule(record, monitor);
  }

  private schedule(record: ContainerRecord, monitor: Monitor): void {
    const timing = probeTiming(record.Config.Healthcheck as HealthConfig | undefined);
    const sinceStartNs = (Date.now() - Date.parse(record.State.StartedAt)) * 1_000_000;
    const startup = sinceStartNs < timing.startPeriodNs && record.State.Health?.Status === 'starting';
    const delayMs = (startup ? timing.startIntervalNs : timing.intervalNs) / 1_000_000;
    // Node's timers hold at most 2^31-1 ms (about 24 days); longer intervals wait that long.
    monitor.timer = setTimeout(() => void this.probe(record, monitor), Math.min(delayMs, 2 ** 31 - 1));
    monitor.timer.unref();
  }

  private async probe(record: ContainerRecord, monitor: Monitor): Promise<void> {
    const cmd = probeCommand(record.Config);
    if (!cmd || monitor.stop.signal.aborted) return;
    const timing = probeTiming(record.Config.Healthcheck as HealthConfig | undefined);
    const startNano = nowNano();
    const startMs = Date.now();
    const output = new ProbeOutput();
    const kill = new AbortController();
    const stop = () => kill.abort();
    monitor.stop.signal.addEventListener('abort', stop, { once: true });
    let timer: NodeJS.Timeout | undefined;
    let timedOut = false;
    let exitCode: number;
    let text: string;
    // A probe whose exec does not even start is given up (and killed if it starts later), as dockerd does.
    let startTimer: NodeJS.Timeout | undefined;
    const startDeadline = new Promise<never>((_, reject) => {
      startTimer = setTimeout(() => {
        kill.abort();
        reject(new Error(`timed out starting health check for container ${record.Id}`));
      }, PROBE_START_LIMIT_MS);
    });
    startDeadline.catch(() => undefined);
    try {
      const run = this.deps.execs.runInternal(record, cmd, {
        onOutput: (data) => output.write(data),
        // The timeout counts from the moment the probe runs (starting an exec is not the probe's time).
        onStarted: () => {
          clearTimeout(startTimer);
          timer = setTimeout(() => {
            timedOut = true;
            kill.abort();
          }, Math.min(timing.timeoutNs / 1_000_000, 2 ** 31 - 1));
        },
        signal: kill.signal,
      });
      run.catch(() => undefined);
      exitCode = await Promise.race([run, startDeadline]);
      text = output.toString();
      if (timedOut) {
        exitCode = -1;
        const limit = goDuration(timing.timeoutNs);
        text = output.length > 0 ? `Health check exceeded timeout (${limit}): ${text}` : `Health check exceeded timeout (${limit})`;
      }
    } catch (err) {
      exitCode = -1;
      text = errorMessage(err);
    } finally {
      clearTimeout(startTimer);
      clearTimeout(timer);
      monitor.stop.signal.removeEventListener('abort', stop);
    }
    const endNano = nowNano();
    if (monitor.stop.signal.aborted) return;
    try {
      await this.deps.containers.serialised(record.Id, async () => {
        // Stopped (or started again) while the probe ran: its result belongs to no run.
        if (this.monitors.get(record.Id) !== monitor || !record.State.Health) return;
        const changed = recordProbe(
          record.State.Health,
          { Start: rfc3339Nano(startNano), End: rfc3339Nano(endNano), ExitCode: exitCode, Output: text, startMs },
          { retries: timing.retries, startPeriodNs: timing.startPeriodNs, startedAtMs: Date.parse(record.State.StartedAt) },
        );
        await this.deps.containers.save(record);
        if (changed) this.deps.containers.containerEvent(record, `health_status: ${record.State.Health.Status}`);
      });
    } catch (err) {
      log.warn('recording a health probe failed', { id: record.Id, error: errorMessage(err) });
    }
    if (this.monitors.get(record.Id) === monitor) this.schedule(record, monitor);
  }
}
