/**
 * The VM path under QEMU: the guest image is built from Debian packages (or found in the cache), booted with
 * TCG (these machines' /dev/kvm does not work; BERTH_VM_ACCEL=kvm where it does), and answers on the agent's
 * virtio-serial port, whose host end is a unix socket in the test's folder. A host folder is shared over 9p;
 * the guest reads and writes it. Skipped with a message when qemu-system-x86_64 or the build's tools are
 * missing. Everything started here is stopped by PID (QEMU's, through the driver) and its folders removed.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, promises as fs, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import { buildGuestImage, defaultCacheDir, type BuildResult } from '../src/vm/guest/image.js';
import http from 'node:http';
import net from 'node:net';
import { ClockKeeper } from '../src/vm/clock.js';
import type { Share, VmStatus } from '../src/vm/driver.js';
import { GuestLineChannel, type GuestHello } from '../src/vm/hello.js';
import { PublishedPorts } from '../src/vm/ports.js';
import { QemuDriver } from '../src/vm/qemu.js';
import { createRemoteHost } from '../src/host/remote/index.js';
import { toGuestPath } from '../src/vm/shares.js';
import { buildBusyboxArchive, haveBusybox } from './fixtures/busybox.js';
import { pluginContext, volumeDriverConfig } from './plugin-support.js';
import { BERTHD, DAEMON_DIR, Engine, runCommand, tmpdir } from './harness.js';

function onPath(cmd: string): boolean {
  return spawnSync('sh', ['-c', `command -v ${cmd}`], { stdio: 'ignore' }).status === 0;
}

const missing = ['qemu-system-x86_64', 'apt-get', 'dpkg-deb', 'depmod'].filter((c) => !onPath(c));
const skip =
  os.arch() !== 'x64'
    ? 'the QEMU test boots an amd64 guest on an amd64 host'
    : missing.length
      ? `${missing.join(', ')} not installed (scripts/install-deps.sh installs qemu-system-x86 and kmod)`
      : !existsSync('/usr/share/keyrings/debian-archive-keyring.gpg')
        ? 'debian-archive-keyring not installed'
        : false;

const cacheDir = defaultCacheDir();
const cleanups: Array<() => Promise<void>> = [];
after(async () => {
  for (const c of cleanups.reverse()) await c().catch(() => undefined);
});

let image: BuildResult | undefined;
async function guestImage(): Promise<BuildResult> {
  image ??= await buildGuestImage({ arch: 'amd64', cacheDir, log: (l) => process.stderr.write(`# ${l}\n`) });
  return image;
}

interface BootedVm {
  driver: QemuDriver;
  channel: GuestLineChannel;
  hello: GuestHello;
  status: VmStatus;
  share: string;
  shares: Share[];
  enginePort: number;
  root: string;
}

async function freePort(): Promise<number> {
  const srv = net.createServer();
  await new Promise<void>((resolve) => srv.listen(0, '127.0.0.1', resolve));
  const port = (srv.address() as net.AddressInfo).port;
  await new Promise((resolve) => srv.close(resolve));
  return port;
}

/** GET /index.html on the host's loopback. */
function getPage(port: number): Promise<string> {
  return new Promise<string>((resolve, reject) => {
    const req = http.get({ host: '127.0.0.1', port, path: '/index.html', timeout: 10_000 }, (res) => {
      let body = '';
      res.on('data', (c: Buffer) => (body += c.toString()));
      res.on('end', () => resolve(body));
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', reject);
  });
}

/** Waits (2 minutes at most) for the page a busybox httpd container serves to answer on the host port. */
async function servedOn(port: number): Promise<void> {
  const deadline = Date.now() + 120_000;
  let body = '';
  while (body !== 'served\n') {
    body = await getPage(port).catch((err: Error) => err.message);
    assert.ok(body === 'served\n' || Date.now() < deadline, `no answer on the host's port ${port}: ${body}`);
    if (body !== 'served\n') await new Promise((r) => setTimeout(r, 1000));
  }
}

const HTTPD = ['busybox', 'sh', '-c', 'mkdir -p /www && echo served > /www/index.html && exec httpd -f -p 80 -h /www'];

/**
 * One VM for the tests of the line handshake and of the guest's own engine (a boot under TCG costs tens of
 * seconds): a 9p share of a host folder, the line handshake on the agent's port, the guest's engine on a
 * forwarded port.
 */
let booted: Promise<BootedVm> | undefined;
function bootVm(): Promise<BootedVm> {
  booted ??= (async () => {
    const img = await guestImage();
    const root = tmpdir();
    cleanups.push(() => fs.rm(root, { recursive: true, force: true }));
    const share = path.join(root, 'share');
    await fs.mkdir(share);
    const shares = [{ hostPath: share, guestPath: '/mnt/work' }];
    const enginePort = await freePort();
    const driver = new QemuDriver(
      { name: 'test', stateDir: path.join(root, 'vm'), image: img, resources: { cpus: 2, memoryMiB: 2048, diskGiB: 4 }, shares, kernelArgs: ['berth.handshake=line'] },
      { accel: (process.env.BERTH_VM_ACCEL as 'kvm' | 'tcg' | undefined) ?? 'tcg', hostForwards: [{ hostPort: enginePort, guestPort: 2375, engine: true }] },
    );
    cleanups.push(() => driver.stop({ timeoutMs: 1000 }));
    const started = Date.now();
    const status = await driver.start();
    const channel = await GuestLineChannel.connect(status.agentEndpoint!.slice('unix://'.length));
    cleanups.push(async () => channel.close());
    const hello = await channel.hello(180_000).catch((err: Error) => {
      throw new Error(`${err.message}; console:\n${readFileSync(status.consoleLog!, 'utf8').slice(-3000)}`);
    });
    process.stderr.write(`# guest ready ${Date.now() - started} ms after QEMU started (kernel uptime ${hello.uptime} s, ${hello.steps} init steps)\n`);
    return { driver, channel, hello, status, share, shares, enginePort, root };
  })();
  return booted;
}

test('the guest image boots under QEMU: the agent port answers, shares are read and written, the clock is set', { skip, timeout: 15 * 60_000 }, async () => {
  const img = await guestImage();
  const { status, channel, hello, share } = await bootVm();
  assert.equal(status.state, 'running');
  assert.ok(status.pid && status.pid > 0);
  assert.match(status.agentEndpoint ?? '', /^unix:\/\/.*agent\.sock$/);
  assert.equal(hello.kernel, img.manifest.kernelVersion);
  assert.equal(hello.mounts.berth0, '/mnt/work');
  assert.equal(hello.data, 'ext4');
  assert.ok(hello.modules > 10, `modules loaded: ${hello.modules}`);

  assert.match(await channel.call('ping'), /^pong \d+\.\d+$/);
  // The daemon's own build runs on the guest's Node.
  const hostVersion = spawnSync(BERTHD, ['--version'], { encoding: 'utf8' }).stdout.split('\n')[0]!.trim();
  assert.equal(await channel.call('version', 120_000), `version ${hostVersion}`);

  // The share both ways: the guest copies the host's file, and the host reads the copy.
  await fs.writeFile(path.join(share, 'from-host.txt'), 'written by the host\n');
  assert.equal(await channel.call('cp /mnt/work/from-host.txt /mnt/work/from-guest.txt'), 'copied');
  assert.equal(await fs.readFile(path.join(share, 'from-guest.txt'), 'utf8'), 'written by the host\n');

  // The clock, kept by the host's ClockKeeper over the channel: the guest's clock is set far back (as after a
  // long host sleep); the keeper's start (the handshake) sets it to the host's; a tick an hour late (the host
  // slept an hour) sets it again.
  assert.equal(await channel.call('time 1000000000'), 'time 1000000000');
  let hostNow = Date.now();
  const guestClock: number[] = [];
  const keeper = new ClockKeeper({
    sync: async (d) => void guestClock.push(Number((await channel.call(`time ${Math.floor(d.getTime() / 1000)}`)).split(' ')[1])),
    now: () => hostNow,
    setInterval: () => ({}),
    clearInterval: () => undefined,
  });
  await keeper.start();
  assert.ok(Math.abs(guestClock[0]! - hostNow / 1000) <= 5, `guest clock ${guestClock[0]}, host ${hostNow / 1000}`);
  hostNow += 3_600_000;
  keeper.tick();
  assert.equal(keeper.wakes.length, 1, 'the late tick is taken for a wake');
  await keeper.syncNow(); // the sync the tick started
  assert.ok(Math.abs(guestClock.at(-1)! - hostNow / 1000) <= 5, `guest clock ${guestClock.at(-1)}, host ${hostNow / 1000}`);
  keeper.stop();
});

test('the guest runs containers: the docker CLI against the guest\'s own engine, a host folder bind-mounted through the share, a published port forwarded to the host', { skip: skip || (!haveBusybox() && 'busybox-static not installed'), timeout: 15 * 60_000 }, async () => {
  const { driver, channel, share, shares, enginePort, root } = await bootVm();
  await fs.writeFile(path.join(share, 'in.txt'), 'from the host\n');
  const env = { DOCKER_HOST: `tcp://127.0.0.1:${enginePort}`, DOCKER_CONFIG: path.join(root, 'docker-config') };
  const docker = (args: string[], timeoutMs = 120_000) => runCommand('docker', args, { env, timeoutMs });
  const deadline = Date.now() + 180_000;
  for (;;) {
    const v = await docker(['version', '--format', '{{.Server.Os}}'], 20_000);
    if (v.code === 0 && v.stdout.trim() === 'linux') break;
    assert.ok(Date.now() < deadline, `the guest's engine did not answer in 3 minutes: ${v.stderr}`);
    await new Promise((r) => setTimeout(r, 1000));
  }
  const archive = path.join(root, 'busybox.tar');
  await buildBusyboxArchive(archive);
  const loaded = await docker(['load', '-i', archive], 300_000);
  assert.equal(loaded.code, 0, loaded.stderr);

  const hi = await docker(['run', '--rm', 'busybox', 'echo', 'hi'], 300_000);
  assert.equal(hi.code, 0, hi.stderr);
  assert.equal(hi.stdout, 'hi\n');

  // A host folder as a bind mount: its host path translated to the share's guest path.
  const guestSrc = toGuestPath(shares, share);
  assert.equal(guestSrc, '/mnt/work');
  const rw = await docker(['run', '--rm', '-v', `${guestSrc}:/src`, 'busybox', 'sh', '-c', 'cat /src/in.txt; echo written in the guest > /src/out.txt'], 300_000);
  assert.equal(rw.code, 0, rw.stderr);
  assert.equal(rw.stdout, 'from the host\n');
  assert.equal(await fs.readFile(path.join(share, 'out.txt'), 'utf8'), 'written in the guest\n');

  // A published port of the guest reached from the host's loopback: forwarded while the VM runs.
  const web = await docker(['run', '-d', '-p', '8080:80', ...HTTPD], 300_000);
  assert.equal(web.code, 0, web.stderr);
  const hostPort = await freePort();
  await driver.forwardPort({ protocol: 'tcp', hostPort, guestPort: 8080 });
  await servedOn(hostPort);
  await driver.unforwardPort({ protocol: 'tcp', hostPort, guestPort: 8080 });
  await assert.rejects(getPage(hostPort), /ECONNREFUSED|ECONNRESET|socket hang up/);
  await docker(['rm', '-f', web.stdout.trim()], 120_000);

  // Power off from inside: QEMU exits (-no-reboot) and the driver sees it stopped.
  assert.equal(await channel.call('poweroff'), 'bye');
  const stopDeadline = Date.now() + 60_000;
  while ((await driver.status()).state !== 'stopped') {
    assert.ok(Date.now() < stopDeadline, 'QEMU still runs a minute after the guest powered off');
    await new Promise((r) => setTimeout(r, 200));
  }
});

test('the guest image is cached by its inputs and rebuilt byte for byte', { skip, timeout: 15 * 60_000 }, async () => {
  const first = await guestImage();
  const again = await buildGuestImage({ arch: 'amd64', cacheDir, log: () => undefined });
  assert.equal(again.cached, true);
  assert.equal(again.dir, first.dir);
  const rebuilt = await buildGuestImage({ arch: 'amd64', cacheDir, force: true, log: () => undefined });
  assert.equal(rebuilt.cached, false);
  assert.equal(rebuilt.manifest.initrdSha256, first.manifest.initrdSha256);
});

const agentBuilt = existsSync(path.join(DAEMON_DIR, 'dist', 'src', 'agent'));

test('a daemon on the host runs containers in the guest through the agent (--agent unix://<port socket>): run --rm, a bind mount at its guest path (--agent-path), a named volume, a managed volume plugin, run -d -p reached on the host, logs -f, exec -it, cp, build', { skip: skip || (!agentBuilt && 'the guest agent is not in this build') || (!haveBusybox() && 'busybox-static not installed'), timeout: 20 * 60_000 }, async () => {
  const img = await guestImage();
  const root = tmpdir();
  cleanups.push(() => fs.rm(root, { recursive: true, force: true }));
  const src = path.join(root, 'src');
  await fs.mkdir(src);
  await fs.writeFile(path.join(src, 'in.txt'), 'from the host\n');
  // The host folder is mounted elsewhere in the guest (/mnt/src): the daemon is told so (--agent-path) and
  // gives the agent the guest's path of a bind mount's source. The guest's data disk is mounted at the
  // daemon's data root and the agent keeps its state there, so that the folders the remote Host names by the
  // daemon's paths are the guest's; the daemon's containers folder, whose files both sides read and write (a
  // container's log and /etc files), is shared at its path. Volumes are the guest's own, on its data disk
  // (their records are the daemon's, on the host).
  const engineArgs: string[] = []; // the agent's address, known once the VM runs
  const engine = new Engine({ args: engineArgs });
  const daemonShares = ['containers'].map((n) => path.join(engine.dataRoot, n));
  for (const dir of daemonShares) await fs.mkdir(dir, { recursive: true });
  const driver = new QemuDriver(
    {
      name: 'agent',
      stateDir: path.join(root, 'vm'),
      image: img,
      resources: { cpus: 2, memoryMiB: 2048, diskGiB: 4 },
      shares: [{ hostPath: src, guestPath: '/mnt/src' }, ...daemonShares.map((dir) => ({ hostPath: dir, guestPath: dir }))],
      guestDataRoot: engine.dataRoot,
    },
    { accel: (process.env.BERTH_VM_ACCEL as 'kvm' | 'tcg' | undefined) ?? 'tcg' },
  );
  cleanups.push(() => driver.stop({ timeoutMs: 1000 }));
  const status = await driver.start();
  // The daemon is started once the guest's agent answers: a boot under TCG on a busy machine outlasts the
  // harness's wait for a daemon's first answer.
  const probe = await createRemoteHost(status.agentEndpoint!, { waitMs: 300_000 });
  await probe.close();
  engineArgs.push('--agent', status.agentEndpoint!, '--agent-path', `${src}=/mnt/src`);
  cleanups.push(() => engine.cleanup());
  await engine.start();
  const archive = path.join(root, 'busybox.tar');
  await buildBusyboxArchive(archive);
  await engine.dockerOk(['load', '-i', archive], { timeoutMs: 600_000 });
  const hi = await engine.dockerOk(['run', '--rm', 'busybox', 'echo', 'hi'], { timeoutMs: 300_000 });
  assert.equal(hi, 'hi\n');
  const rw = await engine.dockerOk(['run', '--rm', '-v', `${src}:/src`, 'busybox', 'sh', '-c', 'cat /src/in.txt; echo written in the guest > /src/out.txt'], { timeoutMs: 300_000 });
  assert.equal(rw, 'from the host\n');
  assert.equal(await fs.readFile(path.join(src, 'out.txt'), 'utf8'), 'written in the guest\n');
  // A folder the VM does not see is refused, naming it and the shared folders.
  const unshared = await engine.docker(['run', '--rm', '-v', `${root}:/x`, 'busybox', 'true'], { timeoutMs: 120_000 });
  assert.notEqual(unshared.code, 0);
  assert.match(unshared.stderr, /the path .* is not shared with the VM .*shared folders are/);
  // A named volume keeps what a container wrote for the next one.
  await engine.dockerOk(['volume', 'create', 'vmvol'], { timeoutMs: 120_000 });
  await engine.dockerOk(['run', '--rm', '-v', 'vmvol:/data', 'busybox', 'sh', '-c', 'echo kept > /data/x'], { timeoutMs: 300_000 });
  assert.equal(await engine.dockerOk(['run', '--rm', '-v', 'vmvol:/data', 'busybox', 'cat', '/data/x'], { timeoutMs: 300_000 }), 'kept\n');
  assert.ok(!existsSync(path.join(engine.dataRoot, 'volumes', 'vmvol')), 'the volume is in the guest, not on the host');

  // A managed volume plugin made on the host (its static binary built here): its files, process and socket are
  // the guest's, the plugin client's requests cross on the agent's stream, its volume mounts in a container.
  const pluginStarted = Date.now();
  const plugin = pluginContext('volplugin.c', 'volplugin', volumeDriverConfig());
  cleanups.push(() => fs.rm(plugin, { recursive: true, force: true }));
  await engine.dockerOk(['plugin', 'create', 'vmplug', plugin], { timeoutMs: 300_000 });
  await engine.dockerOk(['plugin', 'enable', '--timeout', '120', 'vmplug'], { timeoutMs: 300_000 });
  const pluginId = (await engine.dockerOk(['plugin', 'inspect', '--format', '{{.Id}}', 'vmplug'])).trim();
  await engine.dockerOk(['volume', 'create', '-d', 'vmplug', 'vmpv'], { timeoutMs: 120_000 });
  assert.equal(await engine.dockerOk(['run', '--rm', '-v', 'vmpv:/v', 'busybox', 'cat', '/v/greeting'], { timeoutMs: 300_000 }), 'hello\n');
  assert.ok(existsSync(path.join(engine.dataRoot, 'plugins', pluginId, 'config.json')), 'its record is the daemon\'s');
  assert.ok(!existsSync(path.join(engine.dataRoot, 'plugins', pluginId, 'rootfs')), 'its files are in the guest');
  await engine.dockerOk(['volume', 'rm', 'vmpv'], { timeoutMs: 120_000 });
  await engine.dockerOk(['plugin', 'rm', '--force', 'vmplug'], { timeoutMs: 120_000 });
  process.stderr.write(`# the managed plugin's steps took ${Date.now() - pluginStarted} ms\n`);

  // run -d -p: the published port answers on the host's loopback, forwarded into the VM while the container
  // runs, and no longer once it is gone.
  const ports = new PublishedPorts(engine.socket, driver);
  const stopWatch = ports.watch();
  cleanups.push(async () => stopWatch());
  const hostPort = await freePort();
  const id = (await engine.dockerOk(['run', '-d', '-p', `${hostPort}:80`, ...HTTPD], { timeoutMs: 300_000 })).trim();
  await servedOn(hostPort);
  await engine.dockerOk(['rm', '-f', id], { timeoutMs: 120_000 });
  const deadline = Date.now() + 60_000;
  while (ports.forwards.length > 0) {
    assert.ok(Date.now() < deadline, `forwards left after the container went: ${JSON.stringify(ports.forwards)}`);
    await new Promise((r) => setTimeout(r, 200));
  }
  await assert.rejects(getPage(hostPort), /ECONNREFUSED|ECONNRESET|socket hang up/);

  // logs, exec, cp both ways, and a build whose context is on the host.
  await engine.dockerOk(['run', '-d', '--name', 'app', 'busybox', 'sh', '-c', 'echo started; exec sleep 600'], { timeoutMs: 300_000 });
  let logs = await engine.docker(['logs', 'app']);
  for (const end = Date.now() + 60_000; !/started/.test(logs.stdout) && Date.now() < end; ) {
    await new Promise((r) => setTimeout(r, 500));
    logs = await engine.docker(['logs', 'app']);
  }
  assert.match(logs.stdout, /started/, `docker logs: ${JSON.stringify(logs)}; ps: ${(await engine.docker(['ps', '-a'])).stdout}`);
  assert.equal(await engine.dockerOk(['exec', 'app', 'echo', 'inside'], { timeoutMs: 120_000 }), 'inside\n');
  await engine.dockerOk(['cp', path.join(src, 'in.txt'), 'app:/tmp/copied.txt'], { timeoutMs: 120_000 });
  assert.equal(await engine.dockerOk(['exec', 'app', 'cat', '/tmp/copied.txt'], { timeoutMs: 120_000 }), 'from the host\n');
  await engine.dockerOk(['cp', 'app:/tmp/copied.txt', path.join(root, 'back.txt')], { timeoutMs: 120_000 });
  assert.equal(await fs.readFile(path.join(root, 'back.txt'), 'utf8'), 'from the host\n');
  const tty = await runCommand('script', ['-qec', `stty cols 91 rows 27; docker exec -it app sh -c 'tty; stty size'`, '/dev/null'], {
    env: { DOCKER_HOST: engine.host, DOCKER_CONFIG: engine.dockerConfig },
    timeoutMs: 120_000,
    holdInput: true,
  });
  assert.equal(tty.code, 0, tty.stdout + tty.stderr);
  assert.match(tty.stdout, /\/dev\/pts\/\d+\r\n/);
  assert.match(tty.stdout, /27 91\r\n/);
  await engine.dockerOk(['rm', '-f', 'app'], { timeoutMs: 120_000 });
  // logs -f follows a container to its end.
  const talker = (await engine.dockerOk(['run', '-d', 'busybox', 'sh', '-c', 'echo one; sleep 2; echo two'], { timeoutMs: 300_000 })).trim();
  assert.equal(await engine.dockerOk(['logs', '-f', talker], { timeoutMs: 120_000 }), 'one\ntwo\n');
  await engine.dockerOk(['rm', '-f', talker], { timeoutMs: 120_000 });
  const context = path.join(root, 'context');
  await fs.mkdir(context);
  await fs.writeFile(path.join(context, 'hello.txt'), 'built from the host\n');
  await fs.writeFile(path.join(context, 'Dockerfile'), 'FROM busybox\nCOPY hello.txt /hello.txt\nRUN cat /hello.txt > /copy.txt\n');
  const built = await engine.docker(['build', '-t', 'vmbuilt', context], { timeoutMs: 600_000, env: { DOCKER_BUILDKIT: '0' } });
  assert.equal(built.code, 0, built.stderr + built.stdout);
  assert.equal(await engine.dockerOk(['run', '--rm', 'vmbuilt', 'cat', '/copy.txt'], { timeoutMs: 300_000 }), 'built from the host\n');
});
