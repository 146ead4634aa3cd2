/**
 * The Swarm view in Chromium against a real berthd (`--ui`) that becomes a one-node swarm: the empty state
 * outside a swarm and `swarm init` from it (an etcd member on a loopback address of the test's own); a
 * service made with the docker CLI shows without a reload (service events, and the container events of its
 * tasks), with its mode, replicas, image and published port; its tasks and logs; create, scale, update of its
 * image (its state followed by updatestate events), rollback and remove from the view; secrets and configs
 * listed; the node drained and activated, and its demotion (the last manager) refused with the engine's
 * message. Screenshots at 1280 and 800 px in both themes go to artifacts/.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomInt } from 'node:crypto';
import type { Browser, Page } from 'playwright-core';
import { launchChromium, loadHarness, shots, startEngineWithUi, type Engine } from './support.js';

const harness = await loadHarness();
/** A loopback address of this test's own: etcd and the swarm port listen there, beside other tests' daemons. */
const IP = `127.${randomInt(100, 250)}.${randomInt(1, 250)}.${randomInt(2, 250)}`;
const PORT = randomInt(20_000, 30_000);

/** Screenshots at both widths and themes; usable at both widths: nothing scrolls sideways. */
async function swarmShots(page: Page, name: string): Promise<void> {
  await shots(page, name, async (width) => {
    const overflow = await page.evaluate(() => {
      const main = document.querySelector('main')!;
      return Math.max(document.documentElement.scrollWidth - window.innerWidth, main.scrollWidth - main.clientWidth);
    });
    assert.ok(overflow <= 0, `${name} at ${width} px scrolls sideways by ${overflow} px`);
  });
}

describe('the Swarm view, in Chromium', { timeout: 300_000 }, () => {
  let engine: Engine;
  let browser: Browser;
  let page: Page;

  before(async () => {
    let loginUrl: string;
    ({ engine, loginUrl } = await startEngineWithUi(harness));
    await engine.loadBusybox();
    browser = await launchChromium();
    const ctx = await browser.newContext({ viewport: { width: 1280, height: 800 }, colorScheme: 'light' });
    page = await ctx.newPage();
    await page.goto(loginUrl);
    await page.getByRole('heading', { name: 'Containers' }).waitFor();
  });

  after(async () => {
    await browser?.close();
    await engine?.docker(['swarm', 'leave', '--force'], { timeoutMs: 60_000 }).catch(() => undefined);
    await engine?.cleanup();
  });

  const service = (name: string) => page.getByRole('table', { name: 'Services' }).locator(`tr[data-service="${name}"]`);
  const nodeRow = () => page.getByRole('table', { name: 'Nodes' }).locator('tbody tr').first();
  /** The Replicas cell of a service's row once it says `running/desired`. */
  const replicas = (row: ReturnType<typeof service>, text: string) => row.getByTestId('replicas').filter({ hasText: new RegExp(`^${text}$`) });
  const replicasOf = async (name: string) => JSON.parse(await engine.dockerOk(['service', 'inspect', name]))[0].Spec.Mode.Replicated.Replicas as number;

  it('says when the engine is not in a swarm, and makes it one from there', async () => {
    await page.getByRole('link', { name: 'Swarm' }).click();
    await page.getByRole('heading', { name: 'Swarm' }).waitFor();
    const empty = page.getByTestId('swarm-empty');
    await empty.getByText('This engine is not in a swarm.').waitFor({ timeout: 10_000 });
    await swarmShots(page, 'swarm-empty');
    await empty.getByLabel('Advertise address').fill(IP);
    await empty.getByRole('button', { name: 'Initialize swarm' }).click();
    await nodeRow().waitFor({ timeout: 60_000 });
    assert.match(await nodeRow().innerText(), /this node[\s\S]*\bmanager\b[\s\S]*\bactive\b[\s\S]*\bready\b[\s\S]*\bLeader\b[\s\S]*Drain/);
    const info = (await engine.request('GET', '/info')).json();
    assert.equal(info.Swarm.LocalNodeState, 'active');
    assert.equal(info.Swarm.NodeAddr, IP);
  });

  it('shows a service made with the CLI, its tasks and logs, without a reload', async () => {
    await engine.dockerOk(['service', 'create', '--detach', '--name', 'web', '--replicas', '2', '--stop-grace-period', '1s', 'busybox', 'sh', '-c', 'echo hello from $HOSTNAME; exec sleep 600'], {
      timeoutMs: 60_000,
    });
    // A port published in host mode binds on the node: one task per node (global) can have it.
    await engine.dockerOk(['service', 'create', '--detach', '--name', 'edge', '--mode', 'global', '--stop-grace-period', '1s', '--publish', `mode=host,published=${PORT},target=80`, 'busybox', 'httpd', '-f', '-p', '80'], {
      timeoutMs: 60_000,
    });
    const row = service('web');
    await row.waitFor({ timeout: 10_000 });
    await replicas(row, '2/2').waitFor({ timeout: 60_000 });
    assert.match(await row.innerText(), /^web\treplicated\t2\/2\tbusybox(:latest)?\t—/);
    await replicas(service('edge'), '1/1').waitFor({ timeout: 60_000 });
    assert.match(await service('edge').innerText(), new RegExp(`^edge\\tglobal\\t1/1\\tbusybox(:latest)?\\t\\*:${PORT}->80/tcp\\t`));
    assert.doesNotMatch(await service('edge').innerText(), /Scale/);
    await row.getByRole('link', { name: 'web' }).click();
    const detail = page.getByRole('region', { name: 'Service web' });
    const tasks = detail.getByRole('table', { name: 'Tasks' }).locator('tbody tr');
    await detail.getByRole('table', { name: 'Tasks' }).getByText('running').nth(1).waitFor({ timeout: 10_000 });
    assert.equal(await tasks.count(), 2);
    const hostname = JSON.parse(await engine.dockerOk(['node', 'inspect', 'self']))[0].Description.Hostname as string;
    assert.match(await tasks.first().innerText(), new RegExp(`^web\\.1 \\w+\\t${hostname}\\trunning\\trunning`));
    await detail.getByTestId('service-logs').getByText(/^hello from /).nth(1).waitFor({ timeout: 20_000 });
    // Secrets and configs made with the CLI are listed (secret and config events).
    await engine.dockerOk(['secret', 'create', '--label', 'team=web', 'db_password', '-'], { input: 's3cret' });
    await engine.dockerOk(['config', 'create', 'web_conf', '-'], { input: 'listen 80\n' });
    const secret = page.getByRole('table', { name: 'Secrets' }).locator('tr[data-name="db_password"]');
    await secret.waitFor({ timeout: 10_000 });
    assert.match(await secret.innerText(), /^db_password\t\w{12}\t.*\tteam=web$/);
    await page.getByRole('table', { name: 'Configs' }).locator('tr[data-name="web_conf"]').waitFor({ timeout: 10_000 });
    assert.doesNotMatch(await page.locator('main').innerText(), /s3cret/);
    await swarmShots(page, 'swarm-service');
  });

  it('scales a service from the view', async () => {
    const row = service('web');
    await row.getByLabel('Replicas of web').fill('3');
    await row.getByRole('button', { name: 'Scale' }).click();
    await replicas(row, '3/3').waitFor({ timeout: 60_000 });
    assert.equal(await replicasOf('web'), 3);
    // A change made elsewhere shows too.
    await engine.dockerOk(['service', 'scale', '--detach', 'web=1']);
    await replicas(row, '1/1').waitFor({ timeout: 60_000 });
    assert.equal(await row.getByLabel('Replicas of web').inputValue(), '1');
  });

  it('creates a service from the view', async () => {
    await page.getByRole('button', { name: 'New service…' }).click();
    const form = page.getByRole('form', { name: 'New service' });
    await form.getByLabel('Name').fill('api');
    await form.getByLabel('Image').fill('busybox:latest');
    await form.getByLabel('Replicas').fill('1');
    await form.getByLabel('Published ports').fill(`${PORT + 1}:80`);
    await form.getByLabel('Command').fill('httpd -f -p 80');
    await swarmShots(page, 'swarm-create');
    await form.getByRole('button', { name: 'Create' }).click();
    await replicas(service('api'), '1/1').waitFor({ timeout: 60_000 });
    // The new service is the one shown.
    await page.getByRole('region', { name: 'Service api' }).waitFor({ timeout: 10_000 });
    const spec = JSON.parse(await engine.dockerOk(['service', 'inspect', 'api']))[0].Spec;
    assert.deepEqual(spec.TaskTemplate.ContainerSpec.Args, ['httpd', '-f', '-p', '80']);
    assert.deepEqual(spec.Mode, { Replicated: { Replicas: 1 } });
    assert.deepEqual(spec.EndpointSpec.Ports.map((p: any) => [p.PublishedPort, p.TargetPort, p.Protocol, p.PublishMode]), [[PORT + 1, 80, 'tcp', 'host']]);
    await engine.dockerOk(['service', 'rm', 'api']);
    await service('api').waitFor({ state: 'detached', timeout: 10_000 });
    await service('web').getByRole('link', { name: 'web' }).click();
  });

  it('drains the node (its tasks stop) and activates it again', async () => {
    await nodeRow().getByRole('button', { name: 'Drain' }).click();
    await nodeRow().getByText('drain', { exact: true }).waitFor({ timeout: 20_000 });
    assert.equal(JSON.parse(await engine.dockerOk(['node', 'inspect', 'self']))[0].Spec.Availability, 'drain');
    await replicas(service('web'), '0/1').waitFor({ timeout: 60_000 });
    await replicas(service('edge'), '0/0').waitFor({ timeout: 60_000 });
    await swarmShots(page, 'swarm-drained');
    await nodeRow().getByRole('button', { name: 'Activate' }).click();
    await nodeRow().getByText('active', { exact: true }).waitFor({ timeout: 20_000 });
    await replicas(service('web'), '1/1').waitFor({ timeout: 60_000 });
  });

  it('rolls a service back to its previous spec', async () => {
    // The last update (the CLI's scale to 1) has the view's scale to 3 as its previous spec.
    const detail = page.getByRole('region', { name: 'Service web' });
    await detail.getByRole('button', { name: 'Roll back' }).click();
    await replicas(service('web'), '3/3').waitFor({ timeout: 60_000 });
    assert.equal(await replicasOf('web'), 3);
  });

  it("updates a service's image: its tasks are replaced", async () => {
    await engine.dockerOk(['tag', 'busybox:latest', 'busybox:v2']);
    await engine.dockerOk(['service', 'update', '--detach', '--update-parallelism', '3', '--update-monitor', '1s', 'web']);
    const detail = page.getByRole('region', { name: 'Service web' });
    await detail.getByLabel('Image of the service').fill('busybox:v2');
    await detail.getByRole('button', { name: 'Update image' }).click();
    // The update's state follows its events (updatestate.new): updating, then completed.
    await detail.getByText(/^completed$/).waitFor({ timeout: 90_000 });
    assert.match(await service('web').innerText(), /\tbusybox:v2\t/);
    const running = (await engine.request('GET', `/tasks?filters=${encodeURIComponent(JSON.stringify({ service: ['web'], 'desired-state': ['running'] }))}`)).json<any[]>();
    assert.equal(running.length, 3);
    for (const t of running) assert.match(t.Spec.ContainerSpec.Image, /^busybox:v2(@|$)/);
    await replicas(service('web'), '3/3').waitFor({ timeout: 60_000 });
  });

  it("shows the engine's refusal to demote the last manager", async () => {
    await nodeRow().getByRole('button', { name: 'Demote' }).click();
    await page.getByRole('alert').getByText(/demote the last manager/).waitFor({ timeout: 20_000 });
    assert.equal(JSON.parse(await engine.dockerOk(['node', 'inspect', 'self']))[0].Spec.Role, 'manager');
    await page.getByRole('alert').getByRole('button', { name: 'Dismiss' }).click();
    assert.equal(await page.getByRole('alert').count(), 0, 'no other error was shown');
  });

  it('removes a service after confirmation', async () => {
    await service('web').getByRole('button', { name: 'Remove' }).click();
    await page.getByRole('dialog', { name: 'Remove web?' }).getByRole('button', { name: 'Remove' }).click();
    await service('web').waitFor({ state: 'detached', timeout: 30_000 });
    assert.equal((await engine.dockerOk(['service', 'ls', '--format', '{{.Name}}'])).trim(), 'edge');
    await engine.dockerOk(['service', 'rm', 'edge']);
    await page.getByText('No services.', { exact: false }).waitFor({ timeout: 10_000 });
  });
});
