/**
 * Settings, in Chromium against a real berthd (`--ui`): the theme (system, light, dark) works and is kept
 * across a reload; the engine connection and registry logins, which need the desktop app, say so. Then the
 * same view with the desktop app's bridge (window.berth) stood in by the page: the connection form sends the
 * TCP and TLS settings to it, and a registry login goes to the engine's POST /auth (a local registry) and
 * shows in the list without its password. Screenshots at 1280 and 800 px, light and dark, go to artifacts/.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { startRegistry, type Registry } from './registry.js';
import { launchChromium, loadHarness, screenshot, startEngineWithUi, type Engine } from './support.js';

const harness = await loadHarness();

const themeOf = (page: Page) => page.evaluate(() => document.documentElement.dataset.theme);

async function shots(page: Page, name: string, show?: string): Promise<void> {
  for (const width of [1280, 800]) {
    await page.setViewportSize({ width, height: 800 });
    for (const theme of ['light', 'dark'] as const) {
      await page.getByRole('radio', { name: theme === 'light' ? 'Light' : 'Dark', exact: true }).check();
      assert.equal(await themeOf(page), theme);
      if (show) await page.getByRole('heading', { name: show }).evaluate((h) => h.scrollIntoView({ block: 'start' }));
      await screenshot(page, `${name}-${width}-${theme}`);
    }
  }
  await page.setViewportSize({ width: 1280, height: 800 });
}

/** The desktop app's bridge, stood in by the page: settings and logins in memory, /auth on the real engine. */
function fakeDesktopBridge(): void {
  const w = window as unknown as { berth: unknown; bridgeCalls: unknown[] };
  const calls: unknown[] = [];
  w.bridgeCalls = calls;
  let settings = {
    version: 2,
    engine: { mode: 'embedded', socketPath: '/home/ann/.config/Berth/engine.sock', tcp: { host: '127.0.0.1', port: 2376, tls: true, ca: '', cert: '', key: '' } },
    theme: 'system',
  };
  let logins: Array<{ serveraddress: string; username: string }> = [];
  w.berth = {
    version: '1',
    async request(req: { method: string; path: string; body?: string; headers?: Record<string, string> }) {
      const res = await fetch(`/api${req.path}`, { method: req.method, body: req.body, headers: { ...req.headers, ...(req.body ? { 'Content-Type': 'application/json' } : {}) } });
      return { status: res.status, body: await res.text() };
    },
    settings: {
      get: async () => settings,
      update: async (patch: { engine?: Record<string, unknown>; theme?: string }) => {
        calls.push({ update: patch });
        if (patch.engine && (patch.engine as { tcp?: { ca?: string } }).tcp?.ca === 'relative.pem')
          throw new Error("Error invoking remote method 'berth:settings:update': Error: the ca file must be an absolute path");
        settings = { ...settings, ...(patch.theme ? { theme: patch.theme } : {}), engine: { ...settings.engine, ...(patch.engine as object) } } as typeof settings;
        return settings;
      },
    },
    engine: {
      status: async () => {
        const { mode, socketPath, tcp } = settings.engine as { mode: string; socketPath: string; tcp: { host: string; port: number; tls: boolean } };
        return { state: 'running', error: '', mode, address: mode === 'tcp' ? `${tcp.tls ? 'https' : 'tcp'}://${tcp.host}:${tcp.port}` : socketPath };
      },
    },
    registries: {
      list: async () => ({ keychain: true, logins }),
      async login(login: { serveraddress: string; username: string; password: string }) {
        calls.push({ login: login.serveraddress });
        const res = await fetch('/api/v1.53/auth', { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(login) });
        const body = (await res.json()) as { Status?: string; message?: string };
        if (!res.ok) return { ok: false, message: body.message ?? String(res.status) };
        logins = [...logins.filter((l) => l.serveraddress !== login.serveraddress), { serveraddress: login.serveraddress, username: login.username }];
        return { ok: true, message: body.Status ?? '' };
      },
      logout: async (serveraddress: string) => {
        logins = logins.filter((l) => l.serveraddress !== serveraddress);
        return { ok: true };
      },
    },
  };
}

describe('settings, in Chromium', { timeout: 300_000 }, () => {
  let engine: Engine;
  let baseUrl: string;
  let loginUrl: string;
  let browser: Browser;
  let dir: string;
  let registry: Registry | undefined;

  before(async () => {
    ({ engine, loginUrl, baseUrl } = await startEngineWithUi(harness));
    dir = mkdtempSync(path.join(os.tmpdir(), 'berth-e2e-settings-'));
    browser = await launchChromium();
  });

  after(async () => {
    await browser?.close();
    await engine?.cleanup();
    await registry?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('in the browser: the theme is chosen and kept; the sections that need the desktop app say so', async () => {
    const context = await browser.newContext({ viewport: { width: 1280, height: 800 }, colorScheme: 'dark' });
    const page = await context.newPage();
    await page.goto(loginUrl);
    await page.getByRole('heading', { name: 'Containers' }).waitFor();
    await page.getByRole('link', { name: 'Settings' }).click();
    await page.getByRole('heading', { name: 'Settings' }).waitFor();
    // A fresh page follows the system (dark here).
    assert.equal(await page.getByRole('radio', { name: 'As the system' }).isChecked(), true);
    assert.equal(await themeOf(page), 'dark');
    await page.getByRole('radio', { name: 'Light', exact: true }).check();
    assert.equal(await themeOf(page), 'light');
    await page.reload();
    await page.getByRole('heading', { name: 'Settings' }).waitFor();
    assert.equal(await themeOf(page), 'light', 'kept across a reload');
    assert.equal(await page.getByRole('radio', { name: 'Light', exact: true }).isChecked(), true);
    // The sidebar's toggle and the setting are one choice.
    await page.getByRole('button', { name: 'Toggle theme' }).click();
    assert.equal(await themeOf(page), 'dark');
    assert.equal(await page.getByRole('radio', { name: 'Dark', exact: true }).isChecked(), true);
    await page.getByRole('radio', { name: 'As the system' }).check();
    await context.close();
    const light = await browser.newContext({ viewport: { width: 1280, height: 800 }, colorScheme: 'light', storageState: undefined });
    const page2 = await light.newPage();
    await page2.goto(loginUrl);
    await page2.goto(`${baseUrl}#/settings`);
    await page2.getByRole('heading', { name: 'Settings' }).waitFor();
    assert.equal(await themeOf(page2), 'light');

    assert.match(await page2.getByTestId('engine-needs-app').innerText(), /desktop app/);
    assert.match(await page2.getByTestId('registries-need-app').innerText(), /desktop app/);
    assert.equal(await page2.getByRole('button', { name: 'Log in' }).count(), 0);
    await shots(page2, 'settings-browser');
    await light.close();
  });

  it('with the desktop bridge: connects over TCP with TLS files, and logs in to a registry through the engine', async () => {
    registry = await startRegistry(dir);
    const context = await browser.newContext({ viewport: { width: 1280, height: 800 }, colorScheme: 'light' });
    await context.addInitScript(fakeDesktopBridge);
    const page = await context.newPage();
    await page.goto(loginUrl);
    await page.goto(`${baseUrl}#/settings`);
    await page.getByRole('heading', { name: 'Settings' }).waitFor();
    assert.equal(await page.getByTestId('engine-needs-app').count(), 0);
    await page.getByTestId('engine-status').getByText(/engine\.sock: running/).waitFor();
    assert.equal(await page.getByRole('radio', { name: 'The bundled engine' }).isChecked(), true);

    await page.getByRole('radio', { name: 'An engine over TCP' }).check();
    const field = (label: string) => page.getByLabel(label, { exact: true });
    await field('Host').fill('engine.example');
    await field('Port').fill('2376');
    assert.equal(await page.getByRole('checkbox', { name: 'TLS' }).isChecked(), true);
    await field('CA certificate').fill('relative.pem');
    await page.getByRole('button', { name: 'Connect' }).click();
    // The main process's refusal is shown without Electron's prefix.
    await page.getByTestId('engine-error').getByText(/^the ca file must be an absolute path$/).waitFor({ timeout: 5000 });
    await field('CA certificate').fill('/etc/berth/ca.pem');
    await field('Client certificate').fill('/etc/berth/cert.pem');
    await field('Client key').fill('/etc/berth/key.pem');
    await page.getByRole('button', { name: 'Connect' }).click();
    await page.getByTestId('engine-error').waitFor({ state: 'detached' });
    await page.getByTestId('engine-status').getByText('https://engine.example:2376: running').waitFor();
    const calls = (await page.evaluate(() => (window as unknown as { bridgeCalls: unknown[] }).bridgeCalls)) as Array<{ update?: { engine?: any } }>;
    const last = calls.filter((c) => c.update?.engine).pop()!.update!.engine;
    assert.equal(last.mode, 'tcp');
    assert.deepEqual(last.tcp, { host: 'engine.example', port: 2376, tls: true, ca: '/etc/berth/ca.pem', cert: '/etc/berth/cert.pem', key: '/etc/berth/key.pem' });

    // A login goes to the engine's POST /auth; the list shows the registry and user, never the password.
    await field('Registry').fill(registry.address);
    await field('User').fill('ann');
    await field('Password').fill('pa55word');
    await page.getByRole('button', { name: 'Log in' }).click();
    await page.getByText(`${registry.address}: Login Succeeded`).waitFor({ timeout: 10_000 });
    const row = page.getByRole('table', { name: 'Registry logins' }).getByRole('row').filter({ hasText: registry.address });
    await row.waitFor();
    assert.match(await row.innerText(), /ann/);
    assert.equal(await field('Password').inputValue(), '');
    assert.doesNotMatch(await page.locator('main').innerText(), /pa55word/);
    // Theme changes reach the app's settings too.
    await shots(page, 'settings-desktop');
    await shots(page, 'settings-desktop-logins', 'Registry logins');
    const themes = (await page.evaluate(() => (window as unknown as { bridgeCalls: Array<{ update?: { theme?: string } }> }).bridgeCalls))
      .map((c) => c.update?.theme)
      .filter(Boolean);
    assert.deepEqual(themes.slice(-2), ['light', 'dark']);
    await row.getByRole('button', { name: 'Log out' }).click();
    await row.waitFor({ state: 'detached' });
    await context.close();
  });

  it("with the desktop bridge on macOS or Windows: the VM's resources, saved in the app's settings; absent elsewhere", async () => {
    const context = await browser.newContext({ viewport: { width: 1280, height: 800 }, colorScheme: 'light' });
    await context.addInitScript(fakeDesktopBridge);
    // The main process says the engine runs in a VM, and keeps its resources (with its own range checks).
    await context.addInitScript(() => {
      const w = window as unknown as { berth: any; bridgeCalls: unknown[] };
      const base = w.berth;
      let vm = { cpus: 2, memoryMiB: 2048, diskGiB: 64 };
      const status = base.engine.status;
      w.berth = {
        ...base,
        engine: { status: async () => ({ ...(await status()), vm: true, vmStatus: { state: 'running', driver: 'vfkit', resources: { cpus: 2, memoryMiB: 2048, diskGiB: 64 } } }) },
        settings: {
          get: async () => ({ ...(await base.settings.get()), vm }),
          update: async (patch: { vm?: typeof vm }) => {
            if (patch.vm) {
              w.bridgeCalls.push({ update: patch });
              if (patch.vm.cpus < 1) throw new Error("Error invoking remote method 'berth:settings:update': Error: the VM's CPUs must be a whole number from 1 to 64");
              vm = { ...vm, ...patch.vm };
              return { ...(await base.settings.get()), vm };
            }
            return base.settings.update(patch);
          },
        },
      };
    });
    const page = await context.newPage();
    await page.goto(loginUrl);
    await page.goto(`${baseUrl}#/settings`);
    const section = page.getByRole('form', { name: 'Virtual machine' });
    await section.waitFor({ timeout: 10_000 });
    assert.equal(await section.getByLabel('CPUs').inputValue(), '2');
    assert.equal(await section.getByLabel('Memory').inputValue(), '2048');
    assert.equal(await section.getByLabel('Disk size').inputValue(), '64');
    // The VM's state and the resources it runs with, as the main process reports them.
    assert.equal(await section.getByTestId('vm-state').innerText(), 'State: running · vfkit (Virtualization.framework) · 2 CPUs, 2048 MiB memory, 64 GiB disk');
    await section.getByLabel('CPUs').fill('0');
    await section.getByRole('button', { name: 'Save' }).click();
    await page.getByTestId('vm-error').getByText(/^the VM's CPUs must be a whole number from 1 to 64$/).waitFor({ timeout: 5000 });
    await section.getByLabel('CPUs').fill('4');
    await section.getByLabel('Memory').fill('6144');
    await section.getByLabel('Disk size').fill('100');
    await section.getByRole('button', { name: 'Save' }).click();
    await section.getByRole('status').getByText(/next start/).waitFor({ timeout: 5000 });
    const calls = (await page.evaluate(() => (window as unknown as { bridgeCalls: Array<{ update?: { vm?: unknown } }> }).bridgeCalls)).filter((c) => c.update?.vm);
    assert.deepEqual(calls.at(-1)!.update!.vm, { cpus: 4, memoryMiB: 6144, diskGiB: 100 });
    await shots(page, 'settings-vm', 'Virtual machine');
    await context.close();

    // On Linux (the bridge says no VM), and in the browser, there is no such section.
    const linux = await browser.newContext({ viewport: { width: 1280, height: 800 }, colorScheme: 'light' });
    await linux.addInitScript(fakeDesktopBridge);
    const page2 = await linux.newPage();
    await page2.goto(loginUrl);
    await page2.goto(`${baseUrl}#/settings`);
    await page2.getByTestId('engine-status').getByText(/running/).waitFor();
    assert.equal(await page2.getByRole('heading', { name: 'Virtual machine' }).count(), 0);
    await linux.close();
  });
});
