/**
 * Networks: list, inspect, create, remove, prune, connect and disconnect. The handlers parse and
 * validate, call the network backend, and shape the answer for the request's version.
 */
import { validateEndpointNames } from '../engine/containers/validate.js';
import { InvalidParameter, NotImplemented } from '../errors.js';
import { NETWORK_CONNECT, NETWORK_CREATE, NETWORK_DISCONNECT, type Shape } from './bodies.js';
import { shape } from './compat.js';
import type { ApiRequest, ApiResponse } from './http.js';
import { boolParam, filterParam, stringParam } from './params.js';
import type { Router } from './router.js';

/** What the network routes need of the engine. */
export interface NetworkBackend {
  list(filters: ReadonlyMap<string, string[]>): object[];
  inspect(ref: string, opts: { scope?: string; verbose?: boolean }): object;
  create(body: unknown): Promise<{ Id: string; Warning?: string }>;
  remove(ref: string): Promise<void>;
  /** Names of the networks `prune` removed. */
  prune?(filters: ReadonlyMap<string, string[]>): Promise<string[]>;
  /**
   * Throws NotFound when a container cannot be connected to `ref` because no such network exists (a swarm
   * network this node does not know yet is not refused here); `inspect` decides when absent.
   */
  connectable?(ref: string): void;
}

/** What connect and disconnect need (the container engine resolves the container). */
export interface NetworkContainerBackend {
  connectContainer(networkRef: string, containerRef: string, endpointConfig: unknown): Promise<void>;
  disconnectContainer(networkRef: string, containerRef: string, force: boolean): Promise<void>;
}

const LIST_FILTERS = ['dangling', 'driver', 'id', 'label', 'name', 'scope', 'type'] as const;
const PRUNE_FILTERS = ['until', 'label', 'label!'] as const;
const SCOPES = ['local', 'swarm', 'global'];

export function registerNetworkRoutes(router: Router, backend: NetworkBackend, containers?: NetworkContainerBackend): void {
  const list = (req: ApiRequest, res: ApiResponse) => {
    const filters = filterParam(req, LIST_FILTERS);
    res.json(200, shape('network', req.version, backend.list(filters)));
  };
  router.get('/networks', list);
  // Docker answers the list on a trailing slash too.
  router.get('/networks/', list);

  router.post('/networks/create', async (req, res) => {
    const body = await req.json(NETWORK_CREATE);
    if (body === undefined || body === null || typeof body !== 'object' || Array.isArray(body)) {
      throw new InvalidParameter('request body must be a JSON object with at least a Name');
    }
    const created = await backend.create(body);
    res.json(201, { Id: created.Id, Warning: created.Warning ?? '' });
  });

  router.post('/networks/prune', async (req, res) => {
    const filters = filterParam(req, PRUNE_FILTERS);
    const removed = backend.prune ? await backend.prune(filters) : [];
    res.json(200, { NetworksDeleted: removed });
  });

  router.get('/networks/:id', (req, res) => {
    const scope = stringParam(req, 'scope');
    if (scope !== undefined && scope !== '' && !SCOPES.includes(scope)) {
      throw new InvalidParameter(`invalid scope ${JSON.stringify(scope)}: expected local, swarm or global`);
    }
    // `verbose` adds the peers and services of swarm networks.
    const verbose = boolParam(req, 'verbose') === true;
    res.json(200, shape('network', req.version, backend.inspect(req.params.id, { scope: scope || undefined, verbose })));
  });

  router.delete('/networks/:id', async (req, res) => {
    await backend.remove(req.params.id);
    res.noContent();
  });

  const containerBody = async (req: ApiRequest, type: Shape): Promise<Record<string, unknown>> => {
    const body = await req.json(type);
    if (body === undefined || body === null || typeof body !== 'object' || Array.isArray(body)) {
      throw new InvalidParameter('request body must be a JSON object with a Container');
    }
    const b = body as Record<string, unknown>;
    if (typeof b.Container !== 'string' || b.Container === '') throw new InvalidParameter('Container is required: the id or name of a container');
    return b;
  };

  router.post('/networks/:id/connect', async (req, res) => {
    if (backend.connectable) backend.connectable(req.params.id);
    else backend.inspect(req.params.id, {});
    const body = await containerBody(req, NETWORK_CONNECT);
    if (body.EndpointConfig !== undefined && body.EndpointConfig !== null && (typeof body.EndpointConfig !== 'object' || Array.isArray(body.EndpointConfig))) {
      throw new InvalidParameter('EndpointConfig must be an object');
    }
    validateEndpointNames('EndpointConfig', body.EndpointConfig);
    if (!containers) throw new NotImplemented('connecting a container to a network after create is not supported yet');
    await containers.connectContainer(req.params.id, body.Container as string, body.EndpointConfig);
    res.status(200);
  });

  router.post('/networks/:id/disconnect', async (req, res) => {
    backend.inspect(req.params.id, {});
    const body = await containerBody(req, NETWORK_DISCONNECT);
    if (body.Force !== undefined && typeof body.Force !== 'boolean') throw new InvalidParameter('Force must be a boolean');
    if (!containers) throw new NotImplemented('disconnecting a container from a network is not supported yet');
    await containers.disconnectContainer(req.params.id, body.Container as string, body.Force === true);
    res.status(200);
  });
}
