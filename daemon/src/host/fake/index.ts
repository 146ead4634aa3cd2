/**
 * A Host in memory, for tests that need the contract without a kernel: layers (tars kept as bytes, checked
 * and hashed), volume folders, bridges and the machine's facts. It runs no processes: the runtime, exec,
 * files, sandbox, stats and tools parts answer NotImplemented. It passes the conformance suite's layers,
 * volumes, network and probe groups (test/host-conformance.test.ts).
 */
import { createHash } from 'node:crypto';
import path from 'node:path';
import { Readable } from 'node:stream';
import tar from 'tar-stream';
import { Conflict, InvalidParameter, NotFound, NotImplemented } from '../../errors.js';
import type { Host, LayerInfo, LayerStore, NetworkHost, PathInfo, ProbeHost, StagedLayer, VolumeHost } from '../host.js';

const LAYERS_ROOT = '/fake/layers';

function notImplemented(part: string): never {
  throw new NotImplemented(`the in-memory Host runs no processes (${part})`);
}

/** Every member of a part answers NotImplemented (a rejected promise, or a throw for what is synchronous). */
function absent<T extends object>(part: string, sync: string[] = []): T {
  return new Proxy({} as T, {
    get: (_target, member) => {
      if (typeof member !== 'string' || member === 'then') return undefined;
      return sync.includes(member) ? () => notImplemented(`${part}.${member}`) : async () => notImplemented(`${part}.${member}`);
    },
  });
}

/** Checks that the bytes are a tar (tar-stream reads every header), without keeping more than it is given. */
async function checkTar(bytes: Buffer): Promise<void> {
  const extract = tar.extract();
  await new Promise<void>((resolve, reject) => {
    extract.on('entry', (_header, body, next) => {
      body.on('end', next);
      body.resume();
    });
    extract.on('finish', resolve);
    extract.on('error', reject);
    extract.end(bytes);
  });
}

class MemoryLayers implements LayerStore {
  private readonly layers = new Map<string, { info: LayerInfo; tar: Buffer }>();
  private readonly staged = new WeakMap<StagedLayer, Buffer>();

  async stage(input: NodeJS.ReadableStream, signal?: AbortSignal): Promise<StagedLayer> {
    const chunks: Buffer[] = [];
    for await (const chunk of input as AsyncIterable<Buffer>) {
      signal?.throwIfAborted();
      chunks.push(Buffer.from(chunk));
    }
    const bytes = Buffer.concat(chunks);
    try {
      await checkTar(bytes);
    } catch (err) {
      throw new InvalidParameter(`the layer is not a tar archive: ${(err as Error).message}`);
    }
    const staged: StagedLayer = { diffId: `sha256:${createHash('sha256').update(bytes).digest('hex')}`, size: bytes.length };
    this.staged.set(staged, bytes);
    return staged;
  }

  async commit(staged: StagedLayer, chainId: string, parent: string | null): Promise<void> {
    if (this.layers.has(chainId)) return;
    const bytes = this.staged.get(staged);
    if (!bytes) throw new InvalidParameter('commit of a layer that was not staged by this store');
    this.layers.set(chainId, { info: { chainId, diffId: staged.diffId, parent, tarSize: bytes.length, diskSize: bytes.length }, tar: bytes });
  }

  async discard(staged: StagedLayer): Promise<void> {
    this.staged.delete(staged);
  }

  has(chainId: string): boolean {
    return this.layers.has(chainId);
  }

  chainIds(): string[] {
    return [...this.layers.keys()];
  }

  info(chainId: string): LayerInfo | undefined {
    return this.layers.get(chainId)?.info;
  }

  lowerDirs(chainIds: string[]): string[] {
    return chainIds.map((chainId) => {
      if (!this.layers.has(chainId)) throw new NotFound(`layer ${chainId} does not exist`);
      return path.join(LAYERS_ROOT, chainId.replace(/^sha256:/, ''), 'diff');
    });
  }

  openTar(chainId: string): NodeJS.ReadableStream {
    const layer = this.layers.get(chainId);
    if (!layer) throw new NotFound(`layer ${chainId} does not exist`);
    return Readable.from([layer.tar]);
  }

  async remove(chainId: string): Promise<void> {
    this.layers.delete(chainId);
  }

  /** The layers' merged tree, read from their tars (bottom first): later entries replace, whiteouts delete. */
  private async tree(chainIds: string[]): Promise<Map<string, TreeNode>> {
    const nodes = new Map<string, TreeNode>([['', { info: { type: 'directory', mode: 0o40755, size: 0, mtimeMs: 0 } }]]);
    const drop = (rel: string, keepSelf: boolean) => {
      for (const key of [...nodes.keys()]) if ((!keepSelf && key === rel) || key.startsWith(rel === '' ? '' : `${rel}/`)) if (key !== '') nodes.delete(key);
    };
    for (const chainId of chainIds) {
      const layer = this.layers.get(chainId);
      if (!layer) throw new NotFound(`layer ${chainId} does not exist`);
      await readTar(layer.tar, (header, content) => {
        const rel = path.posix.normalize(header.name).replace(/^\.?\/+/, '').replace(/\/+$/, '');
        const base = path.posix.basename(rel);
        const dir = path.posix.dirname(rel) === '.' ? '' : path.posix.dirname(rel);
        if (base === '.wh..wh..opq') return drop(dir, true);
        if (base.startsWith('.wh.')) return drop(dir ? `${dir}/${base.slice(4)}` : base.slice(4), false);
        const type = header.type === 'directory' ? 'directory' : header.type === 'symlink' ? 'symlink' : header.type === 'file' || header.type === 'contiguous-file' ? 'file' : 'other';
        const kind = type === 'directory' ? 0o40000 : type === 'symlink' ? 0o120000 : type === 'file' ? 0o100000 : 0;
        if (type !== 'directory') drop(rel, false);
        nodes.set(rel, { info: { type, mode: kind | ((header.mode ?? 0o644) & 0o7777), size: type === 'file' ? content.length : 0, mtimeMs: header.mtime?.getTime() ?? 0 }, linkname: header.linkname ?? undefined, content });
      });
    }
    return nodes;
  }

  async layerTreeStat(chainIds: string[], rel: string): Promise<PathInfo | undefined> {
    return (await this.tree(chainIds)).get(rel)?.info;
  }

  async layerTreeReadlink(chainIds: string[], rel: string): Promise<string> {
    const node = (await this.tree(chainIds)).get(rel);
    if (node?.info.type !== 'symlink') throw new NotFound(`no such link: ${rel}`);
    return node.linkname ?? '';
  }

  async layerTreeReaddir(chainIds: string[], rel: string): Promise<string[]> {
    const prefix = rel === '' ? '' : `${rel}/`;
    return [...(await this.tree(chainIds)).keys()].filter((key) => key !== '' && key.startsWith(prefix) && !key.slice(prefix.length).includes('/')).map((key) => key.slice(prefix.length)).sort();
  }

  async layerTreeRead(chainIds: string[], rel: string): Promise<NodeJS.ReadableStream> {
    const node = (await this.tree(chainIds)).get(rel);
    if (node?.info.type !== 'file') throw new NotFound(`no such file: ${rel}`);
    return Readable.from([node.content ?? Buffer.alloc(0)]);
  }
}

interface TreeNode {
  info: PathInfo;
  linkname?: string;
  content?: Buffer;
}

/** Calls `onEntry` with each entry of a tar and its bytes. */
async function readTar(bytes: Buffer, onEntry: (header: tar.Header, content: Buffer) => void): Promise<void> {
  const extract = tar.extract();
  await new Promise<void>((resolve, reject) => {
    extract.on('entry', (header, body, next) => {
      const chunks: Buffer[] = [];
      body.on('data', (c: unknown) => chunks.push(c as Buffer));
      body.on('end', () => {
        onEntry(header, Buffer.concat(chunks));
        next();
      });
    });
    extract.on('finish', resolve);
    extract.on('error', reject);
    extract.end(bytes);
  });
}

/** Folders as a set of paths: what the volume service sees of them. */
class MemoryVolumes implements VolumeHost {
  readonly volumesRoot = '/fake/volumes';
  private readonly dirs = new Set<string>();
  private readonly mounts = new Set<string>();

  async listVolumeDirs(): Promise<string[]> {
    return [...this.dirs].filter((d) => path.dirname(d) === this.volumesRoot).map((d) => path.basename(d));
  }

  async createVolumeDir(dir: string): Promise<void> {
    if (path.dirname(dir) !== this.volumesRoot) throw new InvalidParameter(`refusing to touch ${dir}: not a folder of ${this.volumesRoot}`);
    if (this.dirs.has(dir)) throw new Conflict(`${dir} exists already`);
    this.dirs.add(dir);
    this.dirs.add(path.join(dir, '_data'));
  }
  async removeVolumeDir(dir: string): Promise<void> {
    for (const known of [...this.dirs]) if (known === dir || known.startsWith(`${dir}/`)) this.dirs.delete(known);
  }
  async mount(target: string): Promise<void> {
    this.mounts.add(target);
  }
  async unmount(target: string): Promise<void> {
    this.mounts.delete(target);
  }
  async isMounted(target: string): Promise<boolean> {
    return this.mounts.has(target);
  }
  async exists(p: string): Promise<boolean> {
    return this.dirs.has(p);
  }
  async isEmpty(dir: string): Promise<boolean> {
    return ![...this.dirs].some((known) => known.startsWith(`${dir}/`));
  }
  async diskUsage(): Promise<number> {
    return 0;
  }
  async copyFromRootfs(): Promise<void> {
    notImplemented('volumes.copyFromRootfs');
  }
  async makeMountPoint(): Promise<string> {
    notImplemented('volumes.makeMountPoint');
  }
  async openBeneath(): Promise<{ path: string; directory: boolean; close(): Promise<void> }> {
    notImplemented('volumes.openBeneath');
  }
}

/** Bridges with their addresses; rules and interfaces are accepted and forgotten. */
function memoryNetwork(): NetworkHost {
  const bridges = new Map<string, { address: string; subnet: string }>();
  const nothing = async () => undefined;
  return {
    usedSubnets: async () => [...bridges.values()].map((b) => b.subnet),
    usedIPv6Subnets: async () => [],
    bridgeAddress: async (name) => bridges.get(name)?.address,
    ensureBridge: async (spec) => {
      bridges.set(spec.name, { address: `${spec.gateway}/${spec.prefixLen}`, subnet: spec.subnet });
    },
    removeBridge: async (name) => {
      bridges.delete(name);
    },
    enableForwarding: nothing,
    enableIPv6Forwarding: nothing,
    ensureNat: nothing,
    removeNat: nothing,
    attachVeth: async () => notImplemented('network.attachVeth'),
    adoptInterface: async () => notImplemented('network.adoptInterface'),
    removeInterface: nothing,
    dropDirectDelivery: nothing,
    bridgePorts: async () => [],
    ephemeralPortRange: async () => ({ first: 32768, last: 60999 }),
    hostPortFree: async () => true,
    publishPorts: nothing,
    unpublishPorts: nothing,
    removeStalePortRules: nothing,
    startDns: async () => notImplemented('network.startDns'),
    stopDns: () => undefined,
  };
}

function memoryProbe(): ProbeHost {
  return {
    runtimeName: 'crun',
    runtimePath: 'crun',
    warnings: [],
    initBinary: { name: 'docker-init', problem: 'the in-memory Host runs no processes' },
    rlimits: { RLIMIT_NOFILE: { soft: 1024, hard: 1024 } },
    machineId: 'fake',
    blkio: { weight: false, weightDevice: false, throttle: false },
    devices: async (pathOnHost) => {
      throw new NotFound(`error gathering device information while adding custom device "${pathOnHost}": no such file or directory`);
    },
    allDevices: async () => [],
    blockDevice: async (field, p) => {
      throw new InvalidParameter(`invalid ${field}: ${p} is not a block device`);
    },
    etcFile: async () => undefined,
    pathExists: async () => false,
    info: async () => ({
      kernelVersion: 'fake',
      operatingSystem: 'in-memory',
      osVersion: '0',
      osType: 'linux',
      architecture: 'x86_64',
      ncpu: 1,
      memTotal: 1 << 30,
      cgroupVersion: '2',
      cgroupDriver: 'cgroupfs',
      storageDriver: 'overlay2',
      runtimes: ['crun'],
      defaultRuntime: 'crun',
      hostname: 'fake',
    }),
    componentVersions: async () => [],
    driverStatus: async () => [],
  };
}

export function createFakeHost(): Host {
  return {
    runtime: absent('runtime', ['readLog', 'readLogBatches', 'readLogBlocks']),
    exec: absent('exec'),
    files: absent('files', ['exportRootfs', 'diffTar']),
    layers: new MemoryLayers(),
    volumes: new MemoryVolumes(),
    network: memoryNetwork(),
    plugins: absent('plugins'),
    sandbox: absent('sandbox'),
    stats: absent('stats', ['onlineCpus', 'machineMemory']),
    tools: absent('tools', ['decompressor']),
    probe: memoryProbe(),
    close: async () => undefined,
  };
}
