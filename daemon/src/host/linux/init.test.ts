import assert from 'node:assert/strict';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import { findInitBinary, parseInitVersion, readInitVersion } from './init.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'berth-init-'));
after(() => rmSync(dir, { recursive: true, force: true }));

function executable(name: string, script = '#!/bin/sh\necho "tini version 0.19.0 - git.de40ad0"\n'): string {
  const file = path.join(dir, name);
  writeFileSync(file, script);
  chmodSync(file, 0o755);
  return file;
}

test('parseInitVersion reads Docker builds (with a git commit) and Debian builds (without)', () => {
  assert.deepEqual(parseInitVersion('tini version 0.19.0 - git.de40ad0\n'), { version: '0.19.0', commit: 'de40ad0' });
  assert.deepEqual(parseInitVersion('tini version 0.19.0\n'), { version: '0.19.0', commit: '' });
  assert.equal(parseInitVersion('something else 1.0'), undefined);
});

test('the default lookup prefers docker-init, then tini-static, then tini, on PATH', () => {
  const bin = mkdtempSync(path.join(dir, 'bin-'));
  const put = (name: string) => {
    writeFileSync(path.join(bin, name), '#!/bin/sh\n');
    chmodSync(path.join(bin, name), 0o755);
  };
  assert.match((findInitBinary(undefined, bin, [])).problem ?? '', /no init binary found.*--init-path/);
  put('tini');
  assert.deepEqual(findInitBinary(undefined, bin, []), { name: 'docker-init', path: path.join(bin, 'tini') });
  put('tini-static');
  assert.equal((findInitBinary(undefined, bin, [])).path, path.join(bin, 'tini-static'));
  put('docker-init');
  assert.equal((findInitBinary(undefined, bin, [])).path, path.join(bin, 'docker-init'));
});

test('--init-path: a path must be an executable file; a name is looked up on PATH', () => {
  const file = executable('my-init');
  assert.deepEqual(findInitBinary(file, '', []), { name: file, path: file });
  const missing = findInitBinary(path.join(dir, 'nope'), '', []);
  assert.equal(missing.path, undefined);
  assert.match(missing.problem ?? '', /nope.*--init-path does not exist/);
  writeFileSync(path.join(dir, 'plain'), 'not executable');
  assert.equal((findInitBinary(path.join(dir, 'plain'), '', [])).path, undefined);
  assert.equal((findInitBinary(dir, '', [])).path, undefined);
  assert.deepEqual(findInitBinary('my-init', dir, []), { name: 'my-init', path: file });
  assert.match((findInitBinary('other-init', dir, [])).problem ?? '', /"other-init".*not found on PATH/);
});

test('readInitVersion runs the binary with --version', async () => {
  assert.deepEqual(await readInitVersion({ name: 'x', path: executable('versioned') }), { version: '0.19.0', commit: 'de40ad0' });
  assert.equal(await readInitVersion({ name: 'x', problem: 'none' }), undefined);
  assert.equal(await readInitVersion({ name: 'x', path: executable('silent', '#!/bin/sh\nexit 1\n') }), undefined);
});
