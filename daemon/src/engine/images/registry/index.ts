/**
 * The registry side of the image service: pull, push, the login check and distribution inspect, on top
 * of the registry client. The image service supplies the narrow hooks below (its store and layers).
 */
import { InvalidParameter, NotFound, Unauthorized, Unavailable } from '../../../errors.js';
import type { EventBus } from '../../events.js';
import { familiarName, familiarString, parseReference, validateTag, type Reference } from '../../reference.js';
import type { ImageConfig } from '../store.js';
import { domainOfServerAddress, RegistryConfig, type RegistryOptions } from './config.js';
import { RegistryClient } from './client.js';
import { basicHeader, fetchToken, type AuthConfig } from './auth.js';
import { discard, send } from './http.js';
import { fetchConfig, pullOne, type PullTarget } from './pull.js';
import { openForPush, pushHeader, pushTag, type PushImage } from './push.js';
import { BlobMetadata } from './metadata.js';
import type { StateStore } from '../../../state/state.js';
import { parseManifest, parsePlatform, sha256Digest, type Platform } from './manifest.js';
import type { Emit } from './progress.js';

import { searchImages, type SearchRequest, type SearchResult } from './search.js';
export { parseAuthHeader, type AuthConfig } from './auth.js';
export { RegistryConfig, type RegistryOptions } from './config.js';

/** What the registry side needs of the image service, beyond pulling. */
export interface RegistryImages extends PullTarget {
  /** Images tagged in a repository (full name), by tag. */
  tagsOf(name: string): Array<{ ref: Reference; id: string }>;
  imageForPush(id: string): Promise<PushImage>;
  /** Records `name@digest` for an image (RepoDigests). */
  addDigestRef(ref: Reference, id: string): Promise<void>;
}

export interface PullRequest {
  fromImage: string;
  tag?: string;
  platform?: string;
  auth?: AuthConfig;
  /**
   * A reference without tag or digest pulls every tag of the repository (the API's empty `tag`); otherwise
   * it means `latest`.
   */
  allTagsIfUntagged?: boolean;
}

const DIGEST = /^sha256:[a-f0-9]{64}$/;

/** The reference a pull asks for: fromImage with tag (which may also be a digest); no tag means all tags. */
export function pullReference(fromImage: string, tag: string | undefined): { ref: Reference; allTags: boolean } {
  let ref = parseReference(fromImage);
  if (tag) {
    if (DIGEST.test(tag)) ref = { ...ref, digest: tag, tag: undefined };
    else {
      validateTag(tag);
      if (ref.digest === undefined) ref = { ...ref, tag };
    }
  }
  return { ref, allTags: ref.tag === undefined && ref.digest === undefined };
}

export class Distribution {
  readonly client: RegistryClient;
  readonly config: RegistryConfig;
  private readonly metadata: BlobMetadata;

  constructor(
    state: StateStore,
    options: RegistryOptions,
    private readonly images: RegistryImages,
    private readonly events: EventBus,
  ) {
    this.config = new RegistryConfig(options);
    this.client = new RegistryClient(this.config);
    this.metadata = new BlobMetadata(state);
  }

  /** Reads what is remembered of registries' blobs (before the first push). */
  async init(): Promise<void> {
    await this.metadata.load();
  }

  /**
   * Pulls an image (or all tags of a repository) and writes the progress to `emit`. Errors before the
   * first message are thrown as they are; the api layer writes later ones in-band.
   */
  async pull(request: PullRequest, emit: Emit, signal: AbortSignal): Promise<void> {
    const parsed = pullReference(request.fromImage, request.tag);
    const allTags = parsed.allTags && request.allTagsIfUntagged === true;
    const ref = parsed.allTags && !allTags ? { ...parsed.ref, tag: 'latest' } : parsed.ref;
    const platform: Platform | undefined = request.platform ? parsePlatform(request.platform) : undefined;
    if (platform && platform.os !== 'linux') throw new InvalidParameter(`unsupported platform ${request.platform}: this engine runs linux images`);
    const opts = { platform, auth: request.auth };
    const pullFailed = (err: unknown): never => {
      if (err instanceof Unauthorized && !request.auth) {
        throw new NotFound(`pull access denied for ${familiarName(ref.name)}, repository does not exist or may require 'docker login': ${err.message}`, { cause: err });
      }
      throw err;
    };
    if (!allTags) {
      const { id, updated } = await pullOne(this.client, this.metadata, this.images, ref, opts, emit, signal).catch(pullFailed);
      emit({ status: `Status: ${updated ? 'Downloaded newer image' : 'Image is up to date'} for ${familiarString(ref)}` });
      this.events.publish('image', 'pull', familiarString(ref), { name: familiarString(ref) });
      void id;
      return;
    }
    const repo = await this.client.repository(ref.domain, ref.path, request.auth, ['pull'], signal).catch(pullFailed);
    const tags = await repo.listTags().catch(pullFailed);
    if (tags.length === 0) throw new NotFound(`${familiarName(ref.name)}: the repository has no tags`);
    let anyUpdated = false;
    for (const tag of tags) {
      const tagged = { ...ref, tag };
      const { updated } = await pullOne(this.client, this.metadata, this.images, tagged, opts, emit, signal);
      anyUpdated ||= updated;
      this.events.publish('image', 'pull', familiarString(tagged), { name: familiarString(tagged) });
    }
    emit({ status: `Status: ${anyUpdated ? 'Downloaded newer image' : 'Image is up to date'} for ${familiarName(ref.name)}` });
  }

  /** Pushes a tag (or every tag of the repository when none is given). */
  async push(name: string, tag: string | undefined, auth: AuthConfig | undefined, emit: Emit, signal: AbortSignal): Promise<void> {
    let ref = parseReference(name);
    if (ref.digest) throw new InvalidParameter(`cannot push a digest reference ${JSON.stringify(name)}: push a tag`);
    if (tag) {
      validateTag(tag);
      ref = { ...ref, tag };
    }
    const targets = ref.tag !== undefined ? this.images.tagsOf(ref.name).filter((t) => t.ref.tag === ref.tag) : this.images.tagsOf(ref.name);
    if (targets.length === 0) {
      throw new NotFound(`An image does not exist locally with the tag: ${familiarString(ref.tag !== undefined ? ref : { ...ref, tag: undefined })}`);
    }
    const images = await Promise.all(targets.map((t) => this.images.imageForPush(t.id)));
    const repo = await openForPush(this.client, this.metadata, ref, images, auth, signal);
    emit({ status: pushHeader(ref) });
    for (const [i, target] of targets.entries()) {
      const result = await pushTag(repo, this.metadata, this.images.layers, images[i], target.ref.tag!, emit, signal);
      await this.images.addDigestRef({ domain: ref.domain, path: ref.path, name: ref.name, digest: result.digest }, target.id);
      this.events.publish('image', 'push', familiarString(target.ref), { name: familiarString(target.ref) });
    }
  }

  /** POST /auth: checks credentials against a registry; the identity token when the token server gave one. */
  /** Searches the index a term names (GET /images/search). */
  search(request: SearchRequest): Promise<SearchResult[]> {
    return searchImages(this.config, request);
  }

  async login(auth: AuthConfig): Promise<{ Status: string; IdentityToken: string }> {
    const domain = domainOfServerAddress(auth.serveraddress);
    if (!auth.username && !auth.identitytoken) throw new InvalidParameter('a user name (or an identity token) is required to log in');
    const endpoints = this.config.endpoints(domain).filter((e) => !e.mirror);
    let lastError: unknown;
    for (const endpoint of endpoints) {
      let challenge;
      try {
        challenge = await this.client.ping(endpoint);
      } catch (err) {
        lastError = err;
        continue;
      }
      if (!challenge) return { Status: 'Login Succeeded', IdentityToken: '' };
      if (challenge.scheme === 'basic') {
        const res = await send({ method: 'GET', url: `${endpoint.url}/v2/`, headers: { Authorization: basicHeader(auth) ?? '' }, skipVerify: endpoint.skipVerify });
        discard(res);
        if (res.statusCode === 200) return { Status: 'Login Succeeded', IdentityToken: '' };
        throw new Unauthorized(`login attempt to ${endpoint.url}/v2/ failed with status: ${res.statusCode} ${res.statusMessage ?? ''}`.trim());
      }
      try {
        const answer = await fetchToken(challenge, [], auth, { offline: true, skipVerify: endpoint.skipVerify });
        return { Status: 'Login Succeeded', IdentityToken: answer.refreshToken ?? '' };
      } catch (err) {
        if (err instanceof Unauthorized) throw new Unauthorized(`login attempt to ${endpoint.url}/v2/ failed: ${err.message}`, { cause: err });
        throw err;
      }
    }
    throw new Unavailable(`cannot reach the registry ${domain}: ${(lastError as Error)?.message ?? 'no endpoint'}`, { cause: lastError });
  }

  /** GET /distribution/{name}/json: the descriptor the registry has for a reference, and its platforms. */
  async inspect(name: string, auth: AuthConfig | undefined, signal: AbortSignal): Promise<Record<string, unknown>> {
    let ref = parseReference(name);
    if (ref.tag === undefined && ref.digest === undefined) ref = { ...ref, tag: 'latest' };
    const repo = await this.client.repository(ref.domain, ref.path, auth, ['pull'], signal);
    const reference = ref.digest ?? ref.tag!;
    const top = await repo.getManifest(reference);
    const digest = sha256Digest(top.bytes);
    if (ref.digest && digest !== ref.digest) throw new InvalidParameter(`manifest ${repo.displayName}@${ref.digest}: digest mismatch: the content has ${digest}`);
    const manifest = parseManifest(top.bytes, top.mediaType);
    const descriptor = { mediaType: manifest.mediaType, digest, size: top.bytes.length };
    let platforms: Array<Record<string, unknown>>;
    if (manifest.kind === 'index') {
      platforms = manifest.manifests.filter((m) => m.platform && m.platform.os !== 'unknown').map((m) => ({ ...m.platform }));
    } else {
      const { config } = await fetchConfig(repo, manifest.config);
      platforms = [platformOfConfig(config)];
    }
    return { Descriptor: descriptor, Platforms: platforms };
  }
}

function platformOfConfig(config: ImageConfig): Record<string, unknown> {
  const out: Record<string, unknown> = { architecture: config.architecture ?? '', os: config.os ?? '' };
  if (config['os.version']) out['os.version'] = config['os.version'];
  if (Array.isArray(config['os.features'])) out['os.features'] = config['os.features'];
  if (config.variant) out.variant = config.variant;
  return out;
}
