/**
 * The renderer in Chromium against a real berthd (`--ui`), with real containers started by the docker CLI.
 * Each view is captured under artifacts/.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { DAEMON_DIST, launchChromium, loadHarness, screenshot, startEngineWithUi, type Engine } from './support.js';
import { freePort, pushArchive, startRegistry } from './registry.js';

const harness = await loadHarness();

function rawGet(url: string, headers: Record<string, string>): Promise<number> {
  return new Promise((resolve, reject) => {
    http.get(url, { headers }, (res) => {
      res.resume();
      resolve(res.statusCode!);
    }).on('error', reject);
  });
}

/** The text of the xterm rows, one string per line. */
async function terminalLines(page: Page): Promise<string[]> {
  return page.$$eval('[data-testid=terminal] .xterm-rows > div', (rows) => rows.map((r) => (r.textContent ?? '').replace(/\u00a0/g, ' ').trimEnd()));
}

async function waitForTerminalLine(page: Page, match: (line: string) => boolean, timeoutMs = 5000): Promise<string> {
  return harness.eventually(async () => (await terminalLines(page)).find(match), timeoutMs, 50);
}

async function engineHas(engine: Engine, method: string, urlPath: string): Promise<boolean> {
  const res = await engine.request(method, urlPath, { body: {} });
  return !(res.status === 404 && /page not found/.test(res.text));
}

describe('the renderer served by berthd --ui, in Chromium', { timeout: 480_000 }, () => {
  let engine: Engine;
  let baseUrl: string;
  let loginUrl: string;
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;

  before(async () => {
    ({ engine, loginUrl, baseUrl } = await startEngineWithUi(harness));
    await engine.loadBusybox();
    browser = await launchChromium();
    context = await browser.newContext({ viewport: { width: 1280, height: 800 }, colorScheme: 'light' });
    page = await context.newPage();
    await page.goto(loginUrl);
    await page.getByRole('heading', { name: 'Containers' }).waitFor();
    await page.getByLabel('events live').waitFor({ timeout: 5000 });
  });

  after(async () => {
    await browser?.close();
    await engine?.cleanup();
  });

  it('refuses a browser without the token, and requests from another origin', async () => {
    const other = await browser.newContext();
    const p = await other.newPage();
    const res = await p.goto(baseUrl);
    assert.equal(res?.status(), 401);
    assert.match(await p.content(), /printed at start/);
    await other.close();
    const cookies = await context.cookies();
    const token = cookies.find((c) => c.name === 'berth_ui_token');
    assert.ok(token, 'the first visit left the token cookie');
    assert.equal(token.httpOnly, true);
    assert.equal(token.sameSite, 'Strict');
    const cookie = `berth_ui_token=${token.value}`;
    assert.equal(await rawGet(`${baseUrl}api/_ping`, { Cookie: cookie }), 200);
    assert.equal(await rawGet(`${baseUrl}api/_ping`, { Cookie: cookie, Origin: 'http://evil.example' }), 403);
    assert.equal(await rawGet(`${baseUrl}api/_ping`, {}), 401);
  });

  it('shows a container started with the docker CLI within a second, driven by events', async () => {
    await page.goto(`${baseUrl}#/containers`);
    await page.getByTestId('containers').or(page.getByText('No containers yet')).waitFor();
    const started = Date.now();
    await engine.dockerOk(['run', '-d', '--name', 'e2e-sleep', '--label', 'com.docker.compose.project=shop', 'busybox', 'sleep', '600']);
    const cliDone = Date.now();
    await page.locator('tr[data-name="e2e-sleep"]').waitFor({ timeout: 1000 });
    const shown = Date.now();
    assert.ok(shown - cliDone < 1000, `row shown ${shown - cliDone} ms after docker run returned (${shown - started} ms after it started)`);
    await page.locator('tr[data-name="e2e-sleep"] .badge.running').waitFor({ timeout: 2000 });
    assert.equal(await page.locator('tr.group td').first().innerText().then((t) => t.startsWith('shop')), true, 'grouped by compose project');
    await engine.dockerOk(['run', '-d', '--name', 'e2e-web', 'busybox', 'sleep', '600']);
    await page.locator('tr[data-name="e2e-web"]').waitFor({ timeout: 1000 });
    await screenshot(page, 'containers');
    // Search filters the list.
    await page.getByLabel('Search containers').fill('web');
    await page.locator('tr[data-name="e2e-sleep"]').waitFor({ state: 'detached' });
    await page.getByLabel('Search containers').fill('');
  });

  it('runs `echo hi` in an exec terminal, and a resize reaches the process (stty size)', async (t) => {
    if (!(await engineHas(engine, 'POST', '/containers/x/exec'))) return t.skip('the engine serves no exec endpoints yet');
    const id = (await engine.dockerOk(['inspect', '-f', '{{.Id}}', 'e2e-sleep'])).trim();
    await page.goto(`${baseUrl}#/containers/${id}/terminal`);
    await page.getByTestId('terminal-status').filter({ hasText: 'connected' }).waitFor({ timeout: 5000 });
    const term = page.getByTestId('terminal');
    await term.locator('[data-size]').or(page.locator('[data-testid=terminal][data-size]')).first().waitFor({ timeout: 5000 });
    await page.locator('.xterm-helper-textarea').focus();
    await page.keyboard.type('echo hi\n');
    await waitForTerminalLine(page, (l) => l.trim() === 'hi');
    const size1 = await term.getAttribute('data-size');
    await page.keyboard.type('stty size\n');
    await waitForTerminalLine(page, (l) => l.trim() === size1);
    await screenshot(page, 'container-terminal');
    // A smaller window: the terminal refits, the engine is told, the process sees it.
    await page.setViewportSize({ width: 900, height: 600 });
    await harness.eventually(async () => (await term.getAttribute('data-size')) !== size1, 5000);
    const size2 = (await term.getAttribute('data-size'))!;
    await page.keyboard.type('clear; stty size\n');
    await waitForTerminalLine(page, (l) => l.trim() === size2);
    await page.setViewportSize({ width: 1280, height: 800 });
  });

  it('attaches a terminal to a container started with -it', async () => {
    await engine.dockerOk(['run', '-dit', '--name', 'e2e-shell', 'busybox', 'sh']);
    const id = (await engine.dockerOk(['inspect', '-f', '{{.Id}}', 'e2e-shell'])).trim();
    await page.goto(`${baseUrl}#/containers/${id}/attach`);
    await page.getByTestId('terminal-status').filter({ hasText: 'connected' }).waitFor({ timeout: 5000 });
    await page.locator('.xterm-helper-textarea').focus();
    await page.keyboard.type('echo attached-$((40+2))\n');
    await waitForTerminalLine(page, (l) => l.trim() === 'attached-42');
    await screenshot(page, 'container-attach');
  });

  it('follows new log lines, and tells stdout and stderr apart', async () => {
    await engine.dockerOk(['run', '-d', '--name', 'e2e-logs', 'busybox', 'sh', '-c', 'echo first; sleep 2; echo later; echo oops >&2; sleep 600']);
    const id = (await engine.dockerOk(['inspect', '-f', '{{.Id}}', 'e2e-logs'])).trim();
    await page.goto(`${baseUrl}#/containers/${id}/logs`);
    const logs = page.getByTestId('logs');
    await logs.getByText('first').waitFor({ timeout: 3000 });
    assert.equal(await logs.getByText('later').count(), 0, 'the later line is not there yet');
    await logs.getByText('later').waitFor({ timeout: 6000 });
    await logs.locator('.log-line.stderr', { hasText: 'oops' }).waitFor({ timeout: 2000 });
    assert.equal(await logs.locator('.log-line.stdout', { hasText: 'later' }).count(), 1);
    await page.getByLabel('Timestamps').check();
    await screenshot(page, 'container-logs');
    await page.goto(`${baseUrl}#/containers/${id}/overview`);
    await page.getByText('Show raw JSON').click();
    await page.locator('pre.json').waitFor();
    await screenshot(page, 'container-overview');
    await page.goto(`${baseUrl}#/containers/${id}/stats`);
    await page.waitForTimeout(2500);
    await screenshot(page, 'container-stats');
  });

  it('stops and removes a container through their confirmations', async () => {
    await page.goto(`${baseUrl}#/containers`);
    const row = page.locator('tr[data-name="e2e-web"]');
    await row.getByRole('button', { name: 'Stop e2e-web' }).click();
    const dialog = page.getByRole('dialog');
    await dialog.waitFor();
    await screenshot(page, 'containers-confirm-stop');
    await dialog.getByRole('button', { name: 'Cancel' }).click();
    await dialog.waitFor({ state: 'detached' });
    assert.equal((await engine.dockerOk(['inspect', '-f', '{{.State.Status}}', 'e2e-web'])).trim(), 'running', 'cancel leaves it running');
    await row.getByRole('button', { name: 'Stop e2e-web' }).click();
    await dialog.getByRole('button', { name: 'Stop' }).click();
    await row.locator('.badge.exited').waitFor({ timeout: 15_000 });
    assert.equal((await engine.dockerOk(['inspect', '-f', '{{.State.Status}}', 'e2e-web'])).trim(), 'exited');
    await row.getByRole('button', { name: 'Remove e2e-web' }).click();
    await dialog.getByRole('button', { name: 'Remove' }).click();
    await row.waitFor({ state: 'detached', timeout: 5000 });
    const ps = await engine.dockerOk(['ps', '-a', '--format', '{{.Names}}']);
    assert.doesNotMatch(ps, /e2e-web/);
  });

  it('a network created in the UI is seen by the docker CLI', async () => {
    await page.goto(`${baseUrl}#/networks`);
    await page.getByLabel('Network name').fill('e2e-net');
    await page.getByLabel('Subnet').fill('10.123.0.0/24');
    await page.getByLabel('Gateway').fill('10.123.0.1');
    await page.getByRole('button', { name: 'Create network' }).click();
    await page.getByTestId('networks').getByText('e2e-net').waitFor({ timeout: 5000 });
    const inspect = JSON.parse(await engine.dockerOk(['network', 'inspect', 'e2e-net']))[0];
    assert.equal(inspect.IPAM.Config[0].Subnet, '10.123.0.0/24');
    await page.getByTestId('networks').getByText('e2e-net').click();
    await page.locator('.panel pre.json').waitFor();
    // Connect a running container from the network's page; the CLI sees it, then disconnect it again.
    await page.getByLabel('Container to connect').selectOption({ label: 'e2e-sleep' });
    await page.getByRole('button', { name: 'Connect', exact: true }).click();
    await page.getByRole('button', { name: 'Disconnect e2e-sleep' }).waitFor({ timeout: 5000 });
    const networksOf = async () => Object.keys(JSON.parse(await engine.dockerOk(['inspect', '-f', '{{json .NetworkSettings.Networks}}', 'e2e-sleep'])));
    assert.ok((await networksOf()).includes('e2e-net'));
    await screenshot(page, 'networks');
    await page.getByRole('button', { name: 'Disconnect e2e-sleep' }).click();
    await page.getByText('No containers attached.').waitFor({ timeout: 5000 });
    assert.ok(!(await networksOf()).includes('e2e-net'));
  });

  it('a volume created in the UI is seen by the docker CLI', async (t) => {
    if (!(await engineHas(engine, 'GET', '/volumes'))) return t.skip('the engine serves no volume endpoints yet');
    await page.goto(`${baseUrl}#/volumes`);
    await page.getByLabel('Volume name').fill('e2e-vol');
    await page.getByRole('button', { name: 'Options and labels…' }).click();
    await page.getByLabel('Labels').fill('team=e2e\ntier=data');
    await page.getByRole('button', { name: 'Create volume' }).click();
    const row = page.locator('tr[data-volume="e2e-vol"]');
    await row.waitFor({ timeout: 5000 });
    assert.match(await engine.dockerOk(['volume', 'ls', '--format', '{{.Name}}']), /^e2e-vol$/m);
    const inspect = JSON.parse(await engine.dockerOk(['volume', 'inspect', 'e2e-vol']))[0];
    assert.deepEqual(inspect.Labels, { team: 'e2e', tier: 'data' });
    assert.equal(inspect.Driver, 'local');
    // The mountpoint and driver the engine reports are on the row; inspect shows the same.
    assert.match(await row.innerText(), new RegExp(inspect.Mountpoint.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')));
    await row.getByRole('button', { name: 'Inspect e2e-vol' }).click();
    await page.getByTestId('volume-inspect').getByText('team=e2e').waitFor();

    // A container that uses it appears beside it, from the event of its creation.
    await engine.dockerOk(['run', '-d', '--name', 'e2e-voluser', '-v', 'e2e-vol:/data', 'busybox', 'sleep', '600']);
    await row.getByTestId('volume-users').getByText('e2e-voluser').waitFor({ timeout: 5000 });
    await screenshot(page, 'volumes');

    // Removing it while in use: the confirmation says who uses it; the engine's refusal is shown.
    await row.getByRole('button', { name: 'Remove e2e-vol' }).click();
    const dialog = page.getByRole('dialog');
    await dialog.getByText(/used by e2e-voluser/).waitFor();
    await screenshot(page, 'volumes-confirm-remove');
    await dialog.getByRole('button', { name: 'Remove' }).click();
    const refusal = (await engine.request('DELETE', '/volumes/e2e-vol')).json().message as string;
    const alert = page.locator('.errors .error');
    await alert.waitFor({ timeout: 5000 });
    assert.equal((await alert.locator('span').innerText()).trim(), refusal);
    assert.match(await engine.dockerOk(['volume', 'ls', '--format', '{{.Name}}']), /^e2e-vol$/m, 'still there');

    // Once its container is gone, it can be removed; prune with "named volumes too" removes the unused rest.
    await engine.dockerOk(['rm', '-f', 'e2e-voluser']);
    await row.getByTestId('volume-users').getByText('e2e-voluser').waitFor({ state: 'detached', timeout: 5000 });
    await row.getByRole('button', { name: 'Remove e2e-vol' }).click();
    await dialog.getByRole('button', { name: 'Remove' }).click();
    await row.waitFor({ state: 'detached', timeout: 5000 });
    assert.doesNotMatch(await engine.dockerOk(['volume', 'ls', '--format', '{{.Name}}']), /^e2e-vol$/m);
    await engine.dockerOk(['volume', 'create', 'e2e-unused']);
    await page.locator('tr[data-volume="e2e-unused"]').waitFor({ timeout: 5000 });
    await page.getByRole('button', { name: 'Prune…' }).click();
    await dialog.getByLabel(/Named volumes too/).check();
    await dialog.getByRole('button', { name: 'Prune' }).click();
    await page.locator('tr[data-volume="e2e-unused"]').waitFor({ state: 'detached', timeout: 5000 });
    await page.getByRole('status').getByText(/Pruned \d+ volume/).waitFor();
    assert.doesNotMatch(await engine.dockerOk(['volume', 'ls', '--format', '{{.Name}}']), /^e2e-unused$/m);
  });

  it("shows the engine's message when a call fails", async () => {
    // A name in use (a missing image would be pulled first).
    const expected = (await engine.request('POST', '/containers/create?name=e2e-sleep', { body: { Image: 'busybox' } })).json().message as string;
    assert.ok(expected);
    await page.goto(`${baseUrl}#/run`);
    await page.getByLabel('Image', { exact: true }).fill('busybox');
    await page.getByLabel('Name', { exact: true }).fill('e2e-sleep');
    await page.getByRole('button', { name: 'Run', exact: true }).click();
    const alert = page.locator('.errors .error');
    await alert.waitFor({ timeout: 5000 });
    assert.equal((await alert.locator('span').innerText()).trim(), expected);
    await screenshot(page, 'run-error');
  });

  it('shows health and published ports in the list and the overview', async () => {
    const port = await freePort();
    await engine.dockerOk(['run', '-d', '--name', 'e2e-health', '-p', `${port}:80`, '--health-cmd', 'true', '--health-interval', '1s', 'busybox', 'sleep', '600']);
    await page.goto(`${baseUrl}#/containers`);
    const row = page.locator('tr[data-name="e2e-health"]');
    // starting, then healthy after the first probe: the list follows the health_status event.
    await row.locator('[data-health="healthy"]').waitFor({ timeout: 20_000 });
    const link = row.getByRole('link', { name: `0.0.0.0:${port}->80/tcp` });
    assert.equal(await link.getAttribute('href'), `http://127.0.0.1:${port}`);
    assert.equal(await link.getAttribute('target'), '_blank');
    await screenshot(page, 'containers-health-ports');
    await row.getByRole('link', { name: 'e2e-health' }).click();
    await page.getByTestId('ports').getByRole('link', { name: `0.0.0.0:${port}->80/tcp` }).waitFor();
    await page.locator('.page-head [data-health="healthy"]').waitFor();
    await page.getByText(/last probe: exit 0/).waitFor();
    await screenshot(page, 'container-overview-health');
    await engine.dockerOk(['rm', '-f', 'e2e-health']);
  });

  it("turns the run form's ports and volumes into the create body", async () => {
    const port = await freePort();
    await page.goto(`${baseUrl}#/run`);
    await page.getByLabel('Image', { exact: true }).fill('busybox');
    await page.getByLabel('Name', { exact: true }).fill('e2e-run');
    await page.getByLabel('Command', { exact: true }).fill('sleep 600');
    await page.getByLabel('Ports', { exact: true }).fill(`${port}:80, 127.0.0.1::53/udp`);
    await page.getByLabel('Volumes', { exact: true }).fill('e2e-runvol:/data, /scratch');
    await page.getByRole('button', { name: 'Show the create request' }).click();
    await page.getByTestId('create-body').getByText('"e2e-runvol:/data"').waitFor();
    await screenshot(page, 'run-create-body');
    await page.getByRole('button', { name: 'Run', exact: true }).click();
    await page.getByRole('tab', { name: 'Overview' }).waitFor({ timeout: 10_000 });
    const inspect = JSON.parse(await engine.dockerOk(['inspect', 'e2e-run']))[0];
    assert.equal(inspect.State.Running, true);
    assert.deepEqual(inspect.HostConfig.PortBindings['80/tcp'], [{ HostIp: '', HostPort: String(port) }]);
    assert.equal(inspect.HostConfig.PortBindings['53/udp'][0].HostIp, '127.0.0.1');
    assert.ok('80/tcp' in inspect.Config.ExposedPorts && '53/udp' in inspect.Config.ExposedPorts);
    assert.deepEqual(inspect.HostConfig.Binds, ['e2e-runvol:/data']);
    const data = inspect.Mounts.find((m: { Destination: string }) => m.Destination === '/data');
    assert.equal(data?.Type, 'volume');
    assert.equal(data?.Name, 'e2e-runvol');
    const scratch = inspect.Mounts.find((m: { Destination: string }) => m.Destination === '/scratch');
    assert.equal(scratch?.Type, 'volume', 'an anonymous volume');
    assert.match(await engine.dockerOk(['volume', 'ls', '--format', '{{.Name}}']), /^e2e-runvol$/m);
    await page.getByTestId('ports').getByRole('link', { name: `0.0.0.0:${port}->80/tcp` }).waitFor({ timeout: 5000 });
    // A mistake in a field is said before anything reaches the engine.
    await page.goto(`${baseUrl}#/run`);
    await page.getByLabel('Image', { exact: true }).fill('busybox');
    await page.getByLabel('Volumes', { exact: true }).fill('relative/dir:/data');
    await page.getByRole('button', { name: 'Run', exact: true }).click();
    await page.locator('.errors .error').getByText(/neither a volume name nor an absolute host path/).waitFor({ timeout: 5000 });
    await engine.dockerOk(['rm', '-f', '-v', 'e2e-run']);
  });

  it('a pull from a local registry shows its progress, and a push its own', async (t) => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'berth-e2e-registry-'));
    const registry = await startRegistry(dir);
    try {
      const fixtures = (await import(pathToFileURL(path.join(DAEMON_DIST, 'test', 'fixtures', 'busybox.js')).href)) as {
        buildBusyboxArchive(file: string, opts?: { tag?: string; extraFiles?: Record<string, string> }): Promise<void>;
      };
      // Layers of their own (an extra file each), so that the engine has to download them.
      const archive = path.join(dir, 'tools.tar');
      await fixtures.buildBusyboxArchive(archive, { tag: 'e2e/tools:1.0', extraFiles: { '/etc/e2e-tools': 'tools 1.0\n' } });
      await pushArchive(registry.address, archive, 'e2e/tools', '1.0');
      const brokenArchive = path.join(dir, 'broken.tar');
      await fixtures.buildBusyboxArchive(brokenArchive, { tag: 'e2e/broken:1.0', extraFiles: { '/etc/e2e-broken': 'broken\n' } });
      await pushArchive(registry.address, brokenArchive, 'e2e/broken', '1.0');
      const probe = await engine.request('POST', `/images/create?fromImage=${registry.address}/e2e/probe&tag=none`);
      if (probe.status === 501 || /not implemented|cannot pull images from a registry yet/i.test(probe.text)) return t.skip(`the engine cannot pull yet: ${probe.text.trim()}`);

      const ref = `${registry.address}/e2e/tools:1.0`;
      await page.goto(`${baseUrl}#/images`);
      await page.getByLabel('Image to pull').fill(ref);
      await page.getByRole('button', { name: 'Pull' }).click();
      const progress = page.getByTestId('progress');
      const layer = progress.locator('.layer').first();
      await layer.waitFor({ timeout: 20_000 });
      await progress.getByText(/^Status: (Downloaded newer image|Image is up to date) for /).waitFor({ timeout: 30_000 });
      // Each layer ends complete with a full bar; its bytes were counted (total known from the download).
      assert.match(await layer.locator('.layer-status').innerText(), /Pull complete/);
      assert.equal(await layer.locator('progress').evaluate((el) => (el as HTMLProgressElement).value), 1);
      assert.match(await layer.innerText(), /\d+(\.\d)?\s(B|kB|MB) \/ \d+(\.\d)?\s(B|kB|MB)/);
      await page.getByTestId('images').locator(`tr[data-image="${ref}"]`).waitFor({ timeout: 10_000 });
      assert.match(await engine.dockerOk(['images', '--format', '{{.Repository}}:{{.Tag}}']), new RegExp(`^${ref}$`, 'm'));
      await screenshot(page, 'images-pull');

      // Push under a new name: the UI tags it, then pushes with its own progress; the registry has it.
      const pushed = `${registry.address}/e2e/pushed:2.0`;
      await page.getByRole('button', { name: `Push ${ref}` }).click();
      const dialog = page.getByRole('dialog');
      await dialog.getByLabel('Push as').fill(pushed);
      await dialog.getByRole('button', { name: 'Push' }).click();
      const pushProgress = page.getByTestId('push-progress');
      await pushProgress.getByText(/digest: sha256:[0-9a-f]{64}/).waitFor({ timeout: 30_000 });
      assert.match(await pushProgress.locator('.layer-status').first().innerText(), /Pushed|already exists|Mounted from/);
      const tags = (await (await fetch(`http://${registry.address}/v2/e2e/pushed/tags/list`)).json()) as { tags: string[] };
      assert.deepEqual(tags.tags, ['2.0']);
      await page.getByTestId('images').getByText(pushed).waitFor({ timeout: 5000 });
      await screenshot(page, 'images-push');

      // A layer the registry lost: the pull fails part way, and the engine's message is shown.
      const manifest = (await (await fetch(`http://${registry.address}/v2/e2e/broken/manifests/1.0`, { headers: { Accept: 'application/vnd.docker.distribution.manifest.v2+json' } })).json()) as { layers: Array<{ digest: string }> };
      const hex = manifest.layers[0]!.digest.slice('sha256:'.length);
      rmSync(path.join(dir, 'storage', 'docker', 'registry', 'v2', 'blobs', 'sha256', hex.slice(0, 2), hex), { recursive: true, force: true });
      await page.getByLabel('Image to pull').fill(`${registry.address}/e2e/broken:1.0`);
      await page.getByRole('button', { name: 'Pull' }).click();
      // It comes in the stream, after the 200: the progress panel says the pull failed, and why.
      await progress.getByText('failed', { exact: true }).waitFor({ timeout: 30_000 });
      assert.match(await progress.getByRole('alert').innerText(), /blob|not found|unknown/i);
      assert.doesNotMatch(await engine.dockerOk(['images', '--format', '{{.Repository}}']), /e2e\/broken/);
      await screenshot(page, 'images-pull-error');
    } finally {
      await registry.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('captures every other view, in both themes', async () => {
    const capture = async (suffix: string) => {
      for (const view of ['images', 'volumes', 'networks', 'swarm', 'events', 'system', 'run']) {
        await page.goto(`${baseUrl}#/${view}`);
        await page.getByRole('heading', { level: 1 }).waitFor();
        if (view === 'events') {
          await engine.dockerOk(['run', '--rm', 'busybox', 'true']);
          await page.getByTestId('events').waitFor({ timeout: 3000 });
        }
        if (view === 'images') await page.getByTestId('images').waitFor({ timeout: 5000 });
        if (view === 'networks') await page.getByTestId('networks').waitFor({ timeout: 5000 });
        if (view === 'system') await page.getByTestId('disk-usage').waitFor({ timeout: 5000 });
        if (view === 'swarm') await page.getByTestId('swarm-empty').waitFor({ timeout: 5000 });
        await screenshot(page, `${view}${suffix}`);
      }
    };
    await capture('');
    await page.goto(`${baseUrl}#/containers`);
    await page.getByRole('button', { name: 'Toggle theme' }).click();
    assert.equal(await page.evaluate(() => document.documentElement.dataset.theme), 'dark');
    await page.locator('tr[data-name="e2e-sleep"]').waitFor();
    await screenshot(page, 'containers-dark');
    // Keyboard: Alt+4 goes to images, arrows move between rows, Enter opens one.
    await page.keyboard.press('Alt+4');
    await page.getByRole('heading', { name: 'Images' }).waitFor();
    await page.keyboard.press('Alt+1');
    await page.locator('tr[data-name]').first().focus();
    await page.keyboard.press('Enter');
    await page.getByRole('tab', { name: 'Overview' }).waitFor();
    await screenshot(page, 'container-dark');
    await capture('-dark');
    await page.goto(`${baseUrl}#/containers`);
    await page.getByRole('button', { name: 'Toggle theme' }).click();
  });

  it('misses no event that happened before its event stream opened', async () => {
    const other = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    try {
      const p = await other.newPage();
      await p.goto(loginUrl);
      await p.getByRole('heading', { name: 'Containers' }).waitFor();
      // Hold the page's event stream back until a container was created: the stream must bring it anyway.
      let release!: () => void;
      const gate = new Promise<void>((resolve) => (release = resolve));
      await p.route(/\/api\/v[\d.]+\/events/, async (route) => {
        await gate;
        await route.continue();
      });
      await p.goto('about:blank');
      await p.goto(`${baseUrl}#/containers`);
      await p.getByTestId('containers').waitFor();
      await engine.dockerOk(['create', '--name', 'e2e-between', 'busybox', 'true']);
      release();
      await p.locator('tr[data-name="e2e-between"]').waitFor({ timeout: 5000 });
    } finally {
      await other.close();
      await engine.docker(['rm', '-f', 'e2e-between']);
    }
  });

  it("sets the saved theme and asks for the list before the app's bundle runs", async () => {
    await engine.dockerOk(['create', '--name', 'e2e-early', 'busybox', 'true']);
    const other = await browser.newContext({ viewport: { width: 1280, height: 800 }, colorScheme: 'light' });
    try {
      const p = await other.newPage();
      await p.goto(loginUrl);
      await p.getByRole('heading', { name: 'Containers' }).waitFor();
      await p.evaluate(() => localStorage.setItem('berth.theme', 'dark'));
      // Without the bundle, only index.html's own script can do these: it must be allowed by the page's policy.
      await p.route(/\/assets\/index-[^/]+\.js$/, (route) => route.abort());
      const violations: string[] = [];
      p.on('console', (m) => /Content Security Policy/i.test(m.text()) && violations.push(m.text()));
      await p.goto('about:blank');
      await p.goto(`${baseUrl}#/containers`);
      await p.waitForLoadState('load');
      assert.equal(await p.locator('h1').count(), 0, 'the bundle did not run');
      assert.equal(await p.evaluate(() => document.documentElement.dataset.theme), 'dark');
      assert.equal(await p.evaluate(() => typeof (window as { berthBoot?: unknown }).berthBoot), 'object');
      const listed = await p.evaluate(async () => {
        const answer = await (window as unknown as { berthBoot: { containers: Promise<{ status: number; text: string }> } }).berthBoot.containers;
        return { status: answer.status, names: (JSON.parse(answer.text) as Array<{ Names: string[] }>).map((c) => c.Names[0]) };
      });
      assert.equal(listed.status, 200);
      assert.ok(listed.names.includes('/e2e-early'));
      assert.deepEqual(violations, []);
      // Another view's load does not ask for the list.
      await p.goto('about:blank');
      await p.goto(`${baseUrl}#/images`);
      await p.waitForLoadState('load');
      assert.equal(await p.evaluate(() => typeof (window as { berthBoot?: unknown }).berthBoot), 'undefined');
    } finally {
      await other.close();
      await engine.docker(['rm', '-f', 'e2e-early']);
    }
  });
});
