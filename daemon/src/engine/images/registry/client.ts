/**
 * A client of the registry HTTP API v2 for one repository: finds the endpoint (mirrors, https, plain
 * http for insecure registries), authenticates as the registry asks (anonymous or credentialled bearer
 * tokens, basic auth), and offers the calls pull and push need. Failures are engine errors with the
 * registry's own words.
 */
import type { IncomingMessage } from 'node:http';
import type { Readable } from 'node:stream';
import { EngineError, InvalidParameter, NotFound, Unauthorized, Unavailable } from '../../../errors.js';
import { basicHeader, fetchToken, parseChallenges, type AuthConfig, type Challenge } from './auth.js';
import type { Endpoint, RegistryConfig } from './config.js';
import { discard, readSmall, send, TransportError } from './http.js';

export const MANIFEST_ACCEPT = [
  'application/vnd.docker.distribution.manifest.v2+json',
  'application/vnd.docker.distribution.manifest.list.v2+json',
  'application/vnd.oci.image.manifest.v1+json',
  'application/vnd.oci.image.index.v1+json',
];

/** The registry answered with an error status. */
export class RegistryError extends EngineError {
  constructor(
    message: string,
    readonly status: number,
    readonly codes: string[],
  ) {
    super(message);
  }
}

/** `{"errors":[{"code","message","detail"}]}` as text (`manifest unknown: manifest unknown`). */
export function describeRegistryErrors(body: Buffer): { text: string; codes: string[] } {
  try {
    const parsed = JSON.parse(body.toString('utf8')) as { errors?: Array<{ code?: string; message?: string; detail?: unknown }> };
    if (Array.isArray(parsed.errors) && parsed.errors.length > 0) {
      const codes = parsed.errors.map((e) => String(e.code ?? 'UNKNOWN'));
      const text = parsed.errors
        .map((e) => `${String(e.code ?? 'unknown').toLowerCase().replace(/_/g, ' ')}: ${e.message ?? ''}`.replace(/: $/, ''))
        .join('; ');
      return { text, codes };
    }
  } catch {
    // not JSON
  }
  const text = body.toString('utf8').trim().slice(0, 200);
  return { text, codes: [] };
}

export interface RequestOptions {
  headers?: Record<string, string>;
  body?: Buffer | string | Readable;
  /** Do not retry after a 401 (a streamed body cannot be sent twice). */
  noRetry?: boolean;
  followRedirects?: boolean;
}

interface CachedToken {
  token: string;
  expires: number;
}

export class Repository {
  private challenge: Challenge | undefined;
  private readonly tokens = new Map<string, CachedToken>();
  refreshToken: string | undefined;

  constructor(
    readonly domain: string,
    /** The path below the domain (`library/busybox`). */
    readonly path: string,
    readonly endpoint: Endpoint,
    private readonly auth: AuthConfig | undefined,
    private readonly actions: string[],
    private readonly signal: AbortSignal | undefined,
    firstChallenge: Challenge | undefined,
    /** Other repositories this session may read from (cross-repository mounts). */
    private readonly extraScopes: string[] = [],
  ) {
    this.challenge = firstChallenge;
  }

  /** `127.0.0.1:5000/busybox` as messages show it. */
  get displayName(): string {
    return `${this.domain}/${this.path}`;
  }

  get scopes(): string[] {
    return [`repository:${this.path}:${this.actions.join(',')}`, ...this.extraScopes];
  }

  private async authorization(scopes: string[], force = false): Promise<string | undefined> {
    const challenge = this.challenge;
    if (!challenge) return undefined;
    if (challenge.scheme === 'basic') {
      const header = this.auth ? basicHeader(this.auth) : undefined;
      if (!header) throw new Unauthorized(`${this.domain}: the registry asks for a user name and password: log in first (docker login ${this.domain})`);
      return header;
    }
    if (challenge.scheme !== 'bearer') throw new Unauthorized(`${this.domain}: unsupported authentication scheme ${challenge.scheme}`);
    const key = scopes.join(' ');
    const cached = this.tokens.get(key);
    if (!force && cached && cached.expires > Date.now() + 5000) return `Bearer ${cached.token}`;
    const answer = await fetchToken(challenge, scopes, this.auth, { skipVerify: this.endpoint.skipVerify, signal: this.signal });
    if (answer.refreshToken) this.refreshToken = answer.refreshToken;
    this.tokens.set(key, { token: answer.token, expires: answer.expires });
    return `Bearer ${answer.token}`;
  }

  /** A request below `/v2/` of the endpoint, authenticated; one retry with fresh credentials after a 401. */
  async request(method: string, pathOrUrl: string, opts: RequestOptions = {}): Promise<IncomingMessage> {
    const url = /^https?:\/\//.test(pathOrUrl) ? pathOrUrl : `${this.endpoint.url}/v2/${pathOrUrl}`;
    let scopes = this.scopes;
    for (let attempt = 0; ; attempt++) {
      const auth = await this.authorization(scopes, attempt > 0);
      const headers = { ...opts.headers, ...(auth ? { Authorization: auth } : {}) };
      const res = await send({ method, url, headers, body: opts.body, signal: this.signal, skipVerify: this.endpoint.skipVerify, followRedirects: opts.followRedirects });
      if (res.statusCode !== 401 || attempt > 0 || opts.noRetry) return res;
      const challenges = parseChallenges(res.headers['www-authenticate']);
      const next = challenges.find((c) => c.scheme === 'bearer') ?? challenges.find((c) => c.scheme === 'basic');
      // Credentials were sent and refused by a basic-auth registry: retrying would not change the answer.
      if (!next || (next.scheme === 'basic' && auth)) return res;
      discard(res);
      this.challenge = next;
      if (next.params.scope) scopes = [...new Set([...scopes, ...next.params.scope.split(' ')])];
    }
  }

  /** Turns an error answer into an engine error; `what` names the object (`manifest for x:y`). */
  async fail(res: IncomingMessage, what: string): Promise<never> {
    const body = res.method === 'HEAD' ? Buffer.alloc(0) : await readSmall(res, 64 * 1024).catch(() => Buffer.alloc(0));
    const { text, codes } = describeRegistryErrors(body);
    const status = res.statusCode ?? 0;
    const detail = text || `${status} ${res.statusMessage ?? ''}`.trim();
    if (status === 401 || status === 403) {
      if (this.auth) throw new Unauthorized(`${what}: ${detail || 'unauthorized'}`);
      throw new Unauthorized(`${what}: ${detail || 'unauthorized'}: authentication required (docker login ${this.domain})`);
    }
    if (status === 404) throw new NotFound(`${what} not found: ${detail}`);
    if (status === 400 || status === 405 || status === 413 || status === 415) throw new InvalidParameter(`${what}: ${detail}`);
    throw new RegistryError(`${what}: the registry answered ${status}: ${detail}`, status, codes);
  }

  async getManifest(reference: string): Promise<{ bytes: Buffer; mediaType: string; headerDigest?: string }> {
    const res = await this.request('GET', `${this.path}/manifests/${reference}`, { headers: { Accept: MANIFEST_ACCEPT.join(', ') } });
    if (res.statusCode !== 200) return this.fail(res, `manifest for ${this.displayName}${reference.startsWith('sha256:') ? '@' : ':'}${reference}`);
    const bytes = await readSmall(res, 4 * 1024 * 1024).catch((err: Error) => {
      throw new InvalidParameter(`manifest for ${this.displayName}:${reference}: ${err.message}`);
    });
    const mediaType = String(res.headers['content-type'] ?? '').split(';')[0].trim();
    const headerDigest = res.headers['docker-content-digest'] as string | undefined;
    return { bytes, mediaType, headerDigest };
  }

  /** The blob's body as a stream (status checked). */
  async openBlob(digest: string): Promise<IncomingMessage> {
    const res = await this.request('GET', `${this.path}/blobs/${digest}`);
    if (res.statusCode !== 200) return this.fail(res, `blob ${digest} of ${this.displayName}`);
    return res;
  }

  async blobExists(digest: string): Promise<boolean> {
    const res = await this.request('HEAD', `${this.path}/blobs/${digest}`);
    discard(res);
    if (res.statusCode === 200) return true;
    if (res.statusCode === 404) return false;
    return this.fail(res, `blob ${digest} of ${this.displayName}`);
  }

  /** Asks the registry to link a blob from another repository; false when it started an upload instead. */
  async mountBlob(digest: string, from: string): Promise<boolean> {
    const res = await this.request('POST', `${this.path}/blobs/uploads/?mount=${encodeURIComponent(digest)}&from=${encodeURIComponent(from)}`, {
      headers: { 'Content-Length': '0' },
    });
    discard(res);
    if (res.statusCode === 201) return true;
    if (res.statusCode === 202 && res.headers.location) {
      // The registry opened an upload session instead: close it.
      const cancel = await this.request('DELETE', this.resolveLocation(res.headers.location)).catch(() => undefined);
      if (cancel) discard(cancel);
      return false;
    }
    if (res.statusCode === 202) return false;
    return this.fail(res, `mounting blob ${digest} from ${from} into ${this.displayName}`);
  }

  private resolveLocation(location: string): string {
    return new URL(location, `${this.endpoint.url}/v2/`).toString();
  }

  /**
   * Uploads a blob in chunks: POST opens a session, one streamed PATCH sends the bytes, and the PUT with
   * the digest (known only once the stream has ended) closes it.
   */
  async uploadBlob(body: Readable, digestOf: () => string): Promise<void> {
    const start = await this.request('POST', `${this.path}/blobs/uploads/`, { headers: { 'Content-Length': '0' } });
    discard(start);
    if (start.statusCode !== 202 || !start.headers.location) return this.fail(start, `starting an upload to ${this.displayName}`);
    const patch = await this.request('PATCH', this.resolveLocation(start.headers.location), {
      headers: { 'Content-Type': 'application/octet-stream' },
      body,
      noRetry: true,
    });
    if (patch.statusCode !== 202 || !patch.headers.location) return this.fail(patch, `uploading to ${this.displayName}`);
    discard(patch);
    const done = new URL(this.resolveLocation(patch.headers.location));
    done.searchParams.set('digest', digestOf());
    const put = await this.request('PUT', done.toString(), { headers: { 'Content-Length': '0' } });
    discard(put);
    if (put.statusCode !== 201) return this.fail(put, `completing the upload to ${this.displayName}`);
  }

  /** A small blob in one request (POST then PUT with the body). */
  async uploadSmallBlob(bytes: Buffer, digest: string): Promise<void> {
    const start = await this.request('POST', `${this.path}/blobs/uploads/`, { headers: { 'Content-Length': '0' } });
    discard(start);
    if (start.statusCode !== 202 || !start.headers.location) return this.fail(start, `starting an upload to ${this.displayName}`);
    const done = new URL(this.resolveLocation(start.headers.location));
    done.searchParams.set('digest', digest);
    const put = await this.request('PUT', done.toString(), { headers: { 'Content-Type': 'application/octet-stream' }, body: bytes });
    discard(put);
    if (put.statusCode !== 201) return this.fail(put, `uploading a blob to ${this.displayName}`);
  }

  async putManifest(reference: string, bytes: Buffer, mediaType: string): Promise<void> {
    const res = await this.request('PUT', `${this.path}/manifests/${reference}`, { headers: { 'Content-Type': mediaType }, body: bytes });
    if (res.statusCode !== 201) return this.fail(res, `manifest ${this.displayName}:${reference}`);
    discard(res);
  }

  async listTags(): Promise<string[]> {
    const tags: string[] = [];
    let next: string | undefined = `${this.path}/tags/list`;
    while (next) {
      const res = await this.request('GET', next);
      if (res.statusCode !== 200) return this.fail(res, `tags of ${this.displayName}`);
      const parsed = JSON.parse((await readSmall(res)).toString('utf8')) as { tags?: string[] | null };
      tags.push(...(parsed.tags ?? []));
      const link = /<([^>]+)>;\s*rel="?next"?/.exec(String(res.headers.link ?? ''));
      next = link ? this.resolveLocation(link[1]) : undefined;
    }
    return tags;
  }
}

export class RegistryClient {
  /** Endpoints that answered, by domain (so that an insecure registry is not probed on https each time). */
  private readonly working = new Map<string, Endpoint>();

  constructor(readonly config: RegistryConfig) {}

  /**
   * Opens a session for `domain/path` with the actions needed (pull, push): pings `/v2/` on each endpoint
   * in turn and keeps the first that answers like a registry.
   */
  async repository(
    domain: string,
    path: string,
    auth: AuthConfig | undefined,
    actions: string[],
    signal?: AbortSignal,
    extraScopes: string[] = [],
  ): Promise<Repository> {
    const known = this.working.get(domain);
    const endpoints = known ? [known, ...this.config.endpoints(domain).filter((e) => e.url !== known.url)] : this.config.endpoints(domain);
    let lastError: unknown;
    for (const endpoint of endpoints) {
      if (endpoint.mirror && actions.includes('push')) continue;
      try {
        const challenge = await this.ping(endpoint, signal);
        this.working.set(domain, endpoint);
        return new Repository(domain, path, endpoint, auth, actions, signal, challenge, extraScopes);
      } catch (err) {
        if ((err as Error).name === 'AbortError') throw err;
        lastError = err;
      }
    }
    const reason = lastError instanceof Error ? lastError.message : String(lastError);
    throw new Unavailable(`cannot reach the registry ${domain}: ${reason}`, { cause: lastError });
  }

  /** GET /v2/: 200 (open) or 401 with the challenge to answer. Anything else is not a registry. */
  async ping(endpoint: Endpoint, signal?: AbortSignal): Promise<Challenge | undefined> {
    const res = await send({ method: 'GET', url: `${endpoint.url}/v2/`, signal, skipVerify: endpoint.skipVerify });
    discard(res);
    if (res.statusCode === 200) return undefined;
    if (res.statusCode === 401) {
      const challenges = parseChallenges(res.headers['www-authenticate']);
      return challenges.find((c) => c.scheme === 'bearer') ?? challenges.find((c) => c.scheme === 'basic') ?? challenges[0];
    }
    throw new TransportError(`GET ${endpoint.url}/v2/ answered ${res.statusCode}: not a registry API v2 endpoint`, endpoint.url);
  }
}
