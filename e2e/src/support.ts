/**
 * What the end-to-end tests share: a real berthd (through the daemon's test harness, compiled in
 * daemon/dist) serving the built renderer with `--ui`, and Debian's Chromium driven by playwright-core.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { chromium, type Browser, type Page } from 'playwright-core';

const here = path.dirname(fileURLToPath(import.meta.url));
/** The repository root (this file runs from e2e/dist/src). */
export const ROOT = path.resolve(here, '..', '..', '..');
export const ARTIFACTS = path.join(ROOT, 'artifacts');
export const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
/** The daemon's build the tests drive (its harness, fixtures and berthd): this repository's, or BERTH_DAEMON_DIST. */
export const DAEMON_DIST = process.env.BERTH_DAEMON_DIST ? path.resolve(process.env.BERTH_DAEMON_DIST) : path.join(ROOT, 'daemon', 'dist');

/** The parts of daemon/test/harness.ts these tests use. */
export interface RunResult {
  code: number | null;
  stdout: string;
  stderr: string;
}
export interface Engine {
  readonly socket: string;
  readonly root: string;
  readonly execRoot: string;
  readonly daemonLog: string;
  docker(args: string[], opts?: { input?: string; timeoutMs?: number }): Promise<RunResult>;
  dockerOk(args: string[], opts?: { input?: string; timeoutMs?: number }): Promise<string>;
  loadBusybox(tag?: string): Promise<void>;
  request(method: string, urlPath: string, opts?: { body?: unknown; headers?: Record<string, string> }): Promise<{ status: number; text: string; json<T = any>(): T }>;
  cleanup(): Promise<void>;
}
interface Harness {
  startEngine(opts?: { args?: string[]; verbose?: boolean }): Promise<Engine>;
  eventually<T>(check: () => Promise<T> | T, timeoutMs?: number, intervalMs?: number): Promise<NonNullable<T>>;
}

/** The parts of daemon/test/plugin-support.ts these tests use. */
interface PluginSupport {
  volumeDriverConfig(overrides?: Record<string, unknown>): Record<string, unknown>;
}

/** One of the daemon's compiled test helpers (`name`.js of its dist/test). */
async function loadDaemonTestModule<T>(name: string): Promise<T> {
  const file = path.join(DAEMON_DIST, 'test', `${name}.js`);
  if (!existsSync(file)) throw new Error(`${file} is missing: build the daemon first (npm run build -w daemon)`);
  return (await import(pathToFileURL(file).href)) as T;
}

export function loadHarness(): Promise<Harness> {
  return loadDaemonTestModule<Harness>('harness');
}

export function loadPluginSupport(): Promise<PluginSupport> {
  return loadDaemonTestModule<PluginSupport>('plugin-support');
}

/** Starts berthd with the UI on a free loopback port; returns the engine and the login URL it printed. */
export async function startEngineWithUi(harness: Harness): Promise<{ engine: Engine; loginUrl: string; baseUrl: string }> {
  if (!existsSync(path.join(ROOT, 'renderer', 'dist', 'index.html'))) throw new Error('the renderer is not built: npm run build -w renderer');
  const engine = await harness.startEngine({ args: ['--ui', '127.0.0.1:0'], verbose: !!process.env.E2E_VERBOSE });
  // The address with its token is written to a file of the exec root that only root reads (never to the log).
  const loginFile = path.join(engine.execRoot, 'ui-url');
  const loginUrl = await harness.eventually(() => (existsSync(loginFile) ? /^http:\/\/127\.0\.0\.1:\d+\/\?token=\S+/.exec(readFileSync(loginFile, 'utf8'))?.[0] : undefined), 5000);
  return { engine, loginUrl, baseUrl: loginUrl.replace(/\?token=.*$/, '') };
}

export async function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    args: ['--no-sandbox', '--headless', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'],
  });
}

export async function screenshot(page: Page, name: string): Promise<void> {
  mkdirSync(ARTIFACTS, { recursive: true });
  await page.screenshot({ path: path.join(ARTIFACTS, `${name}.png`), fullPage: false });
}

/** Switches the page to a theme with its own toggle, and checks it took. */
export async function setTheme(page: Page, theme: 'light' | 'dark'): Promise<void> {
  if ((await page.evaluate(() => document.documentElement.dataset.theme)) !== theme) await page.getByRole('button', { name: 'Toggle theme' }).click();
  assert.equal(await page.evaluate(() => document.documentElement.dataset.theme), theme);
}

/**
 * Screenshots of the page at 1280 and 800 px, each in the light and dark themes (`<name>-<width>-<theme>`);
 * `atWidth` runs once at each width before its screenshots. Leaves the page at 1280 px, light.
 */
export async function shots(page: Page, name: string, atWidth?: (width: number) => Promise<void>): Promise<void> {
  for (const width of [1280, 800]) {
    await page.setViewportSize({ width, height: 800 });
    await atWidth?.(width);
    for (const theme of ['light', 'dark'] as const) {
      await setTheme(page, theme);
      await screenshot(page, `${name}-${width}-${theme}`);
    }
  }
  await page.setViewportSize({ width: 1280, height: 800 });
  await setTheme(page, 'light');
}
