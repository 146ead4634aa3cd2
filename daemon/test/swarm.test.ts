/**
 * Swarm mode on one manager, driven by the real docker CLI and plain HTTP: `swarm init` (an etcd member run by
 * the daemon on a loopback address of the test's own), GET /swarm and its join tokens, swarm update (version
 * rule, token rotation), /info and /_ping, nodes (list, filters, update, remove), services (create, scale,
 * restart policy, rolling update and rollback, global mode, remove) whose tasks are ordinary containers,
 * secrets and configs mounted into them, the swarm back after a daemon restart, autolock, and leave.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { createHash, randomBytes, randomInt } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { expectConforms } from './contract/openapi.js';
import { eventually, startEngine, type Engine } from './harness.js';

/** A loopback address of this test's own: etcd and the swarm port listen there, beside other tests' daemons. */
const IP = `127.${randomInt(100, 250)}.${randomInt(1, 250)}.${randomInt(2, 250)}`;

let engine: Engine;

before(async () => {
  engine = await startEngine();
  await engine.loadBusybox();
});

after(async () => {
  await engine?.cleanup();
});

interface Task {
  ID: string;
  Slot?: number;
  NodeID: string;
  DesiredState: string;
  Status: { State: string; Err?: string; ContainerStatus?: { ContainerID?: string } };
  Spec: { ContainerSpec: { Args?: string[]; Env?: string[] } };
}

async function tasksOf(service: string, desired = 'running'): Promise<Task[]> {
  const filters = encodeURIComponent(JSON.stringify({ service: [service], 'desired-state': [desired] }));
  const r = await engine.request('GET', `/tasks?filters=${filters}`);
  assert.equal(r.status, 200, r.text);
  return r.json<Task[]>();
}

async function running(service: string, count: number, timeoutMs = 20_000): Promise<Task[]> {
  return eventually<Task[] | undefined>(async () => {
    const tasks = (await tasksOf(service)).filter((t) => t.Status.State === 'running');
    return tasks.length === count ? tasks : undefined;
  }, timeoutMs, 200) as Promise<Task[]>;
}

function portOpen(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.connect({ host, port });
    s.once('connect', () => (s.destroy(), resolve(true)));
    s.once('error', () => resolve(false));
  });
}

describe('swarm mode on one manager', () => {
  let nodeId = '';

  test('swarm init: the node is an active manager, with Docker\'s join tokens and the CA they name', async () => {
    const out = await engine.dockerOk(['swarm', 'init', '--advertise-addr', IP, '--listen-addr', `${IP}:2377`], { timeoutMs: 60_000 });
    assert.match(out, /Swarm initialized: current node \((\w+)\) is now a manager/);
    assert.match(out, new RegExp(`docker swarm join --token SWMTKN-1-\\w+-\\w+ ${IP.replace(/\./g, '\\.')}:2377`));
    const info = (await engine.request('GET', '/info')).json();
    assert.equal(info.Swarm.LocalNodeState, 'active');
    assert.equal(info.Swarm.ControlAvailable, true);
    assert.equal(info.Swarm.NodeAddr, IP);
    assert.equal(info.Swarm.Managers, 1);
    nodeId = info.Swarm.NodeID;
    assert.equal((await engine.request('GET', '/_ping')).headers.swarm, 'active/manager');
    const swarm = (await engine.request('GET', '/swarm')).json();
    const digest = BigInt('0x' + createHash('sha256').update(swarm.TLSInfo.TrustRoot).digest('hex')).toString(36).padStart(50, '0');
    for (const token of [swarm.JoinTokens.Worker, swarm.JoinTokens.Manager]) assert.match(token, new RegExp(`^SWMTKN-1-${digest}-[0-9a-z]{25}$`));
    assert.notEqual(swarm.JoinTokens.Worker, swarm.JoinTokens.Manager);
    assert.equal(swarm.Spec.Raft.ElectionTick, 10);
    // The etcd member listens on the advertise address, with mutual TLS.
    assert.ok(await portOpen(IP, 2379));
    // A second init, and a join, from a node already in a swarm: 503 (406 at API 1.24).
    const again = await engine.request('POST', '/v1.44/swarm/init', { body: { AdvertiseAddr: IP } });
    assert.equal(again.status, 503);
    assert.match(again.json().message, /already part of a swarm/);
    assert.equal((await engine.request('POST', '/v1.24/swarm/init', { body: { AdvertiseAddr: IP } })).status, 406);
  });

  test('swarm update: the version rule, token rotation and the spec', async () => {
    const before = (await engine.request('GET', '/swarm')).json();
    const stale = await engine.request('POST', `/swarm/update?version=${before.Version.Index - 1}`, { body: before.Spec });
    assert.equal(stale.status, 400, stale.text);
    assert.match(stale.json().message, /update out of sequence/);
    const missing = await engine.request('POST', '/swarm/update', { body: before.Spec });
    assert.equal(missing.status, 400);
    const rotated = (await engine.dockerOk(['swarm', 'join-token', '--rotate', '-q', 'worker'])).trim();
    assert.notEqual(rotated, before.JoinTokens.Worker);
    const after = (await engine.request('GET', '/swarm')).json();
    assert.equal(after.JoinTokens.Worker, rotated);
    assert.equal(after.JoinTokens.Manager, before.JoinTokens.Manager);
    await engine.dockerOk(['swarm', 'update', '--task-history-limit', '10', '--dispatcher-heartbeat', '2s']);
    const updated = (await engine.request('GET', '/swarm')).json();
    assert.equal(updated.Spec.Orchestration.TaskHistoryRetentionLimit, 10);
    assert.equal(updated.Spec.Dispatcher.HeartbeatPeriod, 2_000_000_000);
    const bad = await engine.request('POST', `/swarm/update?version=${updated.Version.Index}`, { body: { ...updated.Spec, Dispatcher: { HeartbeatPeriod: -1 } } });
    assert.equal(bad.status, 400, bad.text);
  });

  test('nodes: list with filters, inspect, update with the version rule, and what cannot be removed', async () => {
    const ls = await engine.dockerOk(['node', 'ls']);
    assert.match(ls, new RegExp(`${nodeId} \\*\\s+\\S+\\s+Ready\\s+Active\\s+Leader`));
    await engine.dockerOk(['node', 'update', '--label-add', 'zone=a', nodeId]);
    const node = (await engine.request('GET', `/nodes/${nodeId}`)).json();
    assert.deepEqual(node.Spec.Labels, { zone: 'a' });
    assert.equal(node.ManagerStatus.Leader, true);
    const f = (filters: object) => engine.request('GET', `/nodes?filters=${encodeURIComponent(JSON.stringify(filters))}`);
    assert.equal((await f({ 'node.label': ['zone=a'] })).json().length, 1);
    assert.equal((await f({ 'node.label': ['zone=b'] })).json().length, 0);
    assert.equal((await f({ role: ['worker'] })).json().length, 0);
    assert.equal((await f({ bogus: ['x'] })).status, 400);
    const stale = await engine.request('POST', `/nodes/${nodeId}/update?version=1`, { body: node.Spec });
    assert.equal(stale.status, 400);
    const badRole = await engine.request('POST', `/nodes/${nodeId}/update?version=${node.Version.Index}`, { body: { ...node.Spec, Role: 'boss' } });
    assert.equal(badRole.status, 400);
    assert.match(badRole.json().message, /invalid role/);
    const demote = await engine.docker(['node', 'demote', nodeId]);
    assert.notEqual(demote.code, 0);
    assert.match(demote.stderr, /last manager/);
    const rm = await engine.request('DELETE', `/nodes/${nodeId}?force=1`);
    assert.equal(rm.status, 409, rm.text);
    assert.equal((await engine.request('GET', '/nodes/nonexistent')).status, 404);
  });

  test('a replicated service runs its tasks as labelled containers, and scales up and down', async () => {
    const id = (await engine.dockerOk(['service', 'create', '--detach', '--name', 'web', '--replicas', '2', '--stop-grace-period', '1s', 'busybox', 'sleep', '600'])).trim();
    const tasks = await running('web', 2);
    assert.deepEqual(tasks.map((t) => t.Slot).sort(), [1, 2]);
    for (const t of tasks) {
      const c = (await engine.request('GET', `/containers/${t.Status.ContainerStatus!.ContainerID}/json`)).json();
      assert.equal(c.Name, `/web.${t.Slot}.${t.ID}`);
      assert.equal(c.Config.Labels['com.docker.swarm.service.id'], id);
      assert.equal(c.Config.Labels['com.docker.swarm.service.name'], 'web');
      assert.equal(c.Config.Labels['com.docker.swarm.task.id'], t.ID);
      assert.equal(c.Config.Labels['com.docker.swarm.node.id'], nodeId);
      assert.equal(c.State.Running, true);
    }
    assert.match(await engine.dockerOk(['service', 'ls']), /web\s+replicated\s+2\/2\s+busybox/);
    const info = await engine.dockerOk(['info']);
    assert.match(info, /Swarm: active/);
    assert.match(info, /Is Manager: true/);
    assert.match(await engine.dockerOk(['node', 'inspect', '--pretty', 'self']), /Hostname:/);
    assert.match(await engine.dockerOk(['service', 'inspect', '--pretty', 'web']), /Replicas:\s+2/);
    const ps = await engine.dockerOk(['service', 'ps', 'web']);
    assert.match(ps, /web\.1\s+busybox:latest\s+\S+\s+Running\s+Running/);
    assert.match(await engine.dockerOk(['node', 'ps', 'self']), /web\.2\s+busybox:latest/);
    // A constraint no node meets leaves the task pending, saying why.
    await engine.dockerOk(['service', 'create', '--detach', '--name', 'nowhere', '--constraint', 'node.labels.zone==mars', 'busybox', 'true']);
    const pending = await eventually(async () => (await tasksOf('nowhere')).find((t) => t.Status.State === 'pending' && (t.Status as { Err?: string }).Err), 10_000, 200);
    assert.equal(pending!.Status.Err, 'no suitable node (scheduling constraints not satisfied on 1 node)');
    await engine.dockerOk(['service', 'rm', 'nowhere']);
    await engine.dockerOk(['service', 'scale', '--detach', 'web=3']);
    await running('web', 3);
    await engine.dockerOk(['service', 'scale', '--detach', 'web=1']);
    await eventually(async () => {
      const containers = (await engine.request('GET', '/containers/json?filters=' + encodeURIComponent(JSON.stringify({ label: [`com.docker.swarm.service.id=${id}`] })))).json();
      return containers.length === 1;
    }, 20_000, 200);
    // A name in use, a network that does not exist and an unknown publish mode are refused.
    const conflict = await engine.docker(['service', 'create', '--detach', '--name', 'web', 'busybox', 'true']);
    assert.notEqual(conflict.code, 0);
    assert.match(conflict.stderr, /already exists/);
    const spec = { Name: 'x', TaskTemplate: { ContainerSpec: { Image: 'busybox' } } };
    const net = await engine.request('POST', '/services/create', { body: { ...spec, TaskTemplate: { ...spec.TaskTemplate, Networks: [{ Target: 'n' }] } } });
    assert.equal(net.status, 404);
    assert.match(net.json().message, /network n not found/);
    const mode = await engine.request('POST', '/services/create', { body: { ...spec, EndpointSpec: { Ports: [{ TargetPort: 80, PublishedPort: 8080, PublishMode: 'mesh' }] } } });
    assert.equal(mode.status, 400);
    assert.match(mode.json().message, /invalid PublishMode "mesh"/);
    assert.equal((await engine.request('POST', '/services/create', { body: { Name: 'x', TaskTemplate: { ContainerSpec: {} } } })).status, 400);
  });

  test('a failing task is restarted by its restart policy, up to MaxAttempts', async () => {
    await engine.dockerOk(['service', 'create', '--detach', '--name', 'fails', '--restart-delay', '200ms', '--restart-max-attempts', '2', 'busybox', 'sh', '-c', 'exit 3']);
    const all = await eventually<Task[] | undefined>(async () => {
      const tasks = (await tasksOf('fails', 'shutdown')).filter((t) => t.Status.State === 'failed');
      return tasks.length === 3 ? tasks : undefined;
    }, 20_000, 200) as Task[];
    assert.ok(all.every((t) => t.Status.Err === 'task: non-zero exit (3)'), JSON.stringify(all.map((t) => t.Status)));
    await new Promise((r) => setTimeout(r, 1500));
    assert.equal((await tasksOf('fails', 'running')).length, 0);
    await engine.dockerOk(['service', 'rm', 'fails']);
  });

  test('restarts are counted in the store: MaxAttempts holds beyond the task history the reaper keeps', async () => {
    const since = (Date.now() / 1000 - 1).toFixed(3);
    await engine.dockerOk(['swarm', 'update', '--task-history-limit', '1']);
    await engine.dockerOk(['service', 'create', '--detach', '--name', 'flaky', '--restart-delay', '100ms', '--restart-max-attempts', '3', 'busybox', 'sh', '-c', 'exit 3']);
    await engine.dockerOk(['service', 'create', '--detach', '--name', 'flakyjob', '--mode', 'replicated-job', '--restart-delay', '100ms', '--restart-max-attempts', '2', 'busybox', 'sh', '-c', 'exit 3']);
    const creates = async (service: string) => {
      const r = await engine.request('GET', `/events?since=${since}&until=${(Date.now() / 1000).toFixed(3)}&filters=${encodeURIComponent(JSON.stringify({ type: ['container'], event: ['create'] }))}`);
      return r.text.split('\n').filter((l) => l.trim() && JSON.parse(l).Actor.Attributes['com.docker.swarm.service.name'] === service).length;
    };
    // The first task and its 3 restarts (2 for the job), then nothing more: the reaper keeps one old task only.
    await eventually(async () => (await creates('flaky')) >= 4 && (await creates('flakyjob')) >= 3, 20_000, 200);
    await new Promise((r) => setTimeout(r, 2000));
    assert.equal(await creates('flaky'), 4);
    assert.equal(await creates('flakyjob'), 3);
    await engine.dockerOk(['service', 'rm', 'flaky', 'flakyjob']);
    await engine.dockerOk(['swarm', 'update', '--task-history-limit', '10']);
  });

  test('reservations: a task that fits nowhere stays pending with Docker\'s message; reserved CPUs are counted', async () => {
    const node = (await engine.request('GET', '/nodes')).json<Array<{ Description: { Resources: { NanoCPUs: number; MemoryBytes: number } } }>>()[0]!;
    const { NanoCPUs: cpus, MemoryBytes: memory } = node.Description.Resources;
    const tooBig = String(memory * 2);
    await engine.dockerOk(['service', 'create', '--detach', '--name', 'huge', '--reserve-memory', tooBig, 'busybox', 'sleep', '600']);
    const [pending] = await eventually(async () => {
      const list = (await tasksOf('huge')).filter((t) => t.Status.Err);
      return list.length === 1 ? list : undefined;
    }, 10_000, 200) as Task[];
    assert.equal(pending!.Status.State, 'pending');
    assert.equal(pending!.Status.Err, 'no suitable node (insufficient resources on 1 node)');
    await engine.dockerOk(['service', 'rm', 'huge']);
    // Two tasks reserving 60% of the node's CPUs each: one runs, the other waits for room.
    const r = await engine.request('POST', '/services/create', {
      body: { Name: 'halves', TaskTemplate: { ContainerSpec: { Image: 'busybox', Args: ['sleep', '600'] }, Resources: { Reservations: { NanoCPUs: Math.floor(cpus * 0.6) } } }, Mode: { Replicated: { Replicas: 2 } } },
    });
    assert.equal(r.status, 201, r.text);
    await running('halves', 1);
    const waiting = await eventually(async () => (await tasksOf('halves')).find((t) => t.Status.State === 'pending' && t.Status.Err), 10_000, 200);
    assert.equal(waiting!.Status.Err, 'no suitable node (insufficient resources on 1 node)');
    await engine.dockerOk(['service', 'rm', 'halves']);
    const bad = await engine.request('POST', '/services/create', { body: { Name: 'bad', TaskTemplate: { ContainerSpec: { Image: 'busybox' }, Resources: { Reservations: { MemoryBytes: -1 } } } } });
    assert.equal(bad.status, 400);
    assert.match(bad.json().message, /Reservations\.MemoryBytes/);
  });

  test('a rolling update converges (the CLI\'s progress), and a failing one rolls back', async () => {
    const out = await engine.dockerOk(['service', 'update', '--env-add', 'COLOR=blue', '--replicas', '2', '--update-parallelism', '1', '--update-delay', '200ms', 'web'], { timeoutMs: 90_000 });
    assert.match(out, /Service web converged|verify: Service (web )?converged/);
    const tasks = await running('web', 2);
    assert.ok(tasks.every((t) => t.Spec.ContainerSpec.Env?.includes('COLOR=blue')));
    // Start-first: each slot's new task starts before its old one is told to stop.
    await engine.dockerOk(['service', 'update', '--detach', '--env-add', 'ORDER=start-first', '--update-order', 'start-first', 'web']);
    const started = await eventually<Task[] | undefined>(async () => {
      const list = (await running('web', 2)).filter((t) => t.Spec.ContainerSpec.Env?.includes('ORDER=start-first'));
      return list.length === 2 ? list : undefined;
    }, 20_000, 200);
    type Past = Task & { CreatedAt: string; Status: { Timestamp: string } };
    const isOld = (h: Past) => h.Spec.ContainerSpec.Env?.includes('COLOR=blue') && !h.Spec.ContainerSpec.Env?.includes('ORDER=start-first');
    // Once the old tasks stopped: each stopped after its slot's new task ran.
    const history = (await eventually(async () => {
      const list = (await engine.request('GET', `/tasks?filters=${encodeURIComponent(JSON.stringify({ service: ['web'] }))}`)).json<Past[]>();
      const old = list.filter((h) => isOld(h) && h.DesiredState === 'shutdown' && started!.some((t) => t.Slot === h.Slot));
      return old.length >= 2 && old.every((h) => h.Status.State === 'shutdown') ? list : undefined;
    }, 20_000, 200))!;
    for (const t of started!) {
      // When the new task's container started (its status's time may move with later reports).
      const container = (await engine.request('GET', `/containers/${t.Status.ContainerStatus!.ContainerID}/json`)).json();
      const ran = Date.parse(container.State.StartedAt);
      const old = history.filter((h) => h.Slot === t.Slot && isOld(h) && h.DesiredState === 'shutdown');
      assert.ok(old.length > 0, `slot ${t.Slot}: no old task`);
      assert.ok(old.some((h) => ran <= Date.parse(h.Status.Timestamp)), `slot ${t.Slot}: the old task stopped before the new one ran`);
    }
    await eventually(async () => (await engine.request('GET', '/services/web')).json().UpdateStatus?.State === 'completed', 20_000, 200);
    const svcSince = Math.floor(Date.now() / 1000);
    await engine.dockerOk(['service', 'update', '--detach', '--args', 'sh -c "exit 4"', '--update-failure-action', 'rollback', '--update-monitor', '2s', 'web']);
    const svc = await eventually(async () => {
      const s = (await engine.request('GET', '/services/web')).json();
      return s.UpdateStatus?.State === 'rollback_completed' ? s : undefined;
    }, 30_000, 200);
    assert.match(svc.UpdateStatus.Message, /rollback completed/);
    // Each change of the update's state is a service update event (updatestate.old/new), as dockerd sends them.
    const updateStates = (await engine.request('GET', `/events?since=${svcSince}&until=${Math.floor(Date.now() / 1000) + 1}&filters=${encodeURIComponent(JSON.stringify({ type: ['service'], service: ['web'] }))}`)).text
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l).Actor.Attributes['updatestate.new'])
      .filter(Boolean);
    assert.deepEqual(updateStates.slice(-3), ['updating', 'rollback_started', 'rollback_completed']);
    const back = await running('web', 2);
    assert.ok(back.every((t) => t.Spec.ContainerSpec.Args?.join(' ') === 'sleep 600'));
    // A manual rollback goes back to the previous spec; one without a previous spec is refused.
    const none = await engine.request('POST', '/services/create', { body: { Name: 'norb', TaskTemplate: { ContainerSpec: { Image: 'busybox', Args: ['sleep', '600'] } }, Mode: { Replicated: { Replicas: 0 } } } });
    assert.equal(none.status, 201, none.text);
    const norb = (await engine.request('GET', '/services/norb')).json();
    const rb = await engine.request('POST', `/services/norb/update?version=${norb.Version.Index}&rollback=previous`, { body: norb.Spec });
    assert.equal(rb.status, 400);
    assert.match(rb.json().message, /does not have a previous spec/);
    await engine.dockerOk(['service', 'rm', 'norb']);
  });

  test('secrets and configs: create, inspect without the value, mounted into the tasks, removal refused while in use', async () => {
    await engine.dockerOk(['secret', 'create', '--label', 'a=1', 'pw', '-'], { input: 's3cret' });
    await engine.dockerOk(['config', 'create', 'conf', '-'], { input: 'setting=1\n' });
    const secret = (await engine.request('GET', '/secrets/pw')).json();
    assert.equal(secret.Spec.Name, 'pw');
    assert.equal(secret.Spec.Data, undefined);
    assert.deepEqual(secret.Spec.Labels, { a: '1' });
    const config = (await engine.request('GET', '/configs/conf')).json();
    assert.equal(Buffer.from(config.Spec.Data, 'base64').toString(), 'setting=1\n');
    assert.match(await engine.dockerOk(['secret', 'ls']), /pw/);
    const upd = await engine.request('POST', `/secrets/${secret.ID}/update?version=${secret.Version.Index}`, { body: { Name: 'pw', Labels: { a: '2' } } });
    assert.equal(upd.status, 200, upd.text);
    assert.deepEqual((await engine.request('GET', '/secrets/pw')).json().Spec.Labels, { a: '2' });
    const dup = await engine.request('POST', '/secrets/create', { body: { Name: 'pw', Data: 'eA==' } });
    assert.equal(dup.status, 409);
    await engine.dockerOk(['service', 'create', '--detach', '--name', 'usesec', '--secret', 'pw', '--config', 'source=conf,target=/etc/app.conf', 'busybox', 'sleep', '600']);
    const [t] = await running('usesec', 1);
    const cat = await engine.dockerOk(['exec', t!.Status.ContainerStatus!.ContainerID!, 'cat', '/run/secrets/pw', '/etc/app.conf']);
    assert.equal(cat, 's3cret' + 'setting=1\n');
    // The secret's file is on the exec root's tmpfs, never under the data root; in etcd its value is sealed.
    assert.ok(existsSync(path.join(engine.execRoot, 'swarm', 'tasks', t!.ID)));
    const grep = spawnSync('grep', ['-rla', '-e', 's3cret', '-e', Buffer.from('s3cret').toString('base64'), engine.dataRoot], { encoding: 'utf8' });
    assert.equal(grep.stdout.trim(), '', 'the secret is in clear under the data root');
    assert.ok(existsSync(path.join(engine.dataRoot, 'swarm', 'etcd', 'member')));
    const rm = await engine.request('DELETE', '/secrets/pw');
    assert.equal(rm.status, 409);
    assert.match(rm.json().message, /in use by the following service: usesec/);
    await engine.dockerOk(['service', 'rm', 'usesec']);
    await eventually(async () => (await engine.request('DELETE', '/secrets/pw')).status === 204, 10_000, 200);
    assert.equal((await engine.request('DELETE', '/configs/conf')).status, 204);
    assert.equal((await engine.request('GET', '/secrets/pw')).status, 404);
  });

  test('service and task logs: each line with its task, as the CLI shows them', async () => {
    await engine.dockerOk(['service', 'create', '--detach', '--name', 'talk', '--replicas', '2', '--stop-grace-period', '1s', 'busybox', 'sh', '-c', 'echo hello; echo oops >&2; sleep 600']);
    const tasks = await running('talk', 2);
    const out = await eventually(async () => {
      const r = await engine.docker(['service', 'logs', 'talk']);
      return r.code === 0 && (r.stdout.match(/hello/g) ?? []).length === 2 && (r.stderr.match(/oops/g) ?? []).length === 2 ? r : undefined;
    }, 10_000, 200);
    for (const t of tasks) assert.match(out!.stdout, new RegExp(`talk\\.${t.Slot}\\.${t.ID.slice(0, 12)}\\w*@\\S+\\s+\\| hello`));
    const one = await engine.request('GET', `/tasks/${tasks[0]!.ID}/logs?stdout=1&details=1&timestamps=1`);
    assert.equal(one.status, 200);
    // One multiplexed frame: header, then "<time> <context> hello".
    assert.equal(one.body[0], 1);
    assert.match(one.body.subarray(8).toString(), new RegExp(`^\\S+Z com\\.docker\\.swarm\\.node\\.id=${nodeId},com\\.docker\\.swarm\\.service\\.id=\\w+,com\\.docker\\.swarm\\.task\\.id=${tasks[0]!.ID} hello\\n$`));
    assert.equal((await engine.request('GET', `/tasks/${tasks[0]!.ID}/logs`)).status, 400);
    await engine.dockerOk(['service', 'rm', 'talk']);
  });

  test('a port published in host mode is bound on the node that runs the task', async () => {
    const port = randomInt(20000, 40000);
    await engine.dockerOk(['service', 'create', '--detach', '--name', 'hostport', '--publish', `mode=host,target=80,published=${port}`, '--stop-grace-period', '1s', 'busybox', 'httpd', '-f', '-p', '80']);
    const [t] = await running('hostport', 1);
    const c = (await engine.request('GET', `/containers/${t!.Status.ContainerStatus!.ContainerID}/json`)).json();
    assert.deepEqual(c.HostConfig.PortBindings['80/tcp'], [{ HostIp: '', HostPort: String(port) }]);
    const svc = (await engine.request('GET', '/services/hostport')).json();
    assert.equal(svc.Endpoint.Ports[0].PublishMode, 'host');
    // busybox httpd answers (404: it serves no files) through the published port.
    const reply = await eventually(() => new Promise<string | undefined>((resolve) => {
      const s = net.connect({ host: '127.0.0.1', port }, () => s.end('GET / HTTP/1.0\r\n\r\n'));
      let data = '';
      s.on('data', (d) => (data += d.toString()));
      s.on('close', () => resolve(data || undefined));
      s.on('error', () => resolve(undefined));
    }), 10_000, 200);
    assert.match(reply!, /^HTTP\/1\.[01] \d{3}/);
    await engine.dockerOk(['service', 'rm', 'hostport']);
  });

  test('jobs run to completion: a replicated job (the CLI waits for it), a global job', async () => {
    const out = await engine.dockerOk(['service', 'create', '--name', 'once', '--mode', 'replicated-job', '--replicas', '3', '--max-concurrent', '2', 'busybox', 'sh', '-c', 'sleep 0.2'], { timeoutMs: 60_000 });
    assert.match(out, /job complete/);
    const done = (await tasksOf('once', 'complete')).filter((t) => t.Status.State === 'complete');
    assert.deepEqual(done.map((t) => t.Slot).sort(), [0, 1, 2]);
    const svc = (await engine.request('GET', '/services?status=1&filters=' + encodeURIComponent('{"name":["once"]}'))).json()[0];
    assert.equal(svc.ServiceStatus.CompletedTasks, 3);
    assert.ok(svc.JobStatus.JobIteration.Index > 0);
    await engine.dockerOk(['service', 'create', '--detach', '--name', 'oneach', '--mode', 'global-job', 'busybox', 'true']);
    await eventually(async () => (await tasksOf('oneach', 'complete')).some((t) => t.Status.State === 'complete' && t.NodeID === nodeId), 15_000, 200);
    await engine.dockerOk(['service', 'rm', 'once', 'oneach']);
  });

  test('a global service runs one task on each node', async () => {
    await engine.dockerOk(['service', 'create', '--detach', '--name', 'everywhere', '--mode', 'global', 'busybox', 'sleep', '600']);
    const [t] = await running('everywhere', 1);
    assert.equal(t!.NodeID, nodeId);
    assert.match(await engine.dockerOk(['service', 'ls']), /everywhere\s+global\s+1\/1/);
    await engine.dockerOk(['service', 'rm', 'everywhere']);
  });

  test('responses conform to the published schemas (1.25 and 1.53), and events name the objects', async () => {
    await engine.dockerOk(['service', 'create', '--detach', '--name', 'shape', '--replicas', '1', 'busybox', 'sleep', '600']);
    await engine.dockerOk(['secret', 'create', 'shape', '-'], { input: 'x' });
    await engine.dockerOk(['config', 'create', 'shape', '-'], { input: 'y' });
    await running('shape', 1);
    for (const version of ['1.25', '1.53']) {
      for (const [path, template] of [
        ['/swarm', '/swarm'], ['/nodes', '/nodes'], [`/nodes/${nodeId}`, '/nodes/{id}'], [`/services?filters=${encodeURIComponent('{"name":["shape"]}')}`, '/services'], ['/services/shape', '/services/{id}'],
        [`/tasks?filters=${encodeURIComponent('{"service":["shape"]}')}`, '/tasks'], ['/secrets', '/secrets'], ['/secrets/shape', '/secrets/{id}'], ['/configs', '/configs'], ['/configs/shape', '/configs/{id}'],
      ] as const) {
        if (version === '1.25' && template.startsWith('/configs')) continue;
        // (Services and tasks are those of "shape": as dockerd's, a rolled-back service's UpdateStatus and a
        // removed task's DesiredState have values the 1.25 schema does not list.)
        const r = await engine.request('GET', `/v${version}${path}`);
        assert.equal(r.status, 200, `${path}: ${r.text}`);
        await expectConforms(version, 'GET', template, 200, r.json());
      }
      const task = (await tasksOf('shape'))[0]!;
      await expectConforms(version, 'GET', '/tasks/{id}', 200, (await engine.request('GET', `/v${version}/tasks/${task.ID}`)).json());
    }
    await engine.dockerOk(['service', 'rm', 'shape']);
    await engine.dockerOk(['secret', 'rm', 'shape']);
    const since = Math.floor(Date.now() / 1000) - 120;
    const events = (await engine.request('GET', `/events?since=${since}&until=${Math.floor(Date.now() / 1000) + 1}&filters=${encodeURIComponent(JSON.stringify({ type: ['service', 'secret', 'config'] }))}`)).text
      .trim().split('\n').map((l) => JSON.parse(l) as { Type: string; Action: string; Actor: { Attributes: { name: string } } });
    const seen = events.filter((e) => e.Actor.Attributes.name === 'shape').map((e) => `${e.Type} ${e.Action}`);
    for (const e of ['service create', 'service remove', 'secret create', 'secret remove', 'config create']) assert.ok(seen.includes(e), `${e} in ${seen.join(', ')}`);
  });

  test('the swarm survives a daemon restart: the node comes back as manager and its tasks keep running', async () => {
    const before = (await tasksOf('web')).map((t) => t.Status.ContainerStatus!.ContainerID).sort();
    await engine.restart();
    await eventually(async () => (await engine.request('GET', '/info')).json().Swarm.ControlAvailable === true, 30_000, 200);
    const after = await running('web', 2);
    assert.deepEqual(after.map((t) => t.Status.ContainerStatus!.ContainerID).sort(), before);
    assert.match(await engine.dockerOk(['node', 'ls']), /Ready\s+Active\s+Leader/);
  });

  test('autolock: keys sealed at rest; after a restart the manager is locked until unlocked with its key', async () => {
    const out = await engine.dockerOk(['swarm', 'update', '--autolock=true']);
    const key = /SWMKEY-1-[A-Za-z0-9+/=]+/.exec(out)?.[0];
    assert.ok(key, out);
    assert.equal((await engine.dockerOk(['swarm', 'unlock-key', '-q'])).trim(), key);
    const certDir = path.join(engine.dataRoot, 'swarm', 'certificates');
    const file = (name: string) => readFileSync(path.join(certDir, name), 'utf8');
    // The node's TLS key, the root CA's key and the data key are written again, sealed.
    await eventually(() => ['swarm-node.key', 'swarm-root-ca.key', 'swarm-data.key'].every((f) => file(f).startsWith('berth-locked:')), 10_000, 100);
    assert.doesNotMatch(file('swarm-node.key') + file('swarm-root-ca.key'), /PRIVATE KEY/);
    // The store keeps the unlock key sealed: etcd's files do not hold it.
    const grep = spawnSync('grep', ['-rlF', key.slice('SWMKEY-1-'.length), path.join(engine.dataRoot, 'swarm')], { encoding: 'utf8' });
    assert.equal(grep.stdout.trim(), '', 'the unlock key is on disk in clear');
    const [web] = await tasksOf('web');
    await engine.restart();
    assert.equal((await engine.request('GET', '/info')).json().Swarm.LocalNodeState, 'locked');
    assert.equal((await engine.request('GET', '/_ping')).headers.swarm, 'locked');
    const denied = await engine.docker(['node', 'ls']);
    assert.notEqual(denied.code, 0);
    assert.match(denied.stderr, /Swarm is encrypted and needs to be unlocked before it can be used/);
    const wrong = await engine.docker(['swarm', 'unlock'], { input: `SWMKEY-1-${randomBytes(32).toString('base64')}\n` });
    assert.notEqual(wrong.code, 0);
    assert.match(wrong.stderr, /swarm could not be unlocked: invalid key provided/);
    assert.equal((await engine.request('POST', '/swarm/unlock', { body: { UnlockKey: 'not-a-key' } })).status, 400);
    const forced = await engine.request('POST', '/swarm/init', { body: { ForceNewCluster: true, AdvertiseAddr: IP, ListenAddr: `${IP}:2377` } });
    assert.equal(forced.status, 503);
    assert.match(forced.json().message, /needs to be unlocked/);
    await engine.dockerOk(['swarm', 'unlock'], { input: `${key}\n` });
    await eventually(async () => (await engine.request('GET', '/info')).json().Swarm.ControlAvailable === true, 30_000, 200);
    assert.ok((await running('web', 2)).some((t) => t.ID === web!.ID));
    // The data key opened: the unlock key, sealed under it in the store, reads back.
    assert.equal((await engine.dockerOk(['swarm', 'unlock-key', '-q'])).trim(), key);
    const rotated = (await engine.dockerOk(['swarm', 'unlock-key', '--rotate', '-q'])).trim();
    assert.match(rotated, /^SWMKEY-1-/);
    assert.notEqual(rotated, key);
    await engine.dockerOk(['swarm', 'update', '--autolock=false']);
    await eventually(() => file('swarm-node.key').includes('PRIVATE KEY') && /^[A-Za-z0-9+/]{43}=$/.test(file('swarm-data.key')), 10_000, 100);
    const notLocked = await engine.request('POST', '/swarm/unlock', { body: { UnlockKey: rotated } });
    assert.equal(notLocked.status, 409);
    assert.match(notLocked.json().message, /swarm is not locked/);
  });

  test('swarm leave: refused on the last manager without force; with force the node leaves and its tasks go', async () => {
    const refused = await engine.request('POST', '/swarm/leave');
    assert.equal(refused.status, 503);
    assert.match(refused.json().message, /Removing the last manager erases all current state of the swarm/);
    await engine.dockerOk(['swarm', 'leave', '--force']);
    const info = (await engine.request('GET', '/info')).json();
    assert.equal(info.Swarm.LocalNodeState, 'inactive');
    assert.equal((await engine.request('GET', '/_ping')).headers.swarm, 'inactive');
    const left = (await engine.request('GET', '/containers/json?all=1&filters=' + encodeURIComponent(JSON.stringify({ label: ['com.docker.swarm.task.id'] })))).json();
    assert.equal(left.length, 0);
    assert.equal(await portOpen(IP, 2379), false);
    assert.equal(existsSync(path.join(engine.dataRoot, 'swarm')), false);
    const r = await engine.request('GET', '/v1.53/services');
    assert.equal(r.status, 503);
    assert.equal((await engine.request('POST', '/v1.24/swarm/leave')).status, 406);
  });

  test('swarm init --autolock: the new manager\'s keys are sealed from the start, and the CLI prints the key', async () => {
    const out = await engine.dockerOk(['swarm', 'init', '--autolock', '--advertise-addr', IP, '--listen-addr', `${IP}:2377`], { timeoutMs: 60_000 });
    const key = /SWMKEY-1-[A-Za-z0-9+/=]+/.exec(out)?.[0];
    assert.ok(key, out);
    assert.equal((await engine.dockerOk(['swarm', 'unlock-key', '-q'])).trim(), key);
    assert.equal((await engine.request('GET', '/swarm')).json().Spec.EncryptionConfig.AutoLockManagers, true);
    const nodeKey = path.join(engine.dataRoot, 'swarm', 'certificates', 'swarm-node.key');
    await eventually(() => readFileSync(nodeKey, 'utf8').startsWith('berth-locked:'), 10_000, 100);
    await engine.dockerOk(['swarm', 'leave', '--force']);
  });
});
