import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { mergeUpdate } from './update.js';

const MB = 1024 * 1024;
const base = { Memory: 0, MemorySwap: 0, NanoCpus: 0, CpuPeriod: 0, CpuQuota: 0, PidsLimit: null, RestartPolicy: { Name: 'no', MaximumRetryCount: 0 } };

describe('update merge', () => {
  test('changes what is given and keeps the rest (zero and absent keep)', () => {
    const next = mergeUpdate({ ...base, CpuShares: 512, Memory: 64 * MB }, { Memory: 0, CpuShares: 256, NanoCpus: 1e9 }, false);
    assert.equal(next.Memory, 64 * MB);
    assert.equal(next.CpuShares, 256);
    assert.equal(next.NanoCpus, 1e9);
  });

  test('PidsLimit: null keeps, 0 and -1 lift, a number sets', () => {
    assert.equal(mergeUpdate({ ...base, PidsLimit: 10 }, { PidsLimit: null }, false).PidsLimit, 10);
    assert.equal(mergeUpdate({ ...base, PidsLimit: 10 }, { PidsLimit: -1 }, false).PidsLimit, 0);
    assert.equal(mergeUpdate({ ...base, PidsLimit: 10 }, { PidsLimit: 0 }, false).PidsLimit, 0);
    assert.equal(mergeUpdate(base, { PidsLimit: 20 }, false).PidsLimit, 20);
  });

  test('refuses conflicts with what is set', () => {
    assert.throws(() => mergeUpdate({ ...base, CpuPeriod: 100000 }, { NanoCpus: 5e8 }, false), /CPU Period has already been set/);
    assert.throws(() => mergeUpdate({ ...base, NanoCpus: 5e8 }, { CpuQuota: 50000 }, false), /NanoCPUs has already been set/);
    assert.throws(() => mergeUpdate({ ...base, Memory: 64 * MB, MemorySwap: 128 * MB }, { Memory: 256 * MB }, false), /update the memoryswap at the same time/);
    assert.throws(() => mergeUpdate({ ...base, Memory: 64 * MB }, { MemorySwap: 32 * MB }, false), /memoryswap limit should be larger/);
  });

  test('restart policies: set, validated, refused with AutoRemove', () => {
    assert.deepEqual(mergeUpdate(base, { RestartPolicy: { Name: 'on-failure', MaximumRetryCount: 2 } }, false).RestartPolicy, { Name: 'on-failure', MaximumRetryCount: 2 });
    assert.throws(() => mergeUpdate(base, { RestartPolicy: { Name: 'always', MaximumRetryCount: 2 } }, false), /maximum retry count/);
    assert.throws(() => mergeUpdate(base, { RestartPolicy: { Name: 'always' } }, true), /AutoRemove/);
  });

  test('refuses what it cannot apply rather than ignoring it', () => {
    assert.throws(() => mergeUpdate(base, { Devices: [{ PathOnHost: '/dev/null' }] }, false), /Devices/);
    assert.throws(() => mergeUpdate(base, { CpuRealtimeRuntime: 1000 }, false), /realtime/);
  });
});
