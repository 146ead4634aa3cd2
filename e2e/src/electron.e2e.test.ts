/**
 * The packaged shape of the app: Electron's main process with the sandboxed window and the preload bridge,
 * connected to a real berthd. Skipped where no Electron binary is installed (set ELECTRON_PATH, or install
 * the electron package with its download).
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { _electron, type ElectronApplication, type Page } from 'playwright-core';
import { loadHarness, ROOT, screenshot, type Engine } from './support.js';

function electronBinary(): string | undefined {
  if (process.env.ELECTRON_PATH && existsSync(process.env.ELECTRON_PATH)) return process.env.ELECTRON_PATH;
  const pkg = path.join(ROOT, 'node_modules', 'electron');
  const pathTxt = path.join(pkg, 'path.txt');
  if (!existsSync(pathTxt)) return undefined;
  const binary = path.join(pkg, 'dist', readFileSync(pathTxt, 'utf8').trim());
  return existsSync(binary) ? binary : undefined;
}

const binary = electronBinary();

describe('the Electron app', { skip: binary ? false : 'no Electron binary here (ELECTRON_PATH unset, electron installed without its download)', timeout: 120_000 }, () => {
  let engine: Engine;
  let app: ElectronApplication;
  let page: Page;
  let userData: string;

  before(async () => {
    const harness = await loadHarness();
    engine = await harness.startEngine();
    await engine.loadBusybox();
    userData = mkdtempSync(path.join(os.tmpdir(), 'berth-electron-'));
    // Connect to the test engine instead of starting one in process.
    writeFileSync(path.join(userData, 'settings.json'), JSON.stringify({ version: 1, engine: { mode: 'socket', socketPath: engine.socket }, theme: 'light' }));
    app = await _electron.launch({
      executablePath: binary,
      args: [path.join(ROOT, 'electron', 'dist', 'src', 'main.js'), `--user-data-dir=${userData}`, '--no-sandbox', '--disable-gpu'],
      env: { ...process.env, ELECTRON_DISABLE_SECURITY_WARNINGS: '1' },
    });
    page = await app.firstWindow();
  });

  after(async () => {
    await app?.close();
    await engine?.cleanup();
    if (userData) rmSync(userData, { recursive: true, force: true });
  });

  it('opens one isolated window whose page has the bridge and no Node', async () => {
    assert.equal(await page.evaluate(() => typeof (window as any).require), 'undefined');
    assert.equal(await page.evaluate(() => typeof (window as any).process), 'undefined');
    assert.equal(await page.evaluate(() => typeof (window as any).berth?.request), 'function');
    const prefs = await app.evaluate(({ BrowserWindow }) => {
      const w = BrowserWindow.getAllWindows()[0]!;
      return { count: BrowserWindow.getAllWindows().length, prefs: (w.webContents as any).getLastWebPreferences() };
    });
    assert.equal(prefs.count, 1);
    assert.equal(prefs.prefs.contextIsolation, true);
    assert.equal(prefs.prefs.sandbox, true);
    assert.equal(prefs.prefs.nodeIntegration, false);
  });

  it('shows a container started with the docker CLI, through the bridge and its event stream', async () => {
    await page.getByRole('heading', { name: 'Containers' }).waitFor();
    await engine.dockerOk(['run', '-d', '--name', 'electron-sleep', 'busybox', 'sleep', '600']);
    await page.locator('tr[data-name="electron-sleep"]').waitFor({ timeout: 2000 });
    await screenshot(page, 'electron-containers');
  });

  it('carries the Content-Security-Policy of berthd --ui, and it holds', async () => {
    const policy = await page.evaluate(() => document.querySelector('meta[http-equiv="Content-Security-Policy"]')?.getAttribute('content'));
    assert.match(String(policy), /default-src 'self'/);
    const ran = await page.evaluate(() => {
      const s = document.createElement('script');
      s.textContent = 'window.injected = true';
      document.head.appendChild(s);
      return (window as { injected?: boolean }).injected;
    });
    assert.equal(ran, undefined);
  });

  it('refuses operations outside the allow-list', async () => {
    const res = await page.evaluate(() => (window as any).berth.request({ method: 'POST', path: '/v1.53/swarm/leave?force=1' }));
    assert.equal(res.status, 403);
  });
});
