/**
 * Workflows of the renderer in Chromium against a real berthd (`--ui`): Run pulls an image the engine lacks
 * (from a local registry) with its progress and applies the common options; image prune; the Compose
 * projects view starts, stops and removes a project. Screenshots go to artifacts/.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import type { Browser, Page } from 'playwright-core';
import { pushArchive, startRegistry, type Registry } from './registry.js';
import { DAEMON_DIST, launchChromium, loadHarness, screenshot, startEngineWithUi, type Engine } from './support.js';

const harness = await loadHarness();
const fixtures = (await import(pathToFileURL(path.join(DAEMON_DIST, 'test', 'fixtures', 'busybox.js')).href)) as {
  buildBusyboxArchive(file: string, opts?: { tag?: string; extraFiles?: Record<string, string> }): Promise<void>;
};

describe('workflows of the renderer, in Chromium', { timeout: 300_000 }, () => {
  let engine: Engine;
  let baseUrl: string;
  let browser: Browser;
  let page: Page;
  let dir: string;
  let registry: Registry | undefined;

  before(async () => {
    let loginUrl: string;
    ({ engine, loginUrl, baseUrl } = await startEngineWithUi(harness));
    await engine.loadBusybox();
    dir = mkdtempSync(path.join(os.tmpdir(), 'berth-e2e-workflows-'));
    browser = await launchChromium();
    const context = await browser.newContext({ viewport: { width: 1280, height: 800 }, colorScheme: 'light' });
    page = await context.newPage();
    await page.goto(loginUrl);
    await page.getByRole('heading', { name: 'Containers' }).waitFor();
    await page.getByLabel('events live').waitFor({ timeout: 5000 });
  });

  after(async () => {
    await browser?.close();
    await engine?.cleanup();
    await registry?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('runs an image the engine lacks: pulls it with progress, then creates with the options given', async () => {
    registry = await startRegistry(dir);
    const archive = path.join(dir, 'app.tar');
    await fixtures.buildBusyboxArchive(archive, { tag: 'e2e/app:1.0', extraFiles: { '/etc/e2e-app': 'app 1.0\n' } });
    await pushArchive(registry.address, archive, 'e2e/app', '1.0');
    const ref = `${registry.address}/e2e/app:1.0`;
    assert.doesNotMatch(await engine.dockerOk(['images', '--format', '{{.Repository}}']), /e2e\/app/);

    await page.goto(`${baseUrl}#/run`);
    const field = (label: string) => page.getByLabel(label, { exact: true });
    await field('Image').fill(ref);
    await field('Name').fill('wf-run');
    await field('Entrypoint').fill('sh -c');
    await field('Command').fill('"id -u > /tmp/uid; sleep 600"');
    await field('User').fill('1234:5678');
    await field('Memory limit').fill('64m');
    await field('CPU limit').fill('0.5');
    await page.getByLabel('Interactive terminal (-it)').uncheck();
    // --rm with a restart policy is refused before anything reaches the engine, as the docker CLI does.
    await page.getByLabel('Remove when it exits (--rm)').check();
    await page.getByLabel('Restart policy').selectOption('always');
    await page.getByRole('button', { name: 'Run', exact: true }).click();
    await page.locator('.errors .error').getByText(/conflicting options/).waitFor({ timeout: 5000 });
    await page.getByLabel('Restart policy').selectOption('no');
    await page.getByRole('button', { name: 'Show the create request' }).click();
    await screenshot(page, 'wf-run-options');

    // The panel goes with the form once the container's page opens: what it showed is recorded as it changes.
    await page.evaluate(() => {
      const seen: string[] = [];
      (window as unknown as { pullSeen: string[] }).pullSeen = seen;
      new MutationObserver(() => {
        const panel = document.querySelector('[data-testid=run-pull]') as HTMLElement | null;
        if (panel) seen.push(`${panel.querySelectorAll('.layer').length} layers|${panel.textContent ?? ''}`);
      }).observe(document.body, { subtree: true, childList: true, characterData: true });
    });
    await page.getByRole('button', { name: 'Run', exact: true }).click();
    await page.getByRole('tab', { name: 'Overview' }).waitFor({ timeout: 45_000 });
    const seen = await page.evaluate(() => (window as unknown as { pullSeen: string[] }).pullSeen);
    assert.ok(seen.some((s) => /^[1-9]\d* layers\|Pulling /.test(s)), `the pull's layers were shown: ${seen.slice(-3).join(' / ')}`);
    assert.ok(seen.some((s) => /Status: Downloaded newer image for /.test(s)), 'its end was shown');
    const inspect = JSON.parse(await engine.dockerOk(['inspect', 'wf-run']))[0];
    assert.equal(inspect.State.Running, true);
    assert.equal(inspect.Config.Image, ref);
    assert.deepEqual(inspect.Config.Entrypoint, ['sh', '-c']);
    assert.deepEqual(inspect.Config.Cmd, ['id -u > /tmp/uid; sleep 600']);
    assert.equal(inspect.Config.User, '1234:5678');
    assert.equal(inspect.HostConfig.AutoRemove, true);
    assert.equal(inspect.HostConfig.Memory, 64 * 1024 * 1024);
    assert.equal(inspect.HostConfig.NanoCpus, 500_000_000);
    assert.equal((await engine.dockerOk(['exec', 'wf-run', 'cat', '/tmp/uid'])).trim(), '1234');
    // --rm: once stopped, it is gone.
    await engine.dockerOk(['stop', '-t', '0', 'wf-run']);
    await harness.eventually(async () => !(await engine.dockerOk(['ps', '-a', '--format', '{{.Names}}'])).includes('wf-run'), 10_000);
    await screenshot(page, 'wf-run-pulled');
  });

  it('prunes unused images: dangling ones, or every unused one when asked', async () => {
    await engine.dockerOk(['create', '--name', 'wf-keep', 'busybox', 'true']);
    const archive = path.join(dir, 'unused.tar');
    await fixtures.buildBusyboxArchive(archive, { tag: 'e2e/unused:1', extraFiles: { '/etc/e2e-unused': 'unused\n' } });
    await engine.dockerOk(['load', '-i', archive]);
    await page.goto(`${baseUrl}#/images`);
    await page.getByTestId('images').getByText('e2e/unused:1').waitFor({ timeout: 5000 });
    // Dangling only: the tagged unused image stays.
    await page.getByRole('button', { name: 'Prune…' }).click();
    const dialog = page.getByRole('dialog');
    await dialog.getByRole('button', { name: 'Prune' }).click();
    await page.getByRole('status').getByText(/Pruned 0 images/).waitFor({ timeout: 5000 });
    assert.match(await engine.dockerOk(['images', '--format', '{{.Repository}}:{{.Tag}}']), /^e2e\/unused:1$/m);
    await page.getByRole('button', { name: 'Prune…' }).click();
    await dialog.getByLabel(/Tagged ones too/).check();
    await screenshot(page, 'wf-images-prune');
    await dialog.getByRole('button', { name: 'Prune' }).click();
    await page.getByTestId('images').getByText('e2e/unused:1').waitFor({ state: 'detached', timeout: 5000 });
    await page.getByRole('status').getByText(/Pruned [1-9]\d* images?/).waitFor({ timeout: 5000 });
    const left = await engine.dockerOk(['images', '--format', '{{.Repository}}:{{.Tag}}']);
    assert.doesNotMatch(left, /e2e\/unused/);
    assert.match(left, /^busybox:latest$/m, 'an image in use stays');
    await engine.dockerOk(['rm', 'wf-keep']);
  });

  it('prunes stopped containers from the list, and leaves running ones', async () => {
    await engine.dockerOk(['create', '--name', 'wf-stopped', 'busybox', 'true']);
    await engine.dockerOk(['run', '-d', '--name', 'wf-running', 'busybox', 'sleep', '600']);
    await page.goto(`${baseUrl}#/containers`);
    await page.locator('tr[data-name="wf-stopped"]').waitFor({ timeout: 5000 });
    await page.getByRole('button', { name: 'Prune…' }).click();
    const dialog = page.getByRole('dialog');
    await dialog.getByText(/wf-stopped: removed/).waitFor();
    assert.doesNotMatch(await dialog.innerText(), /wf-running/);
    await dialog.getByRole('button', { name: 'Prune' }).click();
    await page.locator('tr[data-name="wf-stopped"]').waitFor({ state: 'detached', timeout: 5000 });
    await page.getByRole('status').getByText(/Removed 1 stopped container\./).waitFor({ timeout: 5000 });
    const names = await engine.dockerOk(['ps', '-a', '--format', '{{.Names}}']);
    assert.doesNotMatch(names, /wf-stopped/);
    assert.match(names, /wf-running/);
    await engine.dockerOk(['rm', '-f', 'wf-running']);
  });

  it('groups Compose projects, and starts, stops and removes one', async () => {
    await page.goto(`${baseUrl}#/compose`);
    await page.getByTestId('compose-empty').waitFor({ timeout: 5000 });
    const labels = (service: string, dependsOn?: string) => [
      '--label',
      'com.docker.compose.project=wfshop',
      '--label',
      `com.docker.compose.service=${service}`,
      '--label',
      'com.docker.compose.project.working_dir=/srv/wfshop',
      ...(dependsOn ? ['--label', `com.docker.compose.depends_on=${dependsOn}:service_started:false`] : []),
    ];
    await engine.dockerOk(['network', 'create', '--label', 'com.docker.compose.project=wfshop', '--label', 'com.docker.compose.network=default', 'wfshop_default']);
    // app depends on store: started after it, though its name comes first.
    await engine.dockerOk(['run', '-d', '--name', 'wfshop-store-1', '--network', 'wfshop_default', ...labels('store'), 'busybox', 'sleep', '600']);
    await engine.dockerOk(['run', '-d', '--name', 'wfshop-app-1', '--network', 'wfshop_default', ...labels('app', 'store'), 'busybox', 'sleep', '600']);
    await engine.dockerOk(['run', '-d', '--name', 'wf-loose', 'busybox', 'sleep', '600']);
    const row = page.locator('tr[data-project="wfshop"]');
    await row.waitFor({ timeout: 5000 });
    assert.equal(await page.locator('tr[data-project]').count(), 1, 'containers without the label are in no project');
    assert.match(await row.innerText(), /app, store/);
    await row.getByTestId('project-counts').getByText('2 of 2 running').waitFor({ timeout: 5000 });
    await row.getByRole('button', { name: /wfshop/, expanded: false }).click();
    await page.locator('tr.sub[data-name="wfshop-store-1"]').waitFor();
    await screenshot(page, 'wf-compose');

    const states = async () => (await engine.dockerOk(['ps', '-a', '--filter', 'label=com.docker.compose.project=wfshop', '--format', '{{.Names}} {{.State}}'])).trim().split('\n').sort();
    await row.getByRole('button', { name: 'Stop wfshop' }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Stop' }).click();
    await row.getByTestId('project-counts').getByText('0 of 2 running').waitFor({ timeout: 20_000 });
    assert.deepEqual(await states(), ['wfshop-app-1 exited', 'wfshop-store-1 exited']);
    assert.match(await engine.dockerOk(['inspect', '-f', '{{.State.Status}}', 'wf-loose']), /running/, 'another container is left alone');
    await screenshot(page, 'wf-compose-stopped');

    await row.getByRole('button', { name: 'Start wfshop' }).click();
    await row.getByTestId('project-counts').getByText('2 of 2 running').waitFor({ timeout: 10_000 });
    assert.deepEqual(await states(), ['wfshop-app-1 running', 'wfshop-store-1 running']);
    // RFC 3339 with nanoseconds, the fraction padded so that the strings compare as the times do.
    const startedAt = async (name: string) => (await engine.dockerOk(['inspect', '-f', '{{.State.StartedAt}}', name])).trim().replace(/(?:\.(\d+))?Z$/, (_, f: string | undefined) => `.${(f ?? '').padEnd(9, '0')}Z`);
    const [store, app] = [await startedAt('wfshop-store-1'), await startedAt('wfshop-app-1')];
    assert.ok(store < app, `store started at ${store}, before app at ${app}`);

    await row.getByRole('button', { name: 'Remove wfshop' }).click();
    await page.getByRole('dialog').getByText(/volumes are kept/).waitFor();
    await page.getByRole('dialog').getByRole('button', { name: 'Remove' }).click();
    await page.getByTestId('compose-empty').waitFor({ timeout: 15_000 });
    assert.deepEqual((await engine.dockerOk(['ps', '-a', '--filter', 'label=com.docker.compose.project=wfshop', '--format', '{{.Names}}'])).trim(), '');
    // The project's network goes after its containers (the list may empty first).
    await harness.eventually(async () => !/wfshop_default/.test(await engine.dockerOk(['network', 'ls', '--format', '{{.Name}}'])), 10_000);
    assert.equal(await page.locator('.errors .error').count(), 0);
    assert.match(await engine.dockerOk(['inspect', '-f', '{{.State.Status}}', 'wf-loose']), /running/);
    await engine.dockerOk(['rm', '-f', 'wf-loose']);
  });
});
