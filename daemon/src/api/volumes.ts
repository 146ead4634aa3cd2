/**
 * Volumes: list, create, inspect, remove, prune. The handlers parse and validate, call the volume backend,
 * and shape the answer for the request's version.
 */
import { InvalidParameter, NotImplemented } from '../errors.js';
import { VOLUME_CREATE } from './bodies.js';
import { shape, supports } from './compat.js';
import type { ApiRequest, ApiResponse } from './http.js';
import { boolFilter, boolParam, filterParam } from './params.js';
import type { Router } from './router.js';

/** What the volume routes need of the engine. */
export interface VolumeBackend {
  list(filters: ReadonlyMap<string, string[]>): Promise<object[]>;
  inspect(name: string): Promise<object>;
  create(body: Record<string, unknown>): Promise<{ volume: object }>;
  remove(name: string, opts: { force: boolean }): Promise<void>;
  prune(filters: ReadonlyMap<string, string[]>, opts: { all: boolean }): Promise<{ VolumesDeleted: string[]; SpaceReclaimed: number }>;
}

const LIST_FILTERS = ['dangling', 'driver', 'label', 'name'] as const;
const PRUNE_FILTERS = ['label', 'label!', 'all'] as const;

export function registerVolumeRoutes(router: Router, backend: VolumeBackend): void {
  const list = async (req: ApiRequest, res: ApiResponse) => {
    const filters = filterParam(req, LIST_FILTERS);
    res.json(200, { Volumes: shape('volume', req.version, await backend.list(filters)), Warnings: [] });
  };
  router.get('/volumes', list);
  router.get('/volumes/', list);

  router.post('/volumes/create', async (req, res) => {
    const body = await req.json(VOLUME_CREATE);
    if (body !== undefined && (body === null || typeof body !== 'object' || Array.isArray(body))) {
      throw new InvalidParameter('request body must be a JSON object: {Name, Driver, DriverOpts, Labels}');
    }
    const request = (body ?? {}) as Record<string, unknown>;
    if (request.ClusterVolumeSpec !== undefined && request.ClusterVolumeSpec !== null) {
      throw new NotImplemented('cluster volumes need swarm mode, which this engine does not run');
    }
    const { volume } = await backend.create(request);
    res.json(201, shape('volume', req.version, volume));
  });

  router.post('/volumes/prune', async (req, res) => {
    const filters = filterParam(req, PRUNE_FILTERS);
    const all = !supports(req.version, 'volumes.prune.anonymousOnly') || boolFilter(filters, 'all') === true;
    res.json(200, await backend.prune(filters, { all }));
  });

  router.get('/volumes/:name', async (req, res) => {
    res.json(200, shape('volume', req.version, await backend.inspect(req.params.name)));
  });

  router.put('/volumes/:name', async (req) => {
    await backend.inspect(req.params.name);
    throw new NotImplemented('only cluster volumes can be updated, and this engine does not run swarm mode');
  });

  router.delete('/volumes/:name', async (req, res) => {
    await backend.remove(req.params.name, { force: boolParam(req, 'force') });
    res.noContent();
  });
}
