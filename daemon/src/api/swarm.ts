/**
 * Swarm mode: /swarm, /nodes, /services, /tasks, /secrets and /configs, served by the node's cluster service
 * (engine/cluster). Outside a swarm (or on a worker) the manager routes answer "not a swarm manager"
 * (406 at API 1.24, 503 later: NotInSwarm); a daemon built without the cluster service refuses init and join.
 */
import { InvalidParameter, NotImplemented, NotInSwarm } from '../errors.js';
import type { ClusterService } from '../engine/cluster/cluster.js';
import type { ApiRequest, ApiResponse, Handler } from './http.js';
import { boolParam, filterParam, stringParam } from './params.js';
import type { Router } from './router.js';
import { parseTimestamp, rfc3339Nano } from '../util/json.js';
import { frame, MEDIA_MULTIPLEXED } from './streams.js';

const NOT_A_MANAGER = 'This node is not a swarm manager. Use "docker swarm init" or "docker swarm join" to connect this node to swarm and try again.';

const NODE_FILTERS = ['id', 'label', 'membership', 'name', 'node.label', 'role'];
const SERVICE_FILTERS = ['id', 'label', 'mode', 'name'];
const TASK_FILTERS = ['id', 'label', 'name', 'node', 'service', 'desired-state', '_up-to-date', 'runtime'];
const PAYLOAD_FILTERS = ['id', 'label', 'name', 'names'];

/** A JSON body that must be an object (or absent, as {}). */
async function objectBody(req: Parameters<Handler>[0]): Promise<Record<string, unknown>> {
  const body = await req.json();
  if (body === undefined) return {};
  if (body === null || typeof body !== 'object' || Array.isArray(body)) throw new InvalidParameter('request body must be a JSON object');
  return body as Record<string, unknown>;
}

/** Reads the log of a task's container, on this node or through its own (undefined when there is none). */
export type TaskLogReader = (task: Record<string, any>, opts: { follow: boolean; tail?: number; signal: AbortSignal }) => AsyncIterable<TaskLogRecord[]> | undefined;

/** One record of a container's log: its time, stream, bytes, and whether it ends a line. */
export interface TaskLogRecord {
  timeNano: bigint;
  stream: 'stdout' | 'stderr';
  complete: boolean;
  data: Buffer;
}

/**
 * GET /services/{id}/logs and /tasks/{id}/logs: the logs of the tasks' containers (on every node), multiplexed,
 * each line after its timestamp (`timestamps`) and its task's context (`details`:
 * `com.docker.swarm.node.id=…,com.docker.swarm.service.id=…,com.docker.swarm.task.id=…`), as the CLI reads them.
 */
async function serveTaskLogs(req: ApiRequest, res: ApiResponse, tasks: Array<Record<string, any>>, read: TaskLogReader): Promise<void> {
  const stdout = boolParam(req, 'stdout');
  const stderr = boolParam(req, 'stderr');
  if (!stdout && !stderr) throw new InvalidParameter('Bad parameters: you must choose at least one stream');
  const timestamps = boolParam(req, 'timestamps');
  const details = boolParam(req, 'details');
  const follow = boolParam(req, 'follow');
  const tailRaw = stringParam(req, 'tail');
  if (tailRaw !== undefined && tailRaw !== '' && tailRaw !== 'all' && !/^-?\d+$/.test(tailRaw)) throw new InvalidParameter(`invalid value for tail: ${JSON.stringify(tailRaw)}`);
  const tail = tailRaw === undefined || tailRaw === '' || tailRaw === 'all' || Number(tailRaw) < 0 ? undefined : Number(tailRaw);
  const since = stringParam(req, 'since');
  const sinceNano = since && since !== '0' ? parseTimestamp(since) : undefined;
  if (since && since !== '0' && sinceNano === undefined) throw new InvalidParameter(`invalid value for since: ${JSON.stringify(since)}`);
  const out = res.stream(200, MEDIA_MULTIPLEXED);
  const pump = async (t: Record<string, any>) => {
    const batches = t.Status?.ContainerStatus?.ContainerID ? read(t, { follow, tail, signal: req.signal }) : undefined;
    if (!batches) return;
    const context = `com.docker.swarm.node.id=${t.NodeID},com.docker.swarm.service.id=${t.ServiceID},com.docker.swarm.task.id=${t.ID}`;
    const atStart = { stdout: true, stderr: true };
    for await (const batch of batches) {
      for (const r of batch) {
        if (r.stream === 'stdout' ? !stdout : !stderr) continue;
        if (sinceNano !== undefined && r.timeNano < sinceNano) continue;
        let prefix = '';
        if (atStart[r.stream]) prefix = `${timestamps ? `${rfc3339Nano(r.timeNano)} ` : ''}${details ? `${context} ` : ''}`;
        atStart[r.stream] = r.complete;
        const data = Buffer.concat([Buffer.from(prefix), r.data, r.complete ? Buffer.from('\n') : Buffer.alloc(0)]);
        if (!out.write(frame(r.stream, data))) await new Promise((resolve) => out.once('drain', resolve));
      }
    }
  };
  try {
    if (follow) await Promise.all(tasks.map(pump));
    else for (const t of tasks) await pump(t);
  } finally {
    out.end();
  }
}

export function registerSwarmRoutes(router: Router, cluster?: ClusterService, readLog?: TaskLogReader): void {
  if (!cluster) {
    registerWithoutSwarm(router);
    return;
  }
  const objects = () => cluster.objects();

  router.get('/swarm', (req, res) => {
    req.raw.resume();
    res.json(200, cluster.inspect());
  });
  router.post('/swarm/init', async (req, res) => {
    const body = await objectBody(req);
    res.json(200, await cluster.init(body));
  });
  router.post('/swarm/join', async (req, res) => {
    const body = await objectBody(req);
    await cluster.join(body);
    res.status(200);
  });
  router.post('/swarm/leave', async (req, res) => {
    req.raw.resume();
    await cluster.leave(boolParam(req, 'force'));
    res.status(200);
  });
  router.post('/swarm/update', async (req, res) => {
    const body = await objectBody(req);
    await cluster.update(stringParam(req, 'version'), body, {
      worker: boolParam(req, 'rotateWorkerToken'),
      manager: boolParam(req, 'rotateManagerToken'),
      unlockKey: boolParam(req, 'rotateManagerUnlockKey'),
    });
    res.status(200);
  });
  router.get('/swarm/unlockkey', (req, res) => {
    req.raw.resume();
    res.json(200, cluster.unlockKey());
  });
  router.post('/swarm/unlock', async (req, res) => {
    await cluster.unlock(await objectBody(req));
    res.status(200);
  });

  // Nodes.
  router.get('/nodes', (req, res) => {
    const filters = filterParam(req, NODE_FILTERS);
    res.json(200, objects().listNodes(filters));
  });
  router.get('/nodes/:id', (req, res) => {
    const o = objects();
    res.json(200, o.nodeView(o.node(req.params.id!)));
  });
  router.post('/nodes/:id/update', async (req, res) => {
    const o = objects();
    const body = await objectBody(req);
    await o.updateNode(req.params.id!, stringParam(req, 'version'), body, (node, role) => cluster.roleChanged(node, role));
    res.status(200);
  });
  router.delete('/nodes/:id', async (req, res) => {
    req.raw.resume();
    await objects().removeNode(req.params.id!, boolParam(req, 'force'), cluster.nodeId ?? '');
    res.status(200);
  });

  // Services.
  router.get('/services', (req, res) => {
    const filters = filterParam(req, SERVICE_FILTERS);
    res.json(200, objects().listServices(filters, boolParam(req, 'status')));
  });
  router.post('/services/create', async (req, res) => {
    const o = objects();
    const body = await objectBody(req);
    res.json(201, await o.createService(body));
  });
  router.get('/services/:id', (req, res) => {
    const o = objects();
    res.json(200, o.serviceView(o.service(req.params.id!), false));
  });
  router.post('/services/:id/update', async (req, res) => {
    const o = objects();
    const body = await objectBody(req);
    const rollback = stringParam(req, 'rollback');
    if (rollback !== undefined && rollback !== '' && rollback !== 'previous') throw new InvalidParameter(`invalid rollback value ${JSON.stringify(rollback)}: must be "previous"`);
    res.json(200, await o.updateService(req.params.id!, stringParam(req, 'version'), body, rollback === 'previous'));
  });
  router.delete('/services/:id', async (req, res) => {
    req.raw.resume();
    await objects().removeService(req.params.id!);
    res.status(200);
  });
  router.get('/services/:id/logs', async (req, res) => {
    const o = objects();
    const service = o.service(req.params.id!);
    if (!readLog) throw new NotImplemented('service logs are not supported by this engine yet');
    const tasks = o.listTasks(new Map([['service', [service.obj.ID]]])).sort((a, b) => String(a.CreatedAt).localeCompare(String(b.CreatedAt)));
    await serveTaskLogs(req, res, tasks, readLog);
  });

  // Tasks.
  router.get('/tasks', (req, res) => {
    const filters = filterParam(req, TASK_FILTERS);
    res.json(200, objects().listTasks(filters));
  });
  router.get('/tasks/:id', (req, res) => {
    const o = objects();
    res.json(200, o.taskView(o.task(req.params.id!)));
  });
  router.get('/tasks/:id/logs', async (req, res) => {
    const o = objects();
    const task = o.task(req.params.id!);
    if (!readLog) throw new NotImplemented('task logs are not supported by this engine yet');
    await serveTaskLogs(req, res, [o.taskView(task)], readLog);
  });

  // Secrets and configs.
  for (const kind of ['secrets', 'configs'] as const) {
    router.get(`/${kind}`, (req, res) => {
      const filters = filterParam(req, PAYLOAD_FILTERS);
      res.json(200, objects().listPayloads(kind, filters));
    });
    router.post(`/${kind}/create`, async (req, res) => {
      const o = objects();
      const body = await objectBody(req);
      res.json(201, await o.createPayload(kind, body));
    });
    router.get(`/${kind}/:id`, (req, res) => {
      res.json(200, objects().inspectPayload(kind, req.params.id!));
    });
    router.post(`/${kind}/:id/update`, async (req, res) => {
      const o = objects();
      const body = await objectBody(req);
      await o.updatePayload(kind, req.params.id!, stringParam(req, 'version'), body);
      res.status(200);
    });
    router.delete(`/${kind}/:id`, async (req, res) => {
      req.raw.resume();
      await objects().removePayload(kind, req.params.id!);
      res.status(204);
    });
  }
}

/** The routes of a daemon without the cluster service: not a manager, and no swarm to create or join. */
function registerWithoutSwarm(router: Router): void {
  const manager: Handler = (req) => {
    req.raw.resume();
    throw new NotInSwarm(NOT_A_MANAGER);
  };
  router.get('/swarm', manager);
  for (const verb of ['init', 'join'] as const) {
    router.post(`/swarm/${verb}`, (req) => {
      req.raw.resume();
      throw new NotImplemented(`swarm mode is not supported by this engine: this node cannot ${verb === 'init' ? 'create' : 'join'} a swarm`);
    });
  }
  router.post('/swarm/leave', (req) => {
    req.raw.resume();
    throw new NotInSwarm('This node is not part of a swarm');
  });
  router.post('/swarm/update', manager);
  router.get('/swarm/unlockkey', manager);
  router.post('/swarm/unlock', manager);
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
