/**
 * The app's engine in a VM, as on macOS and Windows, run on Linux under the test switch (BERTH_APP_VM=qemu):
 * the main process (faked Electron objects, the real daemon and VM code of embedded.ts) starts QEMU with the
 * settings' resources from the guest image (built or found in the cache), waits for the engine behind the
 * guest's agent, serves it on the app's socket and the `berth` docker context, reports the VM's state, and
 * stops the daemon and the VM on quit. One boot under TCG (BERTH_VM_ACCEL=kvm where KVM works). Skipped
 * without qemu-system-x86_64 or the image build's tools.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync, mkdirSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { startApp } from '../src/app.js';
import { contextMetaFile } from '../src/docker-context.js';
import { createDaemonStarter } from '../src/embedded.js';
import type { VmEngine, VmView } from '../src/vm-engine.js';
import { fakeElectron } from './fakes.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
const onPath = (cmd: string) => spawnSync('sh', ['-c', `command -v ${cmd}`], { stdio: 'ignore' }).status === 0;
const missing = ['qemu-system-x86_64', 'apt-get', 'dpkg-deb', 'depmod', 'docker'].filter((c) => !onPath(c));
const skip =
  os.arch() !== 'x64'
    ? 'boots an amd64 guest on an amd64 host'
    : missing.length
      ? `${missing.join(', ')} not installed`
      : !existsSync('/usr/share/keyrings/debian-archive-keyring.gpg')
        ? 'debian-archive-keyring not installed'
        : !existsSync(path.join(root, 'daemon', 'dist', 'src', 'agent'))
          ? 'the daemon is not built'
          : false;

/** Mount points under dir (the daemon may put a tmpfs on its exec root), deepest first. */
function mountsUnder(dir: string): string[] {
  return readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .map((l) => l.split(' ')[4] ?? '')
    .filter((m) => m.startsWith(dir + '/'))
    .sort((a, b) => b.length - a.length);
}

test('the app starts the VM with the settings\' resources, the engine on it, the berth context; quitting stops both', { skip, timeout: 15 * 60_000 }, async () => {
  const { buildGuestImage, defaultCacheDir } = (await import(pathToFileURL(path.join(root, 'daemon', 'dist', 'src', 'vm', 'guest', 'image.js')).href)) as {
    buildGuestImage(o: { arch: 'amd64'; cacheDir: string; log(l: string): void }): Promise<{ dir: string; manifest: { kernelVersion?: string } }>;
    defaultCacheDir(): string;
  };
  const image = await buildGuestImage({ arch: 'amd64', cacheDir: defaultCacheDir(), log: (l) => process.stderr.write(`# ${l}\n`) });
  const dir = mkdtempSync(path.join(os.tmpdir(), 'berth-vmapp-'));
  const home = path.join(dir, 'home');
  const userData = path.join(dir, 'app');
  const dockerConfig = path.join(dir, 'docker');
  mkdirSync(userData, { recursive: true });
  // The resources the settings page saved: the VM gets them.
  writeFileSync(path.join(userData, 'settings.json'), JSON.stringify({ version: 3, vm: { cpus: 2, memoryMiB: 1024, diskGiB: 8 } }));
  let vm: VmEngine | undefined;
  const seen: VmView['state'][] = [];
  const startDaemon = createDaemonStarter({
    root,
    facts: () => ({ platform: 'linux', uid: 0, home, env: {}, userData, exists: existsSync }),
    vmSwitch: 'qemu',
    accel: process.env.BERTH_VM_ACCEL ?? 'tcg',
    imageDir: image.dir,
    onVm: (started) => {
      vm = started;
      started.onChange((v) => seen.push(v.state));
    },
  });
  const f = fakeElectron({ userData });
  let qemuPid = 0;
  const app = await startApp(f.electron, { rendererIndex: '/r/index.html', preload: '/p.cjs', trayIcon: '/t.png', startDaemon, dockerConfig, platform: 'linux', vmStatus: () => vm?.status });
  try {
    assert.ok(app);
    assert.equal(app.engine.state, 'running', app.engine.error);
    qemuPid = Number(readFileSync(path.join(home, '.berth', 'vm', 'qemu.pid'), 'utf8'));
    assert.ok(qemuPid > 0);
    const own = { sender: { id: f.windows[0]!.webContents.id } };
    const status = (await f.ipcHandle['berth:engine:status']!(own)) as { state: string; vm: boolean; vmStatus?: VmView };
    assert.equal(status.state, 'running');
    assert.equal(status.vm, true);
    assert.equal(status.vmStatus?.state, 'running');
    assert.equal(status.vmStatus?.driver, 'qemu');
    assert.deepEqual(status.vmStatus?.resources, { cpus: 2, memoryMiB: 1024, diskGiB: 8 });
    assert.deepEqual(seen, ['starting', 'running']);
    // External CLIs reach the engine through the `berth` context (written once the engine runs); it runs on the
    // guest's kernel with the VM's CPUs and memory.
    for (const end = Date.now() + 5000; !existsSync(contextMetaFile(dockerConfig)) && Date.now() < end; ) await new Promise((r) => setTimeout(r, 50));
    assert.equal(JSON.parse(readFileSync(contextMetaFile(dockerConfig), 'utf8')).Endpoints.docker.Host, `unix://${path.join(userData, 'engine.sock')}`);
    const { stdout } = await promisify(execFile)('docker', ['--context', 'berth', 'info', '--format', '{{.KernelVersion}} {{.NCPU}} {{.MemTotal}}'], {
      env: { ...process.env, DOCKER_CONFIG: dockerConfig, DOCKER_HOST: '', DOCKER_CONTEXT: '' },
      timeout: 120_000,
    });
    const [kernel, ncpu, mem] = stdout.trim().split(' ');
    assert.equal(kernel, image.manifest.kernelVersion);
    assert.notEqual(kernel, os.release());
    assert.equal(ncpu, '2');
    assert.ok(Number(mem) > 512 * 2 ** 20 && Number(mem) <= 1024 * 2 ** 20, `MemTotal ${mem}`);
  } finally {
    await app?.quit();
    for (const m of mountsUnder(dir)) spawnSync('umount', ['-l', m]);
    rmSync(dir, { recursive: true, force: true });
  }
  assert.equal(vm?.status.state, 'stopped');
  assert.deepEqual(seen.slice(-2), ['stopping', 'stopped']);
  assert.throws(() => process.kill(qemuPid, 0), /ESRCH/, 'QEMU still runs after the app quit');
});
