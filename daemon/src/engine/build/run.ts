/**
 * One build (BuildRun): its options, its output, its stages' results and the steps every instruction shares
 * (the cache, config-only steps, committed layers). The instructions themselves are in instructions.ts,
 * RUN in command.ts, COPY and ADD in copy.ts.
 */
import path from 'node:path';
import { Readable } from 'node:stream';
import { shortId } from '../../util/ids.js';
import { EngineError, InvalidParameter, NotFound } from '../../errors.js';
import type { ImageRecord } from '../images/store.js';
import type { ImageRunConfig } from '../images/types.js';
import { familiarString, parseNormalizedNamed } from '../reference.js';
import { packCopy } from './copy.js';
import { parseInstructionLine, type Instruction } from './parser.js';
import { ImageTree, resolveInTree } from './sources.js';
import type { BuildWorkspace } from '../../state/scratch.js';
import { expandWord, type Lookup } from './words.js';
import { credentialsFor, type BuildOptions, type Emit, type Stage, type StageState } from './types.js';
import { ARCH, cloneConfig, DEFAULT_SHELL, envLookup, hashKey, jsonArray, PROXY_ARGS, setEnv, splitArg } from './helpers.js';
import type { Builder } from './builder.js';
import { runStep } from './instructions.js';

export class BuildRun {
  readonly stageResults = new Map<string, { imageId?: string; chainIds: string[] }>();
  readonly usedArgs = new Set<string>();
  totalSteps = 0;
  step = 0;
  allowedCache: Set<string> | undefined;
  globalArgs = new Map<string, string | undefined>();

  constructor(
    readonly builder: Builder,
    readonly opts: BuildOptions,
    readonly emit: Emit,
    readonly signal: AbortSignal,
    /** The build's scratch: its context and ADD's downloads. */
    readonly workspace: BuildWorkspace,
    readonly escape: string,
  ) {}

  out(text: string): void {
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

  lookupGlobal: Lookup = (name) => {
    if (this.opts.buildArgs[name] !== undefined && this.opts.buildArgs[name] !== null && this.globalArgs.has(name)) return this.opts.buildArgs[name]!;
    const v = this.globalArgs.get(name);
    if (v !== undefined) return v;
    if (name === 'TARGETPLATFORM' || name === 'BUILDPLATFORM') return `linux/${ARCH}`;
    if (name === 'TARGETOS' || name === 'BUILDOS') return 'linux';
    if (name === 'TARGETARCH' || name === 'BUILDARCH') return ARCH;
    return undefined;
  };

  argValue(state: StageState, name: string): string | undefined {
    if (!state.args.has(name)) return undefined;
    const given = this.opts.buildArgs[name];
    if (given !== undefined && given !== null) return given;
    const declared = state.args.get(name);
    if (declared !== undefined) return declared;
    return this.globalArgs.get(name);
  }

  lookupFor(state: StageState): Lookup {
    return (name) => {
      const env = envLookup(state.config.Env, name);
      if (env !== undefined) return env;
      const arg = this.argValue(state, name);
      if (arg !== undefined) return arg;
      if (PROXY_ARGS.has(name)) return this.opts.buildArgs[name] ?? undefined;
      return undefined;
    };
  }

  stepLine(ins: Instruction): void {
    this.step++;
    this.out(`Step ${this.step}/${this.totalSteps} : ${ins.original}\n`);
  }

  checkAborted(): void {
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

  async resolveBase(state: StageState, from: Instruction): Promise<void> {
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

  async runStage(stage: Stage): Promise<StageState> {
    const state: StageState = { chainIds: [], config: {}, args: new Map(), cmdSet: false };
    this.checkAborted();
    this.stepLine(stage.from);
    await this.resolveBase(state, stage.from);
    const triggers = state.config.OnBuild ?? [];
    if (triggers.length > 0) {
      this.out(`# Executing ${triggers.length} build trigger${triggers.length > 1 ? 's' : ''}\n`);
      state.config.OnBuild = [];
      for (const trigger of triggers) await runStep(this, state, parseInstructionLine(trigger, stage.from.line), true);
    }
    state.config.OnBuild = state.config.OnBuild && state.config.OnBuild.length > 0 ? state.config.OnBuild : undefined;
    if (triggers.length > 0) delete state.config.OnBuild;
    for (const ins of stage.steps) {
      this.checkAborted();
      this.stepLine(ins);
      await runStep(this, state, ins, false);
    }
    return state;
  }

  /** Makes (or finds in the cache) the image of a step; `layer` gives the step's layer tar when it has one. */
  async commitStep(
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
  async fromCache(state: StageState, key: string): Promise<boolean> {
    if (this.opts.nocache) return false;
    const hit = await this.builder.cacheGet(key, this.allowedCache);
    if (!hit) return false;
    this.out(' ---> Using cache\n');
    this.adopt(state, hit);
    this.out(` ---> ${shortId(hit)}\n`);
    return true;
  }

  adopt(state: StageState, id: string): void {
    const image = this.builder.d.images.find(id).image;
    state.imageId = id;
    state.chainIds = [...image.chainIds];
    state.config = cloneConfig(image.config.config);
  }

  nop(state: StageState, text: string): string[] {
    return [...(state.config.Shell ?? DEFAULT_SHELL), `#(nop) ${text}`];
  }

  async configStep(state: StageState, text: string, change: (c: ImageRunConfig) => void): Promise<void> {
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

  commandOf(state: StageState, args: string, heredocs: Instruction['heredocs']): string[] {
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

  /** The stage's image as a tree (read on the Host); undefined for scratch. */
  layersTree(state: StageState): ImageTree | undefined {
    return state.chainIds.length > 0 ? new ImageTree(this.builder.d.host.layers, state.chainIds) : undefined;
  }

  async workdir(state: StageState, dir: string): Promise<void> {
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
      return packCopy({ entries: missing.map((name) => ({ name, type: 'directory', mode: 0o755, uid: 0, gid: 0, mtime: now, size: 0 })), hash: '', kind: 'dir' }, undefined, this.builder.d.host, this.signal);
    }, this.nop(state, text));
  }

  runEnv(state: StageState): { env: string[]; shown: string[] } {
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
}
