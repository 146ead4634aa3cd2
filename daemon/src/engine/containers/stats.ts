/**
 * Container statistics (`docker stats`): frames built from the Host's cgroup samples, one per second when
 * streaming, each carrying the previous sample as precpu_stats (clients compute CPU percent from the two).
 * A container that is not running gives one zeroed frame (name and id only), and a stream ends when the
 * container stops, as Docker does.
 */
import { rfc3339Nano, nowNano } from '../../util/json.js';
import type { ContainerRecord } from './model.js';
import type { ContainerStatsSample, StatsHost } from '../../host/host.js';

export interface StatsAccess {
  get(ref: string): ContainerRecord;
}

const ZERO_TIME = '0001-01-01T00:00:00Z';

type Frame = Record<string, unknown>;

function cpuStats(sample: ContainerStatsSample | undefined, onlineCpus: number): Frame {
  if (!sample) {
    return { cpu_usage: { total_usage: 0, usage_in_kernelmode: 0, usage_in_usermode: 0 }, throttling_data: { periods: 0, throttled_periods: 0, throttled_time: 0 } };
  }
  const usage: Frame = { total_usage: sample.cpu.total, usage_in_kernelmode: sample.cpu.kernel, usage_in_usermode: sample.cpu.user };
  if (sample.cpu.percpu.length > 0) usage.percpu_usage = sample.cpu.percpu;
  return {
    cpu_usage: usage,
    system_cpu_usage: sample.systemCpuUsage,
    online_cpus: onlineCpus,
    throttling_data: { periods: sample.cpu.periods, throttled_periods: sample.cpu.throttledPeriods, throttled_time: sample.cpu.throttledTime },
  };
}

/** Builds one frame (newest API shape; api/compat takes away what older versions lack). */
export function buildFrame(
  record: ContainerRecord,
  current: { sample: ContainerStatsSample; read: string } | undefined,
  previous: { sample: ContainerStatsSample; read: string } | undefined,
  host: { onlineCpus: number; machineMemory: number },
): Frame {
  const frame: Frame = {
    name: record.Name,
    id: record.Id,
    read: current?.read ?? ZERO_TIME,
    preread: previous?.read ?? ZERO_TIME,
    pids_stats: {},
    blkio_stats: {
      // io_service_bytes_recursive is the one list the schema does not let be null.
      io_service_bytes_recursive: [], io_serviced_recursive: null, io_queue_recursive: null, io_service_time_recursive: null,
      io_wait_time_recursive: null, io_merged_recursive: null, io_time_recursive: null, sectors_recursive: null,
    },
    num_procs: 0,
    storage_stats: {},
    cpu_stats: cpuStats(current?.sample, host.onlineCpus),
    precpu_stats: cpuStats(previous?.sample, host.onlineCpus),
    memory_stats: {},
    os_type: 'linux',
  };
  if (!previous) frame.precpu_stats = { cpu_usage: { total_usage: 0, usage_in_kernelmode: 0, usage_in_usermode: 0 }, throttling_data: { periods: 0, throttled_periods: 0, throttled_time: 0 } };
  const s = current?.sample;
  if (!s) return frame;
  const pids: Frame = {};
  if (s.pids.current !== undefined) pids.current = s.pids.current;
  if (s.pids.limit !== undefined) pids.limit = s.pids.limit;
  frame.pids_stats = pids;
  (frame.blkio_stats as Frame).io_service_bytes_recursive = s.blkio.serviceBytes;
  // On cgroup v2 only the bytes are kept, as Docker does.
  if (s.cgroupVersion === 1) (frame.blkio_stats as Frame).io_serviced_recursive = s.blkio.serviced;
  const memory: Frame = { usage: s.memory.usage ?? 0, stats: s.memory.stats };
  if (s.cgroupVersion === 1) {
    memory.max_usage = s.memory.maxUsage ?? 0;
    memory.failcnt = s.memory.failcnt ?? 0;
  }
  // No limit (or a limit above the machine's memory) shows the machine's memory, as Docker does.
  const limit = s.memory.limit;
  memory.limit = limit === undefined || limit > host.machineMemory ? host.machineMemory : limit;
  frame.memory_stats = memory;
  if (s.networks) frame.networks = s.networks;
  return frame;
}

export class ContainerStats {
  constructor(
    private readonly deps: { containers: StatsAccess; host: StatsHost; intervalMs?: number },
  ) {}

  private async read(record: ContainerRecord): Promise<{ sample: ContainerStatsSample; read: string } | undefined> {
    if (!record.State.Running || record.State.Pid <= 0) return undefined;
    const ownNetwork = record.HostConfig.NetworkMode !== 'host' && !String(record.HostConfig.NetworkMode ?? '').startsWith('container:');
    const sample = await this.deps.host.sample(record.State.Pid, { networks: ownNetwork }).catch(() => undefined);
    return sample ? { sample, read: rfc3339Nano(nowNano()) } : undefined;
  }

  private hostFacts() {
    return { onlineCpus: this.deps.host.onlineCpus(), machineMemory: this.deps.host.machineMemory() };
  }

  /**
   * The frames of `docker stats`. stream: one per second until the container stops or the client leaves;
   * otherwise one frame, with precpu_stats filled from a sample a second earlier unless oneShot.
   */
  async *frames(ref: string, opts: { stream: boolean; oneShot: boolean; signal?: AbortSignal }): AsyncGenerator<Frame> {
    const record = this.deps.containers.get(ref);
    const interval = this.deps.intervalMs ?? 1000;
    const facts = this.hostFacts();
    let previous = await this.read(record);
    if (!previous) {
      yield buildFrame(record, undefined, undefined, facts);
      return;
    }
    if (!opts.stream) {
      if (opts.oneShot) {
        yield buildFrame(record, previous, undefined, facts);
        return;
      }
      await sleep(interval, opts.signal);
      const current = await this.read(record);
      yield buildFrame(record, current, current ? previous : undefined, facts);
      return;
    }
    yield buildFrame(record, previous, undefined, facts);
    while (!opts.signal?.aborted) {
      await sleep(interval, opts.signal);
      if (opts.signal?.aborted) return;
      const current = await this.read(record);
      if (!current) {
        yield buildFrame(record, undefined, undefined, facts);
        return;
      }
      yield buildFrame(record, current, previous, facts);
      previous = current;
    }
  }
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    }
    signal?.addEventListener('abort', done, { once: true });
  });
}
