import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { loadEngineId, parseMemTotal, parseOsRelease, parseProcCgroups, parseToolVersion, readComponentVersions, readDriverStatus, readHostInfo } from './info.js';

test('parsers: os-release, meminfo, /proc/cgroups, tool versions', () => {
  assert.deepEqual(parseOsRelease('PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nVERSION_ID="12"\nID=debian\n# c\n'), {
    PRETTY_NAME: 'Debian GNU/Linux 12 (bookworm)',
    VERSION_ID: '12',
    ID: 'debian',
  });
  assert.equal(parseMemTotal('MemTotal:       24684096 kB\nMemFree: 1 kB\n'), 24684096 * 1024);
  assert.deepEqual([...parseProcCgroups('#subsys_name\thierarchy\tnum_cgroups\tenabled\ncpu\t1\t2\t1\nmemory\t4\t22\t0\n')], ['cpu']);
  assert.deepEqual(parseToolVersion('crun version 1.8.1\ncommit: f8a0\nspec: 1.0.0\n'), { version: '1.8.1', commit: 'f8a0' });
  assert.deepEqual(parseToolVersion('conmon version 2.1.6\ncommit: unknown\n'), { version: '2.1.6', commit: 'unknown' });
  assert.equal(parseToolVersion('nothing here'), undefined);
});

test('readHostInfo reports this machine', async () => {
  const info = await readHostInfo({ runtimes: ['crun', 'runc', 'no-such-runtime'], defaultRuntime: 'crun' });
  assert.equal(info.kernelVersion, os.release());
  assert.equal(info.architecture, os.machine());
  assert.equal(info.ncpu, os.availableParallelism());
  assert.equal(info.hostname, os.hostname());
  assert.equal(info.memTotal, parseMemTotal(readFileSync('/proc/meminfo', 'utf8')));
  assert.match(info.operatingSystem, /\S/);
  assert.ok(info.cgroupVersion === '1' || info.cgroupVersion === '2');
  assert.ok(!info.runtimes.includes('no-such-runtime'));
  assert.equal(info.capabilities?.ipv4Forwarding, readFileSync('/proc/sys/net/ipv4/ip_forward', 'utf8').trim() === '1');
});

test('readComponentVersions leaves out missing tools', async () => {
  const found = await readComponentVersions(['no-such-tool-berth', 'crun']);
  assert.equal(found.some((c) => c.name === 'no-such-tool-berth'), false);
});

test('the engine id is created once and kept', async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'berth-info-'));
  try {
    const id = await loadEngineId(dir);
    assert.match(id, /^[0-9a-f-]{36}$/);
    assert.equal(await loadEngineId(dir), id);
    assert.equal((await readDriverStatus(dir))[0][0], 'Backing Filesystem');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
