import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseBlkio, parseCgroupMounts, parseIoStat, parseNetDev, parseProcCgroup, parseSystemCpu } from './stats.js';

test('cgroup mounts and a process cgroup file (v1 with a v2 mount beside)', () => {
  const mounts = parseCgroupMounts([
    '32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu',
    '35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory',
    '41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw',
  ].join('\n'));
  assert.equal(mounts.v1.get('memory')?.mountPoint, '/sys/fs/cgroup/memory');
  assert.equal(mounts.v2?.mountPoint, '/sys/fs/cgroup/unified');
  const paths = parseProcCgroup('4:memory:/berth/abc\n2:cpu,cpuacct:/berth/abc\n0::/\n');
  assert.equal(paths.get('memory'), '/berth/abc');
  assert.equal(paths.get('cpuacct'), '/berth/abc');
  assert.equal(paths.get(''), '/');
});

test('blkio, io.stat, net/dev and /proc/stat', () => {
  assert.deepEqual(parseBlkio('8:0 Read 4096\n8:0 Write 0\nTotal 4096\n'), [
    { major: 8, minor: 0, op: 'Read', value: 4096 },
    { major: 8, minor: 0, op: 'Write', value: 0 },
  ]);
  const io = parseIoStat('8:0 rbytes=10 wbytes=20 rios=1 wios=2 dbytes=0 dios=0\n');
  assert.deepEqual(io.bytes.map((e) => e.value), [10, 20]);
  assert.deepEqual(io.ios.map((e) => e.value), [1, 2]);
  const net = parseNetDev([
    'Inter-|   Receive                                                |  Transmit',
    ' face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed',
    '    lo:     100       1    0    0    0     0          0         0      100       1    0    0    0     0       0          0',
    '  eth0:     486       5    0    1    0     0          0         0      266       3    0    2    0     0       0          0',
  ].join('\n'));
  assert.deepEqual(Object.keys(net), ['eth0']);
  assert.equal(net.eth0.rx_bytes, 486);
  assert.equal(net.eth0.rx_dropped, 1);
  assert.equal(net.eth0.tx_packets, 3);
  assert.equal(net.eth0.tx_dropped, 2);
  assert.equal(parseSystemCpu('cpu  1 2 3 4 5 6 7 8 9 10\ncpu0 1 1 1 1 1 1 1\n'), 28 * 1e7);
});
