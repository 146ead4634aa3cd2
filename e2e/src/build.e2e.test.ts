/**
 * Build from a folder, in Chromium against a real berthd (`--ui`): the folder picked in the page goes up as
 * the build context with its progress, the build log shows as the engine writes it, the image gets its tags
 * (the docker CLI runs it), a failing step is told; then the built image is pushed to a local registry from
 * the images view. Screenshots at 1280 and 800 px, light and dark, go to artifacts/.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { startRegistry, type Registry } from './registry.js';
import { launchChromium, loadHarness, screenshot, startEngineWithUi, type Engine } from './support.js';

const harness = await loadHarness();

async function shots(page: Page, name: string): Promise<void> {
  for (const width of [1280, 800]) {
    await page.setViewportSize({ width, height: 800 });
    for (const theme of ['light', 'dark'] as const) {
      if ((await page.evaluate(() => document.documentElement.dataset.theme)) !== theme) await page.getByRole('button', { name: 'Toggle theme' }).click();
      await screenshot(page, `${name}-${width}-${theme}`);
    }
  }
  await page.setViewportSize({ width: 1280, height: 800 });
}

describe('build from a folder, in Chromium', { timeout: 300_000 }, () => {
  let engine: Engine;
  let baseUrl: string;
  let loginUrl: string;
  let browser: Browser;
  let page: Page;
  let dir: string;
  let registry: Registry;

  before(async () => {
    ({ engine, loginUrl, baseUrl } = await startEngineWithUi(harness));
    await engine.loadBusybox();
    dir = mkdtempSync(path.join(os.tmpdir(), 'berth-e2e-build-'));
    registry = await startRegistry(path.join(dir, 'registry'));
    browser = await launchChromium();
    const context = await browser.newContext({ viewport: { width: 1280, height: 800 }, colorScheme: 'light' });
    page = await context.newPage();
    await page.goto(loginUrl);
    await page.getByRole('heading', { name: 'Containers' }).waitFor();
  });

  after(async () => {
    await browser?.close();
    await engine?.cleanup();
    await registry?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('sends the folder with its progress, shows the log, tags the image; the docker CLI runs it', async () => {
    const context = path.join(dir, 'app');
    // A path longer than a tar header's name field, a file big enough for the upload to take steps, and
    // a file the folder's .dockerignore leaves out.
    const deep = path.join('src', 'a-rather-long-folder-name-for-the-context', 'another-long-folder-name-below-it', 'and-a-third-one');
    mkdirSync(path.join(context, deep), { recursive: true });
    writeFileSync(path.join(context, deep, 'message.txt'), 'from deep inside\n');
    writeFileSync(path.join(context, 'hello.txt'), 'hello from the folder\n');
    writeFileSync(path.join(context, 'blob.bin'), randomBytes(8_000_000));
    writeFileSync(path.join(context, 'secret.txt'), 'not for the image\n');
    writeFileSync(path.join(context, '.dockerignore'), 'secret.txt\n');
    writeFileSync(
      path.join(context, 'Dockerfile'),
      ['FROM busybox', 'COPY hello.txt /hello.txt', `COPY ${deep.split(path.sep).join('/')}/message.txt /message.txt`, 'COPY blob.bin /blob.bin', 'COPY . /ctx', 'RUN echo built > /built', 'CMD ["cat", "/hello.txt"]', ''].join('\n'),
    );

    await page.goto(`${baseUrl}#/images`);
    await page.getByRole('button', { name: 'Build…' }).click();
    await page.getByRole('heading', { name: 'Build an image' }).waitFor();
    await page.getByLabel('Folder').setInputFiles(context);
    assert.match(await page.getByTestId('build-context').innerText(), /^6 files, 8(\.0)?\s+MB/);
    const pushRef = `${registry.address}/e2e/built:1`;
    await page.getByLabel('Tags', { exact: true }).fill(`e2e/built:1, ${pushRef}`);
    // The upload's progress, seen as it changes.
    await page.evaluate(() => {
      const seen: number[] = [];
      (window as unknown as { uploadSeen: number[] }).uploadSeen = seen;
      const watch = () => {
        const bar = document.querySelector<HTMLProgressElement>('progress[aria-label="Context upload"]');
        if (bar && seen[seen.length - 1] !== bar.value) seen.push(bar.value);
        requestAnimationFrame(watch);
      };
      watch();
    });
    await page.getByRole('button', { name: 'Build', exact: true }).click();
    const result = page.getByTestId('build-result');
    await result.waitFor({ timeout: 60_000 });
    assert.match(await result.innerText(), new RegExp(`^Built [0-9a-f]{12}, tagged e2e/built:1, ${pushRef.replace(/[.:/]/g, '\\$&')}\\.`));
    const log = await page.getByTestId('build-log').innerText();
    assert.match(log, /Step 1\/7 : FROM busybox/);
    assert.match(log, /Step 6\/7 : RUN echo built > \/built/);
    assert.match(log, /Successfully tagged e2e\/built:1/);
    const seen = (await page.evaluate(() => (window as unknown as { uploadSeen: number[] }).uploadSeen)) as number[];
    assert.equal(seen[seen.length - 1], 100);
    assert.match(await page.locator('.build-output').innerText(), /100% \(8(\.0)?\s+MB of 8(\.0)?\s+MB\)/);

    assert.equal(await engine.dockerOk(['run', '--rm', 'e2e/built:1']), 'hello from the folder\n');
    assert.equal(await engine.dockerOk(['run', '--rm', 'e2e/built:1', 'cat', '/message.txt', '/built']), 'from deep inside\nbuilt\n');
    assert.equal((await engine.dockerOk(['run', '--rm', 'e2e/built:1', 'sh', '-c', 'wc -c < /blob.bin'])).trim(), String(8_000_000));
    const listed = await engine.dockerOk(['run', '--rm', 'e2e/built:1', 'ls', '-A', '/ctx']);
    assert.doesNotMatch(listed, /secret\.txt/);
    assert.match(listed, /hello\.txt/);
    await shots(page, 'build-done');
  });

  it('tells a failing step, and a folder without the Dockerfile named', async () => {
    const context = path.join(dir, 'broken');
    mkdirSync(context, { recursive: true });
    writeFileSync(path.join(context, 'Dockerfile'), 'FROM busybox\nRUN echo about to fail && exit 7\n');
    await page.goto(`${baseUrl}#/images/build`);
    await page.getByLabel('Folder').setInputFiles(context);
    await page.getByLabel('Dockerfile', { exact: true }).fill('Containerfile');
    await page.getByRole('button', { name: 'Build', exact: true }).click();
    await page.getByTestId('build-problem').getByText('the folder has no Containerfile').waitFor({ timeout: 5000 });
    await page.getByLabel('Dockerfile', { exact: true }).fill('Dockerfile');
    await page.getByRole('button', { name: 'Build', exact: true }).click();
    const error = page.getByTestId('build-error');
    await error.waitFor({ timeout: 60_000 });
    assert.equal(await page.getByTestId('build-problem').count(), 0, 'the refusal went with the next attempt');
    assert.match(await error.innerText(), /returned a non-zero code: 7/);
    assert.match(await page.getByTestId('build-log').innerText(), /about to fail/);
    await shots(page, 'build-failed');
  });

  it('pushes the built image to a registry from the images view', async () => {
    const pushRef = `${registry.address}/e2e/built:1`;
    await page.goto(`${baseUrl}#/images`);
    await page.getByRole('button', { name: `Push ${pushRef}` }).click();
    const dialog = page.getByRole('dialog');
    await dialog.getByLabel('Push as').fill(pushRef);
    await dialog.getByRole('button', { name: 'Push' }).click();
    await page.getByTestId('push-progress').getByText(/digest: sha256:[0-9a-f]{64}/).waitFor({ timeout: 60_000 });
    const tags = (await (await fetch(`http://${registry.address}/v2/e2e/built/tags/list`)).json()) as { tags: string[] };
    assert.deepEqual(tags.tags, ['1']);
  });

  it("in the desktop app, sends the context over the bridge's port within its window of unacknowledged bytes", async () => {
    const context = path.join(dir, 'app');
    const desktop = await browser.newContext({ viewport: { width: 1280, height: 800 }, colorScheme: 'light' });
    // The main process's side of the bridge, stood in by the page: requests through fetch; an upload's chunks
    // acknowledged as they arrive (the most seen unacknowledged is recorded), then the context sent to the
    // engine and its answer relayed back.
    await desktop.addInitScript(() => {
      const w = window as unknown as { berth: unknown; uploadStats: { chunks: number; bytes: number; maxAhead: number } };
      w.uploadStats = { chunks: 0, bytes: 0, maxAhead: 0 };
      w.berth = {
        version: '1',
        async request(req: { method: string; path: string; body?: string; headers?: Record<string, string> }) {
          const res = await fetch(`/api${req.path}`, { method: req.method, body: req.body, headers: { ...req.headers, ...(req.body ? { 'Content-Type': 'application/json' } : {}) } });
          return { status: res.status, body: await res.text() };
        },
      };
      window.addEventListener('message', (event: MessageEvent) => {
        const open = event.data?.berthOpen as { type: string; method: string; path: string } | undefined;
        if (!open || open.type !== 'upload') return;
        const port = event.ports[0]!;
        const parts: Uint8Array[] = [];
        let received = 0;
        let acked = 0;
        port.onmessage = async (ev: MessageEvent<{ type: string; data?: Uint8Array }>) => {
          if (ev.data.type === 'data' && ev.data.data) {
            parts.push(ev.data.data);
            received += ev.data.data.byteLength;
            w.uploadStats.chunks++;
            w.uploadStats.maxAhead = Math.max(w.uploadStats.maxAhead, received - acked);
            // Acknowledged a little later, as a busy connection would.
            await new Promise((r) => setTimeout(r, 5));
            acked += ev.data.data.byteLength;
            port.postMessage({ type: 'ack', bytes: ev.data.data.byteLength });
          } else if (ev.data.type === 'end-upload') {
            w.uploadStats.bytes = received;
            const res = await fetch(`/api${open.path}`, { method: 'POST', headers: { 'Content-Type': 'application/x-tar' }, body: new Blob(parts as BlobPart[]) });
            if (!res.ok) return port.postMessage({ type: 'error', status: res.status, message: (await res.json()).message });
            port.postMessage({ type: 'data', data: new Uint8Array(await res.arrayBuffer()) });
            port.postMessage({ type: 'end' });
          }
        };
        port.start();
      });
    });
    const page2 = await desktop.newPage();
    await page2.goto(loginUrl);
    await page2.goto(`${baseUrl}#/images/build`);
    await page2.getByRole('heading', { name: 'Build an image' }).waitFor();
    await page2.getByLabel('Folder').setInputFiles(context);
    await page2.getByLabel('Tags', { exact: true }).fill('e2e/built-desktop:1');
    await page2.getByRole('button', { name: 'Build', exact: true }).click();
    await page2.getByTestId('build-result').waitFor({ timeout: 60_000 });
    assert.match(await page2.getByTestId('build-log').innerText(), /Successfully tagged e2e\/built-desktop:1/);
    assert.match(await page2.locator('.build-output').innerText(), /100% \(8(\.0)?\s+MB of 8(\.0)?\s+MB\)/);
    const stats = (await page2.evaluate(() => (window as unknown as { uploadStats: unknown }).uploadStats)) as { chunks: number; bytes: number; maxAhead: number };
    assert.ok(stats.chunks > 1, `chunks: ${stats.chunks}`);
    assert.ok(stats.bytes > 8_000_000, `bytes: ${stats.bytes}`);
    // The page waited for acknowledgements: never more than the window (4 MiB) ahead.
    assert.ok(stats.maxAhead <= 4 * 1024 * 1024, `ahead: ${stats.maxAhead}`);
    assert.equal(await engine.dockerOk(['run', '--rm', 'e2e/built-desktop:1']), 'hello from the folder\n');
    await desktop.close();
  });
});
