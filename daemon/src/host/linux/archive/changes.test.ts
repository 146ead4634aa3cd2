import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { after, test } from 'node:test';
import { upperChanges } from './changes.js';

const base = mkdtempSync('/tmp/changes-');
after(() => rmSync(base, { recursive: true, force: true }));

test('adds, changes, whiteouts and opaque folders of an upper folder, sorted, mount points left out', async () => {
  const lower = path.join(base, 'lower');
  const upper = path.join(base, 'upper');
  for (const d of ['etc', 'usr/lib', 'opaque']) mkdirSync(path.join(lower, d), { recursive: true });
  writeFileSync(path.join(lower, 'etc', 'passwd'), 'root');
  writeFileSync(path.join(lower, 'etc', 'group'), 'root');
  writeFileSync(path.join(lower, 'usr', 'lib', 'untouched'), 'x');
  writeFileSync(path.join(lower, 'opaque', 'old'), 'x');
  for (const d of ['etc', 'usr', 'newdir', 'opaque', 'proc']) mkdirSync(path.join(upper, d), { recursive: true });
  writeFileSync(path.join(upper, 'etc', 'group'), 'changed');
  writeFileSync(path.join(upper, 'etc', 'hosts'), '');
  execFileSync('mknod', [path.join(upper, 'etc', 'passwd'), 'c', '0', '0']);
  writeFileSync(path.join(upper, 'newdir', 'f'), 'new');
  writeFileSync(path.join(upper, 'opaque', 'fresh'), 'new');
  let opaqueMarked = true;
  try {
    execFileSync('python3', ['-c', "import os,sys; os.setxattr(sys.argv[1], 'trusted.overlay.opaque', b'y')", path.join(upper, 'opaque')]);
  } catch {
    opaqueMarked = false;
  }
  const changes = await upperChanges(upper, [lower], new Set(['/proc', '/etc/hosts']));
  const expected = [
    { Path: '/etc', Kind: 0 },
    { Path: '/etc/group', Kind: 0 },
    { Path: '/etc/passwd', Kind: 2 },
    { Path: '/newdir', Kind: 1 },
    { Path: '/newdir/f', Kind: 1 },
    ...(opaqueMarked ? [{ Path: '/opaque', Kind: 0 }, { Path: '/opaque/fresh', Kind: 1 }, { Path: '/opaque/old', Kind: 2 }] : [{ Path: '/opaque', Kind: 0 }, { Path: '/opaque/fresh', Kind: 1 }]),
  ];
  assert.deepEqual(changes, expected);
});
