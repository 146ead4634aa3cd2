/**
 * Container file endpoints: archive (HEAD, GET, PUT: `docker cp`), export and changes.
 */
import { pipeline } from 'node:stream/promises';
import type { ContainerFiles, PathStat } from '../engine/containers/archive.js';
import type { ApiRequest } from './http.js';
import { boolParam, stringParam } from './params.js';
import type { Router } from './router.js';

export type ArchiveBackend = Pick<ContainerFiles, 'stat' | 'archive' | 'extract' | 'export' | 'changes'>;

/** Both names of the path-stat header: the Go client and docker-py read the first, the spec names the second. */
function statHeaders(stat: PathStat): Record<string, string> {
  const value = Buffer.from(JSON.stringify(stat)).toString('base64');
  return { 'X-Docker-Container-Path-Stat': value, 'X-Engine-Container-Path-Stat': value };
}

function pathParam(req: ApiRequest): string | undefined {
  return stringParam(req, 'path');
}

export function registerArchiveRoutes(router: Router, files: ArchiveBackend): void {
  router.head('/containers/:id/archive', async (req, res) => {
    const stat = await files.stat(req.params.id, pathParam(req));
    res.status(200, { ...statHeaders(stat), 'Content-Type': 'application/json' });
  });

  router.get('/containers/:id/archive', async (req, res) => {
    const { stat, tar } = await files.archive(req.params.id, pathParam(req), req.signal);
    const out = res.stream(200, 'application/x-tar', statHeaders(stat));
    try {
      await pipeline(tar, out);
    } catch {
      tar.destroy();
      res.raw.destroy();
    }
  });

  router.put('/containers/:id/archive', async (req, res) => {
    await files.extract(req.params.id, pathParam(req), req.body({ goClientText: true }), {
      noOverwriteDirNonDir: boolParam(req, 'noOverwriteDirNonDir'),
      copyUIDGID: boolParam(req, 'copyUIDGID'),
      signal: req.signal,
    });
    res.status(200, { 'Content-Length': 0 });
  });

  router.get('/containers/:id/export', async (req, res) => {
    const tar = await files.export(req.params.id, req.signal);
    const out = res.stream(200, 'application/octet-stream');
    try {
      await pipeline(tar, out);
    } catch {
      tar.destroy();
      res.raw.destroy();
    }
  });

  router.get('/containers/:id/changes', async (req, res) => {
    res.json(200, await files.changes(req.params.id));
  });
}
