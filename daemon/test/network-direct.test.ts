/**
 * Direct delivery between the containers of a bridge, against a real berthd with the docker CLI: each
 * container's MAC has a u32 filter in the bridge's shared tc block that hands its frames to its veth, the
 * traffic between two containers goes through those filters (their counters), the filter goes with its
 * container, a published port reached from a container of the same bridge through a host address answers
 * (its replies come back through the host's NAT), icc=false keeps every frame on the bridge and its rules,
 * an address given again reaches the new container even where a filter of an earlier one was left, and a
 * container that died while the daemon was down loses its filter at the next start.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { randomInt } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { describe, test } from 'node:test';
import { DAEMON_DIR, eventually, useEngine } from './harness.js';

interface DirectFilter {
  mac: string;
  device: string;
  packets: number;
}

/** The direct delivery filters of a bridge's block (`tc -s filter show block <ifindex>`). */
function directFilters(bridge: string): DirectFilter[] {
  let index: string;
  try {
    index = readFileSync(`/sys/class/net/${bridge}/ifindex`, 'utf8').trim();
  } catch {
    return [];
  }
  const out = spawnSync('tc', ['-s', 'filter', 'show', 'block', index], { encoding: 'utf8' }).stdout;
  const filters: DirectFilter[] = [];
  for (const chunk of out.split(/^filter /m)) {
    const head = /match ([0-9a-f]{8})\/0000ffff at -16/.exec(chunk);
    const tail = /match ([0-9a-f]{8})\/ffffffff at -12/.exec(chunk);
    const device = /Redirect to device (\S+?)\)/.exec(chunk);
    if (!head || !tail || !device) continue;
    const hex = head[1].slice(4) + tail[1];
    filters.push({ mac: hex.match(/../g)!.join(':'), device: device[1], packets: Number(/Sent \d+ bytes (\d+) pkt/.exec(chunk)?.[1] ?? 0) });
  }
  return filters;
}

/** The host end of a container's veth: the interface whose index is the container end's peer. */
function hostVeth(pid: string): string {
  const inner = spawnSync('nsenter', ['-t', pid, '-n', 'ip', '-j', 'link', 'show', 'eth0'], { encoding: 'utf8' });
  const peer = (JSON.parse(inner.stdout) as Array<{ link_index: number }>)[0].link_index;
  const host = JSON.parse(spawnSync('ip', ['-j', 'link', 'show'], { encoding: 'utf8' }).stdout) as Array<{ ifindex: number; ifname: string }>;
  return host.find((l) => l.ifindex === peer)!.ifname;
}

const HTTPD = ['busybox', 'httpd', '-f', '-p', '80', '-h', '/etc'];

describe('direct delivery between the containers of a bridge', () => {
  const engine = useEngine();

  async function endpoint(name: string, network: string) {
    const info = (await engine.request('GET', `/containers/${name}/json`)).json();
    const settings = info.NetworkSettings.Networks[network];
    return { id: info.Id as string, pid: String(info.State.Pid), ip: settings.IPAddress as string, mac: settings.MacAddress as string, gateway: settings.Gateway as string };
  }

  async function bridgeOf(network: string): Promise<string> {
    const id = (await engine.request('GET', `/networks/${network}`)).json().Id as string;
    return `br-${id.slice(0, 12)}`;
  }

  test('each container has a filter to its veth; traffic between two goes through them; a filter goes with its container', async () => {
    await engine.dockerOk(['network', 'create', 'fastnet']);
    const bridge = await bridgeOf('fastnet');
    await engine.dockerOk(['run', '-d', '--name', 'fast-web', '--network', 'fastnet', ...HTTPD]);
    await engine.dockerOk(['run', '-d', '--name', 'fast-client', '--network', 'fastnet', 'busybox', 'sleep', '300']);
    const web = await endpoint('fast-web', 'fastnet');
    const client = await endpoint('fast-client', 'fastnet');
    const filters = directFilters(bridge);
    assert.deepEqual(filters.map((f) => [f.mac, f.device]).sort(), [[web.mac, hostVeth(web.pid)], [client.mac, hostVeth(client.pid)]].sort());
    const before = new Map(filters.map((f) => [f.mac, f.packets]));

    // By name (embedded DNS) and by address.
    const out = await engine.dockerOk(['exec', 'fast-client', 'sh', '-c', `wget -q -O - http://fast-web/hostname && wget -q -O - http://${web.ip}/hostname`]);
    assert.deepEqual(out.trim().split('\n'), [web.id.slice(0, 12), web.id.slice(0, 12)]);
    const after = new Map(directFilters(bridge).map((f) => [f.mac, f.packets]));
    assert.ok(after.get(web.mac)! > before.get(web.mac)!, 'frames to the server went through its filter');
    assert.ok(after.get(client.mac)! > before.get(client.mac)!, 'frames back to the client went through its filter');

    await engine.dockerOk(['rm', '-f', 'fast-web']);
    await eventually(() => {
      assert.deepEqual(directFilters(bridge).map((f) => f.mac), [client.mac]);
      return true;
    });
    await engine.dockerOk(['rm', '-f', 'fast-client']);
    await eventually(() => {
      assert.deepEqual(directFilters(bridge), []);
      return true;
    });
    await engine.dockerOk(['network', 'rm', 'fastnet']);
  });

  test('a published port reached from a container of the same bridge through a host address answers', async () => {
    const port = randomInt(20000, 30000);
    await engine.dockerOk(['network', 'create', 'hairnet']);
    await engine.dockerOk(['run', '-d', '--name', 'hair-web', '--network', 'hairnet', '-p', `${port}:80`, ...HTTPD]);
    await engine.dockerOk(['run', '-d', '--name', 'hair-client', '--network', 'hairnet', 'busybox', 'sleep', '300']);
    const web = await endpoint('hair-web', 'hairnet');
    // The gateway is an address of the host: the DNAT sends the connection back into the bridge.
    const fetched = await eventually(async () => {
      const res = await engine.docker(['exec', 'hair-client', 'timeout', '5', 'wget', '-q', '-O', '-', `http://${web.gateway}:${port}/hostname`]);
      if (res.code !== 0) throw new Error(res.stderr);
      return res.stdout.trim();
    }, 30_000);
    assert.equal(fetched, web.id.slice(0, 12));
    await engine.dockerOk(['rm', '-f', 'hair-web', 'hair-client']);
    await engine.dockerOk(['network', 'rm', 'hairnet']);
  });

  test('icc=false: no filter, every frame stays on the bridge and its rules', async () => {
    await engine.dockerOk(['network', 'create', '-o', 'com.docker.network.bridge.enable_icc=false', 'closednet']);
    const bridge = await bridgeOf('closednet');
    await engine.dockerOk(['run', '-d', '--name', 'closed-web', '--network', 'closednet', ...HTTPD]);
    await engine.dockerOk(['run', '-d', '--name', 'closed-client', '--network', 'closednet', 'busybox', 'sleep', '300']);
    const web = await endpoint('closed-web', 'closednet');
    // (timeout stops wget: it is not the container's init, which would ignore the signal.)
    const res = await engine.docker(['exec', 'closed-client', 'timeout', '2', 'wget', '-q', '-O', '-', `http://${web.ip}/hostname`]);
    assert.notEqual(res.code, 0, 'the rules drop traffic between the containers');
    assert.deepEqual(directFilters(bridge), []);
    await engine.dockerOk(['rm', '-f', 'closed-web', 'closed-client']);
    await engine.dockerOk(['network', 'rm', 'closednet']);
  });

  test('an address given again reaches its new container, also where a filter of an earlier one was left behind', async () => {
    await engine.dockerOk(['network', 'create', '--subnet', '10.231.77.0/24', 'againnet']);
    const bridge = await bridgeOf('againnet');
    await engine.dockerOk(['run', '-d', '--name', 'again-client', '--network', 'againnet', 'busybox', 'sleep', '300']);
    await engine.dockerOk(['run', '-d', '--name', 'again-web', '--network', 'againnet', '--ip', '10.231.77.50', ...HTTPD]);
    const first = await endpoint('again-web', 'againnet');
    await engine.dockerOk(['rm', '-f', 'again-web']);
    // What a crash could leave: a filter for that MAC, here one that hands its frames to the client's veth.
    const client = await endpoint('again-client', 'againnet');
    const addon = createRequire(import.meta.url)(path.join(DAEMON_DIR, 'native', 'netns', 'build', 'Release', 'netns.node')) as {
      directDelivery(host: string, bridge: string, mac: string): void;
    };
    addon.directDelivery(hostVeth(client.pid), bridge, first.mac);
    assert.ok(directFilters(bridge).some((f) => f.mac === first.mac && f.device === hostVeth(client.pid)));

    await engine.dockerOk(['run', '-d', '--name', 'again-web', '--network', 'againnet', '--ip', '10.231.77.50', ...HTTPD]);
    const second = await endpoint('again-web', 'againnet');
    assert.equal(second.mac, first.mac);
    assert.deepEqual(directFilters(bridge).filter((f) => f.mac === first.mac).map((f) => f.device), [hostVeth(second.pid)]);
    const out = await eventually(async () => {
      const text = await engine.dockerOk(['exec', 'again-client', 'timeout', '5', 'wget', '-q', '-O', '-', 'http://10.231.77.50/hostname']);
      return text.trim();
    }, 20_000);
    assert.equal(out, second.id.slice(0, 12));
    await engine.dockerOk(['rm', '-f', 'again-web', 'again-client']);
    await eventually(() => {
      assert.deepEqual(directFilters(bridge), []);
      return true;
    });
    await engine.dockerOk(['network', 'rm', 'againnet']);
  });
  test('a container that died while the daemon was down loses its filter at the next start; a live one keeps its own', async () => {
    await engine.dockerOk(['network', 'create', 'crashnet']);
    const bridge = await bridgeOf('crashnet');
    await engine.dockerOk(['run', '-d', '--name', 'crash-live', '--network', 'crashnet', ...HTTPD]);
    await engine.dockerOk(['run', '-d', '--name', 'crash-dead', '--network', 'crashnet', 'busybox', 'sleep', '300']);
    const live = await endpoint('crash-live', 'crashnet');
    const dead = await endpoint('crash-dead', 'crashnet');
    assert.equal(directFilters(bridge).length, 2);
    await engine.crash();
    process.kill(Number(dead.pid), 'SIGKILL');
    await engine.start();
    await eventually(() => {
      assert.deepEqual(directFilters(bridge).map((f) => [f.mac, f.device]), [[live.mac, hostVeth(live.pid)]]);
      return true;
    });
    // The live container is still reached, through its filter.
    await engine.dockerOk(['run', '-d', '--name', 'crash-client', '--network', 'crashnet', 'busybox', 'sleep', '300']);
    const out = await engine.dockerOk(['exec', 'crash-client', 'timeout', '5', 'wget', '-q', '-O', '-', 'http://crash-live/hostname']);
    assert.equal(out.trim(), live.id.slice(0, 12));
    await engine.dockerOk(['rm', '-f', 'crash-live', 'crash-dead', 'crash-client']);
    await engine.dockerOk(['network', 'rm', 'crashnet']);
  });
});
