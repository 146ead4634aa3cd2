import assert from 'node:assert/strict';
import { test } from 'node:test';
import { vfkitCommand, vfkitState, vfkitStateRequest } from './vfkit.js';

const now = new Date(1_800_000_000_000);

test('vfkit: Linux boot loader with the uncompressed Image, vsock agent port, virtiofs shares, no Rosetta', () => {
  const cmd = vfkitCommand(
    {
      name: 'dev',
      stateDir: '/Users/me/Library/Application Support/Berth/vm',
      image: { arch: 'arm64', kernel: '/img/vmlinuz', initrd: '/img/initrd.img' },
      resources: { cpus: 4, memoryMiB: 4096, diskGiB: 64 },
      shares: [{ hostPath: '/Users/me', guestPath: '/Users/me' }],
    },
    { now },
  );
  const state = '/Users/me/Library/Application Support/Berth/vm';
  assert.deepEqual(cmd.args, [
    '--cpus', '4',
    '--memory', '4096',
    '--bootloader',
    'linux,kernel=/img/Image,initrd=/img/initrd.img,cmdline="console=hvc0 panic=-1 quiet berth.agent=vsock:1024 berth.share=berth0:virtiofs:/Users/me berth.net=dhcp berth.time=1800000000"',
    '--device', `virtio-blk,path=${state}/data.raw`,
    '--device', `virtio-vsock,port=1024,socketURL=${state}/agent.sock,connect`,
    '--device', 'virtio-fs,sharedDir=/Users/me,mountTag=berth0',
    '--device', 'virtio-net,nat',
    '--device', `virtio-serial,logFilePath=${state}/console.log`,
    '--device', 'virtio-rng',
    '--device', 'virtio-balloon',
    '--restful-uri', `unix://${state}/vfkit.sock`,
  ]);
  assert.ok(!cmd.args.some((a) => a.startsWith('rosetta')));
  assert.equal(cmd.agentSocket, `${state}/agent.sock`);
});

test('vfkit: socket paths beyond macOS limit are refused; REST state requests and answers', () => {
  assert.throws(
    () => vfkitCommand({ name: 'x', stateDir: '/' + 'a'.repeat(100), image: { arch: 'arm64', kernel: '/k', initrd: '/i' }, resources: { cpus: 1, memoryMiB: 512, diskGiB: 1 }, shares: [] }),
    /longer than macOS allows/,
  );
  assert.deepEqual(vfkitStateRequest(), { method: 'GET', path: '/vm/state' });
  assert.deepEqual(vfkitStateRequest('Stop'), { method: 'POST', path: '/vm/state', body: '{"state":"Stop"}' });
  assert.equal(vfkitState({ state: 'VirtualMachineStateRunning' }), 'running');
  assert.equal(vfkitState({ state: 'VirtualMachineStateStopped' }), 'stopped');
  assert.equal(vfkitState({ state: 'VirtualMachineStateStarting' }), 'starting');
});

test('vfkit: values it would split at commas are refused; kernel arguments with commas stay inside the quoted command line', () => {
  const base = { name: 'x', stateDir: '/Users/me/.berth/vm', image: { arch: 'amd64' as const, kernel: '/img/vmlinuz', initrd: '/img/initrd.img' }, resources: { cpus: 1, memoryMiB: 512, diskGiB: 1 }, shares: [] };
  assert.throws(() => vfkitCommand({ ...base, stateDir: '/Users/me/a,b' }), /comma: \/Users\/me\/a,b/);
  assert.throws(() => vfkitCommand({ ...base, shares: [{ hostPath: '/Users/me/x,y', guestPath: '/x' }] }), /shared folder with a comma/);
  assert.throws(() => vfkitCommand({ ...base, image: { ...base.image, initrd: '/img/a,b.img' } }), /initrd path with a comma/);
  assert.throws(() => vfkitCommand({ ...base, kernelArgs: ['x="y"'] }), /double quote/);
  const cmd = vfkitCommand({ ...base, kernelArgs: ['console=ttyS0,115200'] }, { now });
  const boot = cmd.args[cmd.args.indexOf('--bootloader') + 1]!;
  // amd64 keeps the kernel as built; the command line is one quoted option value, its comma inside the quotes.
  assert.match(boot, /^linux,kernel=\/img\/vmlinuz,initrd=\/img\/initrd.img,cmdline="[^"]* console=ttyS0,115200"$/);
  // The host dials the guest's vsock port (`connect`; vfkit's default, `listen`, is the other way).
  assert.ok(cmd.args.includes('virtio-vsock,port=1024,socketURL=/Users/me/.berth/vm/agent.sock,connect'));
  assert.equal(vfkitState({ state: 'VirtualMachineStateSaving' }), 'running');
  assert.equal(vfkitState({ state: 'VirtualMachineStateError' }), 'stopped');
});
