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

  /**
   * A network (`docker network create` with `create` before its name) with two containers: `<network>-web`
   * serving its /etc over HTTP (`web` before the image), and `<network>-client` that sleeps.
   */
  async function webAndClient(network: string, opts: { create?: string[]; web?: string[] } = {}) {
    await engine.dockerOk(['network', 'create', ...(opts.create ?? []), network]);
    await engine.dockerOk(['run', '-d', '--name', `${network}-web`, '--network', network, ...(opts.web ?? []), ...HTTPD]);
    await engine.dockerOk(['run', '-d', '--name', `${network}-client`, '--network', network, 'busybox', 'sleep', '300']);
    return { bridge: await bridgeOf(network), web: await endpoint(`${network}-web`, network), client: await endpoint(`${network}-client`, network) };
  }

  test('each container has a filter to its veth; traffic between two goes through them; a filter goes with its container', async () => {
    const { bridge, web, client } = await webAndClient('fastnet');
    const filters = directFilters(bridge);
    assert.deepEqual(filters.map((f) => [f.mac, f.device]).sort(), [[web.mac, hostVeth(web.pid)], [client.mac, hostVeth(client.pid)]].sort());
    const before = new Map(filters.map((f) => [f.mac, f.packets]));

    // By name (embedded DNS) and by address.
    const out = await engine.dockerOk(['exec', 'fastnet-client', 'sh', '-c', `wget -q -O - http://fastnet-web/hostname && wget -q -O - http://${web.ip}/hostname`]);
    assert.deepEqual(out.trim().split('\n'), [web.id.slice(0, 12), web.id.slice(0, 12)]);
    const after = new Map(directFilters(bridge).map((f) => [f.mac, f.packets]));
    assert.ok(after.get(web.mac)! > before.get(web.mac)!, 'frames to the server went through its filter');
    assert.ok(after.get(client.mac)! > before.get(client.mac)!, 'frames back to the client went through its filter');

    await engine.dockerOk(['rm', '-f', 'fastnet-web']);
    await eventually(() => {
      assert.deepEqual(directFilters(bridge).map((f) => f.mac), [client.mac]);
      return true;
    });
    await engine.dockerOk(['rm', '-f', 'fastnet-client']);
    await eventually(() => {
      assert.deepEqual(directFilters(bridge), []);
      return true;
    });
    await engine.dockerOk(['network', 'rm', 'fastnet']);
  });

  test('a published port reached from a container of the same bridge through a host address answers', async () => {
    const port = randomInt(20000, 30000);
    const { web } = await webAndClient('hairnet', { web: ['-p', `${port}:80`] });
    // The gateway is an address of the host: the DNAT sends the connection back into the bridge.
    const fetched = await eventually(async () => {
      const res = await engine.docker(['exec', 'hairnet-client', 'timeout', '5', 'wget', '-q', '-O', '-', `http://${web.gateway}:${port}/hostname`]);
      if (res.code !== 0) throw new Error(res.stderr);
      return res.stdout.trim();
    }, 30_000);
    assert.equal(fetched, web.id.slice(0, 12));
    await engine.dockerOk(['rm', '-f', 'hairnet-web', 'hairnet-client']);
    await engine.dockerOk(['network', 'rm', 'hairnet']);
  });

  test('icc=false: no filter, every frame stays on the bridge and its rules', async () => {
    const { bridge, web } = await webAndClient('closednet', { create: ['-o', 'com.docker.network.bridge.enable_icc=false'] });
    // (timeout stops wget: it is not the container's init, which would ignore the signal.)
    const res = await engine.docker(['exec', 'closednet-client', 'timeout', '2', 'wget', '-q', '-O', '-', `http://${web.ip}/hostname`]);
    assert.notEqual(res.code, 0, 'the rules drop traffic between the containers');
    assert.deepEqual(directFilters(bridge), []);
    await engine.dockerOk(['rm', '-f', 'closednet-web', 'closednet-client']);
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
    // The server lives on; the client dies with the daemon.
    const { bridge, web: live, client: dead } = await webAndClient('crashnet');
    assert.equal(directFilters(bridge).length, 2);
    await engine.crash();
    process.kill(Number(dead.pid), 'SIGKILL');
    await engine.start();
    await eventually(() => {
      assert.deepEqual(directFilters(bridge).map((f) => [f.mac, f.device]), [[live.mac, hostVeth(live.pid)]]);
      return true;
    });
    // The live container is still reached, through its filter.
    await engine.dockerOk(['run', '-d', '--name', 'crashnet-probe', '--network', 'crashnet', 'busybox', 'sleep', '300']);
    const out = await engine.dockerOk(['exec', 'crashnet-probe', 'timeout', '5', 'wget', '-q', '-O', '-', 'http://crashnet-web/hostname']);
    assert.equal(out.trim(), live.id.slice(0, 12));
    await engine.dockerOk(['rm', '-f', 'crashnet-web', 'crashnet-client', 'crashnet-probe']);
    await engine.dockerOk(['network', 'rm', 'crashnet']);
  });
});
