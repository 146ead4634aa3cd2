/** What the builder needs of the engine, the options of a build, and the state of its stages. */
import type { Readable } from 'node:stream';
import { EngineError } from '../../errors.js';
import type { AuthConfig } from '../images/registry/auth.js';
import type { ImageRecord } from '../images/store.js';
import type { CreateImageOptions, ImageRunConfig } from '../images/types.js';
import type { BuildTools } from './context.js';
import type { LayerTrees } from './sources.js';
import type { Instruction } from './parser.js';

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

export interface BuildHost extends BuildTools {
  /** The container's writable layer as a layer tar. */
  diffTar(id: string, lowerDirs: string[], signal?: AbortSignal): Readable;
  /** Images' layers read as trees (COPY --from, --chown names, what exists at a destination). */
  layers: LayerTrees;
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

export interface Stage {
  name?: string;
  index: number;
  from: Instruction;
  steps: Instruction[];
}

export interface StageState {
  imageId?: string;
  chainIds: string[];
  config: ImageRunConfig;
  /** ARGs declared in this stage with their values (undefined: declared without value). */
  args: Map<string, string | undefined>;
  cmdSet: boolean;
}
