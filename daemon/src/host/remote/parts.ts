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
 */
import type { Host } from '../host.js';

export type MemberKind = 'call' | 'retry' | 'fire' | 'stream' | 'iterable' | 'duplex' | 'open' | 'snapshot' | 'layers';

export interface MemberSpec {
  kind: MemberKind;
  /** The result is a handle (session.ts markHandle): given back in a later call, the agent gets its own object. */
  handle?: boolean;
  flags?: string[];
  sinks?: string[];
}

type Spec = MemberKind | MemberSpec;
type PartName = Exclude<keyof Host, 'close'>;
type PartSpec<T> = { [K in keyof T]-?: Spec };

const LOG_OPTIONS: MemberSpec = { kind: 'iterable', flags: ['1.until'] };

const HOST_PARTS: { [P in PartName]: PartSpec<Host[P]> } = {
  plugins: {
    pluginsRoot: 'snapshot',
    pluginsRunRoot: 'snapshot',
    makeDir: 'call',
    entries: 'retry',
    kindOf: 'retry',
    readText: 'retry',
    rename: 'call',
    remove: 'call',
    run: 'call',
    waitExit: 'retry',
    stop: 'call',
    dial: 'open',
  },
  runtime: {
    mountRootfs: 'call',
    unmountRootfs: 'call',
    startBeginning: 'fire',
    removeContainerFiles: 'call',
    readFileFromLayers: 'call',
    start: 'call',
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
    sourceMount: 'retry',
  },
  exec: {
    exec: { kind: 'call', sinks: ['streams.input'] },
    releaseExec: 'call',
    readFileFromLayers: 'call',
  },
  files: {
    writeEtcFiles: 'call',
    readEtcFile: 'retry',
    mountRootfs: 'call',
    unmountRootfs: 'call',
    readFileFromLayers: 'call',
    statPath: 'retry',
    archivePath: 'call',
    extractArchive: 'call',
    exportRootfs: 'stream',
    changes: 'retry',
    diffTar: 'stream',
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
    createVolumeDir: 'call',
    removeVolumeDir: 'call',
    mount: 'call',
    unmount: 'call',
    isMounted: 'retry',
    exists: 'retry',
    isEmpty: 'retry',
    diskUsage: 'retry',
    copyFromRootfs: 'call',
    makeMountPoint: 'call',
    openBeneath: 'call',
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
    packFolder: 'stream',
    unpackInto: 'call',
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
    devices: 'retry',
    allDevices: 'retry',
    blockDevice: 'retry',
    etcFile: 'retry',
    pathExists: 'retry',
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
