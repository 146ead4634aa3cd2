/**
 * Swarm mode across daemons, each in a network namespace of its own on a test bridge (as in the netns harness
 * of the swarm notes): a worker joins with the real docker CLI (after a token naming another CA is refused
 * before its secret is sent), gets its tasks and only their secrets through the manager's dispatcher, and when
 * its daemon is killed the manager marks it down and moves its task; when it comes back its orphaned task
 * is stopped. A worker whose daemon restarts, or stalls for a moment, stays ready with its tasks. A second manager joins with an etcd member of its own; spread preferences place by a label.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { Engine, eventually } from './harness.js';
import { NetnsCluster } from './netns.js';

const cluster = new NetnsCluster(3);
const nodes = cluster.nodes;

/** A daemon in node i's namespace (BERTH_TEST_VERBOSE=1 shows the daemons' logs). */
const nodeEngine = (i: number) => cluster.engine(i, { verbose: process.env.BERTH_TEST_VERBOSE === '1' });

const engines: Engine[] = [];

before(async () => {
  cluster.setUp();
  for (let i = 0; i < 3; i++) engines.push(nodeEngine(i));
  await Promise.all(engines.slice(0, 2).map(async (e) => {
    await e.start();
    await e.loadBusybox();
  }));
});

after(async () => {
  for (const e of engines) await e.cleanup().catch(() => undefined);
  cluster.tearDown();
});

interface Task {
  ID: string;
  NodeID: string;
  DesiredState: string;
  Status: { State: string; ContainerStatus?: { ContainerID?: string } };
}

describe('a swarm of daemons in their own network namespaces', () => {
  const [m1, w1, m2] = [0, 1, 2].map((i) => new Proxy({} as Engine, { get: (_, k) => Reflect.get(engines[i]!, k, engines[i]).bind?.(engines[i]) ?? Reflect.get(engines[i]!, k, engines[i]) }));
  let managerId = '';
  let workerId = '';
  let workerToken = '';

  const tasks = async (service: string): Promise<Task[]> =>
    (await m1!.request('GET', `/tasks?filters=${encodeURIComponent(JSON.stringify({ service: [service], 'desired-state': ['running'] }))}`)).json<Task[]>();
  const nodeState = async (id: string): Promise<string> => (await m1!.request('GET', `/nodes/${id}`)).json().Status.State;
  /** The node's state changes on the manager's event stream since `since` (seconds), as `old->new`. */
  const stateEvents = async (id: string, since: number): Promise<string[]> =>
    (await m1!.request('GET', `/events?since=${since}&until=${Math.floor(Date.now() / 1000) + 1}&filters=${encodeURIComponent(JSON.stringify({ type: ['node'], node: [id] }))}`)).text
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l))
      .filter((e) => e.Action === 'update' && e.Actor.Attributes['state.new'])
      .map((e) => `${e.Actor.Attributes['state.old']}->${e.Actor.Attributes['state.new']}`);
  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

  test('a worker joins with the token: after a token of another CA is refused, before its secret is sent', async () => {
    await m1!.dockerOk(['swarm', 'init', '--advertise-addr', nodes[0]!.ip, '--dispatcher-heartbeat', '1s']);
    managerId = (await m1!.request('GET', '/info')).json().Swarm.NodeID;
    workerToken = (await m1!.dockerOk(['swarm', 'join-token', '-q', 'worker'])).trim();
    const otherCa = workerToken.replace(/^(SWMTKN-1-)(\w)/, (_, p: string, c: string) => p + (c === '0' ? '1' : '0'));
    const refused = await w1!.docker(['swarm', 'join', '--token', otherCa, `${nodes[0]!.ip}:2377`]);
    assert.notEqual(refused.code, 0);
    assert.match(refused.stderr, /remote CA does not match fingerprint/);
    assert.equal((await w1!.request('GET', '/info')).json().Swarm.LocalNodeState, 'inactive');
    const out = await w1!.dockerOk(['swarm', 'join', '--token', workerToken, '--advertise-addr', nodes[1]!.ip, `${nodes[0]!.ip}:2377`]);
    assert.match(out, /This node joined a swarm as a worker/);
    const info = (await w1!.request('GET', '/info')).json().Swarm;
    workerId = info.NodeID;
    assert.equal(info.LocalNodeState, 'active');
    assert.equal(info.ControlAvailable, false);
    assert.equal((await w1!.request('GET', '/_ping')).headers.swarm, 'active/worker');
    await eventually(async () => (await nodeState(workerId)) === 'ready', 15_000, 200);
    const ls = await m1!.dockerOk(['node', 'ls']);
    assert.match(ls, /node-2\s+Ready\s+Active\s/);
    assert.match(ls, /node-1\s+Ready\s+Active\s+Leader/);
    // A worker serves no cluster state.
    const denied = await w1!.docker(['node', 'ls']);
    assert.notEqual(denied.code, 0);
    assert.match(denied.stderr, /Worker nodes can't be used to view or modify cluster state/);
  });

  test('tasks spread over both nodes, and only a node running a task gets its secret', async () => {
    await m1!.dockerOk(['secret', 'create', 'shared', '-'], { input: 'for-both' });
    await m1!.dockerOk(['secret', 'create', 'manager-only', '-'], { input: 'not-for-the-worker' });
    await m1!.dockerOk(['service', 'create', '--detach', '--name', 'spread', '--replicas', '2', '--secret', 'shared', '--stop-grace-period', '1s', 'busybox', 'sleep', '600']);
    await m1!.dockerOk(['service', 'create', '--detach', '--name', 'pinned', '--constraint', 'node.role==manager', '--secret', 'manager-only', '--stop-grace-period', '1s', 'busybox', 'sleep', '600']);
    const spread = await eventually(async () => {
      const list = (await tasks('spread')).filter((t) => t.Status.State === 'running');
      return list.length === 2 ? list : undefined;
    }, 30_000, 200) as Task[];
    assert.deepEqual(spread.map((t) => t.NodeID).sort(), [managerId, workerId].sort());
    const onWorker = spread.find((t) => t.NodeID === workerId)!;
    const cat = await w1!.dockerOk(['exec', onWorker.Status.ContainerStatus!.ContainerID!, 'cat', '/run/secrets/shared']);
    assert.equal(cat, 'for-both');
    const c = (await w1!.request('GET', `/containers/${onWorker.Status.ContainerStatus!.ContainerID}/json`)).json();
    assert.equal(c.Config.Labels['com.docker.swarm.node.id'], workerId);
    assert.equal(c.Name, `/spread.${(c.Config.Labels['com.docker.swarm.task.name'] as string).split('.')[1]}.${onWorker.ID}`);
    const [pinned] = await eventually(async () => {
      const list = (await tasks('pinned')).filter((t) => t.Status.State === 'running');
      return list.length === 1 ? list : undefined;
    }, 30_000, 200) as Task[];
    assert.equal(pinned!.NodeID, managerId);
    // The worker's task files: its own task's only, and none holds the other secret.
    const dir = path.join(w1!.execRoot, 'swarm', 'tasks');
    assert.deepEqual(readdirSync(dir), [onWorker.ID]);
    const grep = spawnSync('grep', ['-rl', 'not-for-the-worker', w1!.root], { encoding: 'utf8' });
    assert.equal(grep.stdout.trim(), '', 'the manager-only secret reached the worker');
  });

  test('service logs gather the tasks\' logs from every node: the worker streams its own through the dispatcher', async () => {
    await m1!.dockerOk(['service', 'create', '--detach', '--name', 'talk', '--replicas', '2', '--stop-grace-period', '1s', 'busybox', 'sh', '-c', 'echo "hello from task $$"; sleep 600']);
    const list = await eventually(async () => {
      const l = (await tasks('talk')).filter((t) => t.Status.State === 'running');
      return l.length === 2 ? l : undefined;
    }, 30_000, 200) as Task[];
    assert.deepEqual(list.map((t) => t.NodeID).sort(), [managerId, workerId].sort());
    const out = await eventually(async () => {
      const r = await m1!.dockerOk(['service', 'logs', 'talk']);
      return /@node-1\s+\| hello from task/.test(r) && /@node-2\s+\| hello from task/.test(r) ? r : undefined;
    }, 20_000, 500);
    assert.ok(out);
    // A task's own log, from the worker, through the API.
    const onWorker = list.find((t) => t.NodeID === workerId)!;
    const r = await m1!.request('GET', `/tasks/${onWorker.ID}/logs?stdout=1&details=1`);
    assert.equal(r.status, 200);
    assert.match(r.body.subarray(8).toString(), new RegExp(`^com\\.docker\\.swarm\\.node\\.id=${workerId},.* hello from task`));
    await m1!.dockerOk(['service', 'rm', 'talk']);
  });

  test('a drained node\'s tasks move; back active, it takes new ones', async () => {
    await m1!.dockerOk(['node', 'update', '--availability', 'drain', workerId]);
    await eventually(async () => {
      const list = (await tasks('spread')).filter((t) => t.Status.State === 'running');
      return list.length === 2 && list.every((t) => t.NodeID === managerId);
    }, 20_000, 200);
    // Its task's container is stopped and its secret's file gone from the worker.
    await eventually(() => readdirSync(path.join(w1!.execRoot, 'swarm', 'tasks')).length === 0, 10_000, 200);
    await m1!.dockerOk(['node', 'update', '--availability', 'active', workerId]);
    await m1!.dockerOk(['service', 'scale', '--detach', 'spread=3']);
    await eventually(async () => {
      const list = (await tasks('spread')).filter((t) => t.Status.State === 'running');
      return list.length === 3 && list.some((t) => t.NodeID === workerId);
    }, 20_000, 200);
  });

  test('a worker whose daemon restarts, or stalls (SIGSTOP) for less than its session\'s lease, stays ready and keeps its tasks', async () => {
    const since = Math.floor(Date.now() / 1000) - 1;
    const running = async () => (await tasks('spread')).filter((t) => t.Status.State === 'running').map((t) => `${t.ID}@${t.NodeID}`).sort();
    const before = await running();
    assert.equal(before.length, 3);
    assert.ok(before.some((t) => t.endsWith(`@${workerId}`)), 'no task on the worker');
    // A restart that takes longer than the heartbeat period (1 s) but less than the session's lease (3 s): the
    // daemon tells its manager before its stream closes, and its session lives out its lease while the daemon
    // is away (its tasks' containers run on meanwhile).
    const restarting = Date.now();
    await w1!.stop();
    await sleep(1200);
    await w1!.start();
    console.log(`# the worker's daemon was away for ${Date.now() - restarting} ms`);
    await eventually(async () => (await w1!.request('GET', '/info')).json().Swarm.LocalNodeState === 'active', 10_000, 100);
    // Past the lease the daemon's last heartbeat before its stop kept (and etcd's check of expired leases).
    await sleep(Math.max(0, restarting + 4000 - Date.now()));
    assert.equal(await nodeState(workerId), 'ready');
    assert.deepEqual(await running(), before);
    // A stall: heartbeats stop but the daemon's connections stay open. 1.5 s is half the session's lease.
    const pid = w1!.pid!;
    process.kill(pid, 'SIGSTOP');
    try {
      await sleep(1500);
    } finally {
      process.kill(pid, 'SIGCONT');
    }
    await sleep(3000);
    assert.equal(await nodeState(workerId), 'ready');
    assert.deepEqual(await stateEvents(workerId, since), []);
    assert.deepEqual(await running(), before);
  });

  test('kill -9 of the worker\'s daemon: it is marked down and its task moves; back, its orphaned task stops', async () => {
    const old = (await tasks('spread')).find((t) => t.NodeID === workerId)!;
    const started = Date.now();
    const since = Math.floor(started / 1000) - 1;
    await w1!.crash();
    // The kernel closes the dead daemon's connections: the manager ends its session one heartbeat period (1 s)
    // later, and the task runs on the manager soon after (the benchmark bench/swarm-nodes.js measures it).
    const moved = await eventually(async () => {
      const list = (await tasks('spread')).filter((t) => t.Status.State === 'running');
      return list.length === 3 && list.every((t) => t.NodeID === managerId) ? list : undefined;
    }, 20_000, 50);
    assert.ok(moved);
    const elapsed = Date.now() - started;
    console.log(`# kill -9 of the worker to its task running on the manager: ${elapsed} ms`);
    assert.ok(elapsed < 4000, `rescheduled after ${elapsed} ms`);
    assert.equal(await nodeState(workerId), 'down');
    // The managers say so on their event streams, as dockerd does.
    assert.deepEqual(await eventually(async () => ((await stateEvents(workerId, since)).length ? stateEvents(workerId, since) : undefined), 5000, 200), ['ready->down']);
    // The logs of the down node's tasks are left out at once (no wait for a node that cannot answer).
    const logsStarted = Date.now();
    await m1!.dockerOk(['service', 'logs', 'spread']);
    assert.ok(Date.now() - logsStarted < 5000, `service logs took ${Date.now() - logsStarted} ms with a node down`);
    // The container of the old task still runs under conmon while its daemon is away.
    await w1!.start();
    await eventually(async () => (await nodeState(workerId)) === 'ready', 20_000, 200);
    await eventually(async () => {
      const r = await w1!.request('GET', `/containers/${old.Status.ContainerStatus!.ContainerID}/json`);
      return r.status === 404 || r.json().State.Running === false;
    }, 20_000, 200);
  });

  test('a second manager joins with an etcd member of its own', async () => {
    await engines[2]!.start();
    await engines[2]!.loadBusybox();
    const token = (await m1!.dockerOk(['swarm', 'join-token', '-q', 'manager'])).trim();
    const out = await m2!.dockerOk(['swarm', 'join', '--token', token, '--advertise-addr', nodes[2]!.ip, `${nodes[0]!.ip}:2377`], { timeoutMs: 60_000 });
    assert.match(out, /This node joined a swarm as a manager/);
    const info = (await m2!.request('GET', '/info')).json().Swarm;
    assert.equal(info.ControlAvailable, true);
    // Both managers see the same store: the new one lists the services and nodes.
    await eventually(async () => {
      const ls = await m2!.docker(['node', 'ls']);
      return ls.code === 0 && /node-3\s+Ready\s+Active\s+Reachable/.test(ls.stdout) && /node-1\s+Ready\s+Active\s+Leader/.test(ls.stdout);
    }, 20_000, 300);
    assert.match(await m2!.dockerOk(['service', 'ls']), /spread/);
    assert.equal(existsSync(path.join(m2!.dataRoot, 'swarm', 'etcd', 'member')), true);
  });

  test('a spread preference balances tasks over a label\'s values, not over nodes', async () => {
    const m2Id = (await m2!.request('GET', '/info')).json().Swarm.NodeID as string;
    await m1!.dockerOk(['node', 'update', '--label-add', 'zone=a', managerId]);
    for (const id of [workerId, m2Id]) await m1!.dockerOk(['node', 'update', '--label-add', 'zone=b', id]);
    await m1!.dockerOk(['service', 'create', '--detach', '--name', 'zoned', '--replicas', '6', '--placement-pref', 'spread=node.labels.zone', '--stop-grace-period', '1s', 'busybox', 'sleep', '600']);
    const list = await eventually(async () => {
      const l = (await tasks('zoned')).filter((t) => t.Status.State === 'running');
      return l.length === 6 ? l : undefined;
    }, 30_000, 200) as Task[];
    // Zone a has one node, zone b two: half the tasks on node-1 (spread over nodes would put two there).
    const count = (id: string) => list.filter((t) => t.NodeID === id).length;
    assert.equal(count(managerId), 3, JSON.stringify(list.map((t) => t.NodeID)));
    assert.equal(count(workerId) + count(m2Id), 3);
    await m1!.dockerOk(['service', 'rm', 'zoned']);
    for (const id of [managerId, workerId, m2Id]) await m1!.dockerOk(['node', 'update', '--label-rm', 'zone', id]);
  });

  test('promotion, kill -9 of the leader (another manager takes over, services keep their replicas), demotion', async () => {
    const promoting = Math.floor(Date.now() / 1000) - 1;
    await m1!.dockerOk(['node', 'promote', workerId]);
    await eventually(async () => (await w1!.request('GET', '/info')).json().Swarm.ControlAvailable === true, 30_000, 300);
    assert.equal(existsSync(path.join(w1!.dataRoot, 'swarm', 'etcd', 'member')), true);
    await eventually(async () => /node-2\s+Ready\s+Active\s+Reachable/.test(await m1!.dockerOk(['node', 'ls'])), 15_000, 300);
    // The node stayed ready through its promotion (its tasks were not moved).
    assert.deepEqual(await stateEvents(workerId, promoting), [], 'the node went down during its promotion');
    const killedAt = Date.now();
    await m1!.crash();
    const leader = await eventually(async () => {
      const r = await m2!.request('GET', '/nodes');
      if (r.status !== 200) return undefined;
      const list = r.json<Array<{ ID: string; ManagerStatus?: { Leader?: boolean } }>>();
      return list.find((n) => n.ManagerStatus?.Leader && n.ID !== managerId);
    }, 20_000, 50);
    const failover = Date.now() - killedAt;
    assert.ok(leader, 'no new leader');
    // The leader key's lease (2 s) runs out; etcd's leader was moved off the leader's host, so no etcd
    // election comes first.
    assert.ok(failover < 3000, `a new leader only ${failover} ms after kill -9`);
    const spread = await eventually(async () => {
      const r = await m2!.request('GET', `/tasks?filters=${encodeURIComponent(JSON.stringify({ service: ['spread'], 'desired-state': ['running'] }))}`);
      const list = r.status === 200 ? r.json<Task[]>().filter((t) => t.Status.State === 'running' && t.NodeID !== managerId) : [];
      return list.length === 3 ? list : undefined;
    }, 30_000, 300).catch(async (err) => {
      if (process.env.BERTH_TEST_VERBOSE === '1') {
        console.log((await m2!.request('GET', '/nodes')).text);
        console.log((await m2!.request('GET', '/tasks')).text);
      }
      throw err;
    });
    assert.ok(spread);
    console.log(`# leader failover: a new leader ${failover} ms after kill -9`);
    // The old leader comes back as a manager of the same swarm.
    await m1!.start();
    await eventually(async () => (await m1!.request('GET', '/info')).json().Swarm.ControlAvailable === true, 30_000, 300);
    await eventually(async () => (await m1!.docker(['node', 'ls'])).code === 0, 30_000, 300);
    // Demotion: the node's etcd member is removed and it goes on as a worker, its node ready throughout.
    const demoting = Math.floor(Date.now() / 1000) - 1;
    await m2!.dockerOk(['node', 'demote', workerId]);
    await eventually(async () => {
      const info = (await w1!.request('GET', '/info')).json().Swarm;
      return info.LocalNodeState === 'active' && info.ControlAvailable === false && !existsSync(path.join(w1!.dataRoot, 'swarm', 'etcd'));
    }, 30_000, 300);
    const node = (await m2!.request('GET', `/nodes/${workerId}`)).json();
    assert.equal(node.Spec.Role, 'worker');
    assert.equal(node.ManagerStatus, undefined);
    await eventually(async () => (await nodeState(workerId)) === 'ready', 15_000, 200);
    // Past the lease that carried its session meanwhile.
    await sleep(Math.max(0, demoting * 1000 + 12_000 - Date.now()));
    assert.deepEqual(await stateEvents(workerId, demoting), [], 'the node went down during its demotion');
  });

  test('the worker leaves: its node is down on the managers', async () => {
    await w1!.dockerOk(['swarm', 'leave']);
    assert.equal((await w1!.request('GET', '/info')).json().Swarm.LocalNodeState, 'inactive');
    await eventually(async () => (await nodeState(workerId)) === 'down', 15_000, 200);
    await m1!.dockerOk(['node', 'rm', workerId]);
    assert.equal((await m1!.request('GET', `/nodes/${workerId}`)).status, 404);
  });

  test('a manager leaves with force: out of etcd first, so the one left keeps its quorum', async () => {
    const m2Id = (await m2!.request('GET', '/info')).json().Swarm.NodeID;
    await m2!.dockerOk(['swarm', 'leave', '--force']);
    await eventually(async () => (await nodeState(m2Id)) === 'down', 15_000, 200);
    const node = (await m1!.request('GET', `/nodes/${m2Id}`)).json();
    assert.equal(node.Spec.Role, 'worker');
    // Writes still go through on the manager left alone.
    await m1!.dockerOk(['service', 'scale', '--detach', 'spread=1']);
    await eventually(async () => (await tasks('spread')).filter((t) => t.Status.State === 'running').length === 1, 20_000, 200);
  });

  test('quorum lost: writes answer a clear error and tasks keep running; init --force-new-cluster brings the swarm back', async () => {
    const token = (await m1!.dockerOk(['swarm', 'join-token', '-q', 'manager'])).trim();
    await m2!.dockerOk(['swarm', 'join', '--token', token, '--advertise-addr', nodes[2]!.ip, `${nodes[0]!.ip}:2377`], { timeoutMs: 60_000 });
    await eventually(async () => /node-3\s+Ready\s+Active\s+Reachable/.test(await m1!.dockerOk(['node', 'ls'])), 20_000, 300);
    const [task] = (await tasks('spread')).filter((t) => t.Status.State === 'running');
    await m2!.crash();
    const started = Date.now();
    const refused = await m1!.docker(['service', 'scale', '--detach', 'spread=2'], { timeoutMs: 60_000 });
    assert.notEqual(refused.code, 0);
    assert.match(refused.stderr, /the swarm's store cannot be reached/);
    console.log(`# a write without quorum failed after ${Date.now() - started} ms`);
    const c = (await m1!.request('GET', `/containers/${task!.Status.ContainerStatus!.ContainerID}/json`)).json();
    assert.equal(c.State.Running, true);
    await m1!.dockerOk(['swarm', 'init', '--force-new-cluster', '--advertise-addr', nodes[0]!.ip], { timeoutMs: 60_000 });
    await eventually(async () => (await m1!.docker(['service', 'scale', '--detach', 'spread=2'])).code === 0, 20_000, 500);
    await eventually(async () => (await tasks('spread')).filter((t) => t.Status.State === 'running').length === 2, 20_000, 200);
    const ls = await m1!.dockerOk(['node', 'ls']);
    assert.match(ls, /node-1\s+Ready\s+Active\s+Leader/);
  });
});