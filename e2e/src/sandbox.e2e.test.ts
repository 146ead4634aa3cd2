/**
 * A sandbox's network policy in the renderer, in Chromium against a real berthd (`--ui`): the Run form starts
 * a container with a policy (the `berth.network-policy` label); its page shows the exact and effective views
 * and the generation; an edit the engine refuses shows the engine's reason, a good one installs a new
 * generation; a container without a policy says so and can be given one. Screenshots at 1280 and 800 px in
 * both themes go to artifacts/.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { Browser, Page } from 'playwright-core';
import { launchChromium, loadHarness, screenshot, shots, startEngineWithUi, type Engine } from './support.js';

const harness = await loadHarness();

describe('sandbox policies in the renderer, in Chromium', { timeout: 300_000 }, () => {
  let engine: Engine;
  let baseUrl: string;
  let browser: Browser;
  let page: Page;

  before(async () => {
    let loginUrl: string;
    ({ engine, loginUrl, baseUrl } = await startEngineWithUi(harness));
    await engine.loadBusybox();
    browser = await launchChromium();
    const context = await browser.newContext({ viewport: { width: 1280, height: 800 }, colorScheme: 'light' });
    page = await context.newPage();
    await page.goto(loginUrl);
    await page.getByRole('heading', { name: 'Containers' }).waitFor();
  });

  after(async () => {
    await browser?.close();
    await engine?.docker(['rm', '-f', 'sbx-ui', 'plain-ui']).catch(() => undefined);
    await engine?.cleanup();
  });

  it('runs a sandbox with a policy from the Run form, shows its views, and installs an edit', async () => {
    await page.goto(`${baseUrl}#/run`);
    const field = (label: string) => page.getByLabel(label, { exact: true });
    await field('Image').fill('busybox');
    await field('Name').fill('sbx-ui');
    await field('Command').fill('sleep 600');
    await page.getByLabel(/Sandbox: hold its outbound traffic/).check();
    const policy = { defaultAction: 'deny', rules: [{ action: 'allow', cidr: '192.0.2.0/24', protocol: 'tcp', ports: [443, '8000-8080'] }] };
    // Not JSON: refused before anything reaches the engine.
    await field('Network policy').fill('{ defaultAction: deny');
    await page.getByRole('button', { name: 'Run', exact: true }).click();
    await page.locator('.errors .error').getByText(/the network policy is not JSON/).waitFor({ timeout: 5000 });
    // A rule the engine refuses: its reason, naming the rule.
    await field('Network policy').fill(JSON.stringify({ defaultAction: 'deny', rules: [{ action: 'allow', cidr: '10.0.0.0/40' }] }));
    await page.getByRole('button', { name: 'Run', exact: true }).click();
    await page.locator('.errors .error').getByText(/rules\[0\]\.cidr/).waitFor({ timeout: 10_000 });
    await field('Network policy').fill(JSON.stringify(policy, null, 2));
    await screenshot(page, 'sandbox-run-form');
    await page.getByRole('button', { name: 'Run', exact: true }).click();
    await page.getByRole('heading', { name: /Containers \/ sbx-ui/ }).waitFor({ timeout: 20_000 });
    const label = (await engine.dockerOk(['inspect', '--format', '{{index .Config.Labels "berth.network-policy"}}', 'sbx-ui'])).trim();
    assert.deepEqual(JSON.parse(label), policy);

    await page.getByRole('tab', { name: 'Policy' }).click();
    await page.getByTestId('policy').waitFor({ timeout: 10_000 });
    assert.equal(await page.getByTestId('policy-generation').innerText(), '1');
    assert.deepEqual(JSON.parse(await page.getByTestId('policy-exact').innerText()), policy);
    assert.equal(await page.getByTestId('policy-default').innerText(), 'refused');
    const effective = page.getByRole('table', { name: 'Effective rules' });
    assert.match(await effective.innerText(), /allow\s+192\.0\.2\.0\/24\s+tcp\s+443, 8000-8080/);
    await shots(page, 'sandbox-policy');

    // An edit the engine refuses: its message, and nothing installed.
    await page.getByRole('button', { name: 'Edit policy' }).click();
    const editor = page.getByLabel('Network policy', { exact: true });
    await editor.fill(JSON.stringify({ defaultAction: 'deny', rules: [{ action: 'allow', domain: 'bad..name' }] }));
    await page.getByRole('button', { name: 'Save policy' }).click();
    await page.getByTestId('policy-error').getByText(/rules\[0\]\.domain/).waitFor({ timeout: 10_000 });
    await shots(page, 'sandbox-policy-error');
    const next = { defaultAction: 'allow', rules: [{ action: 'deny', domain: '*.example.com' }] };
    await editor.fill(JSON.stringify(next));
    await page.getByRole('button', { name: 'Save policy' }).click();
    await page.getByTestId('policy-generation').getByText('2').waitFor({ timeout: 10_000 });
    assert.deepEqual(JSON.parse(await page.getByTestId('policy-exact').innerText()), next);
    assert.equal(await page.getByTestId('policy-default').innerText(), 'allowed');
    // The engine's unix socket still wants a token of the store: the UI's access is its own.
    const read = await engine.request('GET', '/v1/sandboxes/sbx-ui/network-policies');
    assert.equal(read.status, 401, 'the unix socket without a token is still refused');
  });

  it('says when a container has no policy, and gives it one', async () => {
    const id = (await engine.dockerOk(['run', '-d', '--name', 'plain-ui', 'busybox', 'sleep', '600'])).trim();
    await page.goto(`${baseUrl}#/containers/${id}/policy`);
    await page.getByTestId('no-policy').waitFor({ timeout: 10_000 });
    assert.match(await page.getByTestId('no-policy').innerText(), /not restricted/);
    await shots(page, 'sandbox-no-policy');
    await page.getByRole('button', { name: 'Add a policy' }).click();
    await page.getByLabel('Network policy', { exact: true }).fill(JSON.stringify({ defaultAction: 'deny', rules: [] }));
    await page.getByRole('button', { name: 'Save policy' }).click();
    await page.getByTestId('policy-generation').getByText('1').waitFor({ timeout: 10_000 });
    assert.equal(await page.getByTestId('policy-default').innerText(), 'refused');
    // Reloaded, the page asks the engine again and shows the same generation.
    await page.reload();
    await page.getByTestId('policy-generation').getByText('1').waitFor({ timeout: 10_000 });
  });
});
