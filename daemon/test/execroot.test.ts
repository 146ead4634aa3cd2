/**
 * Where the engine keeps its per-boot files: the exec root on a tmpfs (mounted by the daemon when the folder is
 * on a disk and empty, kept across restarts, never stacked), the OCI bundles in it; and the writeback after
 * deletions on ext4 without a journal, told apart from ext4 with one on real loop-mounted file systems.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, statfsSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import { onExtWithoutJournal, writebackAfterDeletions } from '../src/host/linux/nojournal.js';
import { Engine, eventually } from './harness.js';

const TMPFS_MAGIC = 0x01021994;

/** The mount points at `dir` (more than one when mounts are stacked). */
function mountsAt(dir: string): string[] {
  return readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .filter((l) => l.split(' ')[4] === dir)
    .map((l) => l.split(' - ')[1]?.split(' ')[0] ?? '');
}

describe('exec root', () => {
  const engines: Engine[] = [];
  after(async () => {
    for (const e of engines) await e.cleanup();
  });

  test('an empty exec root on disk gets a tmpfs, holding the bundles; a restart reuses it and the container attaches', async () => {
    const engine = new Engine();
    engines.push(engine);
    assert.notEqual(statfsSync(path.dirname(engine.execRoot)).type, TMPFS_MAGIC, 'the test root is on a disk file system');
    await engine.start();
    await engine.loadBusybox();
    assert.deepEqual(mountsAt(engine.execRoot), ['tmpfs']);
    const id = (await engine.dockerOk(['run', '-d', '-i', 'busybox', 'sh', '-c', 'read line; echo "got $line"'])).trim();
    // The bundle (config.json and conmon's FIFOs) is in the tmpfs, not in the data root.
    const bundle = path.join(engine.execRoot, 'bundles', id);
    assert.ok(existsSync(path.join(bundle, 'config.json')));
    assert.ok(existsSync(path.join(bundle, 'ctl')));
    assert.equal(existsSync(path.join(engine.dataRoot, 'runtime', id, 'config.json')), false);

    await engine.restart();
    assert.deepEqual(mountsAt(engine.execRoot), ['tmpfs'], 'one tmpfs, not a second one over the first');
    const attached = await engine.docker(['attach', id], { input: 'through the restart\n' });
    assert.equal(attached.code, 0, attached.stderr);
    assert.equal(attached.stdout, 'got through the restart\n');
    await eventually(async () => (await engine.request('GET', `/containers/${id}/json`)).json().State.Running === false);
    await engine.dockerOk(['rm', id]);
    await eventually(() => !existsSync(bundle));
  });

  test('an exec root on disk that holds files already is used as it is', async () => {
    const engine = new Engine();
    engines.push(engine);
    mkdirSync(engine.execRoot, { recursive: true });
    writeFileSync(path.join(engine.execRoot, 'kept'), 'a file of before\n');
    await engine.start();
    await engine.loadBusybox();
    assert.deepEqual(mountsAt(engine.execRoot), []);
    assert.equal((await engine.dockerOk(['run', '--rm', 'busybox', 'echo', 'hi'])).trim(), 'hi');
    assert.equal(readFileSync(path.join(engine.execRoot, 'kept'), 'utf8'), 'a file of before\n');
  });
});

describe('writeback after deletions', () => {
  const work = path.join(os.tmpdir(), `bt-fs-${process.pid}`);
  const mounted: string[] = [];
  after(() => {
    for (const m of mounted.reverse()) spawnSync('umount', [m]);
    rmSync(work, { recursive: true, force: true });
  });

  /** A 32 MB ext4 image loop-mounted on work/<name>, made with `features` (mkfs.ext4 -O). */
  function ext4(name: string, features: string): string {
    const image = path.join(work, `${name}.img`);
    const dir = path.join(work, name);
    mkdirSync(dir, { recursive: true });
    const mkfs = spawnSync('mkfs.ext4', ['-q', '-F', '-O', features, image, '32M'], { encoding: 'utf8' });
    assert.equal(mkfs.status, 0, mkfs.stderr);
    const mount = spawnSync('mount', ['-o', 'loop', image, dir], { encoding: 'utf8' });
    assert.equal(mount.status, 0, mount.stderr);
    mounted.push(dir);
    return dir;
  }

  test('a syncfs follows deletions on ext4 without a journal only', async () => {
    mkdirSync(work, { recursive: true });
    const without = ext4('nojournal', '^has_journal');
    const withJournal = ext4('journal', 'has_journal');
    assert.equal(onExtWithoutJournal(without), true);
    assert.equal(onExtWithoutJournal(path.join(without, '.')), true);
    assert.equal(onExtWithoutJournal(withJournal), false);
    assert.equal(onExtWithoutJournal('/dev/shm'), false);
    assert.equal(onExtWithoutJournal(path.join(work, 'missing')), false);
    assert.equal(writebackAfterDeletions([withJournal, '/dev/shm']), undefined);
    const writeback = writebackAfterDeletions([withJournal, without]);
    assert.ok(writeback, 'a writeback for the file system without a journal');
    // The deletions dirty the inode table and bitmaps; the writeback writes them to the device.
    for (let i = 0; i < 50; i++) writeFileSync(path.join(without, `f${i}`), 'x');
    spawnSync('sync', ['-f', without]);
    const device = readFileSync('/proc/self/mountinfo', 'utf8').split('\n').find((l) => l.split(' ')[4] === without)!.split(' - ')[1]!.split(' ')[1]!;
    const sectorsWritten = () => Number(readFileSync(`/sys/block/${path.basename(device)}/stat`, 'utf8').trim().split(/\s+/)[6]);
    for (let i = 0; i < 50; i++) rmSync(path.join(without, `f${i}`));
    const before = sectorsWritten();
    await writeback();
    assert.ok(sectorsWritten() > before, `${device} wrote nothing on the writeback`);
  });
});
