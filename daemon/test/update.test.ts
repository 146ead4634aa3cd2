/**
 * docker update against a real berthd: new limits reach the live cgroup (read back from the cgroup files
 * of this cgroup v1 host) and are kept in HostConfig, a stopped container gets them at its next start,
 * restart policies change, and bad or conflicting values are refused with 400.
 */
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { describe, test } from 'node:test';
import { useEngine } from './harness.js';

const engine = useEngine();

/** A cgroup file of the container (v1 layout; v2 keeps them all under the unified root). */
function cgroupFile(id: string, controller: string, v1File: string, v2File: string): string {
  const v1 = `/sys/fs/cgroup/${controller}/berth/${id}/${v1File}`;
  if (existsSync(v1)) return readFileSync(v1, 'utf8').trim();
  return readFileSync(`/sys/fs/cgroup/berth/${id}/${v2File}`, 'utf8').trim();
}

async function hostConfig(id: string): Promise<Record<string, any>> {
  return (await engine.request('GET', `/containers/${id}/json`)).json().HostConfig;
}

describe('docker update', () => {
  test('applies memory, cpus and pids limits to the running container and keeps them', async () => {
    const id = (await engine.dockerOk(['run', '-d', 'busybox', 'sleep', '600'])).trim();
    await engine.dockerOk(['update', '--memory', '64m', '--memory-swap', '128m', '--cpus', '0.5', '--pids-limit', '50', '--cpu-shares', '512', id]);
    assert.equal(cgroupFile(id, 'memory', 'memory.limit_in_bytes', 'memory.max'), String(64 * 1024 * 1024));
    assert.match(cgroupFile(id, 'cpu', 'cpu.cfs_quota_us', 'cpu.max'), /^50000\b/);
    assert.equal(cgroupFile(id, 'pids', 'pids.max', 'pids.max'), '50');
    const hc = await hostConfig(id);
    assert.equal(hc.Memory, 64 * 1024 * 1024);
    assert.equal(hc.MemorySwap, 128 * 1024 * 1024);
    assert.equal(hc.NanoCpus, 500_000_000);
    assert.equal(hc.PidsLimit, 50);
    assert.equal(hc.CpuShares, 512);

    // The pids limit is enforced by the kernel: the container cannot start more processes than it allows.
    await engine.dockerOk(['update', '--pids-limit', '3', id]);
    const fork = await engine.docker(['exec', id, 'sh', '-c', 'for i in 1 2 3 4 5; do sleep 5 & done; wait']);
    assert.notEqual(fork.code, 0);

    // 0 and -1 lift the pids limit.
    assert.equal((await engine.request('POST', `/containers/${id}/update`, { body: { PidsLimit: -1 } })).status, 200);
    assert.equal(cgroupFile(id, 'pids', 'pids.max', 'pids.max'), 'max');
    assert.equal((await hostConfig(id)).PidsLimit, 0);
    await engine.dockerOk(['rm', '-f', id]);
  });

  test('a stopped container keeps the new limits and gets them when it starts', async () => {
    const id = (await engine.dockerOk(['create', 'busybox', 'sleep', '600'])).trim();
    const r = await engine.request('POST', `/containers/${id}/update`, { body: { Memory: 32 * 1024 * 1024, MemorySwap: -1 } });
    assert.equal(r.status, 200, r.text);
    assert.deepEqual(r.json(), { Warnings: [] });
    await engine.dockerOk(['start', id]);
    assert.equal(cgroupFile(id, 'memory', 'memory.limit_in_bytes', 'memory.max'), String(32 * 1024 * 1024));
    await engine.dockerOk(['rm', '-f', id]);
  });

  test('changes the restart policy', async () => {
    const id = (await engine.dockerOk(['run', '-d', 'busybox', 'sleep', '600'])).trim();
    await engine.dockerOk(['update', '--restart', 'on-failure:3', id]);
    assert.deepEqual((await hostConfig(id)).RestartPolicy, { Name: 'on-failure', MaximumRetryCount: 3 });
    const auto = (await engine.dockerOk(['run', '-d', '--rm', 'busybox', 'sleep', '600'])).trim();
    const refused = await engine.request('POST', `/containers/${auto}/update`, { body: { RestartPolicy: { Name: 'always' } } });
    assert.equal(refused.status, 400);
    assert.match(refused.json().message, /AutoRemove/);
    await engine.dockerOk(['rm', '-f', id, auto]);
  });

  test('refuses bad and conflicting values with 400, unknown containers with 404', async () => {
    const id = (await engine.dockerOk(['run', '-d', '--cpu-period', '100000', 'busybox', 'sleep', '600'])).trim();
    const cases: Array<[unknown, RegExp]> = [
      [{ Memory: 1024 * 1024 }, /Minimum memory limit allowed is 6MB/],
      [{ Memory: 64 * 1024 * 1024, MemorySwap: 32 * 1024 * 1024 }, /memoryswap limit should be larger than memory limit/],
      [{ BlkioWeight: 5 }, /blkio weight/],
      [{ CpuPeriod: 10 }, /CPU cfs period/],
      [{ NanoCpus: 500_000_000 }, /Nano CPUs cannot be updated as CPU Period has already been set/],
      [{ Memory: 'lots' }, /Memory/],
      [{ RestartPolicy: { Name: 'sometimes' } }, /restart policy/],
      [{ Devices: [{ PathOnHost: '/dev/null', PathInContainer: '/dev/x', CgroupPermissions: 'rwm' }] }, /Devices/],
      ['not an object', /JSON object/],
    ];
    for (const [body, message] of cases) {
      const r = await engine.request('POST', `/containers/${id}/update`, { body: typeof body === 'string' ? JSON.stringify(body) : body, headers: { 'Content-Type': 'application/json' } });
      assert.equal(r.status, 400, `${JSON.stringify(body)}: ${r.text}`);
      assert.match(r.json().message, message);
    }
    const bad = await engine.docker(['update', '--memory', '1m', id]);
    assert.notEqual(bad.code, 0);
    assert.match(bad.stderr, /Minimum memory limit allowed is 6MB/);
    assert.equal((await engine.request('POST', '/containers/no-such/update', { body: { Memory: 64 * 1024 * 1024 } })).status, 404);
    // Nothing was changed by the refused updates.
    assert.equal((await hostConfig(id)).Memory, 0);
    await engine.dockerOk(['rm', '-f', id]);
  });

  test('publishes an update event', async () => {
    const id = (await engine.dockerOk(['run', '-d', 'busybox', 'sleep', '600'])).trim();
    const since = Math.floor(Date.now() / 1000) - 1;
    await engine.dockerOk(['update', '--cpu-shares', '256', id]);
    const until = Math.floor(Date.now() / 1000) + 1;
    const r = await engine.request('GET', `/events?since=${since}&until=${until}&filters=${encodeURIComponent(JSON.stringify({ container: [id], event: ['update'] }))}`);
    assert.equal(r.text.trim().split('\n').filter(Boolean).length, 1);
    await engine.dockerOk(['rm', '-f', id]);
  });
});
