/**
 * Nothing leaks: 200 cycles of create, run on a user-defined network (IPv4 and IPv6) with a published port,
 * and remove leave the host's links, namespaces, firewall rules (iptables and ip6tables), IPv6 routes, mounts
 * and the daemon's sockets as they were; so do running containers whose daemon crashed, some of which died
 * before it came back; so do rounds of kill -9 of the daemon in the middle of concurrent runs (no container
 * the daemon answered for is lost, and the monitors, cgroups, veths and rules of the others go); removing the
 * network then leaves nothing of it.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';
import { findProcessesMentioning } from '../bench/procmem.js';
import { eventually, startEngine, type Engine } from './harness.js';

const CYCLES = 200;
const WORKERS = 4;

interface HostState {
  links: string[];
  netns: string[];
  rules: string[];
  rules6: string[];
  routes6: string[];
  mounts: string[];
}

function lines(cmd: string, args: string[]): string[] {
  return spawnSync(cmd, args, { encoding: 'utf8' }).stdout.split('\n').filter(Boolean);
}

/** What the engine may leave on the host: links and rules naming its bridges, named namespaces, mounts under its root. */
function hostState(engine: Engine, bridges: string[]): HostState {
  const mentions = (l: string) => bridges.some((b) => l.includes(b));
  return {
    links: lines('ip', ['-o', 'link']).filter(mentions).map((l) => l.split(':')[1].trim().split('@')[0]).sort(),
    netns: lines('ip', ['netns', 'list']).sort(),
    rules: lines('iptables-save', []).filter((l) => l.startsWith('-A ') && (mentions(l) || l.includes('berth:' + bridges[0]))).sort(),
    rules6: lines('ip6tables-save', []).filter((l) => l.startsWith('-A ') && mentions(l)).sort(),
    // (A bridge's carrier, hence `linkdown`, follows whether it has ports: no leak either way.)
    routes6: lines('ip', ['-6', 'route', 'show']).filter(mentions).map((l) => l.replace(' linkdown', '')).sort(),
    // The exec root's own tmpfs (see host/linux/execroot.ts) stays for as long as the engine's root does.
    mounts: readFileSync('/proc/self/mountinfo', 'utf8').split('\n').map((l) => l.split(' ')[4]).filter((p) => p && p.startsWith(engine.root) && p !== engine.execRoot).sort(),
  };
}

/** Sockets the daemon holds (the embedded DNS listeners keep container namespaces alive). */
function daemonSockets(engine: Engine): number {
  const dir = `/proc/${engine.pid}/fd`;
  let n = 0;
  for (const fd of readdirSync(dir)) {
    try {
      if (readFileSync(`/proc/${engine.pid}/fdinfo/${fd}`, 'utf8') && spawnSync('readlink', [`${dir}/${fd}`], { encoding: 'utf8' }).stdout.startsWith('socket:')) n++;
    } catch {
      // closed meanwhile
    }
  }
  return n;
}

describe('nothing leaks', () => {
  let engine: Engine;
  let bridges: string[];

  before(async () => {
    engine = await startEngine();
    await engine.loadBusybox();
    await engine.dockerOk(['network', 'create', '--ipv6', 'leaknet']);
    const id = (await engine.request('GET', '/networks/leaknet')).json().Id as string;
    bridges = [engine.bridge, `br-${id.slice(0, 12)}`];
  });
  after(async () => {
    await engine?.cleanup();
    // The harness removes the bridges and their iptables rules; the IPv6 network's ip6tables rules go here.
    for (const table of ['nat', 'filter']) {
      for (const rule of lines('ip6tables-save', ['-t', table])) {
        if (!rule.startsWith('-A ') || !bridges?.some((b) => rule.includes(`berth:${b}`))) continue;
        spawnSync('ip6tables', ['-t', table, '-D', ...rule.slice(3).match(/"[^"]*"|\S+/g)!.map((a) => a.replace(/^"|"$/g, ''))]);
      }
    }
  });

  const body = {
    Image: 'busybox',
    Cmd: ['true'],
    ExposedPorts: { '80/tcp': {} },
    HostConfig: { NetworkMode: 'leaknet', PortBindings: { '80/tcp': [{ HostPort: '' }] } },
  };

  async function cycle(): Promise<void> {
    const created = await engine.request('POST', '/containers/create', { body });
    assert.equal(created.status, 201, created.text);
    const id = created.json().Id;
    const started = await engine.request('POST', `/containers/${id}/start`);
    assert.equal(started.status, 204, started.text);
    const waited = await engine.request('POST', `/containers/${id}/wait`, { timeoutMs: 60_000 });
    assert.equal(waited.json().StatusCode, 0);
    const removed = await engine.request('DELETE', `/containers/${id}?force=1`);
    assert.equal(removed.status, 204, removed.text);
  }

  test(`${CYCLES} cycles of create, run with a published port on a user network, remove`, async () => {
    // A warm-up as concurrent as the run: the client's kept-alive connections are counted in the baseline.
    await Promise.all(Array.from({ length: WORKERS }, () => cycle()));
    // A removal answers before the root filesystem of the container is unmounted: the baseline has none.
    await eventually(() => hostState(engine, bridges).mounts.length === 0, 15_000);
    const before = hostState(engine, bridges);
    const socketsBefore = daemonSockets(engine);
    let left = CYCLES;
    await Promise.all(
      Array.from({ length: WORKERS }, async () => {
        while (left-- > 0) await cycle();
      }),
    );
    await eventually(() => JSON.stringify(hostState(engine, bridges)) === JSON.stringify(before), 15_000);
    assert.deepEqual(hostState(engine, bridges), before);
    assert.ok(daemonSockets(engine) <= socketsBefore + 2, `sockets ${socketsBefore} -> ${daemonSockets(engine)}`);
    const stored = readdirSync(`${engine.dataRoot}/containers`).filter((f) => /^[0-9a-f]{64}$/.test(f));
    assert.deepEqual(stored, []);
  });

  test('running containers through a daemon crash (some dying meanwhile), then removed: nothing left', async () => {
    const before = hostState(engine, bridges);
    const ids: string[] = [];
    for (let i = 0; i < 6; i++) {
      const created = await engine.request('POST', '/containers/create', { body: { ...body, Cmd: ['sleep', '300'] } });
      ids.push(created.json().Id);
      assert.equal((await engine.request('POST', `/containers/${ids[i]}/start`)).status, 204);
    }
    const pids: number[] = [];
    for (const id of ids.slice(0, 3)) pids.push((await engine.request('GET', `/containers/${id}/json`)).json().State.Pid);
    await engine.crash();
    for (const pid of pids) process.kill(pid, 'SIGKILL');
    await engine.start();
    const socketsAfterRestart = daemonSockets(engine);
    for (const id of ids) assert.equal((await engine.request('DELETE', `/containers/${id}?force=1`)).status, 204);
    await eventually(() => JSON.stringify(hostState(engine, bridges)) === JSON.stringify(before), 15_000);
    assert.deepEqual(hostState(engine, bridges), before);
    // The three live containers had DNS listeners (a UDP and a TCP socket each) again after the restart.
    assert.ok(daemonSockets(engine) <= socketsAfterRestart - 6 + 2, `sockets ${socketsAfterRestart} -> ${daemonSockets(engine)}`);
  });

  test('kill -9 of the daemon in the middle of concurrent runs, three rounds: no container lost, nothing leaked', { timeout: 180_000 }, async (t) => {
    const before = hostState(engine, bridges);
    const seen = new Set<string>();
    // The daemon's monitors: every process but the daemon that names the engine's root.
    const monitors = () => findProcessesMentioning(engine.root).filter((pid) => pid !== engine.pid && pid !== process.pid);
    // Containers' cgroups, wherever a controller's hierarchy is mounted (crun puts them at berth/<id>).
    const cgroupsOf = (ids: Iterable<string>) => {
      const roots = readdirSync('/sys/fs/cgroup').map((c) => `/sys/fs/cgroup/${c}/berth`);
      return [...ids].flatMap((id) => roots.map((r) => `${r}/${id}`)).filter((dir) => existsSync(dir));
    };
    const publishedRule = (port: string) => lines('iptables-save', ['-t', 'nat']).some((l) => l.includes('DNAT') && l.includes(`--dport ${port}`));
    const run = async (body: object) => {
      const created = await engine.request('POST', '/containers/create', { body });
      assert.equal(created.status, 201, created.text);
      const id = created.json().Id as string;
      seen.add(id);
      assert.equal((await engine.request('POST', `/containers/${id}/start`)).status, 204);
      return id;
    };
    // Containers that run through every crash: on the user network and on the default bridge with a published
    // port each, and one without a network.
    const kept: Array<{ id: string; pid: number; hostPort?: string }> = [];
    for (const b of [
      { ...body, Cmd: ['sleep', '600'] },
      { Image: 'busybox', Cmd: ['sleep', '600'], ExposedPorts: { '80/tcp': {} }, HostConfig: { PortBindings: { '80/tcp': [{ HostPort: '' }] } } },
      { Image: 'busybox', Cmd: ['sleep', '600'], HostConfig: { NetworkMode: 'none' } },
    ]) {
      const id = await run(b);
      const state = (await engine.request('GET', `/containers/${id}/json`)).json();
      kept.push({ id, pid: state.State.Pid, hostPort: state.NetworkSettings.Ports?.['80/tcp']?.[0]?.HostPort });
    }
    const variants = [
      { ...body, Cmd: ['sleep', '600'] },
      { Image: 'busybox', Cmd: ['true'], ExposedPorts: { '80/tcp': {} }, HostConfig: { PortBindings: { '80/tcp': [{ HostPort: '' }] } } },
      { Image: 'busybox', Cmd: ['sh', '-c', 'echo hi; sleep 600'], HostConfig: { NetworkMode: 'none' } },
    ];
    for (let round = 0; round < 3; round++) {
      // Containers whose create was answered, those whose removal was asked for, and those whose removal was
      // answered: the first must be there after the restart unless their removal was asked for (the crash may
      // have come before or after it was done), and the last must not.
      const answered = new Set<string>();
      const removing = new Set<string>();
      const removed = new Set<string>();
      let crashing = false;
      const worker = async (w: number) => {
        for (let i = 0; !crashing; i++) {
          const created = await engine.request('POST', '/containers/create', { body: variants[(w + i) % variants.length] });
          if (created.status !== 201) throw new Error(`create answered ${created.status}: ${created.text}`);
          const id = created.json().Id as string;
          answered.add(id);
          seen.add(id);
          await engine.request('POST', `/containers/${id}/start`);
          // Two in three are removed again; the others stay, running or exited, into the crash.
          if (i % 3 === 2) continue;
          removing.add(id);
          if ((await engine.request('DELETE', `/containers/${id}?force=1`)).status === 204) removed.add(id);
        }
      };
      const workers = Array.from({ length: WORKERS }, (_, w) => worker(w).catch((err: Error) => (crashing ? undefined : Promise.reject(err))));
      await new Promise((r) => setTimeout(r, 700 + round * 400));
      crashing = true;
      await engine.crash();
      await Promise.all(workers);
      await engine.start();

      const listed = new Set((await engine.request('GET', '/containers/json?all=1')).json<Array<{ Id: string }>>().map((c) => c.Id));
      t.diagnostic(`round ${round}: ${answered.size} created, ${removed.size} removed, ${removing.size - removed.size} removals cut by the crash; ${listed.size} containers after the restart`);
      for (const id of answered) {
        if (removed.has(id)) assert.ok(!listed.has(id), `round ${round}: ${id.slice(0, 12)} was removed before the crash, and is back`);
        else if (!removing.has(id)) assert.ok(listed.has(id), `round ${round}: ${id.slice(0, 12)} was created before the crash, and is lost`);
      }
      for (const k of kept) {
        const state = (await engine.request('GET', `/containers/${k.id}/json`)).json();
        assert.equal(state.State.Running, true, `round ${round}: a running container came back not running`);
        assert.equal(state.State.Pid, k.pid, `round ${round}: the same process`);
        if (k.hostPort) assert.ok(publishedRule(k.hostPort), `round ${round}: its port ${k.hostPort} is still published`);
      }
      // One monitor per running container, no more: those of the containers removed or half-made are gone.
      const running = async () => (await engine.request('GET', '/containers/json')).json<unknown[]>().length;
      await eventually(async () => monitors().length === (await running()), 15_000).catch(async () =>
        assert.fail(`round ${round}: ${monitors().length} monitors for ${await running()} running containers`),
      );
    }

    for (const id of (await engine.request('GET', '/containers/json?all=1')).json<Array<{ Id: string }>>().map((c) => c.Id)) {
      assert.equal((await engine.request('DELETE', `/containers/${id}?force=1`)).status, 204);
    }
    await eventually(() => JSON.stringify(hostState(engine, bridges)) === JSON.stringify(before), 15_000).catch(() => undefined);
    assert.deepEqual(hostState(engine, bridges), before);
    await eventually(() => monitors().length === 0 && cgroupsOf(seen).length === 0, 15_000).catch(() => undefined);
    assert.deepEqual(monitors(), [], 'no monitor is left');
    assert.deepEqual(cgroupsOf(seen), [], 'no cgroup of a container is left');
    const stored = readdirSync(`${engine.dataRoot}/containers`).filter((f) => /^[0-9a-f]{64}$/.test(f));
    assert.deepEqual(stored, [], 'no container folder is left');
  });

  test('removing the network after all that leaves none of its links, rules (iptables and ip6tables) or routes', async () => {
    const state = hostState(engine, bridges.slice(1));
    assert.ok(state.rules6.length > 0, 'the IPv6 network has ip6tables rules');
    assert.ok(state.routes6.length > 0, 'and its IPv6 route');
    assert.equal((await engine.request('DELETE', '/networks/leaknet')).status, 204);
    assert.deepEqual(hostState(engine, bridges.slice(1)), { links: [], netns: state.netns, rules: [], rules6: [], routes6: [], mounts: state.mounts });
  });
});
