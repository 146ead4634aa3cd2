import assert from 'node:assert/strict';
import { test } from 'node:test';
import { isAbsoluteHostPath, isWindowsHostPath, normalizeHostPath, normalizeWindowsPath, splitBind } from './hostpath.js';

test('Windows paths in their spellings: drive, forward slashes, MSYS, UNC', () => {
  for (const p of ['C:\\src', 'c:/src', 'C:', 'C:\\', '/c/src', '//c/src', '/c', '\\\\server\\share\\x', '//server/share/x', '\\\\wsl$\\berth\\srv']) {
    assert.ok(isWindowsHostPath(p), p);
    assert.ok(isAbsoluteHostPath(p, 'win32'), p);
  }
  for (const p of ['/var/run/x', '/mnt/c/src', 'src', 'C', 'myvolume', '//c:']) assert.ok(!isWindowsHostPath(p), p);
  // On Windows a POSIX path names a folder of the guest; elsewhere a drive path is no absolute path.
  assert.ok(isAbsoluteHostPath('/var/run/x', 'win32'));
  assert.ok(!isAbsoluteHostPath('C:\\src', 'posix'));
  assert.ok(!isAbsoluteHostPath('vol', 'win32'));

  assert.equal(normalizeWindowsPath('c:/Users/me/./src/../app/'), 'C:\\Users\\me\\app');
  assert.equal(normalizeWindowsPath('/c/Users/me'), 'C:\\Users\\me');
  assert.equal(normalizeWindowsPath('//d/data'), 'D:\\data');
  assert.equal(normalizeWindowsPath('C:'), 'C:\\');
  assert.equal(normalizeWindowsPath('C:\\'), 'C:\\');
  assert.equal(normalizeWindowsPath('//server/share/x/'), '\\\\server\\share\\x');
  assert.equal(normalizeWindowsPath('/var/lib'), undefined);
  assert.equal(normalizeHostPath('/var//lib/', 'win32'), '/var/lib');
  assert.equal(normalizeHostPath('/Users/me/src/', 'posix'), '/Users/me/src');
});

test('Binds entries with a Windows source keep its drive colon', () => {
  assert.deepEqual(splitBind('C:\\src:/src', 'win32'), ['C:\\src', '/src']);
  assert.deepEqual(splitBind('C:\\src:/src:ro', 'win32'), ['C:\\src', '/src', 'ro']);
  assert.deepEqual(splitBind('d:/data/x:/x:rw,rslave', 'win32'), ['d:/data/x', '/x', 'rw,rslave']);
  assert.deepEqual(splitBind('//c/src:/src', 'win32'), ['//c/src', '/src']);
  assert.deepEqual(splitBind('vol:/data', 'win32'), ['vol', '/data']);
  assert.deepEqual(splitBind('C:\\src:/src', 'posix'), ['C', '\\src', '/src']);
});
