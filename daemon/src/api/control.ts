/**
 * Container control endpoints kept beside the main container routes: pause, unpause, update and top.
 */
import type { TopResult } from '../engine/containers/top.js';
import { CONTAINER_UPDATE } from './bodies.js';
import { readRequest } from './compat.js';
import { stringParam } from './params.js';
import type { Router } from './router.js';

/** What these endpoints need of the engine. */
export interface ContainerControlBackend {
  pause(ref: string): Promise<void>;
  unpause(ref: string): Promise<void>;
  update(ref: string, body: unknown): Promise<{ Warnings: string[] }>;
  top(ref: string, psArgs: string | undefined): Promise<TopResult>;
}

export function registerContainerControlRoutes(router: Router, backend: ContainerControlBackend): void {
  router.post('/containers/:id/pause', async (req, res) => {
    await backend.pause(req.params.id);
    res.noContent();
  });

  router.post('/containers/:id/unpause', async (req, res) => {
    await backend.unpause(req.params.id);
    res.noContent();
  });

  router.post('/containers/:id/update', async (req, res) => {
    const body = await req.json(CONTAINER_UPDATE);
    readRequest('container.update', req.version, body);
    res.json(200, await backend.update(req.params.id, body));
  });

  router.get('/containers/:id/top', async (req, res) => {
    res.json(200, await backend.top(req.params.id, stringParam(req, 'ps_args')));
  });
}
