/**
 * The Plugins view in Chromium against a real berthd (`--ui`), with the static volume driver plugin of the
 * daemon's fixtures (daemon/test/fixtures/plugin, built here with gcc): made with `docker plugin create`,
 * pushed to a local docker-registry, then installed from the view with its privileges shown first; enabled,
 * disabled and removed from the view; a change made with the docker CLI shows without a reload (plugin
 * events). Screenshots at 1280 and 800 px in both themes go to artifacts/.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { startRegistry, type Registry } from './registry.js';
import { DAEMON_DIST, launchChromium, loadHarness, loadPluginSupport, screenshot, setTheme, shots, startEngineWithUi, type Engine } from './support.js';

const harness = await loadHarness();
const SOURCE = path.join(DAEMON_DIST, '..', 'test', 'fixtures', 'plugin', 'volplugin.c');

const CONFIG = (await loadPluginSupport()).volumeDriverConfig();

describe('the Plugins view, in Chromium', { timeout: 300_000 }, () => {
  let engine: Engine;
  let baseUrl: string;
  let browser: Browser;
  let page: Page;
  let dir: string;
  let registry: Registry;
  let remote: string;

  before(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'berth-e2e-plugins-'));
    const context = path.join(dir, 'plugin');
    const rootfs = path.join(context, 'rootfs');
    for (const d of ['run/docker/plugins', 'data', 'proc', 'dev', 'sys', 'tmp']) mkdirSync(path.join(rootfs, d), { recursive: true });
    const cc = spawnSync('gcc', ['-static', '-O2', '-o', path.join(rootfs, 'volplugin'), SOURCE], { encoding: 'utf8' });
    assert.equal(cc.status, 0, cc.stderr);
    writeFileSync(path.join(context, 'config.json'), JSON.stringify(CONFIG));
    let loginUrl: string;
    ({ engine, loginUrl, baseUrl } = await startEngineWithUi(harness));
    registry = await startRegistry(path.join(dir, 'registry'));
    remote = `${registry.address}/fixvol:1`;
    await engine.dockerOk(['plugin', 'create', remote, context], { timeoutMs: 60_000 });
    await engine.dockerOk(['plugin', 'push', remote], { timeoutMs: 120_000 });
    await engine.dockerOk(['plugin', 'rm', remote]);
    await engine.dockerOk(['plugin', 'create', 'fixlocal', context], { timeoutMs: 60_000 });
    browser = await launchChromium();
    const ctx = await browser.newContext({ viewport: { width: 1280, height: 800 }, colorScheme: 'light' });
    page = await ctx.newPage();
    await page.goto(loginUrl);
    await page.getByRole('heading', { name: 'Containers' }).waitFor();
  });

  after(async () => {
    await browser?.close();
    for (const name of ['fixlocal', remote]) if (name) await engine?.docker(['plugin', 'rm', '-f', name]).catch(() => undefined);
    await engine?.cleanup();
    await registry?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const row = (name: string) => page.getByRole('table', { name: 'Plugins' }).locator(`tr[data-plugin="${name}"]`);
  const enabledOf = async (name: string) => JSON.parse(await engine.dockerOk(['plugin', 'inspect', name]))[0].Enabled as boolean;

  it('lists plugins with their tag, state and interface types; enables one', async () => {
    await page.getByRole('link', { name: 'Plugins' }).click();
    await page.getByRole('heading', { name: 'Plugins' }).waitFor();
    const local = row('fixlocal:latest');
    await local.waitFor({ timeout: 10_000 });
    assert.match(await local.innerText(), /^fixlocal\n[\s\S]*\blatest\b[\s\S]*\bdisabled\s+volumedriver 1\.0/);
    await local.getByRole('button', { name: 'Enable' }).click();
    await local.getByText('enabled', { exact: true }).waitFor({ timeout: 30_000 });
    assert.equal(await enabledOf('fixlocal'), true);
  });

  it('installs from a registry after showing the privileges, and enables it', async () => {
    await page.getByLabel('Plugin reference').fill(remote);
    await page.getByRole('button', { name: 'Install…' }).click();
    const dialog = page.getByRole('dialog', { name: `Install ${remote}?` });
    await dialog.waitFor({ timeout: 20_000 });
    assert.match(await dialog.getByRole('list', { name: 'Privileges' }).innerText(), /network[\s\S]*permissions to access a network[\s\S]*none/);
    // Cancelled: nothing installed. (The dialog is captured in each theme, chosen while it is closed.)
    await dialog.getByRole('button', { name: 'Cancel' }).click();
    for (const width of [1280, 800]) {
      await page.setViewportSize({ width, height: 800 });
      for (const theme of ['light', 'dark'] as const) {
        await setTheme(page, theme);
        await page.getByRole('button', { name: 'Install…' }).click();
        await dialog.waitFor({ timeout: 20_000 });
        await screenshot(page, `plugins-privileges-${width}-${theme}`);
        await dialog.getByRole('button', { name: 'Cancel' }).click();
      }
    }
    await page.setViewportSize({ width: 1280, height: 800 });
    await setTheme(page, 'light');
    assert.doesNotMatch(await engine.dockerOk(['plugin', 'ls', '--format', '{{.Name}}']), /fixvol:1/);
    await page.getByRole('button', { name: 'Install…' }).click();
    await page.getByRole('dialog', { name: `Install ${remote}?` }).getByRole('button', { name: 'Accept and install' }).click();
    await page.getByText(`Installed and enabled ${remote}.`).waitFor({ timeout: 60_000 });
    const installed = row(remote);
    await installed.getByText('enabled', { exact: true }).waitFor({ timeout: 10_000 });
    assert.match(await installed.innerText(), /\/fixvol\n[\s\S]*\t1\t[\s\S]*\benabled\b/);
    assert.equal(await enabledOf(remote), true);
    await shots(page, 'plugins-list');
  });

  it('follows changes made elsewhere (events); disables and removes from the view', async () => {
    await engine.dockerOk(['plugin', 'disable', remote], { timeoutMs: 30_000 });
    await row(remote).getByText('disabled', { exact: true }).waitFor({ timeout: 10_000 });
    const local = row('fixlocal:latest');
    await local.getByRole('button', { name: 'Disable' }).click();
    await local.getByText('disabled', { exact: true }).waitFor({ timeout: 30_000 });
    assert.equal(await enabledOf('fixlocal'), false);
    await local.getByRole('button', { name: 'Remove' }).click();
    await page.getByRole('dialog', { name: 'Remove fixlocal:latest?' }).getByRole('button', { name: 'Remove' }).click();
    await local.waitFor({ state: 'detached', timeout: 30_000 });
    assert.doesNotMatch(await engine.dockerOk(['plugin', 'ls', '--format', '{{.Name}}']), /fixlocal/);
    // An enabled one is disabled and removed, after its own confirmation.
    await engine.dockerOk(['plugin', 'enable', remote], { timeoutMs: 30_000 });
    await row(remote).getByText('enabled', { exact: true }).waitFor({ timeout: 10_000 });
    await row(remote).getByRole('button', { name: 'Remove' }).click();
    await page.getByRole('dialog', { name: `Remove ${remote}?` }).getByRole('button', { name: 'Disable and remove' }).click();
    await row(remote).waitFor({ state: 'detached', timeout: 30_000 });
    await page.getByText(/No plugins installed/).waitFor();
    assert.equal((await engine.dockerOk(['plugin', 'ls', '-q'])).trim(), '');
  });
});
