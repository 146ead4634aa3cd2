/**
 * The OCI runtime's binary as containers' creates and execs run it: a sealed in-memory copy the daemon holds,
 * so that the runtime does not copy itself for every container, and nothing a container does can change it.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { closeSync, readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { findExecutable } from '../src/host/linux/runtime/ociruntime.js';
import { sealedRuntimeCopy, sealedRuntimeOpen } from '../src/host/linux/runtime/sealed.js';
import { linuxSys } from '../src/host/linux/sys.js';
import { startEngine, type Engine } from './harness.js';

/** `/proc/<pid>/fd/N` of the daemon's sealed runtime copies. */
function sealedCopies(pid: number): string[] {
  return readdirSync(`/proc/${pid}/fd`)
    .map((fd) => `/proc/${pid}/fd/${fd}`)
    .filter((p) => {
      try {
        return readlinkSync(p).startsWith('/memfd:berth-runtime');
      } catch {
        return false;
      }
    });
}

/** F_GET_SEALS of a file, and whether a write to it was refused (python's fcntl; node has none). */
function sealsOf(file: string): { seals: number; writeRefused: boolean } {
  const script = [
    'import fcntl, os, sys',
    'fd = os.open(sys.argv[1], os.O_RDWR)',
    'seals = fcntl.fcntl(fd, 1034)',
    'try:',
    '    os.write(fd, b"x"); refused = False',
    'except PermissionError:',
    '    refused = True',
    'print(seals, int(refused))',
  ].join('\n');
  const r = spawnSync('python3', ['-c', script, file], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  const [seals, refused] = r.stdout.trim().split(' ').map(Number);
  return { seals, writeRefused: refused === 1 };
}

const sha = (data: Buffer) => createHash('sha256').update(data).digest('hex');

for (const runtime of ['crun', 'runc'] as const) {
  describe(`the ${runtime} binary containers run from`, { skip: !findExecutable(runtime) && `${runtime} is not installed` }, () => {
    let engine: Engine;
    before(async () => {
      engine = await startEngine({ runtime });
      await engine.loadBusybox();
    });
    after(() => engine?.cleanup());

    test('is a sealed copy of the installed binary, which conmon runs for creates and execs', async () => {
      const copies = sealedCopies(engine.pid!);
      assert.equal(copies.length, 1, `one sealed copy among the daemon's files: ${copies.join(', ')}`);
      const copy = copies[0];
      assert.equal(sha(readFileSync(copy)), sha(readFileSync(findExecutable(runtime)!)));
      // F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE: what crun and runc take as "already cloned".
      const { seals, writeRefused } = sealsOf(copy);
      assert.equal(seals, 0xf);
      assert.ok(writeRefused, 'a write to the copy is refused');

      const id = (await engine.dockerOk(['run', '-d', 'busybox', 'sleep', '60'])).trim();
      const conmon = readdirSync('/proc')
        .filter((p) => /^\d+$/.test(p))
        .map((p) => {
          try {
            return readFileSync(`/proc/${p}/cmdline`, 'utf8').split('\0');
          } catch {
            return [];
          }
        })
        .find((args) => args[0]?.endsWith('conmon') && args.includes(id));
      assert.ok(conmon, 'the container has a conmon');
      assert.equal(conmon[conmon.indexOf('-r') + 1], copy);
      assert.equal((await engine.dockerOk(['exec', id, 'echo', 'from-exec'])).trim(), 'from-exec');
      assert.equal((await engine.dockerOk(['run', '--rm', 'busybox', 'echo', 'hi'])).trim(), 'hi');
      await engine.dockerOk(['rm', '-f', id]);
    });
  });
}

describe('a sealed runtime copy', { skip: !linuxSys()?.sealedCopy && 'the linuxsys addon is not built' }, () => {
  test('is known to be open under its number until that number is closed', () => {
    const sealed = sealedRuntimeCopy('/bin/busybox')!;
    assert.ok(sealed, 'a copy was made');
    assert.equal(sealed.path, `/proc/${process.pid}/fd/${sealed.fd}`);
    assert.equal(sealedRuntimeOpen(sealed), true);
    closeSync(sealed.fd);
    assert.equal(sealedRuntimeOpen(sealed), false);
  });
});
