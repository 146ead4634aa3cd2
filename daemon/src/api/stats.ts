/**
 * GET /containers/{id}/stats: a stream of JSON frames (one per second) or one frame.
 */
import type { ContainerStats } from '../engine/containers/stats.js';
import { shape } from './compat.js';
import { boolParam } from './params.js';
import type { Router } from './router.js';
import { writeWithBackpressure } from './streams.js';

export type StatsBackend = Pick<ContainerStats, 'frames'>;

export function registerStatsRoutes(router: Router, stats: StatsBackend): void {
  router.get('/containers/:id/stats', async (req, res) => {
    const stream = boolParam(req, 'stream', true);
    const oneShot = boolParam(req, 'one-shot');
    const frames = stats.frames(req.params.id, { stream, oneShot: oneShot && !stream, signal: req.signal });
    // The first frame is read before the headers go out, so that a missing container is a 404.
    const first = await frames.next();
    const out = res.stream(200, 'application/json');
    try {
      if (!first.done) {
        if (!(await writeWithBackpressure(out, JSON.stringify(shape('container.stats', req.version, first.value)) + '\n'))) return;
      }
      for await (const frame of frames) {
        if (!(await writeWithBackpressure(out, JSON.stringify(shape('container.stats', req.version, frame)) + '\n'))) return;
      }
    } finally {
      await frames.return(undefined);
      out.end();
    }
  });
}
