/**
 * The packaged app holds everything the engine loads at run time. electron-builder packages the app for
 * Linux as a directory (its `dir` target, from electron-builder.yml as it is) around a stand-in for the
 * Electron binary, which cannot be downloaded here; then a real berthd, started from the built tree with a
 * loader that records every file it loads, starts, loads an image, runs a container on its bridge and
 * serves the UI. Each file it loaded from the tree must be in the package (app.asar or, for native addons,
 * app.asar.unpacked), and so must the renderer it serves.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { loadHarness, ROOT, type Engine } from './support.js';

const require = createRequire(import.meta.url);
const harness = await loadHarness();

interface AsarModule {
  listPackage(archive: string, options: { isPack: boolean }): string[];
  statFile(archive: string, file: string, followLinks?: boolean): { files?: unknown; unpacked?: boolean };
}
interface Builder {
  build(options: Record<string, unknown>): Promise<string[]>;
  Platform: { LINUX: { createTarget(type: string | string[], ...archs: number[]): unknown } };
  Arch: Record<string, number>;
}

function walk(dir: string): string[] {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => path.join(e.parentPath ?? (e as unknown as { path: string }).path, e.name));
}

describe('the packaged app', { timeout: 600_000 }, () => {
  let dir: string;
  let engine: Engine | undefined;
  /** Files of the package, relative to the app's root as in the repository. */
  const packaged = new Set<string>();
  const unpacked = new Set<string>();
  const loaded = new Set<string>();
  /** The deb's fpm arguments and maintainer scripts, as electron-builder computed them. */
  let debArgs: string[] = [];
  let afterInstall = '';
  let beforeRemove = '';
  let appOut = '';

  before(async () => {
    for (const built of ['daemon/dist/src/cli.js', 'renderer/dist/index.html', 'electron/dist/src/main.js'])
      if (!existsSync(path.join(ROOT, built))) throw new Error(`${built} is missing: npm run build first`);
    dir = mkdtempSync(path.join(os.tmpdir(), 'berth-package-'));

    // The stand-in for Electron's unpacked distribution: electron-builder copies it and renames the binary.
    const electronDist = path.join(dir, 'electron-dist');
    mkdirSync(electronDist);
    writeFileSync(path.join(electronDist, 'electron'), '#!/bin/sh\nexit 1\n');
    chmodSync(path.join(electronDist, 'electron'), 0o755);
    const builder = require('app-builder-lib') as Builder;
    const output = path.join(dir, 'out');
    // The deb is computed too, up to the fpm call it would make (fpm is a download): its arguments and
    // scripts are kept here.
    const effectiveOptionComputed = async (computed: unknown) => {
      if (!Array.isArray(computed) || !Array.isArray(computed[0])) return false;
      debArgs = computed[0] as string[];
      const script = (flag: string) => debArgs[debArgs.indexOf(flag) + 1]!;
      afterInstall = readFileSync(path.resolve(ROOT, script('--after-install')), 'utf8');
      beforeRemove = readFileSync(path.resolve(ROOT, script('--before-remove')), 'utf8');
      return true;
    };
    // From the repository root, as electron-builder is run: the config's hook paths are relative to it.
    const cwd = process.cwd();
    process.chdir(ROOT);
    try {
      await builder.build({
        projectDir: ROOT,
        targets: builder.Platform.LINUX.createTarget(['dir', 'deb'], builder.Arch[process.arch]!),
        // Only what running offline needs; the rest comes from electron-builder.yml.
        config: { electronDist, electronVersion: '41.7.1', directories: { output } },
        effectiveOptionComputed,
      });
    } finally {
      process.chdir(cwd);
    }
    appOut = path.join(output, process.arch === 'x64' ? 'linux-unpacked' : `linux-${process.arch}-unpacked`);
    const resources = path.join(appOut, 'resources');
    const archive = path.join(resources, 'app.asar');
    const asar = createRequire(require.resolve('app-builder-lib'))('@electron/asar') as AsarModule;
    for (const entry of asar.listPackage(archive, { isPack: false })) {
      const rel = entry.replace(/^[/\\]/, '');
      const stat = asar.statFile(archive, rel, false);
      if (stat.files) continue;
      packaged.add(rel);
      if (stat.unpacked) unpacked.add(rel);
    }
    const unpackedDir = path.join(resources, 'app.asar.unpacked');
    if (existsSync(unpackedDir)) for (const file of walk(unpackedDir)) assert.ok(unpacked.has(path.relative(unpackedDir, file)), `${file} is unpacked but not in the archive's index`);

    // A real berthd from the built tree, every file it loads recorded.
    const trace = path.join(dir, 'loaded.txt');
    writeFileSync(trace, '');
    const saved = { NODE_OPTIONS: process.env.NODE_OPTIONS, BERTH_TRACE_LOADS: process.env.BERTH_TRACE_LOADS };
    process.env.NODE_OPTIONS = `${saved.NODE_OPTIONS ?? ''} --import=${pathToFileURL(path.join(path.dirname(new URL(import.meta.url).pathname), 'trace-loads.js')).href}`.trim();
    process.env.BERTH_TRACE_LOADS = trace;
    try {
      engine = await harness.startEngine({ args: ['--ui', '127.0.0.1:0'] });
    } finally {
      for (const [key, value] of Object.entries(saved)) {
        if (value === undefined) delete process.env[key];
        else process.env[key] = value;
      }
    }
    await engine.loadBusybox();
    assert.equal((await engine.dockerOk(['run', '--rm', 'busybox', 'echo', 'from the package'])).trim(), 'from the package');
    await engine.dockerOk(['run', '-d', '--name', 'pkg-exec', 'busybox', 'sleep', '600']);
    assert.equal((await engine.dockerOk(['exec', 'pkg-exec', 'cat', '/etc/hostname'])).trim().length > 0, true);
    await engine.dockerOk(['rm', '-f', 'pkg-exec']);
    // The UI's address: in a file of the exec root where the daemon writes one, else in its log.
    const uiFile = path.join((engine as unknown as { execRoot: string }).execRoot, 'ui-url');
    const uiUrl = await harness.eventually(() => /(http:\/\/127\.0\.0\.1:\d+)\/\?token=/.exec(existsSync(uiFile) ? readFileSync(uiFile, 'utf8') : engine!.daemonLog)?.[1], 5000);
    assert.equal((await fetch(uiUrl)).status < 500, true);
    // SIGTERM: the daemon exits on its own, and the tracer writes require's cache.
    await (engine as unknown as { stop(): Promise<void> }).stop();
    for (const line of readFileSync(trace, 'utf8').split('\n')) {
      if (!line || !path.isAbsolute(line)) continue;
      const rel = path.relative(ROOT, line);
      if (rel.startsWith('..') || rel.startsWith(`e2e${path.sep}`)) continue;
      loaded.add(rel.split(path.sep).join('/'));
    }
  });

  after(async () => {
    await engine?.cleanup();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('holds every file a running engine loaded from the tree: its modules, runtime dependencies and native addons', () => {
    // The trace saw the kinds of files that matter, or this test would prove nothing.
    assert.ok([...loaded].some((f) => f.startsWith('daemon/dist/src/')), 'no daemon module traced');
    assert.ok([...loaded].some((f) => f.startsWith('node_modules/')), 'no dependency traced');
    assert.ok([...loaded].some((f) => f.endsWith('.node')), 'no native addon traced');
    if (process.env.E2E_VERBOSE) console.log([...loaded].sort().join('\n'));
    const missing = [...loaded].filter((f) => !packaged.has(f)).sort();
    assert.deepEqual(missing, [], `loaded by berthd but not packaged:\n${missing.join('\n')}`);
  });

  it('keeps native addons outside the archive, where they can be loaded', () => {
    const addons = [...packaged].filter((f) => f.endsWith('.node'));
    assert.ok(addons.length > 0);
    for (const addon of addons) assert.ok(unpacked.has(addon), `${addon} is inside app.asar`);
    for (const built of walk(path.join(ROOT, 'daemon', 'native')).filter((f) => f.endsWith('.node') && path.basename(path.dirname(f)) === 'Release'))
      assert.ok(packaged.has(path.relative(ROOT, built)), `${path.relative(ROOT, built)} is not packaged`);
  });

  it('holds the renderer berthd --ui serves, the Electron main process and its preload', () => {
    for (const file of walk(path.join(ROOT, 'renderer', 'dist'))) assert.ok(packaged.has(path.relative(ROOT, file)), `${path.relative(ROOT, file)} is not packaged`);
    for (const file of ['electron/dist/src/main.js', 'electron/dist/src/preload.cjs', 'electron/assets/tray.png', 'daemon/bin/berthd', 'package.json'])
      assert.ok(packaged.has(file), `${file} is not packaged`);
    const meta = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { dependencies?: Record<string, string> };
    const daemonDeps = (JSON.parse(readFileSync(path.join(ROOT, 'daemon', 'package.json'), 'utf8')) as { dependencies: Record<string, string> }).dependencies;
    for (const name of Object.keys(daemonDeps)) {
      assert.equal(meta.dependencies?.[name], daemonDeps[name], `the root package.json does not declare the daemon's dependency ${name}`);
      assert.ok(packaged.has(`node_modules/${name}/package.json`), `node_modules/${name} is not packaged`);
    }
  });

  it('carries an icon of at least 512 px and the product metadata', () => {
    const icon = readFileSync(path.join(ROOT, 'electron', 'assets', 'icon.png'));
    assert.equal(icon.subarray(1, 4).toString('latin1'), 'PNG');
    assert.ok(icon.readUInt32BE(16) >= 512 && icon.readUInt32BE(20) >= 512, 'icon smaller than 512x512');
    assert.ok(statSync(path.join(ROOT, 'electron', 'assets', 'icon.png')).size > 0);
    const meta = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as Record<string, any>;
    for (const key of ['name', 'version', 'description']) assert.ok(meta[key], key);
    assert.ok(meta.author?.name && meta.author?.email, 'author with an email (the deb package needs one)');
  });

  it('installs the root agent service with the deb: its unit, the berth group, and the service enabled and stopped with the package', () => {
    assert.ok(debArgs.length > 0, 'the deb target was not computed');
    // The app goes to /opt/Berth; the unit to systemd's folder, from the repository's file.
    const appMapping = debArgs.find((a) => a.startsWith(`${appOut}/=`));
    assert.equal(appMapping, `${appOut}/=/opt/Berth`);
    const unitMapping = debArgs.find((a) => a.endsWith('=/lib/systemd/system/berth-agent.service'));
    assert.ok(unitMapping, `no unit in ${debArgs.join(' ')}`);
    const unit = readFileSync(path.resolve(ROOT, unitMapping.split('=')[0]!), 'utf8');
    const execStart = /^ExecStart=(\S+) (\S+) (.*)$/m.exec(unit);
    assert.ok(execStart, unit);
    assert.equal(execStart[3], 'agent --socket /run/berth-agent.sock --group berth');
    assert.match(unit, /^Environment=ELECTRON_RUN_AS_NODE=1$/m);
    assert.match(unit, /^KillMode=process$/m);
    assert.match(unit, /^WantedBy=multi-user\.target$/m);
    // What it runs is in the package: the app's binary (as Node), and berthd in its archive.
    assert.ok(execStart[1]!.startsWith('/opt/Berth/'));
    assert.ok(existsSync(path.join(appOut, execStart[1]!.slice('/opt/Berth/'.length))), `${execStart[1]} is not in the package`);
    assert.ok(execStart[2]!.startsWith('/opt/Berth/resources/app.asar/'));
    assert.ok(packaged.has(execStart[2]!.slice('/opt/Berth/resources/app.asar/'.length)), `${execStart[2]} is not in app.asar`);
    // The postinst, its macros filled in: the group, then the service enabled and started.
    assert.doesNotMatch(afterInstall, /\$\{[A-Za-z]+\}/);
    assert.match(afterInstall, /app_dir='\/opt\/Berth'/);
    assert.match(afterInstall, /getent group berth[\s\S]*groupadd --system berth/);
    assert.match(afterInstall, /systemctl enable berth-agent\.service[\s\S]*systemctl restart berth-agent\.service/);
    assert.ok(afterInstall.indexOf('groupadd') < afterInstall.indexOf('systemctl enable'), 'the group exists before the agent starts');
    assert.match(beforeRemove, /remove\|purge[\s\S]*systemctl stop berth-agent\.service[\s\S]*systemctl disable berth-agent\.service/);
  });
});
