import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { overlayOptions, readFileFromLayers } from './rootfs.js';

function layers(): { root: string; bottom: string; top: string } {
  const root = mkdtempSync(path.join(os.tmpdir(), 'berth-layers-'));
  const bottom = path.join(root, 'bottom');
  const top = path.join(root, 'top');
  mkdirSync(path.join(bottom, 'etc'), { recursive: true });
  mkdirSync(path.join(bottom, 'usr', 'lib'), { recursive: true });
  mkdirSync(path.join(top, 'etc'), { recursive: true });
  writeFileSync(path.join(bottom, 'etc', 'passwd'), 'root:x:0:0::/root:/bin/sh\n');
  writeFileSync(path.join(bottom, 'etc', 'group'), 'root:x:0:\n');
  writeFileSync(path.join(bottom, 'etc', 'hosts'), 'bottom\n');
  writeFileSync(path.join(top, 'etc', 'hosts'), 'top\n');
  writeFileSync(path.join(bottom, 'usr', 'lib', 'os-release'), 'ID=test\n');
  return { root, bottom, top };
}

test('overlay options list lower links top-first and stay short', () => {
  assert.equal(overlayOptions(3), 'lowerdir=lower/2:lower/1:lower/0,upperdir=upper,workdir=work');
  assert.ok(overlayOptions(127).length < 1200);
});

test('readFileFromLayers takes the topmost copy and honours whiteouts', async () => {
  const { root, bottom, top } = layers();
  try {
    assert.equal((await readFileFromLayers([bottom, top], '/etc/hosts'))?.toString(), 'top\n');
    assert.equal((await readFileFromLayers([bottom, top], 'etc/passwd'))?.toString(), 'root:x:0:0::/root:/bin/sh\n');
    writeFileSync(path.join(top, 'etc', '.wh.group'), '');
    assert.equal(await readFileFromLayers([bottom, top], '/etc/group'), undefined);
    assert.equal(await readFileFromLayers([bottom, top], '/etc/shadow'), undefined);
    assert.equal(await readFileFromLayers([bottom, top], '/etc'), undefined, 'a directory is not a file');
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});

test('readFileFromLayers resolves symlinks inside the layers, never outside', async () => {
  const { root, bottom, top } = layers();
  try {
    // Absolute and relative links across layers.
    symlinkSync('/usr/lib/os-release', path.join(top, 'etc', 'os-release'));
    assert.equal((await readFileFromLayers([bottom, top], '/etc/os-release'))?.toString(), 'ID=test\n');
    symlinkSync('../../../../../../../etc/hosts', path.join(top, 'etc', 'escape'));
    assert.equal((await readFileFromLayers([bottom, top], '/etc/escape'))?.toString(), 'top\n', '.. stops at the image root');
    // A directory link pointing at the host's /etc must resolve to the image's /etc.
    symlinkSync('/etc', path.join(top, 'conf'));
    assert.equal((await readFileFromLayers([bottom, top], '/conf/passwd'))?.toString(), 'root:x:0:0::/root:/bin/sh\n');
    // A link in a lower layer hidden by a directory above must not be followed.
    const outside = path.join(root, 'outside');
    mkdirSync(outside);
    writeFileSync(path.join(outside, 'secret'), 'host secret\n');
    symlinkSync(outside, path.join(bottom, 'data'));
    mkdirSync(path.join(top, 'data'));
    assert.equal(await readFileFromLayers([bottom, top], '/data/secret'), undefined);
    // Link loops end.
    symlinkSync('loop2', path.join(top, 'loop1'));
    symlinkSync('loop1', path.join(top, 'loop2'));
    assert.equal(await readFileFromLayers([bottom, top], '/loop1'), undefined);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});
