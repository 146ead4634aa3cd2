/**
 * Swarm mode: /swarm, /nodes, /services, /tasks, /secrets and /configs. This engine has no swarm mode yet;
 * these routes answer as a daemon whose node is not part of a swarm (NotInSwarm, with dockerd's
 * messages), and refuse to create or join one. A real implementation replaces this module.
 */
import { NotImplemented, NotInSwarm } from '../errors.js';
import type { Handler } from './http.js';
import type { Router } from './router.js';

const NOT_A_MANAGER = 'This node is not a swarm manager. Use "docker swarm init" or "docker swarm join" to connect this node to swarm and try again.';
const NOT_IN_SWARM = 'This node is not part of a swarm';

/** What these routes need to know of the cluster: for now, that there is none. */
export interface SwarmBackend {
  /** Throws when the node cannot serve manager requests. */
  requireManager(): void;
  /** Throws when the node is not part of a swarm. */
  requireMember(): void;
  init(): never;
  join(): never;
}

/** The backend of an engine without swarm mode. */
export const noSwarm: SwarmBackend = {
  requireManager() {
    throw new NotInSwarm(NOT_A_MANAGER);
  },
  requireMember() {
    throw new NotInSwarm(NOT_IN_SWARM);
  },
  init() {
    throw new NotImplemented('swarm mode is not supported by this engine: this node cannot create a swarm');
  },
  join() {
    throw new NotImplemented('swarm mode is not supported by this engine: this node cannot join a swarm');
  },
};

export function registerSwarmRoutes(router: Router, backend: SwarmBackend = noSwarm): void {
  const manager: Handler = (req) => {
    req.raw.resume();
    backend.requireManager();
  };

  router.get('/swarm', manager);
  router.post('/swarm/init', (req) => {
    req.raw.resume();
    backend.init();
  });
  router.post('/swarm/join', (req) => {
    req.raw.resume();
    backend.join();
  });
  router.post('/swarm/leave', (req) => {
    req.raw.resume();
    backend.requireMember();
  });
  router.post('/swarm/update', manager);
  router.get('/swarm/unlockkey', manager);
  router.post('/swarm/unlock', manager);

  // Nodes, services, tasks, secrets and configs live in the cluster's store, which only a manager serves.
  for (const kind of ['nodes', 'services', 'secrets', 'configs']) {
    router.get(`/${kind}`, manager);
    if (kind !== 'nodes') router.post(`/${kind}/create`, manager);
    router.get(`/${kind}/:id`, manager);
    router.delete(`/${kind}/:id`, manager);
    router.post(`/${kind}/:id/update`, manager);
  }
  router.get('/services/:id/logs', manager);
  router.get('/tasks', manager);
  router.get('/tasks/:id', manager);
  router.get('/tasks/:id/logs', manager);
}
