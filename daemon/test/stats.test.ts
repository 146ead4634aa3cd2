/**
 * docker stats against a real berthd: numbers read from the container's cgroups compared with what the
 * container does (a busy loop shows CPU, a file in /dev/shm shows memory), the stream cadence and end,
 * stopped containers, and the per-version shape.
 */
import assert from 'node:assert/strict';
import http from 'node:http';
import { describe, test } from 'node:test';
import { expectConforms } from './contract/openapi.js';
import { useEngine } from './harness.js';

const engine = useEngine();

type Frame = Record<string, any>;

function cpuPercent(f: Frame): number {
  const cpuDelta = f.cpu_stats.cpu_usage.total_usage - f.precpu_stats.cpu_usage.total_usage;
  const systemDelta = f.cpu_stats.system_cpu_usage - f.precpu_stats.system_cpu_usage;
  return systemDelta > 0 ? (cpuDelta / systemDelta) * f.cpu_stats.online_cpus * 100 : 0;
}

/** Reads `count` frames of a streaming stats request (or until it ends), with their arrival times. */
function streamFrames(urlPath: string, count: number, onFrame?: (n: number) => void): Promise<{ frames: Frame[]; times: number[]; ended: boolean }> {
  return new Promise((resolve, reject) => {
    const frames: Frame[] = [];
    const times: number[] = [];
    const req = http.request({ socketPath: engine.socket, path: urlPath, method: 'GET' }, (res) => {
      let buf = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        buf += chunk;
        let nl;
        while ((nl = buf.indexOf('\n')) >= 0) {
          const line = buf.slice(0, nl);
          buf = buf.slice(nl + 1);
          if (!line.trim()) continue;
          frames.push(JSON.parse(line));
          times.push(Date.now());
          onFrame?.(frames.length);
          if (frames.length >= count) {
            req.destroy();
            resolve({ frames, times, ended: false });
          }
        }
      });
      res.on('end', () => resolve({ frames, times, ended: true }));
    });
    req.on('error', (err) => (frames.length >= count ? undefined : reject(err)));
    req.end();
  });
}

describe('container stats', () => {
  test('stream=false gives one full frame with the previous sample as precpu_stats', async () => {
    const id = (await engine.dockerOk(['run', '-d', '--name', 'stats-one', 'busybox', 'sleep', '600'])).trim();
    const res = await engine.request('GET', `/containers/${id}/stats?stream=false`);
    assert.equal(res.status, 200);
    const f = res.json();
    assert.equal(f.name, '/stats-one');
    assert.equal(f.id, id);
    assert.ok(Date.parse(f.read) - Date.parse(f.preread) >= 900, `read ${f.read} is about a second after preread ${f.preread}`);
    assert.ok(f.cpu_stats.cpu_usage.total_usage > 0);
    assert.ok(f.precpu_stats.cpu_usage.total_usage > 0);
    assert.ok(f.cpu_stats.system_cpu_usage > f.precpu_stats.system_cpu_usage);
    assert.equal(f.cpu_stats.online_cpus, (await import('node:os')).cpus().length);
    assert.ok(Array.isArray(f.cpu_stats.cpu_usage.percpu_usage));
    assert.deepEqual(Object.keys(f.cpu_stats.throttling_data).sort(), ['periods', 'throttled_periods', 'throttled_time']);
    assert.ok(f.memory_stats.usage > 0 && f.memory_stats.limit > 0 && 'stats' in f.memory_stats);
    assert.equal(f.pids_stats.current, 1);
    assert.ok(f.networks.eth0.rx_bytes >= 0 && 'tx_packets' in f.networks.eth0);
    assert.ok(!('lo' in f.networks));
    assert.ok('io_service_bytes_recursive' in f.blkio_stats);
    assert.equal(f.os_type, 'linux');
  });

  test('one-shot answers at once with a single sample', async () => {
    const id = (await engine.dockerOk(['run', '-d', 'busybox', 'sleep', '600'])).trim();
    const start = Date.now();
    const f = (await engine.request('GET', `/containers/${id}/stats?stream=false&one-shot=true`)).json();
    assert.ok(Date.now() - start < 900, 'no second sample is waited for');
    assert.equal(f.preread, '0001-01-01T00:00:00Z');
    assert.equal(f.precpu_stats.cpu_usage.total_usage, 0);
    assert.ok(f.cpu_stats.cpu_usage.total_usage > 0);
  });

  test('a busy loop shows CPU use, an idle container almost none', async () => {
    const busy = (await engine.dockerOk(['run', '-d', 'busybox', 'sh', '-c', 'while :; do :; done'])).trim();
    const idle = (await engine.dockerOk(['run', '-d', 'busybox', 'sleep', '600'])).trim();
    await new Promise((r) => setTimeout(r, 1000));
    const busyFrame = (await engine.request('GET', `/containers/${busy}/stats?stream=false`)).json();
    const idleFrame = (await engine.request('GET', `/containers/${idle}/stats?stream=false`)).json();
    assert.ok(cpuPercent(busyFrame) > 25, `busy loop at ${cpuPercent(busyFrame).toFixed(1)}%`);
    assert.ok(cpuPercent(idleFrame) < 5, `idle at ${cpuPercent(idleFrame).toFixed(1)}%`);
    const row = await engine.dockerOk(['stats', '--no-stream', '--format', '{{.ID}} {{.CPUPerc}}', busy]);
    const pct = Number(/ ([\d.]+)%/.exec(row)?.[1]);
    assert.ok(pct > 25, `docker stats shows ${row.trim()}`);
    await engine.dockerOk(['rm', '-f', busy]);
  });

  test('memory: usage follows what the container holds, the limit is the container\'s', async () => {
    const id = (await engine.dockerOk(['run', '-d', '-m', '256m', 'busybox', 'sh', '-c', 'dd if=/dev/zero of=/dev/shm/fill bs=1M count=48 2>/dev/null; echo filled; sleep 600'])).trim();
    for (let i = 0; i < 50 && !(await engine.dockerOk(['logs', id])).includes('filled'); i++) await new Promise((r) => setTimeout(r, 100));
    const f = (await engine.request('GET', `/containers/${id}/stats?stream=false&one-shot=1`)).json();
    const mib = f.memory_stats.usage / 2 ** 20;
    assert.ok(mib >= 48 && mib < 48 + 32, `usage ${mib.toFixed(1)} MiB with 48 MiB held`);
    assert.equal(f.memory_stats.limit, 256 * 2 ** 20);
    assert.ok(f.memory_stats.max_usage >= f.memory_stats.usage);
    const row = await engine.dockerOk(['stats', '--no-stream', '--format', '{{.MemUsage}}', id]);
    assert.match(row, /^(4[89]|[5-7]\d)(\.\d+)?MiB \/ 256MiB$/m);
  });

  test('streams one frame a second, each with the previous as precpu, and ends when the container stops', async () => {
    const id = (await engine.dockerOk(['run', '-d', 'busybox', 'sleep', '600'])).trim();
    const three = await streamFrames(`/containers/${id}/stats`, 3);
    assert.equal(three.frames.length, 3);
    assert.equal(three.frames[0].preread, '0001-01-01T00:00:00Z');
    for (let i = 1; i < 3; i++) {
      const gap = three.times[i] - three.times[i - 1];
      assert.ok(gap > 700 && gap < 2000, `frame ${i} came ${gap} ms after the previous`);
      assert.equal(three.frames[i].preread, three.frames[i - 1].read);
      assert.equal(three.frames[i].precpu_stats.cpu_usage.total_usage, three.frames[i - 1].cpu_stats.cpu_usage.total_usage);
    }
    let stopped = false;
    const tail = await streamFrames(`/containers/${id}/stats?stream=1`, 100, (n) => {
      if (n === 1 && !stopped) {
        stopped = true;
        void engine.dockerOk(['kill', id]);
      }
    });
    assert.equal(tail.ended, true, 'the stream ends');
    assert.equal(tail.frames.at(-1)!.read, '0001-01-01T00:00:00Z', 'with a zeroed frame');
  });

  test('a stopped container gives one zeroed frame and the stream ends', async () => {
    const id = (await engine.dockerOk(['create', '--name', 'stats-created', 'busybox', 'true'])).trim();
    const r = await streamFrames(`/containers/${id}/stats`, 10);
    assert.equal(r.ended, true);
    assert.equal(r.frames.length, 1);
    const f = r.frames[0];
    assert.equal(f.name, '/stats-created');
    assert.equal(f.read, '0001-01-01T00:00:00Z');
    assert.equal(f.cpu_stats.cpu_usage.total_usage, 0);
    assert.deepEqual(f.memory_stats, {});
    const cli = await engine.dockerOk(['stats', '--no-stream', '--format', '{{.Name}} {{.CPUPerc}} {{.MemUsage}}', id]);
    assert.equal(cli.trim(), 'stats-created 0.00% 0B / 0B');
    assert.equal((await engine.request('GET', '/containers/no-such/stats?stream=false')).status, 404);
  });

  test('the frame shape follows the API version', async () => {
    const id = (await engine.dockerOk(['run', '-d', 'busybox', 'sleep', '600'])).trim();
    const get = async (v: string) => (await engine.request('GET', `/v${v}/containers/${id}/stats?stream=false&one-shot=1`)).json();
    assert.equal((await get('1.52')).os_type, 'linux');
    assert.ok(!('os_type' in (await get('1.51'))));
    const old = await get('1.26');
    assert.ok(!('online_cpus' in old.cpu_stats));
    assert.ok('online_cpus' in (await get('1.27')).cpu_stats);
  });

  test('docker stats --no-stream lists every running container; dockerode reads the stream', async () => {
    const out = await engine.dockerOk(['stats', '--no-stream', '--format', '{{.Name}}']);
    assert.ok(out.includes('stats-one'));
    const container = engine.dockerode().getContainer('stats-one');
    const frame = (await container.stats({ stream: false })) as unknown as Frame;
    assert.equal(frame.name, '/stats-one');
  });

  test('frames conform to the published schema of each version, running and stopped', async () => {
    const running = (await engine.dockerOk(['run', '-d', 'busybox', 'sleep', '600'])).trim();
    const created = (await engine.dockerOk(['create', 'busybox', 'true'])).trim();
    for (const v of ['1.25', '1.30', '1.41', '1.44', '1.52', '1.53']) {
      for (const id of [running, created]) {
        const res = await engine.request('GET', `/v${v}/containers/${id}/stats?stream=false&one-shot=true`);
        assert.equal(res.status, 200);
        await expectConforms(v, 'get', '/containers/{id}/stats', 200, res.json());
      }
    }
  });

  test('the streaming view of docker stats keeps refreshing the row', async () => {
    const id = (await engine.dockerOk(['run', '-d', '--name', 'stats-live', 'busybox', 'sh', '-c', 'while :; do :; done'])).trim();
    const r = await engine.docker(['stats', '--format', '{{.Name}} {{.CPUPerc}}', id], { timeoutMs: 4500 });
    const rows = r.stdout.split(/\r?\n|\x1b\[[0-9;]*[A-Za-z]/).filter((l) => l.startsWith('stats-live '));
    assert.ok(rows.length >= 2, `rows: ${JSON.stringify(r.stdout.slice(0, 500))}`);
    assert.ok(rows.some((l) => Number(/ ([\d.]+)%/.exec(l)?.[1]) > 20), rows.join(' | '));
    await engine.dockerOk(['rm', '-f', id]);
  });
});
