/**
 * POST /build (the classic builder), POST /build/prune and POST /commit. A build answers a stream of JSON
 * lines (`{"stream"}`, `{"aux"}`, `{"error","errorDetail"}`); an error before the first line (a bad
 * context, a Dockerfile that does not parse) is an ordinary error response, as dockerd answers it.
 */
import type { Readable, Writable } from 'node:stream';
import type { BuildOptions, Emit, RegistryCredentials } from '../engine/build/builder.js';
import { errorMessage, InvalidParameter, NotImplemented } from '../errors.js';
import type { CommitOptions } from '../engine/containers/commit.js';
import { parseUntil } from '../engine/images/service.js';
import { CONTAINER_CONFIG } from './bodies.js';
import { supports } from './compat.js';
import type { ApiRequest, ApiResponse } from './http.js';
import { boolParam, intParam, parseFilters, requiredParam, stringParam } from './params.js';
import type { Router } from './router.js';

export interface BuildBackend {
  build(input: Readable, opts: BuildOptions, emit: Emit, signal: AbortSignal): Promise<string>;
  prune(opts: { untilNano?: bigint }): Promise<{ CachesDeleted: string[]; SpaceReclaimed: number }>;
}

export interface CommitBackend {
  commit(ref: string, opts: CommitOptions): Promise<string>;
}

const PRUNE_FILTERS = ['until', 'unused-for', 'id', 'parent', 'type', 'description', 'inuse', 'shared', 'private'] as const;

function jsonParam<T>(req: ApiRequest, name: string, check: (v: unknown) => v is T, what: string): T | undefined {
  const raw = stringParam(req, name);
  if (raw === undefined || raw.trim() === '') return undefined;
  let value: unknown;
  try {
    value = JSON.parse(raw);
  } catch (err) {
    throw new InvalidParameter(`query parameter ${name} must be ${what}: ${(err as Error).message}`, { cause: err });
  }
  if (value === null) return undefined;
  if (!check(value)) throw new InvalidParameter(`query parameter ${name} must be ${what}`);
  return value;
}

const isStringMap = (v: unknown): v is Record<string, string | null> =>
  typeof v === 'object' && v !== null && !Array.isArray(v) && Object.values(v).every((x) => typeof x === 'string' || x === null);
const isStringList = (v: unknown): v is string[] => Array.isArray(v) && v.every((x) => typeof x === 'string');

/** X-Registry-Config: base64 (URL-safe or not) JSON of registry -> credentials. */
export function registryConfig(header: string | undefined): Record<string, RegistryCredentials> {
  if (!header || header.trim() === '') return {};
  let value: unknown;
  try {
    value = JSON.parse(Buffer.from(header.replace(/-/g, '+').replace(/_/g, '/'), 'base64').toString('utf8'));
  } catch (err) {
    throw new InvalidParameter(`invalid X-Registry-Config header: not base64-encoded JSON (${(err as Error).message})`, { cause: err });
  }
  if (value === null) return {};
  if (typeof value !== 'object' || Array.isArray(value)) throw new InvalidParameter('invalid X-Registry-Config header: expected a JSON object of registry credentials');
  return value as Record<string, RegistryCredentials>;
}

export function buildOptions(req: ApiRequest): BuildOptions {
  if (stringParam(req, 'version') === '2') {
    throw new NotImplemented('BuildKit (builder version 2) is not supported by this engine: use the classic builder (DOCKER_BUILDKIT=0)');
  }
  if (boolParam(req, 'squash')) throw new NotImplemented('squash is not supported by this engine');
  const remote = stringParam(req, 'remote');
  if (remote) throw new InvalidParameter(`remote build contexts (remote=${remote}) are not supported by this engine: send the context as a tar in the request body`);
  const dockerfile = stringParam(req, 'dockerfile') || 'Dockerfile';
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(dockerfile)) {
    throw new InvalidParameter(`the dockerfile parameter must be a path inside the build context, not a URL (${dockerfile})`);
  }
  const tags = req.query.getAll('t').filter((t) => t !== '');
  const labels = jsonParam(req, 'labels', isStringMap, 'a JSON object of strings') ?? {};
  const buildArgs = jsonParam(req, 'buildargs', isStringMap, 'a JSON object of strings') ?? {};
  const cacheFrom = jsonParam(req, 'cachefrom', isStringList, 'a JSON array of image names') ?? [];
  const resources: Record<string, number | string> = {};
  const memory = intParam(req, 'memory', 0, { min: 0 });
  if (memory) resources.Memory = memory;
  const memswap = intParam(req, 'memswap', 0, { min: -1 });
  if (memswap) resources.MemorySwap = memswap;
  const cpushares = intParam(req, 'cpushares', 0, { min: 0 });
  if (cpushares) resources.CpuShares = cpushares;
  const cpuset = stringParam(req, 'cpusetcpus');
  if (cpuset) resources.CpusetCpus = cpuset;
  const cpuperiod = intParam(req, 'cpuperiod', 0, { min: 0 });
  if (cpuperiod) resources.CpuPeriod = cpuperiod;
  const cpuquota = intParam(req, 'cpuquota', 0, { min: 0 });
  if (cpuquota) resources.CpuQuota = cpuquota;
  const shm = stringParam(req, 'shmsize');
  if (shm !== undefined && shm !== '') {
    const n = intParam(req, 'shmsize', 0);
    if (n < 0) throw new InvalidParameter('shmsize must be greater than 0');
    if (n > 0) resources.ShmSize = n;
  }
  const extraHosts = req.query.getAll('extrahosts').flatMap((h) => h.split(',')).map((h) => h.trim()).filter(Boolean);
  for (const h of extraHosts) if (!/^[^:\s]+:[^\s]+$/.test(h)) throw new InvalidParameter(`invalid extra host ${JSON.stringify(h)}: expected host:ip`);
  return {
    registryAuth: registryConfig(req.header('x-registry-config')),
    dockerfile,
    tags,
    quiet: boolParam(req, 'q'),
    rm: boolParam(req, 'rm', true),
    forcerm: boolParam(req, 'forcerm'),
    nocache: boolParam(req, 'nocache'),
    pull: boolParam(req, 'pull'),
    labels: labels as Record<string, string>,
    target: stringParam(req, 'target') || undefined,
    buildArgs,
    cacheFrom,
    platform: stringParam(req, 'platform') || undefined,
    resources,
    networkMode: stringParam(req, 'networkmode') || undefined,
    extraHosts,
  };
}

/** The build's output: started by the first message; quiet builds keep messages until the end or an error. */
class BuildStream {
  private out: Writable | undefined;
  private held: string[] = [];
  private heldBytes = 0;

  constructor(
    private readonly res: ApiResponse,
    private readonly quiet: boolean,
  ) {}

  get started(): boolean {
    return this.out !== undefined;
  }

  /** A message that goes out even in a quiet build. */
  final(message: Record<string, unknown>): void {
    this.write(JSON.stringify(message) + '\n');
  }

  private write(line: string): void {
    this.out ??= this.res.stream(200, 'application/json');
    this.out.write(line);
  }

  emit(message: Record<string, unknown>): void {
    const line = JSON.stringify(message) + '\n';
    if (this.quiet && 'stream' in message) {
      // Kept for an error report; a huge output keeps its last part.
      this.held.push(line);
      this.heldBytes += line.length;
      while (this.heldBytes > 1 << 20 && this.held.length > 1) this.heldBytes -= this.held.shift()!.length;
      return;
    }
    this.write(line);
  }

  fail(err: unknown): void {
    for (const line of this.held) this.write(line);
    const message = errorMessage(err);
    const code = (err as { code?: unknown }).code;
    const detail: Record<string, unknown> = typeof code === 'number' ? { code, message } : { message };
    this.write(JSON.stringify({ errorDetail: detail, error: message }) + '\n');
    this.end();
  }

  end(): void {
    this.out ??= this.res.stream(200, 'application/json');
    this.out.end();
  }
}

export function registerBuildRoutes(router: Router, backend: { builder: BuildBackend; commits: CommitBackend }): void {
  router.post('/build', async (req, res) => {
    const opts = buildOptions(req);
    const out = new BuildStream(res, opts.quiet);
    // Aux messages (the image id) are sent from API 1.30 on, as dockerd does.
    const emit = supports(req.version, 'build.auxMessages') ? (m: Record<string, unknown>) => out.emit(m) : (m: Record<string, unknown>) => ('aux' in m ? undefined : out.emit(m));
    let id: string;
    try {
      id = await backend.builder.build(req.body(), opts, emit, req.signal);
    } catch (err) {
      if (!out.started && !req.signal.aborted) throw err;
      out.fail(err);
      return;
    }
    // A quiet build prints only the image id.
    if (opts.quiet) out.final({ stream: `${id}\n` });
    out.end();
  });

  router.post('/build/prune', async (req, res) => {
    const filters = parseFilters(req.query.get('filters'), PRUNE_FILTERS);
    let untilNano: bigint | undefined;
    for (const key of ['until', 'unused-for'] as const) {
      for (const value of filters.get(key) ?? []) {
        const nano = parseUntil(value);
        if (untilNano === undefined || nano < untilNano) untilNano = nano;
      }
    }
    // keep-storage, reserved-space, max-used-space and min-free-space are accepted and not applied: the
    // cache holds images, removed whole.
    res.json(200, await backend.builder.prune({ untilNano }));
  });

  // BuildKit's session endpoint: the client upgrades to h2c and serves its files over gRPC. Without BuildKit
  // the upgrade is refused after the checks dockerd makes of the request.
  router.post('/session', (req) => {
    req.raw.resume();
    const proto = req.header('upgrade');
    if (!proto) throw new InvalidParameter('no upgrade proto in request');
    if (proto !== 'h2c') throw new InvalidParameter(`protocol ${proto} not supported`);
    throw new NotImplemented('BuildKit sessions are not supported by this engine: use the classic builder (DOCKER_BUILDKIT=0)');
  });

  router.post('/commit', async (req, res) => {
    const container = requiredParam(req, 'container');
    const body = await req.json<Record<string, unknown>>(CONTAINER_CONFIG);
    const id = await backend.commits.commit(container, {
      repo: stringParam(req, 'repo') || undefined,
      tag: stringParam(req, 'tag') || undefined,
      comment: stringParam(req, 'comment') || undefined,
      author: stringParam(req, 'author') || undefined,
      pause: boolParam(req, 'pause', true),
      changes: req.query.getAll('changes').filter((c) => c.trim() !== ''),
      config: body ?? undefined,
      signal: req.signal,
    });
    res.json(201, { Id: id });
  });
}
