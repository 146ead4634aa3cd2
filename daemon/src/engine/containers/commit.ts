/**
 * `docker commit`: a new image from a container's writable layer (its overlay upper folder, as a layer tar
 * with whiteouts) on top of the container's image, with the container's config merged under the config the
 * caller gives and its `changes` lines applied, as Docker does.
 */
import type { Readable } from 'node:stream';
import { errorMessage, InvalidParameter } from '../../errors.js';
import { log } from '../../util/log.js';
import { applyChanges } from '../images/changes.js';
import type { CreateImageOptions, ImageRunConfig } from '../images/types.js';
import { parseReference, validateTag } from '../reference.js';
import type { ContainerRecord } from './model.js';

/** What commit needs of the Host: the writable layer as a tar, and the freezer. */
export interface CommitHost {
  diffTar(id: string, lowerDirs: string[], signal?: AbortSignal): Readable;
}

/** What commit needs of the image service. */
export interface CommitImages {
  lowerDirs(chainIds: string[]): string[];
  createImage(
    opts: CreateImageOptions,
    signal?: AbortSignal,
  ): Promise<string>;
}

/** What commit needs of the container engine. */
export interface CommitContainers {
  get(ref: string): ContainerRecord;
  serialised<T>(id: string, fn: () => Promise<T>): Promise<T>;
  containerEvent(record: ContainerRecord, action: string, extra?: Record<string, string>): void;
  pause(ref: string): Promise<void>;
  unpause(ref: string): Promise<void>;
}

export interface CommitOptions {
  repo?: string;
  tag?: string;
  comment?: string;
  author?: string;
  /** Freeze the container while its layer is read (default true). */
  pause?: boolean;
  changes?: string[];
  /** The request body: a container config whose set fields override the container's. */
  config?: Record<string, unknown>;
  signal?: AbortSignal;
}

const IMAGE_CONFIG_KEYS = [
  'Hostname', 'Domainname', 'User', 'AttachStdin', 'AttachStdout', 'AttachStderr', 'ExposedPorts', 'Tty', 'OpenStdin',
  'StdinOnce', 'Env', 'Cmd', 'Healthcheck', 'ArgsEscaped', 'Image', 'Volumes', 'WorkingDir', 'Entrypoint', 'OnBuild',
  'Labels', 'StopSignal', 'StopTimeout', 'Shell',
] as const;

/** The container's config as an image keeps it (container_config, and the base of the new config). */
export function imageConfigOf(config: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const key of IMAGE_CONFIG_KEYS) if (config[key] !== undefined) out[key] = config[key];
  return out;
}

function empty(v: unknown): boolean {
  return v === undefined || v === null || v === '' || (Array.isArray(v) && v.length === 0) || (typeof v === 'object' && v !== null && Object.keys(v).length === 0);
}

/**
 * Docker's merge of a commit: what `user` leaves unset comes from the container's config; Env, Labels,
 * ExposedPorts and Volumes are unions (the user's entries win); Cmd and Entrypoint come as a pair.
 */
export function mergeCommitConfig(user: Record<string, any>, container: Record<string, any>): ImageRunConfig {
  const out: Record<string, any> = { ...user };
  if (empty(out.User)) out.User = container.User;
  const env: string[] = [...(user.Env ?? [])];
  const keys = new Set(env.map((e) => e.split('=')[0]));
  for (const e of (container.Env ?? []) as string[]) if (!keys.has(e.split('=')[0])) env.push(e);
  if (env.length > 0) out.Env = env;
  for (const key of ['Labels', 'ExposedPorts', 'Volumes'] as const) {
    const merged = { ...(container[key] ?? {}), ...(user[key] ?? {}) };
    if (Object.keys(merged).length > 0) out[key] = merged;
    else delete out[key];
  }
  if (empty(out.Cmd)) {
    out.Cmd = container.Cmd;
    if (empty(out.Entrypoint)) out.Entrypoint = container.Entrypoint;
  }
  for (const key of ['WorkingDir', 'StopSignal', 'Healthcheck', 'Shell', 'OnBuild'] as const) {
    if (empty(out[key]) && !empty(container[key])) out[key] = container[key];
  }
  const image: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(out)) if (v !== undefined && v !== null) image[k] = v;
  return image as ImageRunConfig;
}

export class CommitService {
  constructor(
    private readonly deps: {
      containers: CommitContainers;
      images: CommitImages;
      host: CommitHost;
    },
  ) {}

  async commit(ref: string, opts: CommitOptions): Promise<string> {
    const { containers, images, host } = this.deps;
    const record = containers.get(ref);
    let tags: string[] = [];
    if (opts.repo) {
      const named = parseReference(opts.repo);
      if (named.digest) throw new InvalidParameter('cannot commit to a digest reference');
      if (opts.tag) {
        if (named.tag !== undefined) throw new InvalidParameter(`cannot give a tag both in repo (${opts.repo}) and in tag (${opts.tag})`);
        validateTag(opts.tag);
      }
      tags = [opts.tag ? `${opts.repo}:${opts.tag}` : opts.repo];
    } else if (opts.tag) {
      throw new InvalidParameter('a tag needs a repository: give repo too');
    }
    if (opts.config !== undefined && (typeof opts.config !== 'object' || opts.config === null || Array.isArray(opts.config))) {
      throw new InvalidParameter('the request body must be a container config object');
    }
    const user = applyChanges(imageConfigOf(opts.config ?? {}) as ImageRunConfig, opts.changes ?? []);
    const containerConfig = imageConfigOf(record.Config as unknown as Record<string, unknown>);
    const config = mergeCommitConfig(user as Record<string, unknown>, containerConfig);
    delete (config as Record<string, unknown>).Image;
    for (const key of ['Hostname', 'Domainname', 'AttachStdin', 'AttachStdout', 'AttachStderr', 'Tty', 'OpenStdin', 'StdinOnce', 'StopTimeout']) {
      delete (config as Record<string, unknown>)[key];
    }

    // A container that stops between the check and the pause (or that the runtime cannot freeze) is
    // committed as it is, as Docker does: the pause is a best effort, never the commit's failure.
    let shouldPause = (opts.pause ?? true) && record.State.Running && !record.State.Paused;
    if (shouldPause) {
      shouldPause = await containers.pause(record.Id).then(
        () => true,
        (err: unknown) => {
          log.debug('commit goes on without pausing the container', { id: record.Id, error: errorMessage(err) });
          return false;
        },
      );
    }
    let id: string;
    try {
      const layer = host.diffTar(record.Id, images.lowerDirs(record.ImageChainIds), opts.signal);
      id = await images.createImage(
        {
          parent: record.Image,
          layer,
          config,
          createdBy: (record.Config.Cmd ?? []).join(' '),
          comment: opts.comment || undefined,
          author: opts.author || undefined,
          tags,
          container: record.Id,
          containerConfig,
        },
        opts.signal,
      );
    } finally {
      if (shouldPause) await containers.unpause(record.Id).catch(() => undefined);
    }
    containers.containerEvent(record, 'commit', { comment: opts.comment ?? '', imageID: id, imageRef: tags[0] ?? '' });
    return id;
  }
}
