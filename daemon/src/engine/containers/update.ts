/**
 * Update: new resource limits (and restart policy) for a container, applied to the live cgroup when it runs
 * and kept in its HostConfig, as `docker update` does. A zero or absent value leaves a setting as it is
 * (PidsLimit: null keeps it, 0 or -1 lift the limit).
 */
import { Conflict, InvalidParameter } from '../../errors.js';
import { discardUnsupported } from './devices.js';
import type { ContainerRecord } from './model.js';
import { buildSpec } from './ocispec.js';
import { validateCreateBody } from './validate.js';

/** What update needs of the Host. */
export interface ResourceHost {
  /** Applies OCI runtime-spec `linux.resources` to the running container's cgroup. */
  updateResources(id: string, resources: object): Promise<void>;
}

export interface UpdateContainers {
  get(ref: string): ContainerRecord;
  serialised<T>(id: string, fn: () => Promise<T>): Promise<T>;
  containerEvent(record: ContainerRecord, action: string, extra?: Record<string, string>): void;
  readonly store: { save(record: ContainerRecord): Promise<void> };
}

/** The fields update accepts; those the engine cannot apply on this host are refused rather than ignored. */
const INT_FIELDS = ['BlkioWeight', 'CpuShares', 'CpuPeriod', 'CpuQuota', 'CpuRealtimePeriod', 'CpuRealtimeRuntime', 'Memory', 'MemorySwap', 'MemoryReservation', 'KernelMemory', 'KernelMemoryTCP', 'NanoCpus', 'CpuCount', 'CpuPercent', 'IOMaximumIOps', 'IOMaximumBandwidth'];
const STRING_FIELDS = ['CpusetCpus', 'CpusetMems'];
/** Accepted as Docker does but with nothing to change here (deprecated or Windows-only). */
const IGNORED_FIELDS = new Set(['KernelMemory', 'KernelMemoryTCP', 'CpuCount', 'CpuPercent', 'IOMaximumIOps', 'IOMaximumBandwidth', 'CgroupParent']);
const UNSUPPORTED_LIST_FIELDS = ['BlkioWeightDevice', 'BlkioDeviceReadBps', 'BlkioDeviceWriteBps', 'BlkioDeviceReadIOps', 'BlkioDeviceWriteIOps', 'Devices', 'DeviceCgroupRules', 'DeviceRequests', 'Ulimits'];

function isEmptyList(v: unknown): boolean {
  return v === undefined || v === null || (Array.isArray(v) && v.length === 0);
}

/**
 * The HostConfig after applying `body` to `current` (Docker's container.UpdateContainer rules). Throws
 * InvalidParameter on bad values and conflicting settings.
 */
export function mergeUpdate(current: Record<string, any>, body: Record<string, any>, autoRemove: boolean): Record<string, any> {
  for (const key of UNSUPPORTED_LIST_FIELDS) {
    if (!isEmptyList(body[key])) throw new InvalidParameter(`updating ${key} is not supported`);
  }
  if (body.CpuRealtimePeriod || body.CpuRealtimeRuntime) throw new InvalidParameter('updating the realtime scheduler (CpuRealtimePeriod, CpuRealtimeRuntime) is not supported by this engine');
  const next: Record<string, any> = { ...current };
  const value = (k: string) => (typeof body[k] === 'number' ? (body[k] as number) : 0);

  if (value('NanoCpus') > 0 && ((current.CpuPeriod ?? 0) > 0 || (current.CpuQuota ?? 0) > 0)) {
    if ((current.CpuPeriod ?? 0) > 0) throw new InvalidParameter('Conflicting options: Nano CPUs cannot be updated as CPU Period has already been set');
    throw new InvalidParameter('Conflicting options: Nano CPUs cannot be updated as CPU Quota has already been set');
  }
  if (value('CpuPeriod') > 0 && (current.NanoCpus ?? 0) > 0) throw new InvalidParameter('Conflicting options: CPU Period cannot be updated as NanoCPUs has already been set');
  if (value('CpuQuota') > 0 && (current.NanoCpus ?? 0) > 0) throw new InvalidParameter('Conflicting options: CPU Quota cannot be updated as NanoCPUs has already been set');
  const memory = value('Memory');
  if (memory !== 0 && (current.MemorySwap ?? 0) > 0 && memory > current.MemorySwap && value('MemorySwap') === 0) {
    throw new InvalidParameter('Memory limit should be smaller than already set memoryswap limit, update the memoryswap at the same time');
  }

  // Types and ranges of the values as given, over the current ones (zero, null and '' keep a setting, so
  // they are not laid over it): the create-time checks of the same fields.
  const given = Object.fromEntries(Object.entries(body).filter(([, v]) => v !== 0 && v !== null && v !== ''));
  validateCreateBody({ Image: 'update', HostConfig: { ...current, ...given, AutoRemove: false } });
  for (const k of INT_FIELDS) {
    if (IGNORED_FIELDS.has(k)) continue;
    if (value(k) !== 0) next[k] = value(k);
  }
  for (const k of STRING_FIELDS) if (typeof body[k] === 'string' && body[k] !== '') next[k] = body[k];
  if (body.PidsLimit !== undefined && body.PidsLimit !== null) next.PidsLimit = body.PidsLimit <= 0 ? 0 : body.PidsLimit;
  if (typeof body.MemorySwappiness === 'number' && body.MemorySwappiness !== -1) next.MemorySwappiness = body.MemorySwappiness;
  if (typeof body.OomKillDisable === 'boolean') next.OomKillDisable = body.OomKillDisable;

  const policy = body.RestartPolicy as { Name?: string; MaximumRetryCount?: number } | undefined | null;
  if (policy && policy.Name !== undefined && policy.Name !== '') {
    if (autoRemove && policy.Name !== 'no') throw new InvalidParameter('Restart policy cannot be updated because AutoRemove is enabled for the container');
    next.RestartPolicy = { Name: policy.Name, MaximumRetryCount: policy.MaximumRetryCount ?? 0 };
  }
  // The combination must still be valid (swap against memory, reservation under the limit...).
  validateCreateBody({ Image: 'update', HostConfig: { ...next, AutoRemove: false } });
  return next;
}

/** The OCI resources to write to the live cgroup for the merged HostConfig. */
export function liveResources(record: ContainerRecord, hostConfig: Record<string, any>): Record<string, unknown> {
  const spec = buildSpec({
    record: { ...record, HostConfig: hostConfig as ContainerRecord['HostConfig'] },
    user: { uid: 0, gid: 0, additionalGids: [], home: '/' },
    network: 'host',
    cgroupParent: '/',
  }) as { linux: { resources: Record<string, unknown> } };
  const { devices: _devices, ...resources } = spec.linux.resources;
  // A lifted pids limit must be written as "no limit"; buildSpec leaves it out for a new container.
  if (!resources.pids && hostConfig.PidsLimit === 0 && (record.HostConfig as Record<string, any>).PidsLimit > 0) resources.pids = { limit: -1 };
  return resources;
}

export async function updateContainer(containers: UpdateContainers, host: ResourceHost, ref: string, body: unknown): Promise<{ Warnings: string[] }> {
  if (body === undefined || body === null || typeof body !== 'object' || Array.isArray(body)) {
    throw new InvalidParameter('the update request needs a JSON object body with the resources to change');
  }
  const record = containers.get(ref);
  // Limits this host cannot apply are left out with Docker's warnings (kernel memory, blkio weights here),
  // once the values as given have passed their checks.
  const applicable = { ...(body as Record<string, any>) };
  const warnings = discardUnsupported(applicable);
  await containers.serialised(record.Id, async () => {
    if (record.State.Status === 'removing') throw new Conflict(`container ${record.Id} is marked for removal and cannot be updated`);
    mergeUpdate(record.HostConfig as Record<string, any>, body as Record<string, any>, record.HostConfig.AutoRemove === true);
    const next = mergeUpdate(record.HostConfig as Record<string, any>, applicable, record.HostConfig.AutoRemove === true);
    if (record.State.Running) await host.updateResources(record.Id, liveResources(record, next));
    record.HostConfig = next as ContainerRecord['HostConfig'];
    await containers.store.save(record);
  });
  containers.containerEvent(record, 'update');
  return { Warnings: warnings };
}
