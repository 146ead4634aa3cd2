/**
 * The /images routes: list, inspect, history, tag, remove, prune, load, save, import, and pull
 * (`fromImage`) and push through the image service's registry client.
 */
import { Readable, type Writable } from 'node:stream';
import { errorMessage, InvalidParameter, NotImplemented } from '../errors.js';
import { parseAuthHeader, type AuthConfig, type PullRequest } from '../engine/images/registry/index.js';
import type { DeleteRecord, Filters, ProgressMessage } from '../engine/images/service.js';
import { shape, supports } from './compat.js';
import type { ApiRequest, ApiResponse } from './http.js';
import { boolParam, filterParam, parseFilters, stringParam } from './params.js';
import type { Router } from './router.js';
import { ProgressStream } from './streams.js';

/** The image service as these routes use it. */
export interface ImagesBackend {
  find(name: string): unknown;
  list(opts: { all?: boolean; filters: Filters; sharedSize?: boolean }): Record<string, unknown>[];
  inspect(name: string): Record<string, unknown>;
  history(name: string): Record<string, unknown>[];
  tag(name: string, repo: string, tag: string | undefined): Promise<void>;
  remove(name: string, opts: { force?: boolean; noprune?: boolean }): Promise<DeleteRecord[]>;
  prune(filters: Filters): Promise<{ ImagesDeleted: DeleteRecord[]; SpaceReclaimed: number }>;
  load(input: Readable, emit: (m: ProgressMessage) => void, signal?: AbortSignal, opts?: { quiet?: boolean }): Promise<string[]>;
  importRootfs(
    input: Readable,
    opts: { repo?: string; tag?: string; changes?: string[]; message?: string; platform?: string },
    signal?: AbortSignal,
  ): Promise<string>;
  save(names: string[], out: Writable, signal?: AbortSignal): Promise<void>;
  pull(request: PullRequest, emit: (m: ProgressMessage) => void, signal: AbortSignal): Promise<void>;
  push(name: string, tag: string | undefined, auth: AuthConfig | undefined, emit: (m: ProgressMessage) => void, signal: AbortSignal): Promise<void>;
}

const LIST_FILTERS = ['dangling', 'label', 'before', 'since', 'reference', 'until'] as const;
const PRUNE_FILTERS = ['dangling', 'until', 'label', 'label!'] as const;

function listFilters(req: ApiRequest): Filters {
  const filters = filterParam(req, LIST_FILTERS);
  const legacy = supports(req.version, 'images.list.filter') ? stringParam(req, 'filter') : undefined;
  if (legacy) filters.set('reference', [...(filters.get('reference') ?? []), legacy]);
  return filters;
}

/** Opens a root filesystem tar to import from an http(s) URL (`docker import https://...`). */
async function download(source: string, signal: AbortSignal): Promise<Readable> {
  let url: URL;
  try {
    url = new URL(source);
  } catch {
    throw new InvalidParameter(`fromSrc must be - or an http(s) URL, got ${JSON.stringify(source)}`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new NotImplemented(`importing from ${url.protocol} URLs is not supported: use http(s) or send the tar in the request body with fromSrc=-`);
  }
  let response: Response;
  try {
    response = await fetch(url, { signal, redirect: 'follow' });
  } catch (err) {
    throw new InvalidParameter(`cannot download ${source}: ${errorMessage((err as Error).cause ?? err)}`, { cause: err });
  }
  if (!response.ok || !response.body) {
    throw new InvalidParameter(`cannot download ${source}: the server answered ${response.status} ${response.statusText}`);
  }
  return Readable.fromWeb(response.body as import('node:stream/web').ReadableStream<Uint8Array>);
}

export function registerImageRoutes(router: Router, images: ImagesBackend): void {
  router.get('/images/json', (req, res) => {
    const list = images.list({ all: boolParam(req, 'all'), filters: listFilters(req), sharedSize: boolParam(req, 'shared-size') });
    res.json(200, shape('image.list', req.version, list));
  });

  router.post('/images/load', async (req, res) => {
    const quiet = boolParam(req, 'quiet');
    // A body sent as a form or as text is the request's fault (400), refused before the stream starts.
    const archive = req.body();
    const progress = new ProgressStream(res);
    try {
      await images.load(archive, (m) => progress.write(m), req.signal, { quiet });
    } catch (err) {
      // As dockerd: a load always answers 200, and what went wrong (a body that is no image archive
      // included) is the stream's error message, which clients read from the stream.
      req.raw.resume();
      progress.fail(err);
      return;
    }
    progress.end();
  });

  const save = async (req: ApiRequest, res: ApiResponse, names: string[]) => {
    if (names.length === 0) throw new InvalidParameter('query parameter names is required');
    for (const name of names) images.find(name);
    const out = res.stream(200, 'application/x-tar');
    await images.save(names, out, req.signal);
  };
  router.get('/images/get', (req, res) => save(req, res, req.query.getAll('names').filter((n) => n !== '')));

  router.post('/images/create', async (req, res) => {
    const fromImage = stringParam(req, 'fromImage');
    const fromSrc = stringParam(req, 'fromSrc');
    if (fromImage) {
      const request: PullRequest = {
        fromImage,
        tag: stringParam(req, 'tag') || undefined,
        platform: supports(req.version, 'images.pull.platform') ? stringParam(req, 'platform') || undefined : undefined,
        auth: parseAuthHeader(req.header('x-registry-auth')),
        allTagsIfUntagged: true,
      };
      await new ProgressStream(res).run((write) => images.pull(request, write, req.signal));
      return;
    }
    if (fromSrc === undefined || fromSrc === '') throw new InvalidParameter('one of fromImage or fromSrc is required');
    let input: Readable;
    if (fromSrc === '-') {
      input = req.body({ goClientText: true });
    } else {
      input = await download(fromSrc, req.signal);
      // A download that the import refuses before reading it (a bad repository name) is closed here.
      input.on('error', () => undefined);
    }
    const progress = new ProgressStream(res);
    let id: string;
    try {
      id = await images.importRootfs(
        input,
        {
          repo: stringParam(req, 'repo') || undefined,
          tag: stringParam(req, 'tag') || undefined,
          changes: req.query.getAll('changes').filter((c) => c.trim() !== ''),
          message: stringParam(req, 'message') || undefined,
          platform: stringParam(req, 'platform') || undefined,
        },
        req.signal,
      );
    } catch (err) {
      if (fromSrc !== '-') input.destroy();
      if (!progress.started) throw err;
      progress.fail(err);
      return;
    }
    progress.write({ status: id });
    progress.end();
  });

  router.post('/images/prune', async (req, res) => {
    const filters = parseFilters(req.query.get('filters'), PRUNE_FILTERS);
    res.json(200, await images.prune(filters));
  });

  router.get('/images/:name*/json', (req, res) => {
    res.json(200, shape('image.inspect', req.version, images.inspect(req.params.name)));
  });

  router.get('/images/:name*/history', (req, res) => {
    res.json(200, shape('image.history', req.version, images.history(req.params.name)));
  });

  router.get('/images/:name*/get', (req, res) => save(req, res, [req.params.name]));

  router.post('/images/:name*/push', async (req, res) => {
    const auth = parseAuthHeader(req.header('x-registry-auth'));
    await new ProgressStream(res).run((write) => images.push(req.params.name, stringParam(req, 'tag') || undefined, auth, write, req.signal));
  });

  router.post('/images/:name*/tag', async (req, res) => {
    const repo = stringParam(req, 'repo');
    if (!repo) throw new InvalidParameter('query parameter repo is required');
    await images.tag(req.params.name, repo, stringParam(req, 'tag') || undefined);
    res.status(201);
  });

  router.delete('/images/:name*', async (req, res) => {
    res.json(200, await images.remove(req.params.name, { force: boolParam(req, 'force'), noprune: boolParam(req, 'noprune') }));
  });
}
