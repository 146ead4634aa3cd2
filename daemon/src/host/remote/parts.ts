/**
 * What the remote Host and the agent need to know of each part of the Host contract beyond what values say
 * about themselves (session.ts encodes streams, iterables, signals, promises and callbacks wherever they
 * are): how each member is called. The table is typed against the contract, so a member added to a part and
 * not described here fails the build.
 *
 *   call      async method: a call on the agent, its result as it comes.
 *   retry     async and idempotent: made again on the next connection when the connection is lost under it.
 *   fire      synchronous, returns nothing: sent without waiting.
 *   stream    synchronous, returns a stream: a stream is given at once and fed once the agent answers.
 *   iterable  synchronous, returns an async iterable: the call is made when iteration starts.
 *   duplex    synchronous, returns a Duplex (bytes written in, bytes read out): a Duplex is given at once;
 *             the agent's crosses as its two halves.
 *   open      async, resolves to a Duplex (a connection made on the agent's machine): the call's result, or
 *             its error, as it comes; the agent's Duplex crosses as its two halves, joined again here.
 *   snapshot  a property or synchronous figure that does not change: read once per connection.
 *   layers    a synchronous lookup of the layer store: answered from a copy of the store's index, which the
 *             remote Host reads at each connection and again after each change it makes.
 *
 * `flags` names options that are synchronous predicates (`1.until`: the `until` field of argument 1): they
 * cross as flags (session.ts Flag). `sinks` names the members of a result that are written to on this side
 * (a Writable that may also be Readable, such as an attach's input). `handle` says the result is an object the
 * agent's Host knows by identity when it is given back (a staged layer).
 *
 * `paths` names the arguments that are paths of the daemon's machine (`1.mounts.*.source`: the source of
 * each mount of argument 1), given to the guest as its own (paths.ts GuestPaths); `sources` those that a
 * user gave (a bind mount's source), which must lie in a folder shared with the guest. Paths the Host gave
 * (a root filesystem, a layer's folder) are the guest's already and cross as they are.
 */
import type { Host } from '../host.js';

export type MemberKind = 'call' | 'retry' | 'fire' | 'stream' | 'iterable' | 'duplex' | 'open' | 'snapshot' | 'layers';

export interface MemberSpec {
  kind: MemberKind;
  /** The result is a handle (session.ts markHandle): given back in a later call, the agent gets its own object. */
  handle?: boolean;
  flags?: string[];
  sinks?: string[];
  paths?: string[];
  sources?: string[];
}

type Spec = MemberKind | MemberSpec;
type PartName = Exclude<keyof Host, 'close'>;
type PartSpec<T> = { [K in keyof T]-?: Spec };

const LOG_OPTIONS: MemberSpec = { kind: 'iterable', flags: ['1.until'], paths: ['0'] };
/** Calls whose first argument is a path. */
const CALL_AT: MemberSpec = { kind: 'call', paths: ['0'] };
const RETRY_AT: MemberSpec = { kind: 'retry', paths: ['0'] };
/** A container's files seen through its root and bind mounts (argument 0, a FilesystemView). */
const VIEW: MemberSpec = { kind: 'call', paths: ['0.root', '0.mounts.*.source'] };
const LOWER_DIRS_FIRST: MemberSpec = { kind: 'call', paths: ['0.*'] };

const HOST_PARTS: { [P in PartName]: PartSpec<Host[P]> } = {
  plugins: {
    pluginsRoot: 'snapshot',
    pluginsRunRoot: 'snapshot',
    makeDir: CALL_AT,
    entries: RETRY_AT,
    kindOf: RETRY_AT,
    readText: RETRY_AT,
    rename: { kind: 'call', paths: ['0', '1'] },
    remove: CALL_AT,
    run: { kind: 'call', paths: ['0.runtimeRoot', '0.bundle', '0.logFile', '0.socket', '0.spec.mounts.*.source'] },
    waitExit: 'retry',
    stop: 'call',
    dial: { kind: 'open', paths: ['0.socketPath'] },
  },
  runtime: {
    mountRootfs: { kind: 'call', paths: ['1.*'] },
    unmountRootfs: 'call',
    startBeginning: 'fire',
    removeContainerFiles: 'call',
    readFileFromLayers: LOWER_DIRS_FIRST,
    start: { kind: 'call', paths: ['1.mounts.*.source', '2.logPath'] },
    signal: 'call',
    waitExit: 'retry',
    cleanup: 'call',
    isRunning: 'retry',
    attach: { kind: 'call', sinks: ['input'] },
    resize: 'call',
    readLog: LOG_OPTIONS,
    readLogBatches: LOG_OPTIONS,
    readLogBlocks: LOG_OPTIONS,
    writableLayerSize: 'retry',
    pause: 'call',
    resume: 'call',
    updateResources: 'call',
    listProcesses: 'retry',
    listRuntimeContainers: 'retry',
    sourceMount: { kind: 'retry', sources: ['0'] },
  },
  exec: {
    exec: { kind: 'call', sinks: ['streams.input'] },
    releaseExec: 'call',
    readFileFromLayers: LOWER_DIRS_FIRST,
  },
  files: {
    writeEtcFiles: { kind: 'call', paths: ['0.*.file'] },
    readEtcFile: RETRY_AT,
    mountRootfs: { kind: 'call', paths: ['1.*'] },
    unmountRootfs: 'call',
    readFileFromLayers: LOWER_DIRS_FIRST,
    statPath: { ...VIEW, kind: 'retry' },
    archivePath: VIEW,
    extractArchive: VIEW,
    exportRootfs: { kind: 'stream', paths: ['0'] },
    changes: { kind: 'retry', paths: ['1.*'] },
    diffTar: { kind: 'stream', paths: ['1.*'] },
  },
  layers: {
    lowerDirs: 'layers',
    stage: { kind: 'call', handle: true },
    commit: 'call',
    discard: 'call',
    has: 'layers',
    chainIds: 'layers',
    info: 'layers',
    openTar: 'stream',
    remove: 'call',
    layerTreeStat: 'retry',
    layerTreeReadlink: 'retry',
    layerTreeReaddir: 'retry',
    layerTreeRead: 'call',
  },
  volumes: {
    volumesRoot: 'snapshot',
    listVolumeDirs: 'retry',
    createVolumeDir: CALL_AT,
    removeVolumeDir: CALL_AT,
    mount: { kind: 'call', paths: ['0', '1.device'] },
    unmount: CALL_AT,
    isMounted: RETRY_AT,
    exists: RETRY_AT,
    isEmpty: RETRY_AT,
    diskUsage: RETRY_AT,
    copyFromRootfs: { kind: 'call', paths: ['0', '2'] },
    makeMountPoint: CALL_AT,
    openBeneath: CALL_AT,
    releaseStaleSubpaths: 'call',
  },
  network: {
    usedSubnets: 'retry',
    usedIPv6Subnets: 'retry',
    bridgeAddress: 'retry',
    ensureBridge: 'call',
    removeBridge: 'call',
    enableForwarding: 'call',
    enableIPv6Forwarding: 'call',
    ensureNat: 'call',
    removeNat: 'call',
    attachVeth: 'call',
    adoptInterface: 'call',
    removeInterface: 'call',
    dropDirectDelivery: 'call',
    bridgePorts: 'retry',
    ephemeralPortRange: 'retry',
    hostPortFree: 'retry',
    publishPorts: 'call',
    unpublishPorts: 'call',
    removeStalePortRules: 'call',
    startDns: 'call',
    stopDns: 'fire',
    observeDns: 'fire',
  },
  sandbox: {
    applyPolicy: 'call',
    removePolicy: 'call',
    allowAddresses: 'call',
    allowedAddresses: 'retry',
    installedPolicies: 'retry',
    removePolicyByShortId: 'call',
    setDirectPeers: 'call',
  },
  stats: {
    sample: 'retry',
    onlineCpus: 'snapshot',
    machineMemory: 'snapshot',
  },
  tools: {
    decompressor: 'duplex',
    packFolder: { kind: 'stream', paths: ['0'] },
    unpackInto: CALL_AT,
  },
  probe: {
    runtimeName: 'snapshot',
    runtimePath: 'snapshot',
    warnings: 'snapshot',
    initBinary: 'snapshot',
    rlimits: 'snapshot',
    capabilityBoundingSet: 'snapshot',
    machineId: 'snapshot',
    blkio: 'snapshot',
    info: 'retry',
    devices: RETRY_AT,
    allDevices: 'retry',
    blockDevice: { kind: 'retry', paths: ['1'] },
    etcFile: 'retry',
    pathExists: { kind: 'retry', sources: ['0'] },
    componentVersions: 'retry',
    driverStatus: 'retry',
  },
};

export const PART_NAMES = Object.keys(HOST_PARTS) as PartName[];

export function memberSpec(part: string, member: string): MemberSpec | undefined {
  const spec = (HOST_PARTS as Record<string, Record<string, Spec> | undefined>)[part]?.[member];
  if (spec === undefined) return undefined;
  return typeof spec === 'string' ? { kind: spec } : spec;
}

export function partMembers(part: PartName): Array<[string, MemberSpec]> {
  return Object.keys(HOST_PARTS[part]).map((member) => [member, memberSpec(part, member)!]);
}

/** Follows a dotted path (`streams.input`, `1.until`) to the object that holds its last step. */
export function holderOf(root: unknown, dotted: string): { holder: Record<string, unknown>; key: string } | undefined {
  const steps = dotted.split('.');
  let at = root as Record<string, unknown> | undefined;
  for (const step of steps.slice(0, -1)) {
    if (at === null || typeof at !== 'object') return undefined;
    at = at[step] as Record<string, unknown> | undefined;
  }
  if (at === null || typeof at !== 'object') return undefined;
  return { holder: at, key: steps[steps.length - 1]! };
}
