/**
 * Fit and finish, in Chromium against a real berthd (`--ui`): the layout at 800 px, exit codes in the
 * list, pending actions, empty filter results, removal of one tag of several, and the page's
 * Content-Security-Policy when loaded from a file (as Electron loads it). Screenshots at 1280 and 800 px,
 * light and dark, go to artifacts/.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { launchChromium, loadHarness, ROOT, screenshot, setTheme, startEngineWithUi, type Engine } from './support.js';

const harness = await loadHarness();

/** The Content-Security-Policy header `berthd --ui` sends with its page. */
function pageHeaderPolicy(url: string, cookie: string): Promise<string> {
  return new Promise((resolve, reject) => {
    http
      .get(url, { headers: { Cookie: cookie } }, (res) => {
        res.resume();
        resolve(String(res.headers['content-security-policy'] ?? ''));
      })
      .on('error', reject);
  });
}

/** A policy as directive name -> sorted sources, so that two spellings of one policy compare equal. */
function directives(policy: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const part of policy.split(';')) {
    const [name, ...sources] = part.trim().split(/\s+/);
    if (name) out[name] = sources.sort().join(' ');
  }
  return out;
}

/** Every visible button of the page lies inside the viewport's width (none pushed off to the right). */
async function buttonsOffScreen(page: Page): Promise<string[]> {
  return page.$$eval('main button, nav button', (buttons) =>
    buttons
      .filter((b) => (b as HTMLElement).offsetParent !== null)
      .filter((b) => b.getBoundingClientRect().right > window.innerWidth + 0.5)
      .map((b) => b.getAttribute('aria-label') ?? b.textContent ?? '?'),
  );
}

describe('fit and finish of the renderer, in Chromium', { timeout: 300_000 }, () => {
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

  it('shows the exit code of an exited container in the list, from its die event', async () => {
    assert.equal((await engine.docker(['run', '--name', 'fit-exit3', 'busybox', 'sh', '-c', 'exit 3'])).code, 3);
    const badge = page.locator('tr[data-name="fit-exit3"] .badge.exited');
    await badge.waitFor({ timeout: 5000 });
    assert.equal((await badge.innerText()).trim(), 'exited (3)');
    assert.equal(await badge.getAttribute('data-exit-code'), '3');
    await page.goto(`${baseUrl}#/containers/${(await engine.dockerOk(['inspect', '-f', '{{.Id}}', 'fit-exit3'])).trim()}`);
    await page.locator('.page-head .badge', { hasText: 'exited (3)' }).waitFor({ timeout: 5000 });
    await page.goto(`${baseUrl}#/containers`);
  });

  it('shows a stop as pending until the engine answers, then the exit code of the kill', async () => {
    // sh as PID 1 ignores SIGTERM: the stop waits the container's stop timeout (3 s) and kills it.
    await engine.dockerOk(['run', '-d', '--stop-timeout', '3', '--name', 'fit-slowstop', 'busybox', 'sh', '-c', 'sleep 600 & wait']);
    const row = page.locator('tr[data-name="fit-slowstop"]');
    await row.locator('.badge.running').waitFor({ timeout: 5000 });
    await row.getByRole('button', { name: 'Stop fit-slowstop' }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Stop' }).click();
    const stopping = row.getByRole('button', { name: 'Stop fit-slowstop' });
    await row.locator('button[aria-busy="true"]', { hasText: 'Stopping…' }).waitFor({ timeout: 2000 });
    assert.equal(await stopping.isDisabled(), true, 'a pending stop cannot be asked again');
    assert.equal(await row.getByRole('button', { name: 'Remove fit-slowstop' }).isDisabled(), true, 'nor can the row be removed meanwhile');
    await screenshot(page, 'fit-pending-stop');
    await row.locator('.badge.exited', { hasText: 'exited (137)' }).waitFor({ timeout: 20_000 });
    await row.getByRole('button', { name: 'Start fit-slowstop' }).waitFor({ timeout: 5000 });
    assert.equal(await row.locator('button[aria-busy="true"]').count(), 0);
  });

  it('says that no container matches a filter, and clears it', async () => {
    await page.getByLabel('Search containers').fill('no-such-container-anywhere');
    const empty = page.getByTestId('containers-no-match');
    await empty.waitFor({ timeout: 2000 });
    assert.match(await empty.innerText(), /No container matches “no-such-container-anywhere”/);
    assert.equal(await page.getByTestId('containers').count(), 0, 'no bare table headers');
    await screenshot(page, 'fit-containers-no-match');
    await page.getByLabel('State filter').selectOption('paused');
    await page.getByLabel('Search containers').fill('');
    assert.match(await empty.innerText(), /among the paused ones/);
    await empty.getByRole('button', { name: 'Clear the filters' }).click();
    await page.locator('tr[data-name="fit-exit3"]').waitFor({ timeout: 2000 });
    assert.equal(await page.getByLabel('State filter').inputValue(), 'all');
    await page.goto(`${baseUrl}#/images`);
    await page.getByLabel('Search images').fill('nothing-like-this');
    await page.getByTestId('images-no-match').getByRole('button', { name: 'Clear the search' }).click();
    await page.getByTestId('images').waitFor({ timeout: 2000 });
  });

  it('removes the chosen tag of an image that carries several, and only that one', async () => {
    await engine.dockerOk(['tag', 'busybox:latest', 'fit/one:1']);
    await engine.dockerOk(['tag', 'busybox:latest', 'fit/two:2']);
    await page.goto(`${baseUrl}#/images`);
    const row = page.getByTestId('images').locator('tr', { hasText: 'fit/two:2' });
    await row.waitFor({ timeout: 5000 });
    await row.getByRole('button', { name: /^Remove / }).click();
    const dialog = page.getByRole('dialog');
    await dialog.getByRole('radio', { name: 'fit/two:2 only' }).check();
    await screenshot(page, 'fit-images-remove-tag');
    await dialog.getByRole('button', { name: 'Remove' }).click();
    await page.getByTestId('images').getByText('fit/two:2').waitFor({ state: 'detached', timeout: 5000 });
    const tags = (await engine.dockerOk(['images', '--format', '{{.Repository}}:{{.Tag}}'])).split('\n');
    assert.ok(!tags.includes('fit/two:2'), 'the chosen tag is gone');
    assert.ok(tags.includes('fit/one:1') && tags.includes('busybox:latest'), `the others stay: ${tags.join(', ')}`);
    await engine.dockerOk(['rmi', 'fit/one:1']);
  });

  it('is usable at 800 px: readable names, every button on screen; captured at 1280 and 800 px in both themes', async () => {
    await engine.dockerOk(['run', '-d', '--name', 'fit-a-rather-long-container-name', '-p', '127.0.0.1::80', 'busybox', 'sleep', '600']);
    await engine.dockerOk(['volume', 'create', 'fit-volume']);
    await engine.dockerOk(['create', '--name', 'fit-shop-web-1', '--label', 'com.docker.compose.project=fitshop', '--label', 'com.docker.compose.service=web', 'busybox', 'true']);
    const longId = (await engine.dockerOk(['inspect', '-f', '{{.Id}}', 'fit-a-rather-long-container-name'])).trim();
    for (const theme of ['light', 'dark'] as const) {
      for (const width of [1280, 800]) {
        await page.setViewportSize({ width, height: 720 });
        await page.goto(`${baseUrl}#/containers`);
        await setTheme(page, theme);
        const row = page.locator('tr[data-name="fit-a-rather-long-container-name"]');
        await row.waitFor({ timeout: 5000 });
        // The name's cell shows at least its first 16 characters (an average character is under 8 px wide).
        const nameWidth = await row.locator('td').nth(1).evaluate((td) => td.getBoundingClientRect().width);
        assert.ok(nameWidth >= 140, `the name column is ${nameWidth} px wide at ${width} px`);
        for (const view of ['containers', 'compose', 'images', 'volumes', 'networks', 'run', 'system', 'events', 'container', 'container-logs']) {
          const route = view === 'container' ? `containers/${longId}` : view === 'container-logs' ? `containers/${longId}/logs` : view;
          await page.goto(`${baseUrl}#/${route}`);
          await page.getByRole('heading', { level: 1 }).waitFor();
          if (view === 'containers') await row.waitFor();
          if (view === 'container') await page.getByRole('tab', { name: 'Overview' }).waitFor();
          if (view === 'container-logs') await page.getByTestId('logs-empty').getByText(/No output yet/).waitFor({ timeout: 5000 });
          if (view === 'compose') await page.getByTestId('compose-projects').waitFor({ timeout: 5000 });
          if (view === 'images') await page.getByTestId('images').waitFor({ timeout: 5000 });
          if (view === 'volumes') await page.getByTestId('volumes').waitFor({ timeout: 5000 });
          if (view === 'networks') await page.getByTestId('networks').waitFor({ timeout: 5000 });
          if (view === 'system') await page.getByTestId('disk-usage').waitFor({ timeout: 5000 });
          assert.deepEqual(await buttonsOffScreen(page), [], `${view} at ${width} px`);
          const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
          assert.ok(overflow <= 0, `${view} at ${width} px scrolls sideways by ${overflow} px`);
          await screenshot(page, `fit-${view}-${width}-${theme}`);
        }
      }
    }
    await page.setViewportSize({ width: 1280, height: 800 });
    await setTheme(page, 'light');
  });

  it('has the same Content-Security-Policy loaded from a file (as in Electron) as under --ui, and it holds', async () => {
    const token = (await context.cookies()).find((c) => c.name === 'berth_ui_token');
    assert.ok(token);
    const header = await pageHeaderPolicy(baseUrl, `berth_ui_token=${token.value}`);
    assert.ok(header, 'berthd --ui sends a policy');
    const file = pathToFileURL(path.join(ROOT, 'renderer', 'dist', 'index.html')).href;
    const other = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    try {
      const p = await other.newPage();
      const violations: string[] = [];
      p.on('console', (m) => /Content Security Policy/i.test(m.text()) && violations.push(m.text()));
      await p.goto(file);
      const meta = await p.locator('meta[http-equiv="Content-Security-Policy"]').getAttribute('content');
      assert.ok(meta, 'the page carries its policy');
      // The same directives; frame-ancestors only in the header (a meta element cannot carry it).
      const fromHeader = directives(header);
      delete fromHeader['frame-ancestors'];
      assert.deepEqual(directives(meta), fromHeader);
      // The boot script is allowed by its hash (it set the theme); nothing else inline runs.
      assert.match(String(await p.evaluate(() => document.documentElement.dataset.theme)), /^(light|dark)$/);
      assert.deepEqual(violations, []);
      await p.evaluate(() => {
        const s = document.createElement('script');
        s.textContent = 'window.injected = true';
        document.head.appendChild(s);
      });
      assert.equal(await p.evaluate(() => (window as { injected?: boolean }).injected), undefined, 'an injected inline script did not run');
      await harness.eventually(() => violations.length > 0, 2000);
    } finally {
      await other.close();
    }
  });
});
