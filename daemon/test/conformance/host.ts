/**
 * The Host conformance suite: what every implementation of the Host contract (host/host.ts) must do, seen
 * from the engine's side. `hostConformance` registers the tests for one implementation, given a factory
 * that builds its Host on a sandbox's data root and exec root, and builds it again there (a restart: the
 * Host's object goes away, its containers do not).
 *
 * Parts covered: layers (stage, commit, lookups, the tar given back byte for byte, stacked layers read as
 * one tree, remove), runtime
 * (mount, start, exit codes, logs with and without follow, signals, attach with stdin, recovery after a
 * restart), exec, files (archive in and out, stat, changes, export, a container's /etc files), volumes (where the Host
 * keeps them, their folders, copy of an image's folder, sizes), network (a bridge and its
 * ports; a plugin's interface moved into a container), stats, tools (a decompressor), plugins (their folders, a plugin run until it listens, its socket dialed, stopped) and probe. `skip` names the groups an implementation leaves out (a fake without a kernel).
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { cpSync, lstatSync, mkdirSync, readFileSync, readdirSync, readlinkSync, statSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import path from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import tar from 'tar-stream';
import type { Host, LogRecord } from '../../src/host/host.js';
import { killContainers, makeSandbox, minimalSpec, readUntil, type RuntimeSandbox } from '../runtime-support.js';

export interface HostFactory {
  /** Builds the Host on the sandbox's roots. */
  create(box: RuntimeSandbox): Promise<Host>;
  /** Lets go of a Host built by create (containers keep running). */
  release(host: Host): Promise<void>;
  /** Removes what the factory started beyond the sandbox (an agent process). */
  cleanup?(): Promise<void>;
}

export type ConformanceGroup = 'layers' | 'runtime' | 'exec' | 'files' | 'volumes' | 'network' | 'stats' | 'tools' | 'probe' | 'recovery' | 'plugins';

let counter = 0;
const newId = () => `${process.pid.toString(16)}${(counter++).toString(16).padStart(4, '0')}${randomBytes(4).toString('hex')}`.padEnd(64, 'c');

/** A layer tar of the sandbox's busybox folder (regular files, symlinks and folders). */
async function layerTar(folder: string): Promise<Buffer> {
  const pack = tar.pack();
  const walk = (dir: string, rel: string) => {
    for (const name of readdirSync(dir).sort()) {
      const full = path.join(dir, name);
      const entry = rel ? `${rel}/${name}` : name;
      const st = lstatSync(full);
      if (st.isDirectory()) {
        pack.entry({ name: `${entry}/`, type: 'directory', mode: 0o755, mtime: new Date(0) });
        walk(full, entry);
      } else if (st.isSymbolicLink()) {
        pack.entry({ name: entry, type: 'symlink', linkname: readlinkSync(full), mtime: new Date(0) });
      } else {
        pack.entry({ name: entry, mode: st.mode & 0o7777, mtime: new Date(0) }, readFileSync(full));
      }
    }
  };
  walk(folder, '');
  pack.finalize();
  const chunks: Buffer[] = [];
  for await (const chunk of pack as unknown as AsyncIterable<Buffer>) chunks.push(chunk);
  return Buffer.concat(chunks);
}

const sha256 = (buf: Buffer) => `sha256:${createHash('sha256').update(buf).digest('hex')}`;

async function readAll(stream: NodeJS.ReadableStream): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream as AsyncIterable<Buffer>) chunks.push(Buffer.from(chunk));
  return Buffer.concat(chunks);
}

async function tarEntries(stream: NodeJS.ReadableStream): Promise<Map<string, string>> {
  const extract = tar.extract();
  const files = new Map<string, string>();
  extract.on('entry', (header, body, next) => {
    const chunks: Buffer[] = [];
    body.on('data', (c: unknown) => chunks.push(c as Buffer));
    body.on('end', () => {
      files.set(header.name, Buffer.concat(chunks).toString('utf8'));
      next();
    });
  });
  await pipeline(stream as Readable, extract as unknown as NodeJS.WritableStream);
  return files;
}

function logText(records: LogRecord[], stream: 'stdout' | 'stderr'): string {
  return records.filter((r) => r.stream === stream).map((r) => r.data.toString() + (r.complete ? '\n' : '')).join('');
}

export function hostConformance(name: string, factory: HostFactory, opts: { skip?: ConformanceGroup[] | string | false } = {}): void {
  const skipped = (group: ConformanceGroup) => (typeof opts.skip === 'string' ? opts.skip : Array.isArray(opts.skip) && opts.skip.includes(group) ? `${name} leaves out ${group}` : false);
  describe(`Host conformance: ${name}`, { skip: typeof opts.skip === 'string' ? opts.skip : false }, () => {
    let box: RuntimeSandbox;
    let host: Host;
    let lowerDirs: string[];
    let chainId: string;
    const started: string[] = [];

    before(async () => {
      box = makeSandbox();
      host = await factory.create(box);
    });
    after(async () => {
      for (const id of started) {
        await host?.runtime.signal(id, 9).catch(() => undefined);
        await host?.runtime.cleanup(id).catch(() => undefined);
        await host?.runtime.removeContainerFiles(id).catch(() => undefined);
      }
      if (host) await factory.release(host).catch(() => undefined);
      await factory.cleanup?.();
      box?.cleanup();
    });

    async function run(args: string[], io: { openStdin?: boolean; tty?: boolean } = {}) {
      const id = newId();
      started.push(id);
      const rootfs = await host.runtime.mountRootfs(id, lowerDirs);
      const logPath = path.join(box.root, `${id.slice(0, 12)}.log`);
      const { pid } = await host.runtime.start(id, minimalSpec(args, { tty: io.tty }), { tty: io.tty ?? false, openStdin: io.openStdin ?? false, stdinOnce: io.openStdin ?? false, logPath });
      return { id, pid, logPath, rootfs };
    }

    async function readLog(logPath: string, follow = false, until?: () => boolean): Promise<LogRecord[]> {
      const out: LogRecord[] = [];
      for await (const rec of host.runtime.readLog(logPath, { follow, signal: new AbortController().signal, until })) out.push(rec);
      return out;
    }

    test('layers: a layer is staged, committed, found, and given back byte for byte', { skip: skipped('layers') }, async () => {
      const tarball = await layerTar(box.layer);
      const staged = await host.layers.stage(Readable.from([tarball]));
      assert.equal(staged.diffId, sha256(tarball));
      assert.equal(staged.size, tarball.length);
      chainId = staged.diffId;
      await host.layers.commit(staged, chainId, null);
      await host.layers.discard(staged);
      assert.equal(host.layers.has(chainId), true);
      assert.ok(host.layers.chainIds().includes(chainId));
      assert.equal(host.layers.info(chainId)?.diffId, staged.diffId);
      assert.equal(host.layers.info(chainId)?.parent, null);
      lowerDirs = host.layers.lowerDirs([chainId]);
      assert.equal(lowerDirs.length, 1);
      assert.equal(sha256(await readAll(host.layers.openTar(chainId))), staged.diffId);
      assert.throws(() => host.layers.lowerDirs(['sha256:' + '0'.repeat(64)]), { name: 'NotFound' });
      await assert.rejects(host.layers.stage(Readable.from([Buffer.from('not a tar at all, not at all'.repeat(40))])), { name: 'InvalidParameter' });
    });

    test('layers: layers stacked are read as one tree (upper files, links, whiteouts)', { skip: skipped('layers') }, async () => {
      const pack = tar.pack();
      pack.entry({ name: 'etc/', type: 'directory', mode: 0o755, mtime: new Date(0) });
      pack.entry({ name: 'etc/hostname', mode: 0o640, mtime: new Date(0) }, 'conformance\n');
      pack.entry({ name: 'etc/link', type: 'symlink', linkname: 'hostname', mtime: new Date(0) });
      pack.entry({ name: '.wh.tmp', mode: 0o644, mtime: new Date(0) }, '');
      pack.finalize();
      const staged = await host.layers.stage(pack as unknown as NodeJS.ReadableStream);
      const upper = `sha256:${createHash('sha256').update(`${chainId} ${staged.diffId}`).digest('hex')}`;
      await host.layers.commit(staged, upper, chainId);
      await host.layers.discard(staged);
      try {
        const chain = [chainId, upper];
        const names = await host.layers.layerTreeReaddir(chain, '');
        assert.ok(names.includes('bin') && names.includes('etc') && !names.includes('tmp'), names.join(' '));
        assert.deepEqual(names, [...names].sort());
        const etc = await host.layers.layerTreeReaddir(chain, 'etc');
        assert.ok(etc.includes('hostname') && etc.includes('link'), etc.join(' '));
        assert.ok(!(await host.layers.layerTreeReaddir([chainId], 'etc')).includes('hostname'));
        assert.equal((await host.layers.layerTreeStat(chain, 'etc'))?.type, 'directory');
        assert.equal(await host.layers.layerTreeStat(chain, 'tmp'), undefined);
        assert.equal((await host.layers.layerTreeStat([chainId], 'tmp'))?.type, 'directory');
        const hostname = await host.layers.layerTreeStat(chain, 'etc/hostname');
        assert.equal(hostname?.type, 'file');
        assert.equal(hostname?.size, 12);
        assert.equal(hostname!.mode & 0o7777, 0o640);
        assert.equal((await host.layers.layerTreeStat(chain, 'etc/link'))?.type, 'symlink');
        assert.equal(await host.layers.layerTreeReadlink(chain, 'etc/link'), 'hostname');
        assert.equal((await readAll(await host.layers.layerTreeRead(chain, 'etc/hostname'))).toString(), 'conformance\n');
        assert.deepEqual(await readAll(await host.layers.layerTreeRead(chain, 'bin/busybox')), readFileSync(path.join(box.layer, 'bin', 'busybox')));
        await assert.rejects(host.layers.layerTreeRead(chain, 'etc/missing'), { name: 'NotFound' });
        await assert.rejects(host.layers.layerTreeRead(chain, 'etc'), { name: 'NotFound' });
      } finally {
        await host.layers.remove(upper);
      }
    });

    test('runtime: output reaches the log and the exit code is the process status', { skip: skipped('runtime') }, async () => {
      const { id, pid, logPath } = await run(['sh', '-c', 'echo hello; echo oops >&2; exit 3']);
      assert.ok(pid > 0);
      const exit = await host.runtime.waitExit(id);
      assert.equal(exit.exitCode, 3);
      assert.equal(typeof exit.finishedAtNano, 'bigint');
      const records = await readLog(logPath);
      assert.equal(logText(records, 'stdout'), 'hello\n');
      assert.equal(logText(records, 'stderr'), 'oops\n');
      assert.equal((await host.runtime.isRunning(id)).running, false);
      let blocks = 0;
      for await (const block of host.runtime.readLogBlocks(logPath, { follow: false, signal: new AbortController().signal })) {
        blocks += block.count;
        if (block.count) assert.ok(block.seconds(0) > 1_600_000_000);
      }
      assert.equal(blocks, 2);
      await host.runtime.cleanup(id);
      await host.runtime.removeContainerFiles(id);
    });

    test('runtime: a followed log ends once the container stops', { skip: skipped('runtime') }, async () => {
      const { id, logPath } = await run(['sh', '-c', 'for i in 1 2 3; do echo line $i; sleep 0.2; done']);
      let stopped = false;
      host.runtime.waitExit(id).then(() => {
        stopped = true;
      });
      const records = await readLog(logPath, true, () => stopped);
      assert.equal(logText(records, 'stdout'), 'line 1\nline 2\nline 3\n');
      await host.runtime.cleanup(id);
    });

    test('runtime: a signal ends a container, and a missing one is NotFound', { skip: skipped('runtime') }, async () => {
      const { id } = await run(['sleep', '1000']);
      assert.equal((await host.runtime.isRunning(id)).running, true);
      assert.ok((await host.runtime.listRuntimeContainers()).includes(id));
      await host.runtime.signal(id, 9);
      assert.equal((await host.runtime.waitExit(id)).exitCode, 137);
      await host.runtime.cleanup(id);
    });

    test('runtime: attach carries stdin in and output out', { skip: skipped('runtime') }, async () => {
      const { id } = await run(['cat'], { openStdin: true });
      const streams = await host.runtime.attach(id);
      const echoed = readUntil(streams.output, (text) => text.includes('ping'));
      streams.input.write('ping\n');
      assert.match(await echoed, /ping/);
      streams.input.end();
      assert.equal((await host.runtime.waitExit(id)).exitCode, 0);
      streams.close();
      await host.runtime.cleanup(id);
    });

    test('exec: a process in a running container, its output and exit code', { skip: skipped('exec') }, async () => {
      const { id } = await run(['sleep', '1000']);
      const proc = await host.exec.exec(id, newId(), { terminal: false, user: { uid: 0, gid: 0 }, args: ['sh', '-c', 'echo in-exec; exit 4'], env: ['PATH=/bin'], cwd: '/' }, { tty: false, openStdin: false });
      const text = readUntil(proc.streams.output, (t) => t.includes('in-exec'));
      assert.match(await text, /in-exec/);
      assert.equal(await proc.exit, 4);
      await host.runtime.signal(id, 9);
      await host.runtime.waitExit(id);
      await host.runtime.cleanup(id);
    });

    test('files: a container\'s /etc files written fresh, in place and as placeholders, and read', { skip: skipped('files') }, async () => {
      const dir = path.join(box.root, `etc-${randomBytes(4).toString('hex')}`);
      mkdirSync(dir);
      const hosts = path.join(dir, 'hosts');
      const hostname = path.join(dir, 'hostname');
      assert.equal(await host.files.readEtcFile(hosts), undefined);
      await host.files.writeEtcFiles([{ file: hosts, data: '' }, { file: hostname, data: '' }], 'placeholder');
      assert.equal(statSync(hosts).mode & 0o777, 0o755);
      assert.equal(await host.files.readEtcFile(hosts), '');
      await host.files.writeEtcFiles([{ file: hosts, data: '10.0.0.2\tone\n' }, { file: hostname, data: 'one\n' }], 'fresh');
      assert.equal(readFileSync(hostname, 'utf8'), 'one\n');
      const inode = statSync(hosts).ino;
      await host.files.writeEtcFiles([{ file: hosts, data: '10.0.0.3\tone\n' }], 'inPlace');
      assert.equal(statSync(hosts).ino, inode, 'the same inode, seen through a bind mount');
      assert.equal(await host.files.readEtcFile(hosts), '10.0.0.3\tone\n');
      // A placeholder never overwrites what a start wrote.
      await host.files.writeEtcFiles([{ file: hosts, data: '' }], 'placeholder');
      assert.equal(readFileSync(hosts, 'utf8'), '10.0.0.3\tone\n');
      // Nothing but those files, in a container's folder.
      await assert.rejects(host.files.writeEtcFiles([{ file: path.join(dir, 'other'), data: 'x' }], 'fresh'), { name: 'InvalidParameter' });
      await assert.rejects(host.files.readEtcFile('/etc/hosts'), { name: 'InvalidParameter' });
    });

    test('files: archive in and out, stat, changes and export', { skip: skipped('files') }, async () => {
      const { id, rootfs } = await run(['sleep', '1000']);
      const view = { root: rootfs, mounts: [], readonlyRootfs: false };
      const pack = tar.pack();
      pack.entry({ name: 'hello.txt', mode: 0o644 }, 'from the archive');
      pack.finalize();
      await host.files.extractArchive(view, '/tmp', pack as unknown as Readable, { noOverwriteDirNonDir: true });
      const stat = await host.files.statPath(view, '/tmp/hello.txt');
      assert.equal(stat.name, 'hello.txt');
      assert.equal(stat.size, 'from the archive'.length);
      const { stat: outStat, tar: out } = await host.files.archivePath(view, '/tmp/hello.txt');
      assert.equal(outStat.size, stat.size);
      assert.equal((await tarEntries(out)).get('hello.txt'), 'from the archive');
      await assert.rejects(host.files.statPath(view, '/no/such/file'), { name: 'NotFound' });
      const changes = await host.files.changes(id, lowerDirs, new Set());
      assert.ok(changes.some((c) => c.Path === '/tmp/hello.txt' && c.Kind === 1), JSON.stringify(changes));
      const exported = await tarEntries(host.files.exportRootfs(rootfs));
      assert.equal(exported.get('tmp/hello.txt'), 'from the archive');
      await host.runtime.signal(id, 9);
      await host.runtime.waitExit(id);
      await host.runtime.cleanup(id);
    });

    test('volumes: a volume folder is made where the Host says, measured and removed', { skip: skipped('volumes') }, async () => {
      // The Host names where its volumes live (on its own machine); each volume's folder is made below that.
      const root = host.volumes.volumesRoot;
      assert.ok(path.isAbsolute(root), root);
      const name = `v${randomBytes(4).toString('hex')}`;
      const dir = path.join(root, name);
      await host.volumes.createVolumeDir(dir);
      assert.ok((await host.volumes.listVolumeDirs()).includes(name));
      assert.equal(await host.volumes.exists(path.join(dir, '_data')), true);
      assert.equal(await host.volumes.isEmpty(path.join(dir, '_data')), true);
      assert.equal(await host.volumes.isMounted(path.join(dir, '_data')), false);
      assert.equal(await host.volumes.diskUsage(path.join(dir, '_data')), 0);
      await assert.rejects(host.volumes.createVolumeDir(dir));
      await host.volumes.removeVolumeDir(dir);
      assert.equal(await host.volumes.exists(dir), false);
      assert.ok(!(await host.volumes.listVolumeDirs()).includes(name));
    });

    test('volumes: a folder outside the Host\'s volumes folder is refused', { skip: skipped('volumes') }, async () => {
      await assert.rejects(host.volumes.createVolumeDir(path.join(box.dataRoot, `elsewhere-${randomBytes(4).toString('hex')}`)));
    });

    test('volumes: an image\'s folder is copied into a volume, which then has a size', { skip: skipped('files') || skipped('volumes') }, async () => {
      const id = newId();
      const rootfs = await host.runtime.mountRootfs(id, lowerDirs);
      const dir = path.join(host.volumes.volumesRoot, `v${randomBytes(4).toString('hex')}`);
      try {
        await host.volumes.createVolumeDir(dir);
        await host.volumes.copyFromRootfs(rootfs, '/bin', path.join(dir, '_data'));
        assert.equal(await host.volumes.isEmpty(path.join(dir, '_data')), false);
        assert.ok((await host.volumes.diskUsage(path.join(dir, '_data'))) > 0);
      } finally {
        await host.volumes.removeVolumeDir(dir).catch(() => undefined);
        await host.runtime.unmountRootfs(id);
        await host.runtime.removeContainerFiles(id);
      }
    });

    test('network: a bridge is made with its address, and removed', { skip: skipped('network') }, async () => {
      const bridge = `bc${randomBytes(4).toString('hex')}`;
      const used = await host.network.usedSubnets();
      assert.ok(Array.isArray(used));
      let third = 200;
      while (used.some((s) => s.startsWith(`10.231.${third}.`))) third++;
      try {
        await host.network.ensureBridge({ name: bridge, gateway: `10.231.${third}.1`, prefixLen: 24, subnet: `10.231.${third}.0/24`, mtu: 1500 });
        assert.equal(await host.network.bridgeAddress(bridge), `10.231.${third}.1/24`);
        assert.deepEqual(await host.network.bridgePorts(bridge), []);
      } finally {
        await host.network.removeBridge(bridge);
      }
      assert.equal(await host.network.bridgeAddress(bridge), undefined);
      const range = await host.network.ephemeralPortRange();
      assert.ok(range.first > 0 && range.last >= range.first);
    });

    // What network plugins need (the plugins group): the suite makes the interface with this machine's ip.
    test('network: an interface made on the host moves into a container, configured there', { skip: skipped('network') || skipped('runtime') || skipped('plugins') }, async () => {
      const { pid } = await run(['sleep', '1000']);
      const suffix = randomBytes(4).toString('hex');
      const [outer, inner] = [`ca${suffix}`, `cb${suffix}`];
      const made = spawnSync('ip', ['link', 'add', outer, 'up', 'type', 'veth', 'peer', 'name', inner], { encoding: 'utf8' });
      assert.equal(made.status, 0, made.stderr);
      const inside = (args: string[]) => spawnSync('nsenter', ['-t', String(pid), '-n', 'ip', ...args], { encoding: 'utf8' }).stdout;
      try {
        const spec = { pid, hostName: inner, containerInterface: 'eth3', address: '10.231.250.2', prefixLen: 24, macAddress: '02:42:0a:e7:fa:02' };
        await assert.rejects(host.network.adoptInterface({ ...spec, address: '10.231.250.2; reboot' }));
        await host.network.adoptInterface({ ...spec, gateway: '10.231.250.1', routes: [{ destination: '10.232.0.0/16', nextHop: '10.231.250.1' }] });
        assert.match(inside(['-4', '-o', 'addr', 'show', 'eth3']), /inet 10\.231\.250\.2\/24/);
        assert.match(inside(['link', 'show', 'eth3']), /02:42:0a:e7:fa:02/);
        const routes = inside(['route']);
        assert.match(routes, /default via 10\.231\.250\.1 dev eth3/);
        assert.match(routes, /10\.232\.0\.0\/16 via 10\.231\.250\.1 dev eth3/);
        assert.equal(spawnSync('ip', ['link', 'show', inner]).status !== 0, true, 'gone from the host');
      } finally {
        spawnSync('ip', ['link', 'del', outer]);
      }
    });

    test('stats: a running container is measured', { skip: skipped('stats') }, async () => {
      const { id, pid } = await run(['sleep', '1000']);
      const sample = await host.stats.sample(pid, { networks: false });
      assert.ok(sample);
      assert.ok(sample.memory.usage === undefined || sample.memory.usage > 0);
      assert.ok(sample.systemCpuUsage > 0);
      assert.ok(host.stats.onlineCpus() > 0);
      assert.ok(host.stats.machineMemory() > 0);
      await host.runtime.signal(id, 9);
      await host.runtime.waitExit(id);
      assert.equal(await host.stats.sample(pid, { networks: false }), undefined);
      await host.runtime.cleanup(id);
    });

    test('tools: a decompressor streams bytes through the machine\'s tool', { skip: skipped('tools') }, async () => {
      const plain = Buffer.from('plain bytes '.repeat(5000));
      const xz = spawnSync('xz', ['-c'], { input: plain });
      const out = host.tools.decompressor('xz');
      const got = readAll(out);
      out.end(xz.stdout);
      assert.ok((await got).equals(plain));
      const broken = host.tools.decompressor('xz');
      const failed = readAll(broken);
      broken.end(Buffer.from('not xz at all'));
      await assert.rejects(failed);
    });

    test('tools: a folder packed by the machine\'s tar unpacks into another', { skip: skipped('tools') }, async () => {
      const from = path.join(box.dataRoot, `pack-${randomBytes(4).toString('hex')}`);
      const to = `${from}-out`;
      mkdirSync(path.join(from, 'sub'), { recursive: true });
      mkdirSync(to);
      writeFileSync(path.join(from, 'sub', 'file'), 'packed\n');
      await host.tools.unpackInto(to, host.tools.packFolder(from));
      assert.equal(readFileSync(path.join(to, 'sub', 'file'), 'utf8'), 'packed\n');
      await assert.rejects(host.tools.unpackInto(to, Readable.from([Buffer.alloc(1024, 'x')])));
    });

    test('plugins: folders, and a plugin run under the OCI runtime until it listens, its socket dialed, stopped; one that exits fails with its log', { skip: skipped('plugins') }, async () => {
      const plugins = host.plugins;
      // The folders the Host keeps plugins in, on its machine.
      assert.ok(path.isAbsolute(plugins.pluginsRoot) && path.isAbsolute(plugins.pluginsRunRoot), `${plugins.pluginsRoot} ${plugins.pluginsRunRoot}`);
      const base = path.join(box.root, 'plugins');
      await plugins.makeDir(path.join(base, 'a', 'b'));
      writeFileSync(path.join(base, 'a', 'f.txt'), 'text');
      const entries = (await plugins.entries(path.join(base, 'a'))).sort((x, y) => x.name.localeCompare(y.name));
      assert.deepEqual(entries, [{ name: 'b', kind: 'dir' }, { name: 'f.txt', kind: 'file' }]);
      assert.deepEqual(await plugins.entries(path.join(base, 'none')), []);
      assert.equal(await plugins.kindOf(path.join(base, 'a', 'b')), 'dir');
      assert.equal(await plugins.kindOf(path.join(base, 'none')), undefined);
      assert.equal(await plugins.readText(path.join(base, 'a', 'f.txt'), 100), 'text');
      assert.equal(await plugins.readText(path.join(base, 'a', 'none'), 100), undefined);
      await assert.rejects(plugins.readText(path.join(base, 'a', 'f.txt'), 2));
      await plugins.rename(path.join(base, 'a', 'f.txt'), path.join(base, 'a', 'g.txt'));
      assert.equal(await plugins.kindOf(path.join(base, 'a', 'g.txt')), 'file');
      await plugins.remove(path.join(base, 'a'));
      await plugins.remove(path.join(base, 'a'));
      assert.equal(await plugins.kindOf(path.join(base, 'a')), undefined);

      // A plugin: the tests' volume driver, listening in its socket folder.
      const rootfs = path.join(base, 'rootfs');
      cpSync(box.layer, rootfs, { recursive: true, verbatimSymlinks: true });
      mkdirSync(path.join(rootfs, 'run', 'docker', 'plugins'), { recursive: true });
      const source = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..', 'test', 'fixtures', 'plugin', 'volplugin.c');
      const cc = spawnSync('gcc', ['-static', '-O2', '-o', path.join(rootfs, 'volplugin'), source], { encoding: 'utf8' });
      assert.equal(cc.status, 0, cc.stderr);
      const sockets = path.join(base, 'sockets');
      await plugins.makeDir(sockets);
      const specOf = (args: string[]) => {
        const spec = minimalSpec(args) as { root: { path?: string }; mounts: object[] };
        spec.root.path = rootfs;
        spec.mounts.push({ destination: '/run/docker/plugins', type: 'bind', source: sockets, options: ['rbind'] });
        return spec;
      };
      // Where the Host finds again what an earlier Host object ran.
      const runtimeRoot = path.join(plugins.pluginsRunRoot, 'runtime');
      const id = newId();
      const run = { id, runtimeRoot, bundle: path.join(box.execRoot, 'plugins', 'bundles', id), logFile: path.join(base, 'plugin.log'), socket: path.join(sockets, 'fixvol.sock'), timeoutMs: 20_000 };
      try {
        await plugins.run({ ...run, spec: specOf(['/volplugin']) });
        assert.equal(await plugins.kindOf(run.socket), 'socket');
        // Its socket, dialed on the Host's machine: an HTTP exchange over the stream the Host gives.
        const connection = await plugins.dial({ socketPath: run.socket });
        connection.write('POST /Plugin.Activate HTTP/1.1\r\nHost: plugin\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}');
        const answer = (await readAll(connection)).toString();
        assert.match(answer, /^HTTP\/1\.1 200 /);
        assert.match(answer, /\r\n\r\n\{"Implements":\["VolumeDriver"\]\}$/);
        // A socket nobody made: the system error's code crosses (the plugin client retries on it).
        await assert.rejects(plugins.dial({ socketPath: path.join(sockets, 'none.sock') }), (err: NodeJS.ErrnoException) => err.code === 'ENOENT');
        // Run again while it runs and listens (a daemon back after it went away): kept, not restarted.
        const exitedBefore = plugins.waitExit(id).then(() => 'exited');
        await plugins.run({ ...run, spec: specOf(['/volplugin']) });
        assert.equal(await Promise.race([exitedBefore, new Promise((r) => setTimeout(() => r('running'), 500))]), 'running', 'the same run');
        const exited = plugins.waitExit(id);
        await plugins.stop(id);
        await exited;
        await plugins.stop(id);
        const broken = newId();
        await assert.rejects(
          plugins.run({ ...run, id: broken, bundle: path.join(box.execRoot, 'plugins', 'bundles', broken), socket: path.join(sockets, 'none.sock'), spec: specOf(['/bin/sh', '-c', 'echo broken >&2; exit 3']) }),
          /exited: .*broken/,
        );
        assert.deepEqual(await plugins.waitExit(broken), { code: null, signal: null });

        // Run again, then a new Host object (an agent that restarted): it finds the plugin still running, keeps
        // it when asked to run it, waits for its end, and stops it.
        await plugins.run({ ...run, spec: specOf(['/volplugin']) });
        await factory.release(host);
        host = await factory.create(box);
        const ended = host.plugins.waitExit(id).then(() => 'ended');
        await host.plugins.run({ ...run, spec: specOf(['/volplugin']) });
        assert.equal(await Promise.race([ended, new Promise((r) => setTimeout(() => r('running'), 500))]), 'running');
        await host.plugins.stop(id);
        assert.equal(await ended, 'ended');
      } finally {
        await host.plugins.stop(id).catch(() => undefined);
        killContainers(runtimeRoot);
      }
    });

    test('probe: the machine and its runtime', { skip: skipped('probe') }, async () => {
      const info = await host.probe.info();
      assert.equal(info.osType, 'linux');
      assert.ok(info.kernelVersion);
      assert.ok(['crun', 'runc'].includes(host.probe.runtimeName));
      assert.equal(typeof host.probe.machineId, 'string');
      assert.ok(host.probe.rlimits.RLIMIT_NOFILE);
      assert.ok(Array.isArray(await host.probe.componentVersions()));
      assert.equal(typeof host.probe.blkio.throttle, 'boolean');
      // The machine's devices: /dev/null where it has one (at the container's path), else Docker's message.
      const devices = await host.probe.allDevices();
      assert.ok(Array.isArray(devices));
      if (devices.some((d) => d.path === '/dev/null')) {
        const [nullDevice] = await host.probe.devices('/dev/null', '/dev/n');
        assert.deepEqual([nullDevice.path, nullDevice.type, nullDevice.major, nullDevice.minor], ['/dev/n', 'c', 1, 3]);
        await assert.rejects(host.probe.blockDevice('BlkioDeviceReadBps', '/dev/null'), /BlkioDeviceReadBps: .*not a block device/);
      }
      const missing = path.join(box.dataRoot, 'no-such-path');
      await assert.rejects(host.probe.devices(missing, '/dev/x'), new RegExp(`error gathering device information while adding custom device "${missing}"`));
      assert.equal(await host.probe.pathExists(missing), false);
      assert.ok(['string', 'undefined'].includes(typeof (await host.probe.etcFile('hosts'))));
    });

    test('recovery: a container outlives its Host object and is found again', { skip: skipped('recovery') }, async () => {
      const { id, logPath } = await run(['sh', '-c', 'echo before; sleep 1000']);
      for (let i = 0; i < 200 && logText(await readLog(logPath), 'stdout') !== 'before\n'; i++) await new Promise((r) => setTimeout(r, 25));
      await factory.release(host);
      host = await factory.create(box);
      assert.deepEqual(host.layers.lowerDirs([chainId]), lowerDirs);
      assert.equal((await host.runtime.isRunning(id)).running, true);
      assert.ok((await host.runtime.listRuntimeContainers()).includes(id));
      const exited = host.runtime.waitExit(id);
      await host.runtime.signal(id, 9);
      assert.equal((await exited).exitCode, 137);
      assert.equal(logText(await readLog(logPath), 'stdout'), 'before\n');
      await host.runtime.cleanup(id);
    });
  });
}

