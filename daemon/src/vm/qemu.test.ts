import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { VmConfig } from './driver.js';
import { chooseAccel, hostfwdRule, qemuCommand } from './qemu.js';

const config = (arch: 'amd64' | 'arm64'): VmConfig => ({
  name: 'dev',
  stateDir: '/state',
  image: { arch, kernel: '/img/vmlinuz', initrd: '/img/initrd.img' },
  resources: { cpus: 4, memoryMiB: 4096, diskGiB: 64 },
  shares: [{ hostPath: '/Users/me', guestPath: '/Users/me' }, { hostPath: '/tmp/x', guestPath: '/mnt/x', readOnly: true }],
});
const now = new Date(1_800_000_000_000);

/** The value following a flag, for each time the flag appears. */
function values(args: string[], flag: string): string[] {
  return args.flatMap((a, i) => (a === flag ? [args[i + 1]!] : []));
}

test('the accelerator follows the platform, and TCG for another architecture or a forced choice', () => {
  assert.equal(chooseAccel('amd64', { platform: 'linux', arch: 'x64', kvmUsable: true }), 'kvm');
  assert.equal(chooseAccel('amd64', { platform: 'linux', arch: 'x64', kvmUsable: false }), 'tcg');
  assert.equal(chooseAccel('arm64', { platform: 'darwin', arch: 'arm64' }), 'hvf');
  assert.equal(chooseAccel('amd64', { platform: 'darwin', arch: 'arm64' }), 'tcg');
  assert.equal(chooseAccel('amd64', { platform: 'win32', arch: 'x64' }), 'whpx');
  assert.equal(chooseAccel('amd64', { platform: 'linux', arch: 'x64', kvmUsable: true }, 'tcg'), 'tcg');
  assert.throws(() => chooseAccel('amd64', { platform: 'linux', arch: 'x64' }, 'xen'), /unknown QEMU accelerator/);
});

test('Linux amd64 under TCG: direct kernel boot, the agent port on a chardev socket, 9p shares, data disk, QMP', () => {
  const cmd = qemuCommand(config('amd64'), { host: { platform: 'linux', arch: 'x64', kvmUsable: false }, now });
  assert.equal(cmd.binary, 'qemu-system-x86_64');
  assert.equal(cmd.accel, 'tcg');
  const a = cmd.args;
  assert.deepEqual(values(a, '-accel'), ['tcg,thread=multi']);
  assert.deepEqual(values(a, '-machine'), ['q35']);
  assert.deepEqual(values(a, '-cpu'), ['max']);
  assert.deepEqual(values(a, '-smp'), ['4']);
  assert.deepEqual(values(a, '-m'), ['4096']);
  assert.deepEqual(values(a, '-kernel'), ['/img/vmlinuz']);
  assert.deepEqual(values(a, '-initrd'), ['/img/initrd.img']);
  assert.equal(
    values(a, '-append')[0],
    'console=ttyS0 panic=-1 quiet berth.agent=port:org.berth.agent berth.share=berth0:9p:/Users/me berth.share=berth1:9p:/mnt/x:ro berth.net=qemu-user berth.time=1800000000',
  );
  assert.ok(values(a, '-chardev').includes('socket,id=agent,path=/state/agent.sock,server=on,wait=off'));
  assert.ok(values(a, '-device').includes('virtserialport,chardev=agent,name=org.berth.agent'));
  assert.deepEqual(values(a, '-fsdev'), ['local,id=fs0,path=/Users/me,security_model=none', 'local,id=fs1,path=/tmp/x,security_model=none,readonly=on']);
  assert.ok(values(a, '-device').includes('virtio-9p-pci,fsdev=fs1,mount_tag=berth1'));
  assert.deepEqual(values(a, '-drive'), ['file=/state/data.raw,if=none,id=data,format=raw,discard=unmap,cache=writeback']);
  assert.deepEqual(values(a, '-qmp'), ['unix:/state/qmp.sock,server=on,wait=off']);
  assert.deepEqual(values(a, '-pidfile'), ['/state/qemu.pid']);
  assert.ok(a.includes('-no-reboot') && a.includes('-nodefaults'));
  assert.equal(cmd.agentSocket, '/state/agent.sock');
});

test('macOS arm64 with HVF, Windows with WHPX, Linux with KVM', () => {
  const mac = qemuCommand(config('arm64'), { host: { platform: 'darwin', arch: 'arm64' }, now });
  assert.equal(mac.binary, 'qemu-system-aarch64');
  assert.deepEqual(values(mac.args, '-accel'), ['hvf']);
  assert.deepEqual(values(mac.args, '-cpu'), ['host']);
  assert.deepEqual(values(mac.args, '-machine'), ['virt']);
  assert.match(values(mac.args, '-append')[0]!, /^console=ttyAMA0 /);
  const win = qemuCommand(config('amd64'), { host: { platform: 'win32', arch: 'x64' }, now });
  assert.equal(win.binary, 'qemu-system-x86_64.exe');
  assert.deepEqual(values(win.args, '-accel'), ['whpx,kernel-irqchip=off']);
  assert.deepEqual(values(win.args, '-cpu'), ['max']);
  const kvm = qemuCommand(config('amd64'), { host: { platform: 'linux', arch: 'x64', kvmUsable: true }, now, network: false });
  assert.deepEqual(values(kvm.args, '-accel'), ['kvm']);
  assert.deepEqual(values(kvm.args, '-cpu'), ['host']);
  assert.deepEqual(values(kvm.args, '-netdev'), []);
  assert.doesNotMatch(values(kvm.args, '-append')[0]!, /berth\.net/);
});

test('resources are checked', () => {
  assert.throws(() => qemuCommand({ ...config('amd64'), resources: { cpus: 0, memoryMiB: 1024, diskGiB: 8 } }), /cpus/);
  assert.throws(() => qemuCommand({ ...config('amd64'), resources: { cpus: 1, memoryMiB: 64, diskGiB: 8 } }), /memory/);
  assert.throws(() => qemuCommand({ ...config('amd64'), shares: [{ hostPath: '/a b', guestPath: '/a b' }] }), /space/);
});

test('port forwards in hostfwd syntax, on the host loopback only', () => {
  assert.equal(hostfwdRule({ protocol: 'tcp', hostPort: 8080, guestPort: 80 }), 'tcp:127.0.0.1:8080-:80');
  assert.equal(hostfwdRule({ protocol: 'udp', hostPort: 5353, guestPort: 53 }), 'udp:127.0.0.1:5353-:53');
  assert.throws(() => hostfwdRule({ protocol: 'tcp', hostPort: 0, guestPort: 80 }), /not a port/);
  const cmd = qemuCommand(
    { name: 'x', stateDir: '/s', image: { arch: 'amd64', kernel: '/k', initrd: '/i' }, resources: { cpus: 1, memoryMiB: 512, diskGiB: 1 }, shares: [] },
    { host: { platform: 'linux', arch: 'x64' }, hostForwards: [{ hostPort: 40000, guestPort: 2375, engine: true }] },
  );
  assert.deepEqual(values(cmd.args, '-netdev'), ['user,id=net0,hostfwd=tcp:127.0.0.1:40000-:2375']);
  assert.match(values(cmd.args, '-append')[0]!, / berth\.engine=2375 /);
  const rooted = qemuCommand(
    { name: 'x', stateDir: '/s', image: { arch: 'amd64', kernel: '/k', initrd: '/i' }, resources: { cpus: 1, memoryMiB: 512, diskGiB: 1 }, shares: [], guestDataRoot: '/Users/me/.berth/data' },
    { host: { platform: 'linux', arch: 'x64' } },
  );
  assert.match(values(rooted.args, '-append')[0]!, / berth\.dataroot=\/Users\/me\/\.berth\/data /);
});
