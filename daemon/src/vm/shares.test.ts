import assert from 'node:assert/strict';
import { test } from 'node:test';
import { toGuestPath, windowsToWslPath } from './shares.js';

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
