/**
 * The Linux desktop's arrangement, never root in the app: `berthd agent` runs as root on a socket owned by a
 * group, and a daemon runs as an unprivileged user (nobody, with that group) with `--agent`, its own data
 * root, exec root and socket. The docker CLI runs containers through it (and named volumes, kept by the agent
 * under its own data root, their records in the daemon's; a managed plugin's files, process and socket on the
 * agent's side, its record in the daemon's; a legacy plugin found and reached there; managed network and
 * authorization plugins), while a second berthd (root, the usual way) keeps working beside it.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, chownSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { once } from 'node:events';
import http from 'node:http';
import path from 'node:path';
import { BERTHD, eventually, removeBridge, runCommand, unmountUnder, useEngine, httpRequest } from './harness.js';
import { killContainers } from './runtime-support.js';
import { pluginContext, pluginRuntimeState, volumeDriverConfig } from './plugin-support.js';
import { haveRegistry, startRegistry } from './registry-support.js';

const NOBODY = 65534;
const canRun = process.getuid?.() === 0 && existsSync('/bin/busybox') && existsSync('/usr/bin/conmon') && existsSync('/usr/bin/setpriv');

describe('a daemon as an unprivileged user, through the root agent', { skip: !canRun && 'needs root, busybox, conmon and setpriv' }, () => {
  const beside = useEngine();
  const group = `bt${randomBytes(3).toString('hex')}`;
  const bridge = `bt${randomBytes(4).toString('hex')}`;
  let root: string;
  let gid: number;
  let agent: ChildProcess | undefined;
  let daemon: ChildProcess | undefined;
  const agentLog: Buffer[] = [];
  const daemonLog: Buffer[] = [];
  let userSocket: string;
  let dockerConfig: string;
  let agentSocket: string;
  let home: string;
  let legacyPlugins: string;

  async function startAgent(): Promise<void> {
    agent = spawn(process.execPath, [BERTHD, 'agent', '--socket', agentSocket, '--group', group, '--data-root', path.join(root, 'agent-data'), '--exec-root', path.join(root, 'ax')], { stdio: ['ignore', 'ignore', 'pipe'] });
    agent.stderr!.on('data', (c: Buffer) => agentLog.push(c));
    await eventually(() => existsSync(agentSocket), 20_000);
  }

  async function startDaemon(extraArgs: string[] = []): Promise<void> {
    daemon = spawn(
      'setpriv',
      ['--reuid', String(NOBODY), '--regid', String(gid), '--clear-groups', '--', process.execPath, BERTHD,
        '-H', `unix://${userSocket}`, '--data-root', path.join(home, 'data'), '--exec-root', path.join(home, 'x'),
        '--pidfile', path.join(home, 'berthd.pid'), '--bridge', bridge, '--agent', `unix://${agentSocket}`, ...extraArgs],
      // Legacy plugins are looked for in a folder only root (the agent) may enter.
      { stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, HOME: home, BERTH_PLUGIN_SOCKET_DIRS: legacyPlugins, BERTH_PLUGIN_SPEC_DIRS: '' } },
    );
    daemon.stderr!.on('data', (c: Buffer) => daemonLog.push(c));
    daemon.on('error', (err) => daemonLog.push(Buffer.from(`spawn failed: ${err.message}\n`)));
    await eventually(async () => {
      if (daemon!.exitCode !== null) throw new Error(`the daemon exited (${daemon!.exitCode}):\n${logs()}`);
      return (await httpRequest(userSocket, 'GET', '/_ping')).status === 200;
    }, 30_000).catch((err: Error) => {
      throw new Error(`${err.message}\n${logs()}`);
    });
  }

  async function stop(child: ChildProcess | undefined): Promise<void> {
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const exited = once(child, 'exit');
    child.kill('SIGTERM');
    await exited;
  }

  const docker = (args: string[], timeoutMs = 60_000) =>
    runCommand('docker', ['-H', `unix://${userSocket}`, ...args], { env: { DOCKER_CONFIG: dockerConfig }, timeoutMs });
  const logs = () => `agent:\n${Buffer.concat(agentLog).toString()}\ndaemon:\n${Buffer.concat(daemonLog).toString()}`;

  before(async () => {
    root = mkdtempSync('/tmp/bu-');
    chmodSync(root, 0o755);
    assert.equal(spawnSync('groupadd', ['--system', group]).status, 0, 'groupadd');
    gid = Number(spawnSync('getent', ['group', group], { encoding: 'utf8' }).stdout.split(':')[2]);
    agentSocket = path.join(root, 'agent', 'agent.sock');
    legacyPlugins = path.join(root, 'legacy-plugins');
    mkdirSync(legacyPlugins, { mode: 0o700 });
    await startAgent();
    const st = statSync(agentSocket);
    assert.equal(st.mode & 0o777, 0o660);
    assert.equal(st.gid, gid);

    // The user's own folders, as the app makes them under its home and runtime directory.
    home = path.join(root, 'user');
    mkdirSync(home);
    chownSync(home, NOBODY, gid);
    userSocket = path.join(home, 'engine.sock');
    dockerConfig = path.join(root, 'docker-config');
    mkdirSync(dockerConfig);
    await startDaemon();
    const tarball = path.join(root, 'busybox.tar');
    const { buildBusyboxArchive } = await import('./fixtures/busybox.js');
    await buildBusyboxArchive(tarball);
    const loaded = await docker(['load', '-i', tarball], 120_000);
    assert.equal(loaded.code, 0, `${loaded.stderr}\n${logs()}`);
  });

  after(async () => {
    await stop(daemon);
    await stop(agent);
    if (root) {
      killContainers(path.join(root, 'ax', 'runtime'));
      // Plugins a failed test left running on the agent's side.
      killContainers(path.join(root, 'ax', 'plugins', 'runtime'));
      unmountUnder(root);
      rmSync(root, { recursive: true, force: true });
    }
    removeBridge(bridge);
    spawnSync('groupdel', [group]);
  });

  test('the daemon runs as nobody', () => {
    const status = spawnSync('ps', ['-o', 'uid=', '-p', String(daemon!.pid)], { encoding: 'utf8' }).stdout;
    // setpriv execs the daemon in its own process.
    assert.equal(Number(status.trim()), NOBODY);
  });

  test('docker run --rm busybox echo hi', async () => {
    const run = await docker(['run', '--rm', 'busybox', 'echo', 'hi']);
    assert.equal(run.code, 0, `${run.stderr}\n${logs()}`);
    assert.equal(run.stdout, 'hi\n');
  });

  test('docker run -d, exec and logs', async () => {
    const started = await docker(['run', '-d', 'busybox', 'sh', '-c', 'echo started; sleep 1000']);
    assert.equal(started.code, 0, `${started.stderr}\n${logs()}`);
    const id = started.stdout.trim();
    try {
      const exec = await docker(['exec', id, 'sh', '-c', 'echo from exec; id -u']);
      assert.equal(exec.code, 0, exec.stderr);
      assert.equal(exec.stdout, 'from exec\n0\n');
      const logsOut = await docker(['logs', id]);
      assert.equal(logsOut.code, 0, logsOut.stderr);
      assert.equal(logsOut.stdout, 'started\n');
    } finally {
      await docker(['rm', '-f', id]);
    }
  });

  test('docker cp both ways and a build', async () => {
    const created = await docker(['create', 'busybox', 'true']);
    const id = created.stdout.trim();
    const cpFile = path.join(root, 'cp-in.txt');
    writeFileSync(cpFile, 'copied in\n');
    const cpIn = await docker(['cp', cpFile, `${id}:/cp-in.txt`]);
    assert.equal(cpIn.code, 0, `${cpIn.stderr}\n${logs()}`);
    const cpOut = await docker(['cp', `${id}:/cp-in.txt`, '-']);
    assert.equal(cpOut.code, 0, cpOut.stderr);
    assert.match(cpOut.stdout, /copied in/);
    await docker(['rm', id]);
    const context = path.join(root, 'ctx');
    mkdirSync(context, { recursive: true });
    writeFileSync(path.join(context, 'Dockerfile'), 'FROM busybox\nRUN echo built > /built\nCMD ["cat", "/built"]\n');
    const build = await runCommand('docker', ['-H', `unix://${userSocket}`, 'build', '-t', 'agent-built', context], { env: { DOCKER_CONFIG: dockerConfig, DOCKER_BUILDKIT: '0' }, timeoutMs: 120_000 });
    assert.equal(build.code, 0, `${build.stdout}\n${build.stderr}\n${logs()}`);
    assert.equal((await docker(['run', '--rm', 'agent-built'])).stdout, 'built\n');
  });

  test('a user-defined network, its embedded DNS answering through the agent', async () => {
    const net = `n${randomBytes(3).toString('hex')}`;
    assert.equal((await docker(['network', 'create', net])).code, 0);
    const server = await docker(['run', '-d', '--network', net, '--name', `${net}-srv`, 'busybox', 'sleep', '1000']);
    assert.equal(server.code, 0, `${server.stderr}\n${logs()}`);
    try {
      const lookup = await docker(['run', '--rm', '--network', net, 'busybox', 'nslookup', `${net}-srv`, '127.0.0.11']);
      assert.equal(lookup.code, 0, `${lookup.stdout}\n${lookup.stderr}\n${logs()}`);
      assert.match(lookup.stdout, /Address:? \d+\.\d+\.\d+\.\d+/);
    } finally {
      await docker(['rm', '-f', server.stdout.trim()]);
      await docker(['network', 'rm', net]);
    }
  });

  test('a published port answers on the host', async () => {
    const web = await docker(['run', '-d', '-p', '127.0.0.1::80', 'busybox', 'sh', '-c', 'mkdir /www && echo published > /www/index.html && httpd -f -p 80 -h /www']);
    assert.equal(web.code, 0, `${web.stderr}\n${logs()}`);
    const id = web.stdout.trim();
    try {
      const port = Number((await docker(['port', id, '80/tcp'])).stdout.trim().split(':').pop());
      assert.ok(port > 0);
      const body = await eventually(async () => {
        const res = await fetch(`http://127.0.0.1:${port}/`).catch(() => undefined);
        return res?.ok ? res.text() : undefined;
      }, 10_000);
      assert.equal(body, 'published\n');
    } finally {
      await docker(['rm', '-f', id]);
    }
  });

  test('named volumes: made on the agent\'s machine under its data root, their records in the daemon\'s', async () => {
    const agentVolumes = path.join(root, 'agent-data', 'volumes');
    const created = await docker(['volume', 'create', '--label', 'kind=named', 'av-one']);
    assert.equal(created.code, 0, `${created.stderr}\n${logs()}`);
    const inspected = JSON.parse((await docker(['volume', 'inspect', 'av-one'])).stdout)[0];
    assert.equal(inspected.Mountpoint, path.join(agentVolumes, 'av-one', '_data'), 'the Mountpoint is where the agent keeps it');
    assert.deepEqual(inspected.Labels, { kind: 'named' });
    assert.ok(existsSync(path.join(home, 'data', 'volume-records', 'av-one', 'volume.json')), 'the record is the daemon\'s own state');
    assert.ok(!existsSync(path.join(home, 'data', 'volumes', 'av-one')), 'no volume folder in the daemon\'s data root');

    // Written by one container, read by another.
    const wrote = await docker(['run', '--rm', '-v', 'av-one:/data', 'busybox', 'sh', '-c', 'echo hello > /data/f']);
    assert.equal(wrote.code, 0, `${wrote.stderr}\n${logs()}`);
    assert.equal((await docker(['run', '--rm', '-v', 'av-one:/data', 'busybox', 'cat', '/data/f'])).stdout, 'hello\n');
    assert.equal(readFileSync(path.join(agentVolumes, 'av-one', '_data', 'f'), 'utf8'), 'hello\n');
    assert.ok((await docker(['volume', 'ls', '-q'])).stdout.split('\n').includes('av-one'));

    // Measured by the agent's Host: the API's size, and the CLI's `system df -v`.
    const df = await httpRequest(userSocket, 'GET', '/v1.47/system/df?type=volume');
    const usage = (JSON.parse(df.body.toString()).Volumes as Array<{ Name: string; UsageData: { Size: number; RefCount: number } }>).find((v) => v.Name === 'av-one');
    assert.deepEqual(usage?.UsageData, { Size: 6, RefCount: 0 });
    const dfCli = await docker(['system', 'df', '-v']);
    assert.equal(dfCli.code, 0, dfCli.stderr);
    assert.match(dfCli.stdout, /^av-one\s+0\s+6B\s*$/m);

    // In use by a stopped container: refused; then removed, folder and record.
    const user = (await docker(['create', '-v', 'av-one:/data', 'busybox', 'true'])).stdout.trim();
    const refused = await docker(['volume', 'rm', 'av-one']);
    assert.notEqual(refused.code, 0);
    assert.match(refused.stderr, /volume is in use/);
    assert.equal((await docker(['rm', user])).code, 0);
    const removed = await docker(['volume', 'rm', 'av-one']);
    assert.equal(removed.code, 0, removed.stderr);
    assert.ok(!existsSync(path.join(agentVolumes, 'av-one')));
    assert.ok(!existsSync(path.join(home, 'data', 'volume-records', 'av-one', 'volume.json')));
  });

  test('volumes made by run (-v name:/path, with the image\'s content copied in), and prune', async () => {
    const agentVolumes = path.join(root, 'agent-data', 'volumes');
    const implicit = await docker(['run', '--rm', '-v', 'av-implicit:/x', 'busybox', 'sh', '-c', 'echo made > /x/m']);
    assert.equal(implicit.code, 0, `${implicit.stderr}\n${logs()}`);
    assert.equal(readFileSync(path.join(agentVolumes, 'av-implicit', '_data', 'm'), 'utf8'), 'made\n');
    // A new volume on a folder of the image gets that folder's content (copy-up).
    const copied = await docker(['run', '--rm', '-v', 'av-etc:/etc', 'busybox', 'cat', '/etc/passwd']);
    assert.equal(copied.code, 0, `${copied.stderr}\n${logs()}`);
    assert.match(copied.stdout, /^root:/m);
    assert.equal(readFileSync(path.join(agentVolumes, 'av-etc', '_data', 'passwd'), 'utf8'), copied.stdout);
    // Anonymous ones go with prune; named ones with prune --all.
    const anonymous = (await docker(['volume', 'create'])).stdout.trim();
    assert.ok(existsSync(path.join(agentVolumes, anonymous, '_data')));
    const pruned = await docker(['volume', 'prune', '-f']);
    assert.equal(pruned.code, 0, pruned.stderr);
    assert.match(pruned.stdout, new RegExp(anonymous));
    assert.ok(!existsSync(path.join(agentVolumes, anonymous)));
    assert.ok(existsSync(path.join(agentVolumes, 'av-etc')));
    const all = await docker(['volume', 'prune', '-f', '--all']);
    assert.equal(all.code, 0, all.stderr);
    assert.deepEqual((await docker(['volume', 'ls', '-q'])).stdout.trim(), '');
    assert.ok(!existsSync(path.join(agentVolumes, 'av-implicit')) && !existsSync(path.join(agentVolumes, 'av-etc')));
  });

  test('a managed volume plugin installed from a registry: its files and process on the agent\'s machine, its socket reached through the agent', async (t) => {
    if (!haveRegistry()) return t.skip('docker-registry is not installed');
    const registry = await startRegistry();
    const context = pluginContext('volplugin.c', 'volplugin', volumeDriverConfig());
    const name = `${registry.host}/agentvol:1`;
    const agentExecRoot = path.join(root, 'ax');
    try {
      // Made and pushed by the root engine beside it, installed by the user's.
      await beside.dockerOk(['plugin', 'create', name, context], { timeoutMs: 60_000 });
      await beside.dockerOk(['plugin', 'push', name], { timeoutMs: 120_000 });
      await beside.dockerOk(['plugin', 'rm', name]);
      const installed = await docker(['plugin', 'install', '--grant-all-permissions', name, 'VOLPLUGIN_GREETING=through the agent'], 120_000);
      assert.equal(installed.code, 0, `${installed.stdout}\n${installed.stderr}\n${logs()}`);
      const p = JSON.parse((await docker(['plugin', 'inspect', name])).stdout)[0];
      assert.equal(p.Enabled, true);
      assert.ok(existsSync(path.join(root, 'agent-data', 'plugins', p.Id, 'rootfs', 'volplugin')), 'its files under the agent\'s data root');
      assert.equal(JSON.parse(readFileSync(path.join(home, 'data', 'plugins', p.Id, 'config.json'), 'utf8')).Name, name, 'its record in the daemon\'s');
      assert.ok(!existsSync(path.join(home, 'data', 'plugins', p.Id, 'rootfs')));
      assert.ok(statSync(path.join(agentExecRoot, 'plugins', p.Id, 'fixvol.sock')).isSocket(), 'its socket in the agent\'s exec root');
      assert.equal(pluginRuntimeState(agentExecRoot, p.Id)?.status, 'running');

      // Its volumes: the plugin's paths on the agent's machine; written by one container, read by another.
      const created = await docker(['volume', 'create', '-d', name, 'apv-one']);
      assert.equal(created.code, 0, `${created.stderr}\n${logs()}`);
      const mountpoint = path.join(root, 'agent-data', 'plugins', p.Id, 'rootfs', 'data', 'apv-one');
      assert.equal(JSON.parse((await docker(['volume', 'inspect', 'apv-one'])).stdout)[0].Mountpoint, mountpoint);
      const wrote = await docker(['run', '--rm', '-v', 'apv-one:/v', 'busybox', 'sh', '-c', 'cat /v/greeting; echo written > /v/f']);
      assert.equal(wrote.code, 0, `${wrote.stderr}\n${logs()}`);
      assert.equal(wrote.stdout, 'through the agent\n');
      assert.equal((await docker(['run', '--rm', '-v', 'apv-one:/v', 'busybox', 'cat', '/v/f'])).stdout, 'written\n');
      assert.equal(readFileSync(path.join(mountpoint, 'f'), 'utf8'), 'written\n');
      assert.match((await docker(['volume', 'ls', '--format', '{{.Driver}} {{.Name}}'])).stdout, new RegExp(`^${name.replace(/[.]/g, '\\.')} apv-one$`, 'm'));
      const refused = await docker(['plugin', 'disable', name]);
      assert.notEqual(refused.code, 0);
      assert.match(refused.stderr, /is in use/);

      // The daemon stops it when it stops, and runs it again when it starts.
      await stop(daemon);
      assert.equal(pluginRuntimeState(agentExecRoot, p.Id), undefined, 'stopped with the daemon');
      await startDaemon();
      assert.equal(JSON.parse((await docker(['plugin', 'inspect', name])).stdout)[0].Enabled, true);
      assert.equal(pluginRuntimeState(agentExecRoot, p.Id)?.status, 'running');
      const read = await docker(['run', '--rm', '-v', 'apv-one:/v', 'busybox', 'cat', '/v/f']);
      assert.equal(read.stdout, 'written\n', `${read.stderr}\n${logs()}`);
      // A daemon killed leaves it running on the agent's side, and the next one keeps that process.
      const pid = pluginRuntimeState(agentExecRoot, p.Id)?.pid;
      assert.ok(pid);
      const killed = once(daemon!, 'exit');
      daemon!.kill('SIGKILL');
      await killed;
      assert.equal(pluginRuntimeState(agentExecRoot, p.Id)?.pid, pid);
      await startDaemon();
      // Once the daemon has restored its state (a list waits for that).
      assert.equal((await docker(['plugin', 'ls', '-q'])).code, 0);
      assert.equal(pluginRuntimeState(agentExecRoot, p.Id)?.pid, pid, 'the same process');
      const again = await docker(['run', '--rm', '-v', 'apv-one:/v', 'busybox', 'cat', '/v/f']);
      assert.equal(again.stdout, 'written\n', `${again.stderr}\n${logs()}`);
      // The agent restarts under the daemon: the plugin is run again on its side, and serves the volume.
      await stop(agent);
      await startAgent();
      const afterAgent = await eventually(async () => {
        const r = await docker(['run', '--rm', '-v', 'apv-one:/v', 'busybox', 'cat', '/v/f']);
        return r.code === 0 ? r : undefined;
      }, 30_000);
      assert.equal(afterAgent?.stdout, 'written\n');
      assert.equal(pluginRuntimeState(agentExecRoot, p.Id)?.status, 'running');

      assert.equal((await docker(['volume', 'rm', 'apv-one'])).code, 0);
      assert.equal((await docker(['plugin', 'disable', name])).code, 0);
      assert.equal(pluginRuntimeState(agentExecRoot, p.Id), undefined, logs());
      const removed = await docker(['plugin', 'rm', name]);
      assert.equal(removed.code, 0, removed.stderr);
      assert.equal((await docker(['plugin', 'ls', '-q'])).stdout.trim(), '');
      assert.ok(!existsSync(path.join(root, 'agent-data', 'plugins', p.Id)), 'its files are gone');
      assert.ok(!existsSync(path.join(home, 'data', 'plugins', p.Id)), 'and its record');
    } finally {
      await docker(['plugin', 'rm', '--force', name]).catch(() => undefined);
      await beside.docker(['plugin', 'rm', '--force', name]).catch(() => undefined);
      await registry.stop();
      rmSync(context, { recursive: true, force: true });
    }
  });

  test('a legacy volume plugin found and reached on the agent\'s machine (its socket in a folder only root enters)', async () => {
    const volumes = path.join(root, 'legacy-volumes');
    mkdirSync(volumes);
    const known = new Set<string>();
    const answer = (method: string, body: { Name?: string }): object => {
      const name = String(body.Name ?? '');
      const mountpoint = path.join(volumes, name);
      switch (method) {
        case 'Plugin.Activate':
          return { Implements: ['VolumeDriver'] };
        case 'VolumeDriver.Create':
          mkdirSync(mountpoint, { recursive: true });
          known.add(name);
          return {};
        case 'VolumeDriver.Remove':
          rmSync(mountpoint, { recursive: true, force: true });
          known.delete(name);
          return {};
        case 'VolumeDriver.Get':
          return known.has(name) ? { Volume: { Name: name, Mountpoint: mountpoint } } : { Err: `no volume ${name}` };
        case 'VolumeDriver.List':
          return { Volumes: [...known].map((n) => ({ Name: n, Mountpoint: path.join(volumes, n) })) };
        case 'VolumeDriver.Mount':
        case 'VolumeDriver.Path':
          return { Mountpoint: mountpoint };
        case 'VolumeDriver.Capabilities':
          return { Capabilities: { Scope: 'local' } };
        default:
          return {};
      }
    };
    const server = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const text = Buffer.concat(chunks).toString();
        res.writeHead(200, { 'Content-Type': 'application/vnd.docker.plugins.v1.2+json' });
        res.end(JSON.stringify(answer((req.url ?? '/').slice(1), text ? JSON.parse(text) : {})));
      });
    });
    await new Promise<void>((resolve) => server.listen(path.join(legacyPlugins, 'agentlegacy.sock'), resolve));
    try {
      const created = await docker(['volume', 'create', '-d', 'agentlegacy', 'alv-one']);
      assert.equal(created.code, 0, `${created.stderr}\n${logs()}`);
      assert.equal(JSON.parse((await docker(['volume', 'inspect', 'alv-one'])).stdout)[0].Mountpoint, path.join(volumes, 'alv-one'));
      const wrote = await docker(['run', '--rm', '-v', 'alv-one:/v', 'busybox', 'sh', '-c', 'echo legacy > /v/f']);
      assert.equal(wrote.code, 0, `${wrote.stderr}\n${logs()}`);
      assert.equal(readFileSync(path.join(volumes, 'alv-one', 'f'), 'utf8'), 'legacy\n');
      assert.equal((await docker(['volume', 'rm', 'alv-one'])).code, 0);
      assert.ok(!existsSync(path.join(volumes, 'alv-one')));
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
  });

  test('a managed network and IPAM driver plugin through the agent: a container on its network reaches another', async () => {
    const context = pluginContext('netplugin.c', 'netplugin', {
      Description: 'a network and IPAM driver for the tests',
      Interface: { Types: ['docker.networkdriver/1.0', 'docker.ipamdriver/1.0'], Socket: 'fixnet.sock' },
      Entrypoint: ['/netplugin'],
      Network: { Type: 'host' },
      Linux: { Capabilities: ['CAP_NET_ADMIN'], AllowAllDevices: false, Devices: null },
      Env: [],
    });
    let networkId = '';
    try {
      assert.equal((await docker(['plugin', 'create', 'agentnet', context])).code, 0);
      const enabled = await docker(['plugin', 'enable', 'agentnet']);
      assert.equal(enabled.code, 0, `${enabled.stderr}\n${logs()}`);
      const created = await docker(['network', 'create', '-d', 'agentnet', '--ipam-driver', 'agentnet', '--subnet', '10.231.27.0/24', 'anet']);
      assert.equal(created.code, 0, `${created.stderr}\n${logs()}`);
      networkId = created.stdout.trim();
      assert.equal((await docker(['run', '-d', '--name', 'anet-a', '--network', 'anet', 'busybox', 'sleep', '300'])).code, 0);
      const ping = await docker(['run', '--rm', '--network', 'anet', 'busybox', 'sh', '-c', 'ip -4 addr show eth0; ping -c 1 -W 5 10.231.27.2']);
      assert.equal(ping.code, 0, `${ping.stdout}\n${ping.stderr}\n${logs()}`);
      assert.match(ping.stdout, /inet 10\.231\.27\.3\/24/);
      assert.match(ping.stdout, /1 packets received/);
      const refused = await docker(['plugin', 'disable', 'agentnet']);
      assert.match(refused.stderr, /is in use/);
    } finally {
      await docker(['rm', '-f', 'anet-a']);
      await docker(['network', 'rm', 'anet']);
      await docker(['plugin', 'rm', '--force', 'agentnet']);
      if (networkId) removeBridge(`fn${networkId.slice(0, 12)}`);
      rmSync(context, { recursive: true, force: true });
    }
  });

  test('a managed authorization plugin through the agent: started with the daemon that names it, it denies what it denies', async () => {
    const context = pluginContext('authzplugin.c', 'authzplugin', {
      Description: 'an authorization plugin for the tests',
      Interface: { Types: ['docker.authz/1.0'], Socket: 'fixauthz.sock' },
      Entrypoint: ['/authzplugin', '/run/docker/plugins/fixauthz.sock', '/data/calls.log'],
      Network: { Type: 'none' },
    });
    try {
      const created = await docker(['plugin', 'create', 'agentauthz', context]);
      assert.equal(created.code, 0, `${created.stderr}\n${logs()}`);
      assert.equal((await docker(['plugin', 'enable', 'agentauthz'])).code, 0);
      await stop(daemon);
      await startDaemon(['--authorization-plugin', 'agentauthz']);
      const denied = await docker(['volume', 'create', 'aa-denied']);
      assert.notEqual(denied.code, 0);
      assert.match(denied.stderr, /authorization denied by plugin agentauthz: volume creation is not allowed/);
      const allowed = await docker(['run', '--rm', 'busybox', 'echo', 'allowed']);
      assert.equal(allowed.stdout, 'allowed\n', `${allowed.stderr}\n${logs()}`);
      const id = JSON.parse((await docker(['plugin', 'inspect', 'agentauthz'])).stdout)[0].Id;
      assert.match(readFileSync(path.join(root, 'agent-data', 'plugins', id, 'rootfs', 'data', 'calls.log'), 'utf8'), /^AuthZPlugin\.AuthZReq .*"RequestUri":"\/v1\.\d+\/volumes\/create"/m);
    } finally {
      await stop(daemon);
      await startDaemon();
      await docker(['plugin', 'rm', '--force', 'agentauthz']);
      rmSync(context, { recursive: true, force: true });
    }
  });

  test('a container outlives a restart of the daemon, and then of the agent', async () => {
    const started = await docker(['run', '-d', 'busybox', 'sh', '-c', 'echo up; sleep 1000']);
    assert.equal(started.code, 0, `${started.stderr}\n${logs()}`);
    const id = started.stdout.trim();
    const kept = await docker(['run', '--rm', '-v', 'av-kept:/k', 'busybox', 'sh', '-c', 'echo kept > /k/f']);
    assert.equal(kept.code, 0, `${kept.stderr}\n${logs()}`);
    try {
      await stop(daemon);
      await startDaemon();
      const afterDaemon = await docker(['exec', id, 'echo', 'still here']);
      assert.equal(afterDaemon.stdout, 'still here\n', `${afterDaemon.stderr}\n${logs()}`);
      // The agent goes away under a running daemon: the daemon connects again to the new one.
      await stop(agent);
      await startAgent();
      const afterAgent = await eventually(async () => {
        const r = await docker(['exec', id, 'echo', 'and here']);
        return r.code === 0 ? r : undefined;
      }, 20_000);
      assert.equal(afterAgent?.stdout, 'and here\n');
      assert.equal((await docker(['logs', id])).stdout, 'up\n');
      const again = await docker(['run', '--rm', 'busybox', 'echo', 'again']);
      assert.equal(again.stdout, 'again\n', `${again.stderr}\n${logs()}`);
      // The volume and its data are there after both restarts.
      assert.equal(JSON.parse((await docker(['volume', 'inspect', 'av-kept'])).stdout)[0].Mountpoint, path.join(root, 'agent-data', 'volumes', 'av-kept', '_data'));
      const read = await docker(['run', '--rm', '-v', 'av-kept:/k', 'busybox', 'cat', '/k/f']);
      assert.equal(read.stdout, 'kept\n', `${read.stderr}\n${logs()}`);
      // The exit of a container the daemon was waiting for when the agent restarted still reaches it.
      assert.equal((await docker(['kill', id])).code, 0);
      const state = await eventually(async () => {
        const r = await docker(['inspect', '-f', '{{.State.Status}} {{.State.ExitCode}}', id]);
        return r.stdout.trim() === 'exited 137' ? r.stdout.trim() : undefined;
      }, 20_000);
      assert.equal(state, 'exited 137');
    } finally {
      await docker(['rm', '-f', id]);
      await docker(['volume', 'rm', 'av-kept']);
    }
  });

  test('a root berthd beside it keeps working', async () => {
    assert.equal(await beside.dockerOk(['run', '--rm', 'busybox', 'echo', 'beside']), 'beside\n');
    const ps = await docker(['ps', '-a', '-q']);
    assert.equal(ps.stdout.trim(), '', 'the other engine shares no containers');
  });
});
