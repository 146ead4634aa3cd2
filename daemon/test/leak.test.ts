/**
 * Nothing leaks: 200 cycles of create, run on a user-defined network (IPv4 and IPv6) with a published port,
 * and remove leave the host's links, namespaces, firewall rules (iptables and ip6tables), IPv6 routes, mounts
 * and the daemon's sockets as they were; so do running containers whose daemon crashed, some of which died
 * before it came back; removing the network then leaves nothing of it.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';
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
    routes6: lines('ip', ['-6', 'route', 'show']).filter(mentions).sort(),
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

  test('removing the network after all that leaves none of its links, rules (iptables and ip6tables) or routes', async () => {
    const state = hostState(engine, bridges.slice(1));
    assert.ok(state.rules6.length > 0, 'the IPv6 network has ip6tables rules');
    assert.ok(state.routes6.length > 0, 'and its IPv6 route');
    assert.equal((await engine.request('DELETE', '/networks/leaknet')).status, 204);
    assert.deepEqual(hostState(engine, bridges.slice(1)), { links: [], netns: state.netns, rules: [], rules6: [], routes6: [], mounts: state.mounts });
  });
});
