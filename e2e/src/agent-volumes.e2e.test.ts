/**
 * The Linux desktop's never-root arrangement, seen through the renderer: the root agent (`berthd agent
 * --socket --group`, its own data root) and the app's engine as an unprivileged user (nobody, in the agent's
 * group) with `--agent`, its data root and exec root the user's own, serving the UI. A named volume created
 * in the Volumes view lives on the agent's side, is written by a container, shown with the Mountpoint the
 * agent names, and removed from the view.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { chmodSync, chownSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import type { Browser, Page } from 'playwright-core';
import { CHROMIUM, DAEMON_DIST, launchChromium, ROOT, screenshot } from './support.js';

const NOBODY = 65534;
const canRun =
  process.getuid?.() === 0 &&
  ['/bin/busybox', '/usr/bin/conmon', '/usr/bin/setpriv', CHROMIUM].every((f) => existsSync(f)) &&
  existsSync(path.join(ROOT, 'renderer', 'dist', 'index.html'));

/** The parts of the daemon's test harness this file uses. */
interface DaemonHarness {
  BERTHD: string;
  eventually<T>(check: () => Promise<T> | T, timeoutMs?: number, intervalMs?: number): Promise<NonNullable<T>>;
  runCommand(cmd: string, args: string[], opts?: { env?: Record<string, string>; timeoutMs?: number }): Promise<{ code: number | null; stdout: string; stderr: string }>;
  httpRequest(socket: string, method: string, urlPath: string): Promise<{ status: number }>;
  unmountUnder(root: string): void;
  removeBridge(name: string): void;
}

describe('named volumes in the UI of an engine run as a user through the root agent', { skip: !canRun && 'needs root, busybox, conmon, setpriv, Chromium and the built renderer', timeout: 240_000 }, () => {
  let h: DaemonHarness;
  let killContainers: (runtimeRoot: string) => void;
  const group = `be${randomBytes(3).toString('hex')}`;
  const bridge = `be${randomBytes(4).toString('hex')}`;
  let root: string;
  let home: string;
  let agent: ChildProcess | undefined;
  let daemon: ChildProcess | undefined;
  const output: Buffer[] = [];
  let browser: Browser | undefined;
  let page: Page;

  const socket = () => path.join(home, 'engine.sock');
  const docker = async (args: string[]) => {
    const r = await h.runCommand('docker', ['-H', `unix://${socket()}`, ...args], { env: { DOCKER_CONFIG: path.join(root, 'docker-config') }, timeoutMs: 60_000 });
    assert.equal(r.code, 0, `docker ${args.join(' ')}: ${r.stderr}\n${Buffer.concat(output).toString()}`);
    return r.stdout;
  };

  async function stop(child: ChildProcess | undefined): Promise<void> {
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const exited = once(child, 'exit');
    child.kill('SIGTERM');
    await exited;
  }

  before(async () => {
    h = (await import(pathToFileURL(path.join(DAEMON_DIST, 'test', 'harness.js')).href)) as DaemonHarness;
    ({ killContainers } = (await import(pathToFileURL(path.join(DAEMON_DIST, 'test', 'runtime-support.js')).href)) as { killContainers: (r: string) => void });
    root = mkdtempSync('/tmp/be-');
    chmodSync(root, 0o755);
    mkdirSync(path.join(root, 'docker-config'));
    assert.equal(spawnSync('groupadd', ['--system', group]).status, 0, 'groupadd');
    const gid = Number(spawnSync('getent', ['group', group], { encoding: 'utf8' }).stdout.split(':')[2]);
    const agentSocket = path.join(root, 'agent', 'agent.sock');
    agent = spawn(process.execPath, [h.BERTHD, 'agent', '--socket', agentSocket, '--group', group, '--data-root', path.join(root, 'agent-data'), '--exec-root', path.join(root, 'ax')], { stdio: ['ignore', 'ignore', 'pipe'] });
    agent.stderr!.on('data', (c: Buffer) => output.push(c));
    await h.eventually(() => existsSync(agentSocket), 20_000);

    // The app's engine: the user's data and runtime folders, its own socket and bridge, the UI on loopback.
    home = path.join(root, 'user');
    mkdirSync(home);
    chownSync(home, NOBODY, gid);
    const execRoot = path.join(home, 'run', 'berth');
    daemon = spawn(
      'setpriv',
      ['--reuid', String(NOBODY), '--regid', String(gid), '--clear-groups', '--', process.execPath, h.BERTHD,
        '-H', `unix://${socket()}`, '--data-root', path.join(home, '.local', 'share', 'berth'), '--exec-root', execRoot,
        '--pidfile', path.join(execRoot, 'berthd.pid'), '--bridge', bridge, '--agent', `unix://${agentSocket}`, '--ui', '127.0.0.1:0'],
      { stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, HOME: home } },
    );
    daemon.stderr!.on('data', (c: Buffer) => output.push(c));
    await h.eventually(async () => (await h.httpRequest(socket(), 'GET', '/_ping').catch(() => ({ status: 0 }))).status === 200, 30_000);
    const loginFile = path.join(execRoot, 'ui-url');
    const loginUrl = await h.eventually(() => (existsSync(loginFile) ? /^http:\/\/127\.0\.0\.1:\d+\/\?token=\S+/.exec(readFileSync(loginFile, 'utf8'))?.[0] : undefined), 10_000);

    const tarball = path.join(root, 'busybox.tar');
    const { buildBusyboxArchive } = (await import(pathToFileURL(path.join(DAEMON_DIST, 'test', 'fixtures', 'busybox.js')).href)) as { buildBusyboxArchive: (f: string) => Promise<void> };
    await buildBusyboxArchive(tarball);
    await docker(['load', '-i', tarball]);

    browser = await launchChromium();
    page = await (await browser.newContext({ viewport: { width: 1280, height: 800 }, colorScheme: 'light' })).newPage();
    await page.goto(loginUrl);
    await page.getByRole('heading', { name: 'Containers' }).waitFor();
  });

  after(async () => {
    await browser?.close();
    await stop(daemon);
    await stop(agent);
    if (root) {
      killContainers(path.join(root, 'ax', 'runtime'));
      h?.unmountUnder(root);
      rmSync(root, { recursive: true, force: true });
    }
    h?.removeBridge(bridge);
    spawnSync('groupdel', [group]);
  });

  it('a volume made in the Volumes view is the agent\'s, written by a container, and removed from the view', async () => {
    const content = path.join(root, 'agent-data', 'volumes', 'app-vol', '_data');
    await page.goto(page.url().replace(/#.*$/, '') + '#/volumes');
    await page.getByLabel('Volume name').fill('app-vol');
    await page.getByRole('button', { name: 'Create volume' }).click();
    const row = page.locator('tr[data-volume="app-vol"]');
    await row.waitFor({ timeout: 10_000 });
    // The Mountpoint shown is where the agent keeps it, not in the user's data root.
    assert.match(await row.innerText(), new RegExp(content.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')));
    assert.ok(existsSync(content));
    assert.ok(!existsSync(path.join(home, '.local', 'share', 'berth', 'volumes', 'app-vol')));

    await docker(['run', '--rm', '-v', 'app-vol:/data', 'busybox', 'sh', '-c', 'echo from the app > /data/note']);
    assert.equal(readFileSync(path.join(content, 'note'), 'utf8'), 'from the app\n');
    assert.equal(await docker(['run', '--rm', '-v', 'app-vol:/data', 'busybox', 'cat', '/data/note']), 'from the app\n');
    await screenshot(page, 'volumes-agent');

    await row.getByRole('button', { name: 'Remove app-vol' }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Remove' }).click();
    await row.waitFor({ state: 'detached', timeout: 10_000 });
    assert.ok(!existsSync(path.dirname(content)), 'the agent removed its folder');
    assert.doesNotMatch(await docker(['volume', 'ls', '-q']), /^app-vol$/m);
  });
});
