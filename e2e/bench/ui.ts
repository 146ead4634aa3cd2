/**
 * The UI benchmark, against a real berthd --ui in Chromium:
 *   - with N containers (default 500), the time from navigation to the painted container list (target < 500 ms);
 *   - the time from a `docker run` to its row, and from the engine's `create` event to the row (target < 100 ms);
 *   - the page's CPU time over 30 idle seconds (target: near zero; the app does not poll).
 *
 *   node e2e/dist/bench/ui.js [--containers 500] [--idle 30] [--runs 5]
 *
 * Everything it starts (engine, containers, browser) is removed at the end.
 */
import http from 'node:http';
import { parseArgs } from 'node:util';
import { launchChromium, loadHarness, startEngineWithUi } from '../src/support.js';

const { values } = parseArgs({
  options: { containers: { type: 'string', default: '500' }, idle: { type: 'string', default: '30' }, runs: { type: 'string', default: '5' } },
});
const N = Number(values.containers);
const IDLE_S = Number(values.idle);
const RUNS = Number(values.runs);

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const fmt = (ms: number) => `${ms.toFixed(0)} ms`;

async function main(): Promise<void> {
  const harness = await loadHarness();
  const { engine, loginUrl, baseUrl } = await startEngineWithUi(harness);
  const browser = await launchChromium();
  // Ctrl-C (or a timeout's SIGTERM) still removes the engine, its containers and the browser.
  const abort = async () => {
    await browser.close().catch(() => undefined);
    await engine.cleanup();
    process.exit(130);
  };
  process.once('SIGINT', abort);
  process.once('SIGTERM', abort);
  try {
    await engine.loadBusybox();
    process.stderr.write(`creating ${N} containers…\n`);
    let next = 0;
    await Promise.all(
      Array.from({ length: 8 }, async () => {
        while (next < N) {
          const i = next++;
          const res = await engine.request('POST', `/containers/create?name=bench-${i}`, {
            body: { Image: 'busybox', Cmd: ['true'], Labels: i % 5 === 0 ? { 'com.docker.compose.project': `proj${i % 3}` } : {}, HostConfig: { NetworkMode: 'none' } },
          });
          if (res.status !== 201) throw new Error(`create: ${res.status} ${res.text}`);
        }
      }),
    );

    const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    const page = await context.newPage();
    await page.goto(loginUrl);
    await page.getByRole('heading', { name: 'Containers' }).waitFor();

    // Navigation to painted list: a fresh load each time; the page reports when the rows are in and painted.
    // Beside the wall-clock time, the page's main-thread work over the same span (less sensitive to a busy machine).
    const loadCdp = await context.newCDPSession(page);
    await loadCdp.send('Performance.enable');
    const mainThreadMs = async () => ((await loadCdp.send('Performance.getMetrics')).metrics.find((m) => m.name === 'TaskDuration')?.value ?? NaN) * 1000;
    const works: number[] = [];
    const paints: number[] = [];
    const fetches: number[] = [];
    const fetchEnds: number[] = [];
    for (let run = 0; run < RUNS; run++) {
      await page.goto('about:blank');
      const workBefore = await mainThreadMs();
      await page.goto(`${baseUrl}#/containers`);
      const ms = await page.evaluate(
        (n) =>
          new Promise<[number, number, number]>((resolve) => {
            // The list is windowed: it is painted when the table holds all N and shows its first rows.
            const check = () => {
              if (document.querySelector(`[data-testid=containers][data-total="${n}"] tr[data-name]`)) {
                requestAnimationFrame(() =>
                  requestAnimationFrame(() => {
                    const list = performance.getEntriesByType('resource').find((e) => e.name.includes('/containers/json')) as PerformanceResourceTiming | undefined;
                    resolve([performance.now(), list ? list.responseEnd - list.startTime : NaN, list ? list.responseEnd : NaN]);
                  }),
                );
                return true;
              }
              return false;
            };
            if (!check()) {
              const obs = new MutationObserver(() => check() && obs.disconnect());
              obs.observe(document.body, { childList: true, subtree: true });
            }
          }),
        N,
      );
      paints.push(ms[0]);
      // A load that moved the page to a new renderer process restarts the counter: that run's figure is unknown.
      const work = (await mainThreadMs()) - workBefore;
      works.push(work >= 0 ? work : NaN);
      fetches.push(ms[1]);
      fetchEnds.push(ms[2]);
    }
    await page.getByLabel('events live').waitFor();

    // docker run -> row: the event's arrival is observed beside the page by a separate /events subscriber.
    const eventTimes = new Map<string, number>();
    const events = http.get({ socketPath: engine.socket, path: '/events?filters=' + encodeURIComponent('{"type":["container"],"event":["create"]}') }, (res) => {
      let rest = '';
      res.on('data', (c: Buffer) => {
        rest += c.toString();
        let nl;
        while ((nl = rest.indexOf('\n')) >= 0) {
          const ev = JSON.parse(rest.slice(0, nl));
          rest = rest.slice(nl + 1);
          eventTimes.set(ev.Actor?.Attributes?.name, Date.now());
        }
      });
    });
    await new Promise((r) => setTimeout(r, 300));
    // The new rows are looked for the way a user would among 500: with the search box.
    await page.getByLabel('Search containers').fill('bench-run-');
    const fromRun: number[] = [];
    const fromEvent: number[] = [];
    for (let run = 0; run < RUNS; run++) {
      const name = `bench-run-${run}`;
      const seen = page.evaluate(
        (name) =>
          new Promise<number>((resolve) => {
            const obs = new MutationObserver(() => {
              if (document.querySelector(`tr[data-name="${name}"]`)) {
                obs.disconnect();
                requestAnimationFrame(() => resolve(Date.now()));
              }
            });
            obs.observe(document.body, { childList: true, subtree: true });
          }),
        name,
      );
      const started = Date.now();
      await engine.dockerOk(['run', '-d', '--network', 'none', '--name', name, 'busybox', 'sleep', '300']);
      const rowAt = await seen;
      fromRun.push(rowAt - started);
      fromEvent.push(rowAt - (eventTimes.get(name) ?? NaN));
    }
    events.destroy();

    // Idle: nothing focused (a focused input's blinking caret is the browser's own work), then the page's main-thread task time over IDLE_S seconds with nothing happening.
    await page.evaluate(() => (document.activeElement as HTMLElement | null)?.blur());
    const cdp = await context.newCDPSession(page);
    await cdp.send('Performance.enable');
    const taskSeconds = async () => ((await cdp.send('Performance.getMetrics')).metrics.find((m) => m.name === 'TaskDuration')?.value ?? NaN);
    // Let the refetches that followed the last run settle first.
    await new Promise((r) => setTimeout(r, 3000));
    const before = await taskSeconds();
    await new Promise((r) => setTimeout(r, IDLE_S * 1000));
    const idleCpuMs = ((await taskSeconds()) - before) * 1000;

    const out = [
      `containers in the list:                       ${N}`,
      `navigation -> painted list (median of ${RUNS}):     ${fmt(median(paints))}   (all: ${paints.map(fmt).join(', ')}; target < 500 ms)`,
      `  of which GET /containers/json (median):     ${fmt(median(fetches))}, answered at ${fmt(median(fetchEnds))} after navigation`,
      `  the page's main-thread work (median):       ${works.some(Number.isFinite) ? fmt(median(works.filter(Number.isFinite))) : 'n/a'}   (all: ${works.map((w) => (Number.isFinite(w) ? fmt(w) : 'n/a')).join(', ')})`,
      `docker run -> row (median):                   ${fmt(median(fromRun))}`,
      `create event -> row painted (median):         ${fmt(median(fromEvent))}   (all: ${fromEvent.map(fmt).join(', ')}; target < 100 ms)`,
      `page CPU over ${IDLE_S} s idle:                     ${idleCpuMs.toFixed(1)} ms   (${((idleCpuMs / (IDLE_S * 1000)) * 100).toFixed(3)} %; target near zero)`,
    ];
    process.stdout.write(out.join('\n') + '\n');
  } finally {
    await browser.close();
    await engine.cleanup();
  }
}

main().catch((err) => {
  process.stderr.write(`${(err as Error).stack}\n`);
  process.exit(1);
});
