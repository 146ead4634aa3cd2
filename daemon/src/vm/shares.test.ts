import assert from 'node:assert/strict';
import { test } from 'node:test';
import { agentPathFlags, toGuestPath, windowsToWslPath } from './shares.js';

test('a host path inside a share maps to the guest mount, the deepest share winning', () => {
  const shares = [
    { hostPath: '/Users/me', guestPath: '/mnt/host/me' },
    { hostPath: '/Users/me/work/', guestPath: '/mnt/work' },
  ];
  assert.equal(toGuestPath(shares, '/Users/me/src/app'), '/mnt/host/me/src/app');
  assert.equal(toGuestPath(shares, '/Users/me'), '/mnt/host/me');
  assert.equal(toGuestPath(shares, '/Users/me/work/x/../y'), '/mnt/work/y');
  assert.equal(toGuestPath(shares, '/Users/meme'), undefined);
  assert.equal(toGuestPath(shares, '/etc'), undefined);
  assert.equal(toGuestPath([{ hostPath: '/', guestPath: '/host' }], '/etc/hosts'), '/host/etc/hosts');
});

test('Windows paths in WSL2', () => {
  assert.equal(windowsToWslPath('C:\\Users\\me\\src', 'berth'), '/mnt/c/Users/me/src');
  assert.equal(windowsToWslPath('d:/data', 'berth'), '/mnt/d/data');
  assert.equal(windowsToWslPath('C:', 'berth'), '/mnt/c');
  assert.equal(windowsToWslPath('\\\\wsl$\\berth\\var\\lib', 'berth'), '/var/lib');
  assert.equal(windowsToWslPath('\\\\wsl.localhost\\Berth\\srv', 'berth'), '/srv');
  assert.equal(windowsToWslPath('\\\\wsl$\\Ubuntu\\home', 'berth'), undefined);
  assert.equal(windowsToWslPath('\\\\server\\share\\x', 'berth'), undefined);
});

test('the daemon is told the guest\'s paths of the shares, of its data root, and the WSL distribution', () => {
  const shares = [{ hostPath: '/Users/me', guestPath: '/Users/me' }];
  assert.deepEqual(agentPathFlags('vfkit', { name: 'berth', shares }), ['--agent-path', '/Users/me=/Users/me']);
  assert.deepEqual(agentPathFlags('qemu', { name: 'berth', shares, guestDataRoot: '/var/lib/berth' }, '/Users/me/.berth/data'), ['--agent-path', '/Users/me/.berth/data=/var/lib/berth', '--agent-path', '/Users/me=/Users/me']);
  assert.deepEqual(agentPathFlags('wsl2', { name: 'berth', shares: [] }), ['--agent-wsl', 'berth']);
});
