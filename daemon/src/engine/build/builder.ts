/**
 * The classic image builder (POST /build as dockerd's builder v1): the context unpacked, the Dockerfile
 * parsed and checked in full before step 1, then each stage's instructions run in order. Steps that change
 * only the config make an image without a layer (an empty_layer history entry); RUN runs a real container
 * of the container engine and commits its writable layer; COPY and ADD write their files as a layer
 * directly. A step whose inputs (parent image, instruction text with the build args it sees, the content of
 * COPY/ADD sources) were seen before is taken from the build cache.
 *
 * Formats: `<root>/cache.json` holds the build cache index, `{"version": 1, "entries": {<key>: <image id>}}`
 * (the key is sha256 of the parent id, the step's history line and its content hash). `<root>/tmp/` holds
 * the contexts of running builds (removed when a build ends, and at start).
 */
import { createHash } from 'node:crypto';
import { createWriteStream, promises as fs } from 'node:fs';
import path from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { StringDecoder } from 'node:string_decoder';
import { readJSONIfExists, writeJSONAtomic } from '../../util/atomic.js';
import { shortId } from '../../util/ids.js';
import { log } from '../../util/log.js';
import { EngineError, errorMessage, InvalidParameter, NotFound, NotImplemented } from '../../errors.js';
import type { AuthConfig } from '../images/registry/auth.js';
import type { ImageConfig, ImageRecord } from '../images/store.js';
import type { CreateImageOptions, ImageRunConfig } from '../images/types.js';
import { familiarString, parseNormalizedNamed } from '../reference.js';
import { applyDockerignore, unpackContext } from './context.js';
import { packCopy, planCopy, resolveChown, type CopySource } from './copy.js';
import { parseDockerfile, parseInstructionLine, type Instruction } from './parser.js';
import { FolderTree, LayersTree, resolveInTree } from './sources.js';
import { expandWord, expandWords, keyValuePairs, type Lookup } from './words.js';

const ARCH = process.arch === 'x64' ? 'amd64' : process.arch === 'ia32' ? '386' : process.arch;
const DEFAULT_SHELL = ['/bin/sh', '-c'];
/** Build args every build knows without an ARG line; their values never reach the history or the cache. */
const PROXY_ARGS = new Set(['HTTP_PROXY', 'http_proxy', 'HTTPS_PROXY', 'https_proxy', 'FTP_PROXY', 'ftp_proxy', 'NO_PROXY', 'no_proxy', 'ALL_PROXY', 'all_proxy']);

/** A failed step that carries the code Docker puts in errorDetail (a RUN's exit code). */
export class BuildStepError extends EngineError {
  constructor(message: string, readonly code: number) {
    super(message);
  }
}

/** What the builder needs of the image service. */
export interface BuildImages {
  find(text: string): { image: ImageRecord };
  lowerDirs(chainIds: string[]): string[];
  createImage(
    opts: CreateImageOptions,
    signal?: AbortSignal,
  ): Promise<string>;
  tag(name: string, repo: string, tag: string | undefined): Promise<void>;
  inspect(name: string): Record<string, unknown>;
  remove(name: string, opts: { force?: boolean; noprune?: boolean }): Promise<Array<{ Untagged?: string; Deleted?: string }>>;
  readonly store: { all(): ImageRecord[]; has(id: string): boolean; refsOf(id: string): unknown[]; get(id: string): ImageRecord | undefined };
}

/** What the builder needs of the container engine (RUN). */
export interface BuildContainers {
  create(body: unknown, name: string | undefined): Promise<{ Id: string }>;
  attach(ref: string, signal: AbortSignal): Promise<{ streams: { output: Readable; close(): void } }>;
  start(ref: string): Promise<void>;
  wait(ref: string, condition: 'not-running' | 'next-exit' | 'removed', signal?: AbortSignal): Promise<{ StatusCode: number }>;
  remove(ref: string, opts: { force: boolean; volumes?: boolean }): Promise<void>;
  kill(ref: string, signal?: string): Promise<void>;
  containersUsingImage(imageId: string): string[];
}

export interface BuildHost {
  /** The container's writable layer as a layer tar. */
  diffTar(id: string, lowerDirs: string[], signal?: AbortSignal): Readable;
}

/** Credentials for one registry, as clients send them (X-Registry-Config values): the registry client's AuthConfig. */
export type RegistryCredentials = AuthConfig;

export type PullFunction = (ref: string, emit: (m: Record<string, unknown>) => void, signal?: AbortSignal, auth?: RegistryCredentials) => Promise<void>;

const DOCKER_HUB_KEYS = new Set(['docker.io', 'index.docker.io', 'registry-1.docker.io']);

/** The credentials of X-Registry-Config for the registry of `domain` (keys may carry a scheme and a path). */
export function credentialsFor(config: Record<string, RegistryCredentials>, domain: string): RegistryCredentials | undefined {
  const hub = DOCKER_HUB_KEYS.has(domain);
  for (const [key, value] of Object.entries(config)) {
    const host = key.replace(/^[a-z]+:\/\//i, '').replace(/\/.*$/, '');
    if (host === domain || (hub && DOCKER_HUB_KEYS.has(host))) return value;
  }
  return undefined;
}

export interface BuildOptions {
  dockerfile: string;
  tags: string[];
  quiet: boolean;
  rm: boolean;
  forcerm: boolean;
  nocache: boolean;
  pull: boolean;
  labels: Record<string, string>;
  target?: string;
  buildArgs: Record<string, string | null>;
  cacheFrom: string[];
  platform?: string;
  /** HostConfig fields of the RUN containers (Memory, MemorySwap, CpuShares, CpusetCpus, CpuPeriod, CpuQuota, ShmSize). */
  resources: Record<string, number | string>;
  networkMode?: string;
  extraHosts: string[];
  /** X-Registry-Config: credentials by registry, for the pulls of FROM. */
  registryAuth?: Record<string, RegistryCredentials>;
}

export type Emit = (message: Record<string, unknown>) => void;

interface Stage {
  name?: string;
  index: number;
  from: Instruction;
  steps: Instruction[];
}

interface StageState {
  imageId?: string;
  chainIds: string[];
  config: ImageRunConfig;
  /** ARGs declared in this stage with their values (undefined: declared without value). */
  args: Map<string, string | undefined>;
  cmdSet: boolean;
}

function cloneConfig(config: ImageRunConfig | undefined): ImageRunConfig {
  return JSON.parse(JSON.stringify(config ?? {})) as ImageRunConfig;
}

function envLookup(env: string[] | undefined, name: string): string | undefined {
  for (const e of env ?? []) {
    const eq = e.indexOf('=');
    if ((eq < 0 ? e : e.slice(0, eq)) === name) return eq < 0 ? '' : e.slice(eq + 1);
  }
  return undefined;
}

function setEnv(env: string[] | undefined, key: string, value: string): string[] {
  const out = [...(env ?? [])];
  const i = out.findIndex((e) => e.split('=')[0] === key);
  if (i >= 0) out[i] = `${key}=${value}`;
  else out.push(`${key}=${value}`);
  return out;
}

function jsonArray(text: string): string[] | undefined {
  if (!text.startsWith('[')) return undefined;
  try {
    const v = JSON.parse(text) as unknown;
    return Array.isArray(v) && v.every((x) => typeof x === 'string') ? (v as string[]) : undefined;
  } catch {
    return undefined;
  }
}

/** A step's stderr in the build output: in bright red (ESC[91m ... ESC[0m), as dockerd shows it. */
function stderrText(text: string): string {
  return `\x1b[91m${text}\x1b[0m`;
}

/** Go durations of HEALTHCHECK flags ("30s", "1m30s") in nanoseconds. */
function parseDuration(flag: string, value: string): number {
  const units: Record<string, number> = { ns: 1, us: 1e3, µs: 1e3, ms: 1e6, s: 1e9, m: 60e9, h: 3600e9 };
  if (value === '0') return 0;
  if (!/^(\d+(\.\d+)?(ns|us|µs|ms|s|m|h))+$/.test(value)) throw new InvalidParameter(`invalid duration ${JSON.stringify(value)} for --${flag}`);
  let ns = 0;
  for (const m of value.matchAll(/(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)/g)) ns += Number(m[1]) * units[m[2]];
  return Math.round(ns);
}

function hashKey(parts: unknown[]): string {
  return createHash('sha256').update(JSON.stringify(parts)).digest('hex');
}

export class Builder {
  private cache: Map<string, string> | undefined;
  private cacheWrite: Promise<void> = Promise.resolve();

  constructor(
    private readonly root: string,
    private readonly deps: {
      images: BuildImages;
      containers: BuildContainers;
      host: BuildHost;
      /** The registry pull, when the engine has one. */
      pull?: PullFunction;
    },
  ) {}

  /** Removes contexts a crash left behind. */
  async init(): Promise<void> {
    await fs.rm(path.join(this.root, 'tmp'), { recursive: true, force: true });
    await fs.mkdir(path.join(this.root, 'tmp'), { recursive: true, mode: 0o700 });
  }

  private async loadCache(): Promise<Map<string, string>> {
    if (this.cache) return this.cache;
    const file = await readJSONIfExists<{ version: number; entries: Record<string, string> }>(path.join(this.root, 'cache.json')).catch(() => undefined);
    this.cache = new Map(Object.entries(file?.version === 1 ? file.entries : {}));
    return this.cache;
  }

  private saveCache(): Promise<void> {
    const entries = Object.fromEntries(this.cache ?? []);
    this.cacheWrite = this.cacheWrite.then(() => writeJSONAtomic(path.join(this.root, 'cache.json'), { version: 1, entries })).catch(() => undefined);
    return this.cacheWrite;
  }

  /** The image ids the build cache knows (for prune). */
  async cachedImages(): Promise<Set<string>> {
    return new Set((await this.loadCache()).values());
  }

  /**
   * Runs a build: `input` is the context tar, messages for the client go to `emit`. Errors before step 1
   * (bad context, bad Dockerfile) are thrown before anything was emitted.
   */
  async build(input: Readable, opts: BuildOptions, emit: Emit, signal: AbortSignal): Promise<string> {
    await fs.mkdir(path.join(this.root, 'tmp'), { recursive: true, mode: 0o700 });
    const workDir = await fs.mkdtemp(path.join(this.root, 'tmp', 'b-'));
    const contextDir = path.join(workDir, 'context');
    await fs.mkdir(contextDir);
    try {
      await unpackContext(input, contextDir, signal);
      const dockerfileRel = path.posix.normalize(opts.dockerfile.replace(/^\/+/, ''));
      if (dockerfileRel.startsWith('..')) throw new InvalidParameter(`the Dockerfile (${opts.dockerfile}) must be within the build context`);
      let text: string | undefined;
      for (const candidate of opts.dockerfile === 'Dockerfile' ? ['Dockerfile', 'dockerfile'] : [dockerfileRel]) {
        const real = await resolveInTree(new FolderTree(contextDir), candidate).catch(() => candidate);
        text = await fs.readFile(path.join(contextDir, real), 'utf8').catch(() => undefined);
        if (text !== undefined) break;
      }
      if (text === undefined) throw new InvalidParameter(`Cannot locate specified Dockerfile: ${opts.dockerfile}`);
      // As dockerd: the Dockerfile and .dockerignore themselves go too when the patterns exclude them.
      await applyDockerignore(contextDir, []);
      const parsed = parseDockerfile(text);
      const run = new BuildRun(this, opts, emit, signal, contextDir, workDir, parsed.escape);
      const stages = run.plan(parsed.instructions);
      return await run.execute(stages);
    } finally {
      await fs.rm(workDir, { recursive: true, force: true }).catch(() => undefined);
    }
  }

  /** @internal used by BuildRun */
  get d() {
    return this.deps;
  }

  /** @internal */
  async cacheGet(key: string, allowed: Set<string> | undefined): Promise<string | undefined> {
    const id = (await this.loadCache()).get(key);
    if (!id || !this.deps.images.store.has(id)) return undefined;
    if (allowed && !allowed.has(id)) return undefined;
    return id;
  }

  /** @internal */
  async cachePut(key: string, id: string): Promise<void> {
    (await this.loadCache()).set(key, id);
    await this.saveCache();
  }

  /**
   * POST /build/prune: removes the images only the build cache holds (untagged, no container, no child
   * left), leaves first. `until` keeps what is newer.
   */
  async prune(opts: { untilNano?: bigint }): Promise<{ CachesDeleted: string[]; SpaceReclaimed: number }> {
    const cache = await this.loadCache();
    const { images, containers } = this.deps;
    const deleted: string[] = [];
    let reclaimed = 0;
    for (let progress = true; progress; ) {
      progress = false;
      const cached = new Set(cache.values());
      const parents = new Set(images.store.all().map((i) => i.meta.parent).filter((p): p is string => !!p));
      for (const id of cached) {
        const image = images.store.get(id);
        if (!image) continue;
        if (images.store.refsOf(id).length > 0 || parents.has(id) || containers.containersUsingImage(id).length > 0) continue;
        if (opts.untilNano !== undefined) {
          const created = image.config.created ? Date.parse(image.config.created) * 1e6 : 0;
          if (BigInt(Math.floor(created)) > opts.untilNano) continue;
        }
        const sizeOf = (ref: string) => {
          try {
            return Number(images.inspect(ref).Size) || 0;
          } catch {
            return 0;
          }
        };
        const own = Math.max(0, sizeOf(id) - (image.meta.parent ? sizeOf(image.meta.parent) : 0));
        try {
          const records = await images.remove(id, { noprune: true });
          if (records.some((r) => r.Deleted)) {
            deleted.push(id);
            progress = true;
            reclaimed += own;
          }
        } catch {
          // In use by now, or removed meanwhile: kept.
        }
      }
    }
    for (const [key, id] of [...cache]) if (!images.store.has(id)) cache.delete(key);
    await this.saveCache();
    return { CachesDeleted: deleted, SpaceReclaimed: reclaimed };
  }
}

/** One build: its options, its output and its stages' results. */
class BuildRun {
  private readonly stageResults = new Map<string, { imageId?: string; chainIds: string[] }>();
  private readonly usedArgs = new Set<string>();
  private totalSteps = 0;
  private step = 0;
  private allowedCache: Set<string> | undefined;
  private globalArgs = new Map<string, string | undefined>();

  constructor(
    private readonly builder: Builder,
    private readonly opts: BuildOptions,
    private readonly emit: Emit,
    private readonly signal: AbortSignal,
    private readonly contextDir: string,
    private readonly workDir: string,
    private readonly escape: string,
  ) {}

  private out(text: string): void {
    this.emit({ stream: text });
  }

  /** Splits the instructions into stages (global ARGs first), checks the target, adds the `labels` step. */
  plan(instructions: Instruction[]): Stage[] {
    const stages: Stage[] = [];
    for (const ins of instructions) {
      if (ins.keyword === 'FROM') {
        const words = ins.args.split(/\s+/).filter(Boolean);
        stages.push({ name: words.length === 3 ? words[2].toLowerCase() : undefined, index: stages.length, from: ins, steps: [] });
      } else if (stages.length === 0) {
        // ARG before the first FROM: global, usable in FROM lines.
        const [name, value] = splitArg(ins.args);
        this.globalArgs.set(name, value);
      } else stages[stages.length - 1].steps.push(ins);
    }
    let last = stages.length - 1;
    if (this.opts.target) {
      last = stages.findIndex((s) => s.name === this.opts.target!.toLowerCase());
      if (last < 0) throw new InvalidParameter(`failed to reach build target ${this.opts.target} in Dockerfile`);
    }
    const used = stages.slice(0, last + 1);
    const labels = Object.entries(this.opts.labels);
    if (labels.length > 0) {
      const line = 'LABEL ' + labels.map(([k, v]) => `${JSON.stringify(k)}=${JSON.stringify(v)}`).join(' ');
      used[used.length - 1].steps.push(parseInstructionLine(line, 0));
    }
    this.totalSteps = used.reduce((n, s) => n + 1 + s.steps.length, 0);
    return used;
  }

  private lookupGlobal: Lookup = (name) => {
    if (this.opts.buildArgs[name] !== undefined && this.opts.buildArgs[name] !== null && this.globalArgs.has(name)) return this.opts.buildArgs[name]!;
    const v = this.globalArgs.get(name);
    if (v !== undefined) return v;
    if (name === 'TARGETPLATFORM' || name === 'BUILDPLATFORM') return `linux/${ARCH}`;
    if (name === 'TARGETOS' || name === 'BUILDOS') return 'linux';
    if (name === 'TARGETARCH' || name === 'BUILDARCH') return ARCH;
    return undefined;
  };

  private argValue(state: StageState, name: string): string | undefined {
    if (!state.args.has(name)) return undefined;
    const given = this.opts.buildArgs[name];
    if (given !== undefined && given !== null) return given;
    const declared = state.args.get(name);
    if (declared !== undefined) return declared;
    return this.globalArgs.get(name);
  }

  private lookupFor(state: StageState): Lookup {
    return (name) => {
      const env = envLookup(state.config.Env, name);
      if (env !== undefined) return env;
      const arg = this.argValue(state, name);
      if (arg !== undefined) return arg;
      if (PROXY_ARGS.has(name)) return this.opts.buildArgs[name] ?? undefined;
      return undefined;
    };
  }

  private stepLine(ins: Instruction): void {
    this.step++;
    this.out(`Step ${this.step}/${this.totalSteps} : ${ins.original}\n`);
  }

  private checkAborted(): void {
    if (this.signal.aborted) throw new EngineError('the build was cancelled: the client went away');
  }

  async execute(stages: Stage[]): Promise<string> {
    const { images } = this.builder.d;
    if (this.opts.cacheFrom.length > 0) {
      // Only the given images and their parents can serve as cache.
      this.allowedCache = new Set();
      for (const ref of this.opts.cacheFrom) {
        let id: string | undefined;
        try {
          id = images.find(ref).image.id;
        } catch {
          continue;
        }
        while (id && !this.allowedCache.has(id)) {
          this.allowedCache.add(id);
          id = images.store.get(id)?.meta.parent ?? undefined;
        }
      }
    }
    let final: StageState | undefined;
    for (const stage of stages) {
      final = await this.runStage(stage);
      const result = { imageId: final.imageId, chainIds: final.chainIds };
      this.stageResults.set(String(stage.index), result);
      if (stage.name) this.stageResults.set(stage.name, result);
    }
    const unused = Object.keys(this.opts.buildArgs).filter((a) => !this.usedArgs.has(a) && !PROXY_ARGS.has(a) && !this.globalArgs.has(a));
    if (unused.length > 0) this.out(`[Warning] One or more build-args [${unused.sort().join(' ')}] were not consumed\n`);
    const id = final?.imageId;
    if (!id) throw new InvalidParameter('No image was generated. Is your Dockerfile empty?');
    this.emit({ aux: { ID: id } });
    this.out(`Successfully built ${shortId(id)}\n`);
    for (const t of this.opts.tags) {
      this.checkAborted();
      const ref = parseNormalizedNamed(t);
      const full = ref.tag === undefined && ref.digest === undefined ? { ...ref, tag: 'latest' } : ref;
      await images.tag(id, familiarString(full), undefined);
      this.out(`Successfully tagged ${familiarString(full)}\n`);
    }
    return id;
  }

  private async resolveBase(state: StageState, from: Instruction): Promise<void> {
    const { images, pull } = this.builder.d;
    const words = from.args.split(/\s+/).filter(Boolean);
    const name = expandWord(words[0], this.lookupGlobal, this.escape);
    if (!name) throw new InvalidParameter(`base name (${words[0]}) should not be blank`);
    const platform = from.flags.platform ? expandWord(from.flags.platform[0], this.lookupGlobal, this.escape) : this.opts.platform;
    if (platform) {
      const [os, arch] = platform.split('/');
      if (os !== 'linux' || (arch && arch !== ARCH)) {
        throw new InvalidParameter(`platform ${platform} is not supported by this engine: only linux/${ARCH} images can be built here`);
      }
    }
    const stage = this.stageResults.get(name.toLowerCase());
    if (stage && !/[:@/]/.test(name)) {
      state.imageId = stage.imageId;
      state.chainIds = stage.chainIds;
      state.config = stage.imageId ? cloneConfig(images.find(stage.imageId).image.config.config) : {};
      this.out(stage.imageId ? ` ---> ${shortId(stage.imageId)}\n` : '');
      return;
    }
    if (name.toLowerCase() === 'scratch') {
      state.chainIds = [];
      state.config = {};
      state.config.Env = undefined;
      return;
    }
    let image: ImageRecord | undefined;
    // A name without tag pulls its latest tag only.
    const parsedName = parseNormalizedNamed(name);
    const pullName = familiarString(parsedName);
    const auth = credentialsFor(this.opts.registryAuth ?? {}, parsedName.domain);
    if (this.opts.pull) {
      if (!pull) throw new InvalidParameter(`cannot pull ${name}: this engine cannot pull images from a registry yet; build without --pull`);
      await pull(pullName, this.emit, this.signal, auth);
    }
    try {
      image = images.find(name).image;
    } catch (err) {
      if (!(err instanceof NotFound)) throw err;
      if (!pull) throw new NotFound(`pull access denied for ${name}: the image is not here and this engine cannot pull images from a registry yet; load it first (docker load)`);
      await pull(pullName, this.emit, this.signal, auth);
      image = images.find(name).image;
    }
    state.imageId = image.id;
    state.chainIds = [...image.chainIds];
    state.config = cloneConfig(image.config.config);
    this.out(` ---> ${shortId(image.id)}\n`);
  }

  private async runStage(stage: Stage): Promise<StageState> {
    const state: StageState = { chainIds: [], config: {}, args: new Map(), cmdSet: false };
    this.checkAborted();
    this.stepLine(stage.from);
    await this.resolveBase(state, stage.from);
    const triggers = state.config.OnBuild ?? [];
    if (triggers.length > 0) {
      this.out(`# Executing ${triggers.length} build trigger${triggers.length > 1 ? 's' : ''}\n`);
      state.config.OnBuild = [];
      for (const trigger of triggers) await this.runStep(state, parseInstructionLine(trigger, stage.from.line), true);
    }
    state.config.OnBuild = state.config.OnBuild && state.config.OnBuild.length > 0 ? state.config.OnBuild : undefined;
    if (triggers.length > 0) delete state.config.OnBuild;
    for (const ins of stage.steps) {
      this.checkAborted();
      this.stepLine(ins);
      await this.runStep(state, ins, false);
    }
    return state;
  }

  /** Makes (or finds in the cache) the image of a step; `layer` gives the step's layer tar when it has one. */
  private async commitStep(
    state: StageState,
    createdBy: string,
    contentHash: string,
    layer: (() => Promise<Readable>) | undefined,
    containerCmd: string[],
  ): Promise<boolean> {
    const { images } = this.builder.d;
    const key = hashKey([state.imageId ?? '', createdBy, contentHash, state.config]);
    if (await this.fromCache(state, key)) return true;
    const id = await images.createImage(
      {
        parent: state.imageId,
        layer: layer ? await layer() : undefined,
        config: state.config,
        createdBy,
        containerConfig: { ...state.config, Cmd: containerCmd },
      },
      this.signal,
    );
    await this.builder.cachePut(key, id);
    this.adopt(state, id);
    this.out(` ---> ${shortId(id)}\n`);
    return false;
  }

  /** Takes the step's result from the cache when it holds one (and the build allows it). */
  private async fromCache(state: StageState, key: string): Promise<boolean> {
    if (this.opts.nocache) return false;
    const hit = await this.builder.cacheGet(key, this.allowedCache);
    if (!hit) return false;
    this.out(' ---> Using cache\n');
    this.adopt(state, hit);
    this.out(` ---> ${shortId(hit)}\n`);
    return true;
  }

  private adopt(state: StageState, id: string): void {
    const image = this.builder.d.images.find(id).image;
    state.imageId = id;
    state.chainIds = [...image.chainIds];
    state.config = cloneConfig(image.config.config);
  }

  private nop(state: StageState, text: string): string[] {
    return [...(state.config.Shell ?? DEFAULT_SHELL), `#(nop) ${text}`];
  }

  private async configStep(state: StageState, text: string, change: (c: ImageRunConfig) => void): Promise<void> {
    // The config before the step is part of the cache key: computed from the parent image.
    const before = state.config;
    const after = cloneConfig(before);
    change(after);
    const key = hashKey([state.imageId ?? '', `#(nop) ${text}`, after]);
    const { images } = this.builder.d;
    const shell = before.Shell ?? DEFAULT_SHELL;
    const createdBy = `${shell.join(' ')} #(nop)  ${text}`;
    if (await this.fromCache(state, key)) return;
    const id = await images.createImage(
      { parent: state.imageId, config: after, createdBy, containerConfig: { ...after, Cmd: this.nop(state, text) } },
      this.signal,
    );
    await this.builder.cachePut(key, id);
    this.adopt(state, id);
    this.out(` ---> ${shortId(id)}\n`);
  }

  private commandOf(state: StageState, args: string, heredocs: Instruction['heredocs']): string[] {
    const exec = jsonArray(args);
    if (exec) return exec;
    const shell = state.config.Shell ?? DEFAULT_SHELL;
    const only = /^<<(-?)(["']?)([A-Za-z_][A-Za-z0-9_]*)\2$/.exec(args.trim());
    if (only && heredocs.length === 1) return [...shell, heredocs[0].content];
    if (heredocs.length > 0) {
      // The shell reads the heredocs itself: the body follows the command line.
      let script = args;
      for (const h of heredocs) script += `\n${h.content}${h.name}`;
      return [...shell, script];
    }
    return [...shell, args];
  }

  private async runStep(state: StageState, ins: Instruction, trigger: boolean): Promise<void> {
    void trigger;
    const lookup = this.lookupFor(state);
    const expand = (t: string) => expandWord(t, lookup, this.escape);
    const text = ins.original.replace(/^\S+/, ins.keyword);
    switch (ins.keyword) {
      case 'ARG': {
        const [name, raw] = splitArg(ins.args);
        const value = raw === undefined ? undefined : expand(raw);
        state.args.set(name, value);
        this.usedArgs.add(name);
        const shown = value === undefined ? name : `${name}=${value}`;
        return this.configStep(state, `ARG ${shown}`, () => undefined);
      }
      case 'ENV': {
        const pairs = keyValuePairs('ENV', ins.args, lookup, this.escape);
        return this.configStep(state, `ENV ${pairs.map(([k, v]) => `${k}=${v}`).join(' ')}`, (c) => {
          for (const [k, v] of pairs) c.Env = setEnv(c.Env, k, v);
        });
      }
      case 'LABEL': {
        const pairs = keyValuePairs('LABEL', ins.args, lookup, this.escape);
        return this.configStep(state, `LABEL ${pairs.map(([k, v]) => `${k}=${v}`).join(' ')}`, (c) => {
          c.Labels = { ...(c.Labels ?? {}) };
          for (const [k, v] of pairs) c.Labels[k] = v;
        });
      }
      case 'MAINTAINER':
        return this.configStep(state, `MAINTAINER ${ins.args}`, () => undefined);
      case 'EXPOSE': {
        const ports = expandWords(ins.args, lookup, this.escape);
        const keys: string[] = [];
        for (const word of ports) {
          const pm = /^(\d+)(?:-(\d+))?(?:\/(tcp|udp|sctp))?$/i.exec(word);
          if (!pm) throw new InvalidParameter(`EXPOSE: invalid port ${JSON.stringify(word)}`);
          const from = Number(pm[1]);
          const to = pm[2] ? Number(pm[2]) : from;
          if (from < 1 || to > 65535 || to < from) throw new InvalidParameter(`EXPOSE: invalid port range ${JSON.stringify(word)}`);
          for (let p = from; p <= to; p++) keys.push(`${p}/${(pm[3] ?? 'tcp').toLowerCase()}`);
        }
        return this.configStep(state, `EXPOSE ${keys.join(' ')}`, (c) => {
          c.ExposedPorts = { ...(c.ExposedPorts ?? {}) };
          for (const k of keys) c.ExposedPorts[k] = {};
        });
      }
      case 'CMD': {
        const cmd = this.commandOf(state, ins.args, []);
        state.cmdSet = true;
        return this.configStep(state, `CMD ${JSON.stringify(cmd)}`, (c) => {
          c.Cmd = cmd;
        });
      }
      case 'ENTRYPOINT': {
        const entrypoint = this.commandOf(state, ins.args, []);
        const resetCmd = !state.cmdSet;
        return this.configStep(state, `ENTRYPOINT ${JSON.stringify(entrypoint)}`, (c) => {
          c.Entrypoint = entrypoint;
          if (resetCmd) c.Cmd = null;
        });
      }
      case 'SHELL': {
        const shell = JSON.parse(ins.args) as string[];
        return this.configStep(state, `SHELL ${JSON.stringify(shell)}`, (c) => {
          c.Shell = shell;
        });
      }
      case 'USER': {
        const user = expand(ins.args);
        return this.configStep(state, `USER ${user}`, (c) => {
          c.User = user;
        });
      }
      case 'STOPSIGNAL': {
        const sig = expand(ins.args);
        if (!/^(SIG)?[A-Z0-9+-]+$/i.test(sig)) throw new InvalidParameter(`Invalid signal: ${sig}`);
        return this.configStep(state, `STOPSIGNAL ${sig}`, (c) => {
          c.StopSignal = sig;
        });
      }
      case 'VOLUME': {
        const list = jsonArray(ins.args) ?? expandWords(ins.args, lookup, this.escape);
        for (const v of list) if (v.trim() === '') throw new InvalidParameter('VOLUME specified can not be an empty string');
        return this.configStep(state, `VOLUME ${JSON.stringify(list)}`, (c) => {
          c.Volumes = { ...(c.Volumes ?? {}) };
          for (const v of list) c.Volumes[v] = {};
        });
      }
      case 'ONBUILD': {
        const trigger = ins.args.replace(/^(\S+)/, (k) => k.toUpperCase());
        return this.configStep(state, `ONBUILD ${trigger}`, (c) => {
          c.OnBuild = [...(c.OnBuild ?? []), trigger];
        });
      }
      case 'HEALTHCHECK': {
        const m = /^(\S+)\s*([\s\S]*)$/.exec(ins.args)!;
        if (m[1].toUpperCase() === 'NONE') {
          return this.configStep(state, 'HEALTHCHECK NONE', (c) => {
            c.Healthcheck = { Test: ['NONE'] };
          });
        }
        const exec = jsonArray(m[2]);
        const test = exec ? ['CMD', ...exec] : ['CMD-SHELL', m[2]];
        const hc: NonNullable<ImageRunConfig['Healthcheck']> = { Test: test };
        for (const [flag, key] of [['interval', 'Interval'], ['timeout', 'Timeout'], ['start-period', 'StartPeriod'], ['start-interval', 'StartInterval']] as const) {
          if (ins.flags[flag]) hc[key] = parseDuration(flag, ins.flags[flag][0]);
        }
        if (ins.flags.retries) {
          const r = Number(ins.flags.retries[0]);
          if (!Number.isInteger(r) || r < 0) throw new InvalidParameter(`invalid --retries ${JSON.stringify(ins.flags.retries[0])}`);
          hc.Retries = r;
        }
        return this.configStep(state, `HEALTHCHECK &{${JSON.stringify(test)}}`, (c) => {
          c.Healthcheck = hc;
        });
      }
      case 'WORKDIR':
        return this.workdir(state, expand(ins.args));
      case 'RUN':
        return this.run(state, ins);
      case 'COPY':
      case 'ADD':
        return this.copy(state, ins, lookup);
      default:
        throw new InvalidParameter(`${text}: not supported here`);
    }
  }

  private layersTree(state: StageState): LayersTree | undefined {
    return state.chainIds.length > 0 ? new LayersTree(this.builder.d.images.lowerDirs(state.chainIds)) : undefined;
  }

  private async workdir(state: StageState, dir: string): Promise<void> {
    const abs = path.posix.resolve(dir.startsWith('/') ? '/' : state.config.WorkingDir || '/', dir);
    const tree = this.layersTree(state);
    const missing: string[] = [];
    const parts = abs.split('/').filter(Boolean);
    for (let i = 1; i <= parts.length; i++) {
      const rel = parts.slice(0, i).join('/');
      const st = tree ? await tree.lstat(await resolveInTree(tree, rel).catch(() => rel)) : undefined;
      if (!st) missing.push(rel);
    }
    if (missing.length === 0) {
      return this.configStep(state, `WORKDIR ${abs}`, (c) => {
        c.WorkingDir = abs;
      });
    }
    // The folder is made in a layer of its own, as Docker's builder does.
    state.config = { ...state.config, WorkingDir: abs };
    const shell = state.config.Shell ?? DEFAULT_SHELL;
    const text = `WORKDIR ${abs}`;
    await this.commitStep(state, `${shell.join(' ')} #(nop) ${text}`, hashKey(missing), async () => {
      const now = new Date();
      return packCopy({ entries: missing.map((name) => ({ name, type: 'directory', mode: 0o755, uid: 0, gid: 0, mtime: now, size: 0 })), hash: '', kind: 'dir' }, undefined, this.signal);
    }, this.nop(state, text));
  }

  private runEnv(state: StageState): { env: string[]; shown: string[] } {
    let env = [...(state.config.Env ?? [])];
    const shown: string[] = [];
    for (const [name] of state.args) {
      const value = this.argValue(state, name);
      if (value === undefined) continue;
      if (envLookup(state.config.Env, name) === undefined) env = setEnv(env, name, value);
      shown.push(`${name}=${value}`);
    }
    for (const name of PROXY_ARGS) {
      const value = this.opts.buildArgs[name];
      if (value !== undefined && value !== null && envLookup(env, name) === undefined) env = setEnv(env, name, value);
    }
    return { env, shown: shown.sort() };
  }

  private async run(state: StageState, ins: Instruction): Promise<void> {
    const { containers, images, host } = this.builder.d;
    // As dockerd's classic builder: RUN's flags are BuildKit's, and the step that uses one fails.
    const buildkitFlag = Object.keys(ins.flags)[0];
    if (buildkitFlag !== undefined) {
      throw new NotImplemented(`the --${buildkitFlag} option requires BuildKit, which this engine does not have: build without RUN --${buildkitFlag}`);
    }
    if (!state.imageId) throw new InvalidParameter('RUN needs a base image with a shell: this stage starts from scratch and has no files yet');
    const cmd = this.commandOf(state, ins.args, ins.heredocs);
    const { env, shown } = this.runEnv(state);
    const createdBy = shown.length > 0 ? `|${shown.length} ${shown.join(' ')} ${cmd.join(' ')}` : cmd.join(' ');
    const key = hashKey([state.imageId, createdBy, '', state.config]);
    if (await this.fromCache(state, key)) return;
    const hostConfig: Record<string, unknown> = { ...this.opts.resources, AutoRemove: false };
    if (this.opts.networkMode && this.opts.networkMode !== 'default') hostConfig.NetworkMode = this.opts.networkMode;
    if (this.opts.extraHosts.length > 0) hostConfig.ExtraHosts = this.opts.extraHosts;
    const body = {
      Image: state.imageId,
      Cmd: cmd,
      Entrypoint: [''],
      Env: env,
      WorkingDir: state.config.WorkingDir ?? '',
      User: state.config.User ?? '',
      Labels: {},
      AttachStdout: true,
      AttachStderr: true,
      Tty: false,
      OpenStdin: false,
      HostConfig: hostConfig,
    };
    this.checkAborted();
    const { Id: containerId } = await containers.create(body, undefined);
    this.out(` ---> Running in ${shortId(containerId)}\n`);
    let succeeded = false;
    const attachAbort = new AbortController();
    let detach: (() => void) | undefined;
    const onAbort = () => {
      attachAbort.abort();
      detach?.();
      // Stopped here; removed below, once the step has let go of it.
      void containers.kill(containerId, 'SIGKILL').catch(() => undefined);
    };
    this.signal.addEventListener('abort', onAbort, { once: true });
    try {
      this.checkAborted();
      const attached = containers.attach(containerId, attachAbort.signal);
      attached.catch(() => undefined);
      try {
        await containers.start(containerId);
      } catch (err) {
        attachAbort.abort();
        throw err;
      }
      const { streams } = await attached;
      detach = () => streams.close();
      this.checkAborted();
      const decoders = { stdout: new StringDecoder('utf8'), stderr: new StringDecoder('utf8') };
      for await (const chunk of streams.output as AsyncIterable<{ stream: 'stdout' | 'stderr'; data: Buffer }>) {
        const textOut = decoders[chunk.stream].write(chunk.data);
        if (textOut) this.out(chunk.stream === 'stderr' ? stderrText(textOut) : textOut);
      }
      const restOut = decoders.stdout.end();
      if (restOut) this.out(restOut);
      const restErr = decoders.stderr.end();
      if (restErr) this.out(stderrText(restErr));
      const { StatusCode } = await containers.wait(containerId, 'not-running', this.signal);
      this.checkAborted();
      if (StatusCode !== 0) {
        throw new BuildStepError(`The command '${cmd.join(' ')}' returned a non-zero code: ${StatusCode}`, StatusCode);
      }
      const id = await images.createImage(
        {
          parent: state.imageId,
          layer: host.diffTar(containerId, images.lowerDirs(state.chainIds), this.signal),
          config: state.config,
          createdBy,
          container: containerId,
          containerConfig: { ...state.config, Cmd: cmd, Env: env },
        },
        this.signal,
      );
      await this.builder.cachePut(key, id);
      succeeded = true;
      if (this.opts.rm || this.opts.forcerm) {
        this.out(`Removing intermediate container ${shortId(containerId)}\n`);
        await containers.remove(containerId, { force: true, volumes: true }).catch(() => undefined);
      }
      this.adopt(state, id);
      this.out(` ---> ${shortId(id)}\n`);
    } finally {
      this.signal.removeEventListener('abort', onAbort);
      if (!succeeded && (this.opts.forcerm || this.signal.aborted)) {
        await containers.remove(containerId, { force: true, volumes: true }).catch((err) => log.debug('build step container removal', { id: containerId, error: errorMessage(err) }));
      }
    }
  }

  private async fetchUrl(url: string): Promise<{ file: string; name: string; mtime: Date }> {
    let response: Response;
    try {
      response = await fetch(url, { signal: this.signal, redirect: 'follow' });
    } catch (err) {
      throw new InvalidParameter(`ADD failed: cannot download ${url}: ${errorMessage((err as Error).cause ?? err)}`, { cause: err });
    }
    if (!response.ok || !response.body) throw new InvalidParameter(`ADD failed: cannot download ${url}: the server answered ${response.status} ${response.statusText}`);
    const file = path.join(this.workDir, `download-${createHash('sha256').update(url).digest('hex').slice(0, 16)}-${Date.now()}`);
    await pipeline(Readable.fromWeb(response.body as import('node:stream/web').ReadableStream<Uint8Array>), createWriteStream(file, { mode: 0o600 }), { signal: this.signal });
    const lastModified = response.headers.get('last-modified');
    const mtime = lastModified && !Number.isNaN(Date.parse(lastModified)) ? new Date(lastModified) : new Date(0);
    let name = path.posix.basename(new URL(url).pathname);
    if (!name || name === '/') name = '__unnamed__';
    return { file, name, mtime };
  }

  private async copy(state: StageState, ins: Instruction, lookup: Lookup): Promise<void> {
    const { images } = this.builder.d;
    const isAdd = ins.keyword === 'ADD';
    const words = jsonArray(ins.args) ?? expandWords(ins.args, lookup, this.escape);
    const dest = words[words.length - 1];
    const sourceWords = words.slice(0, -1);
    let tree: FolderTree | LayersTree = new FolderTree(this.contextDir);
    let fromLabel = '';
    if (ins.flags.from) {
      if (isAdd) throw new InvalidParameter('ADD does not take --from; use COPY --from');
      const from = expandWord(ins.flags.from[0], lookup, this.escape);
      const stage = this.stageResults.get(from.toLowerCase());
      let chainIds: string[];
      if (stage) chainIds = stage.chainIds;
      else {
        if (/^\d+$/.test(from)) throw new InvalidParameter(`invalid from flag value ${from}: no stage with that index before this one`);
        chainIds = images.find(from).image.chainIds;
      }
      tree = new LayersTree(images.lowerDirs(chainIds)) as LayersTree;
      fromLabel = `from ${from} `;
    }
    const image = this.layersTree(state);
    const sources: CopySource[] = [];
    for (const word of sourceWords) {
      const heredoc = /^<<-?["']?([A-Za-z_][A-Za-z0-9_]*)["']?$/.exec(word);
      const doc = heredoc ? ins.heredocs.find((h) => h.name === heredoc[1]) : undefined;
      if (doc) {
        const content = doc.quoted ? doc.content : expandWord(doc.content.replace(/"/g, '\\"').replace(/'/g, "\\'"), lookup, this.escape);
        sources.push({ tree, pattern: '', inline: { name: doc.name, content: Buffer.from(content) } });
      } else if (isAdd && /^https?:\/\//i.test(word)) {
        sources.push({ tree, pattern: '', fetched: await this.fetchUrl(word) });
      } else if (/^[a-z][a-z0-9+.-]*:\/\//i.test(word)) {
        throw new InvalidParameter(`${ins.keyword}: ${word}: only http(s) URLs can be added`);
      } else {
        sources.push({ tree, pattern: word, unpackArchives: isAdd && !ins.flags.from });
      }
    }
    const chown = ins.flags.chown ? await resolveChown(expandWord(ins.flags.chown[0], lookup, this.escape), image) : undefined;
    const chmod = ins.flags.chmod ? parseInt(ins.flags.chmod[0], 8) : undefined;
    const plan = await planCopy({ sources, dest, workdir: state.config.WorkingDir ?? '/', image, chown, chmod, instruction: isAdd ? 'ADD' : 'COPY' });
    const destAbs = dest.startsWith('/') ? dest : path.posix.join(state.config.WorkingDir || '/', dest);
    const shell = state.config.Shell ?? DEFAULT_SHELL;
    const text = `${ins.keyword} ${fromLabel}${plan.kind}:${plan.hash} in ${destAbs} `;
    await this.commitStep(state, `${shell.join(' ')} #(nop) ${text}`, plan.hash, async () => packCopy(plan, chown, this.signal), this.nop(state, text));
  }
}

function splitArg(args: string): [string, string | undefined] {
  const eq = args.indexOf('=');
  if (eq < 0) return [args.trim(), undefined];
  let value = args.slice(eq + 1).trim();
  if ((value.startsWith('"') && value.endsWith('"')) || (value.startsWith("'") && value.endsWith("'"))) value = value.slice(1, -1);
  return [args.slice(0, eq).trim(), value];
}

export type { ImageConfig };
