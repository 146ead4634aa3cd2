import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { contextHostFor } from '../src/docker-context.js';
import type { HostFacts } from '../src/engine-args.js';
import { ENGINE_PIPE, vmDriverFor, vmEnginePlan, windowsDrivePath } from '../src/vm-plan.js';

const resources = { cpus: 4, memoryMiB: 4096, diskGiB: 32 };
const facts = (platform: NodeJS.Platform, home: string, userData: string): HostFacts => ({ platform, uid: 501, home, env: {}, userData, exists: () => false });

describe('the VM engine of each platform', () => {
  it('picks the driver: vfkit on macOS, WSL2 on Windows, QEMU on Linux only under the test switch', () => {
    assert.equal(vmDriverFor('darwin'), 'vfkit');
    assert.equal(vmDriverFor('win32'), 'wsl2');
    assert.equal(vmDriverFor('linux'), undefined);
    assert.equal(vmDriverFor('linux', 'qemu'), 'qemu');
    assert.equal(vmDriverFor('linux', 'vfkit'), undefined);
    assert.equal(vmDriverFor('freebsd', 'qemu'), undefined);
  });

  it('macOS: state under ~/.berth, the engine on a unix socket under the home folder, the home and the shared data folders at their paths', () => {
    const plan = vmEnginePlan('vfkit', facts('darwin', '/Users/ada', '/Users/ada/Library/Application Support/Berth'), '/Users/ada/.berth/engine.sock', resources);
    assert.equal(plan.stateDir, '/Users/ada/.berth/vm');
    assert.equal(plan.dataRoot, '/Users/ada/.berth/data');
    assert.equal(plan.guestDataRoot, '/Users/ada/.berth/data');
    assert.equal(plan.execRoot, '/Users/ada/.berth/run');
    assert.equal(plan.socketPath, '/Users/ada/.berth/engine.sock');
    assert.equal(plan.contextHost, 'unix:///Users/ada/.berth/engine.sock');
    assert.deepEqual(plan.resources, resources);
    assert.deepEqual(
      plan.shares.map((s) => [s.hostPath, s.guestPath]),
      [
        ['/Users/ada', '/Users/ada'],
        ['/Users/ada/.berth/data/containers', '/Users/ada/.berth/data/containers'],
      ],
    );
    // No path the guest's kernel command line names has a space (Application Support has one).
    for (const p of [plan.dataRoot, ...plan.shares.map((s) => s.guestPath)]) assert.doesNotMatch(p, /\s/);
    assert.deepEqual(plan.args, [
      '-H', 'unix:///Users/ada/.berth/engine.sock', '--data-root', '/Users/ada/.berth/data', '--exec-root', '/Users/ada/.berth/run',
      '--pidfile', '/Users/ada/.berth/run/berthd.pid', '--bridge', 'berthapp0',
      '--agent-path', '/Users/ada/.berth/data=/Users/ada/.berth/data',
      '--agent-path', '/Users/ada=/Users/ada',
      '--agent-path', '/Users/ada/.berth/data/containers=/Users/ada/.berth/data/containers',
    ]);
  });

  it('Windows: the named pipe \\\\.\\pipe\\berth for the engine and the context, the data root the guest\'s own, its containers folder at its drive path', () => {
    const plan = vmEnginePlan('wsl2', facts('win32', 'C:\\Users\\ada', 'C:\\Users\\ada\\AppData\\Roaming\\Berth'), 'C:\\ignored.sock', resources);
    assert.equal(ENGINE_PIPE, '\\\\.\\pipe\\berth');
    assert.equal(plan.socketPath, ENGINE_PIPE);
    assert.equal(plan.listen, 'npipe:////./pipe/berth');
    assert.equal(plan.contextHost, 'npipe:////./pipe/berth');
    assert.equal(contextHostFor(plan.socketPath), plan.contextHost);
    assert.equal(plan.stateDir, 'C:\\Users\\ada\\AppData\\Roaming\\Berth\\engine\\vm');
    assert.equal(plan.dataRoot, 'C:\\Users\\ada\\AppData\\Roaming\\Berth\\engine\\data');
    // The guest's data root is the distribution's own; the containers folder, both sides write, is reached
    // through WSL's mount of its drive; the daemon is told both, and that the guest is the WSL distribution.
    assert.equal(plan.guestDataRoot, '/var/lib/berth');
    assert.deepEqual(plan.shares, []);
    assert.deepEqual(plan.args.slice(0, 4), ['-H', 'npipe:////./pipe/berth', '--data-root', 'C:\\Users\\ada\\AppData\\Roaming\\Berth\\engine\\data']);
    assert.deepEqual(plan.args.slice(10), [
      '--agent-wsl', 'berth',
      '--agent-path', 'C:\\Users\\ada\\AppData\\Roaming\\Berth\\engine\\data=/var/lib/berth',
      '--agent-path', 'C:\\Users\\ada\\AppData\\Roaming\\Berth\\engine\\data\\containers=/mnt/c/Users/ada/AppData/Roaming/Berth/engine/data/containers',
      '--agent-path', 'C:\\Users\\ada\\AppData\\Roaming\\Berth\\engine\\run=/run/berth',
    ]);
  });

  it('maps Windows drive paths into the guest; refuses paths without a drive', () => {
    assert.equal(windowsDrivePath('D:\\work\\src'), '/mnt/d/work/src');
    assert.equal(windowsDrivePath('c:/Users/ada/'), '/mnt/c/Users/ada');
    assert.equal(windowsDrivePath('E:'), '/mnt/e');
    assert.throws(() => windowsDrivePath('\\\\server\\share\\data'), /must be on a drive/);
    assert.throws(() => windowsDrivePath('relative\\data'), /must be on a drive/);
  });

  it('Linux under the test switch: as macOS, with QEMU', () => {
    const plan = vmEnginePlan('qemu', facts('linux', '/home/ada', '/home/ada/.config/Berth'), '/home/ada/.config/Berth/engine.sock', resources);
    assert.equal(plan.driver, 'qemu');
    assert.equal(plan.stateDir, '/home/ada/.berth/vm');
    assert.equal(plan.contextHost, 'unix:///home/ada/.config/Berth/engine.sock');
    assert.equal(contextHostFor('/home/ada/.config/Berth/engine.sock'), plan.contextHost);
  });
});
