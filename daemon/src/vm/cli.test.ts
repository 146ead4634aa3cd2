import assert from 'node:assert/strict';
import { test } from 'node:test';
import { defaultDriver, parseShare } from './cli.js';

test('the driver of each platform', () => {
  assert.equal(defaultDriver('darwin'), 'vfkit');
  assert.equal(defaultDriver('win32'), 'wsl2');
  assert.equal(defaultDriver('linux'), 'qemu');
});

test('--share HOST[:GUEST][:ro]', () => {
  assert.deepEqual(parseShare('/Users/me'), { hostPath: '/Users/me', guestPath: '/Users/me', readOnly: false });
  assert.deepEqual(parseShare('/Users/me:/host:ro'), { hostPath: '/Users/me', guestPath: '/host', readOnly: true });
  assert.deepEqual(parseShare('C:\\src:/mnt/src'), { hostPath: 'C:\\src', guestPath: '/mnt/src', readOnly: false });
  assert.throws(() => parseShare('/a:relative'), /absolute guest path/);
});
