import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { NotShared } from '../../errors.js';
import { isWindowsHostPath } from '../../util/hostpath.js';
import { serveSocket } from '../../agent/serve.js';
import { createRemoteHost } from './index.js';
import { argsToGuest, GuestPaths, guestPathsFor, parsePathMapping } from './paths.js';
import { memberSpec } from './parts.js';

// The app's plan on Windows: the daemon's data in the user's app data folder, the guest's on its own disk,
// the containers folder (both sides read and write it) through WSL's mount of drive C.
const DATA = 'C:\\Users\\me\\AppData\\Roaming\\Berth\\engine\\data';
const RUN = 'C:\\Users\\me\\AppData\\Roaming\\Berth\\engine\\run';
const CONTAINERS = `${DATA}\\containers`;
const wsl = new GuestPaths({
  style: 'win32',
  mappings: [
    { hostPath: DATA, guestPath: '/var/lib/berth' },
    { hostPath: RUN, guestPath: '/run/berth' },
    { hostPath: CONTAINERS, guestPath: '/mnt/c/Users/me/AppData/Roaming/Berth/engine/data/containers' },
  ],
  wslDistro: 'berth',
});

function notShared(p: string, shown: RegExp) {
  return (err: unknown) => err instanceof NotShared && err.message.includes(p) && shown.test(err.message);
}

test('WSL2: the data root, the exec root, the containers folder, drives and the distribution\'s own files', () => {
  assert.equal(wsl.toGuest(`${DATA}\\volumes\\v\\_data`), '/var/lib/berth/volumes/v/_data');
  assert.equal(wsl.toGuest(`${RUN}\\plugins\\abc`), '/run/berth/plugins/abc');
  // The deepest mapping wins; case and separators as Windows takes them.
  assert.equal(wsl.toGuest(`${CONTAINERS}\\abc\\hosts`), '/mnt/c/Users/me/AppData/Roaming/Berth/engine/data/containers/abc/hosts');
  assert.equal(wsl.toGuest('c:/users/ME/appdata/roaming/berth/engine/data/containers/abc/hosts'), '/mnt/c/Users/me/AppData/Roaming/Berth/engine/data/containers/abc/hosts');
  assert.equal(wsl.toGuest(DATA), '/var/lib/berth');
  // Bind sources of `docker run -v` in each spelling the CLI sends.
  assert.equal(wsl.toGuest('C:\\src'), '/mnt/c/src');
  assert.equal(wsl.toGuest('C:/src/app/'), '/mnt/c/src/app');
  assert.equal(wsl.toGuest('//c/src'), '/mnt/c/src');
  assert.equal(wsl.toGuest('/d/work'), '/mnt/d/work');
  assert.equal(wsl.toGuest('E:\\'), '/mnt/e');
  assert.equal(wsl.toGuest('\\\\wsl$\\berth\\srv\\www'), '/srv/www');
  assert.equal(wsl.toGuest('\\\\wsl.localhost\\Berth\\srv'), '/srv');
  // The guest's own paths (the Host gave them) and what is no path cross as they are.
  for (const p of ['/var/lib/berth/runtime/abc/merged', '/mnt/c/src', 'tmpfs', 'proc', '']) assert.equal(wsl.toGuest(p), p);
  // A bind source spelled as a guest path is the guest's folder, also where user paths are checked.
  assert.equal(wsl.toGuest('/var/run/x', { strict: true }), '/var/run/x');
  // Never a Windows path to the guest: another distribution's or another machine's files are not shared.
  assert.throws(() => wsl.toGuest('\\\\wsl$\\Ubuntu\\home\\me'), notShared('\\\\wsl$\\Ubuntu\\home\\me', /every drive/));
  assert.throws(() => wsl.toGuest('\\\\fileserver\\team\\src'), notShared('\\\\fileserver\\team\\src', /shared folders are .*Berth\\engine\\data/));
});

test('QEMU or vfkit on Windows: only the shares; the error names the path and the shared folders', () => {
  const paths = new GuestPaths({ style: 'win32', mappings: [{ hostPath: 'C:\\Users\\me', guestPath: '/host/me' }, { hostPath: DATA, guestPath: '/var/lib/berth' }] });
  assert.equal(paths.toGuest('C:\\Users\\me\\src'), '/host/me/src');
  assert.equal(paths.toGuest('C:\\Users\\me'), '/host/me');
  assert.equal(paths.toGuest(`${DATA}\\containers\\x\\container.log`), '/var/lib/berth/containers/x/container.log');
  assert.throws(() => paths.toGuest('C:\\Users\\meme'), notShared('C:\\Users\\meme', /the shared folders are C:\\Users\\me, C:\\Users\\me\\AppData\\Roaming\\Berth\\engine\\data$/));
  assert.throws(() => paths.toGuest('D:\\data'), notShared('D:\\data', /C:\\Users\\me/));
  // `..` cannot climb out of a share: the path is normalized first.
  assert.throws(() => paths.toGuest('C:\\Users\\me\\..\\other\\x'), NotShared);
  assert.throws(() => paths.toGuest('/c/Users/me/../other'), NotShared);
  const none = guestPathsFor({}, 'win32')!;
  assert.throws(() => none.toGuest('C:\\x'), notShared('C:\\x', /no folder is shared/));
});

test('macOS: the home folder and the data root; a bind source outside them is refused, the guest\'s paths pass', () => {
  const paths = guestPathsFor({ mappings: [{ hostPath: '/Users/me', guestPath: '/Users/me' }, { hostPath: '/Users/me/.berth/data', guestPath: '/var/lib/berth' }] }, 'posix')!;
  assert.equal(paths.toGuest('/Users/me/src'), '/Users/me/src');
  assert.equal(paths.toGuest('/Users/me/.berth/data/containers/x/hosts'), '/var/lib/berth/containers/x/hosts');
  assert.equal(paths.toGuest('/Users/meme/x'), '/Users/meme/x');
  assert.equal(paths.toGuest('/proc/self/fd/12'), '/proc/self/fd/12');
  assert.throws(() => paths.toGuest('/etc', { strict: true }), notShared('/etc', /the shared folders are \/Users\/me, \/Users\/me\/.berth\/data/));
  assert.equal(paths.toGuest('/Users/me/src', { strict: true }), '/Users/me/src');
  // Without mappings the agent's machine names folders as the daemon's: no translation at all.
  assert.equal(guestPathsFor({}, 'posix'), undefined);
});

test('--agent-path HOST=GUEST', () => {
  assert.deepEqual(parsePathMapping('C:\\Users\\me=/mnt/c/Users/me'), { hostPath: 'C:\\Users\\me', guestPath: '/mnt/c/Users/me' });
  assert.deepEqual(parsePathMapping('C:\\a=b\\c=/x'), { hostPath: 'C:\\a=b\\c', guestPath: '/x' });
  assert.deepEqual(parsePathMapping('/Users/me=/Users/me'), { hostPath: '/Users/me', guestPath: '/Users/me' });
  assert.throws(() => parsePathMapping('C:\\x'), /HOST=GUEST/);
  assert.throws(() => new GuestPaths({ style: 'posix', mappings: [{ hostPath: '/a', guestPath: 'b' }] }), /must be absolute/);
});

test('the runtime spec of `docker run -v` and `--mount`, its log, a `docker cp` view and the /etc files, in the guest\'s terms', () => {
  const spec = {
    root: { path: 'rootfs' },
    mounts: [
      { destination: '/proc', type: 'proc', source: 'proc' },
      { destination: '/src', type: 'bind', source: 'C:\\src', options: ['rbind', 'rw'] },
      { destination: '/app', type: 'bind', source: '//c/Users/me/app', options: ['rbind', 'ro'] },
      { destination: '/etc/hosts', type: 'bind', source: `${CONTAINERS}\\abc\\hosts` },
      { destination: '/data', type: 'bind', source: '/var/lib/berth/volumes/v/_data' },
    ],
  };
  const io = { tty: false, openStdin: false, stdinOnce: false, logPath: `${CONTAINERS}\\abc\\container.log` };
  const args = argsToGuest(['abc', spec, io], memberSpec('runtime', 'start')!, wsl) as [string, typeof spec, typeof io];
  assert.deepEqual(args[1].mounts.map((m) => m.source), ['proc', '/mnt/c/src', '/mnt/c/Users/me/app', '/mnt/c/Users/me/AppData/Roaming/Berth/engine/data/containers/abc/hosts', '/var/lib/berth/volumes/v/_data']);
  assert.equal(args[2].logPath, '/mnt/c/Users/me/AppData/Roaming/Berth/engine/data/containers/abc/container.log');
  // Copies: the daemon's objects keep its own paths (its records show them).
  assert.equal(spec.mounts[1]!.source, 'C:\\src');
  assert.equal(io.logPath, `${CONTAINERS}\\abc\\container.log`);

  const view = { root: '/var/lib/berth/runtime/abc/merged', mounts: [{ destination: '/src', source: 'D:\\work', readOnly: false }], readonlyRootfs: false };
  const cp = argsToGuest([view, '/src/file'], memberSpec('files', 'archivePath')!, wsl) as [typeof view, string];
  assert.deepEqual(cp, [{ ...view, mounts: [{ destination: '/src', source: '/mnt/d/work', readOnly: false }] }, '/src/file']);
  const etc = argsToGuest([[{ file: `${CONTAINERS}\\abc\\resolv.conf`, data: 'x' }], 'fresh'], memberSpec('files', 'writeEtcFiles')!, wsl);
  assert.deepEqual(etc, [[{ file: '/mnt/c/Users/me/AppData/Roaming/Berth/engine/data/containers/abc/resolv.conf', data: 'x' }], 'fresh']);
  // A path inside the image or the container is no host path.
  assert.deepEqual(argsToGuest([['/var/lib/berth/image/l1'], '/etc/passwd'], memberSpec('runtime', 'readFileFromLayers')!, wsl), [['/var/lib/berth/image/l1'], '/etc/passwd']);
  // A build: its context stays the daemon's (unpacked in its own scratch folder, sent as layer tars); its
  // RUN steps are containers started as above, and their changes come back as the layer of diffTar.
  assert.deepEqual(argsToGuest(['abc', ['/var/lib/berth/image/l1'], new Set()], memberSpec('files', 'diffTar')!, wsl), ['abc', ['/var/lib/berth/image/l1'], new Set()]);
  // A managed plugin's folders, wherever the daemon names them.
  assert.deepEqual(argsToGuest([`${RUN}\\plugins\\p1\\rootfs`], memberSpec('tools', 'unpackInto')!, wsl), ['/run/berth/plugins/p1/rootfs']);
  // A bind volume's device (`docker volume create --opt device=C:\data --opt o=bind --opt type=none`).
  assert.deepEqual(argsToGuest(['/var/lib/berth/volumes/b/_data', { type: 'none', device: 'C:\\data', o: 'bind' }], memberSpec('volumes', 'mount')!, wsl), ['/var/lib/berth/volumes/b/_data', { type: 'none', device: '/mnt/c/data', o: 'bind' }]);
});

/** Every string inside a value (objects, arrays), for the check that none is a Windows path. */
function strings(value: unknown, out: string[] = []): string[] {
  if (typeof value === 'string') out.push(value);
  else if (value && typeof value === 'object') for (const v of Object.values(value)) strings(v, out);
  return out;
}

test('through the remote Host: the agent is never sent a Windows path, and a path outside the shares fails the call', async () => {
  const dir = mkdtempSync('/tmp/berth-paths-');
  const calls: Array<{ target: string; args: unknown[] }> = [];
  const server = await serveSocket(path.join(dir, 'agent.sock'), (target, args) => {
    if (target === '$snapshot') return { values: {}, missing: [], layers: { infos: [], dirs: {} } };
    if (target === '$layers') return { infos: [], dirs: {} };
    calls.push({ target, args });
    return target === 'probe.pathExists' ? true : undefined;
  });
  const host = await createRemoteHost(`unix://${path.join(dir, 'agent.sock')}`, { paths: wsl });
  try {
    await host.runtime.start('abc', { mounts: [{ destination: '/src', type: 'bind', source: 'C:\\src' }, { destination: '/etc/hosts', type: 'bind', source: `${CONTAINERS}\\abc\\hosts` }] }, { tty: false, openStdin: false, stdinOnce: false, logPath: `${CONTAINERS}\\abc\\container.log` });
    await host.files.writeEtcFiles([{ file: `${CONTAINERS}\\abc\\hosts`, data: '127.0.0.1 localhost\n' }], 'fresh');
    await host.files.statPath({ root: '/var/lib/berth/runtime/abc/merged', mounts: [{ destination: '/src', source: 'C:\\src', readOnly: false }], readonlyRootfs: false }, '/src');
    assert.equal(await host.probe.pathExists('//c/src'), true);
    await host.volumes.createVolumeDir('/var/lib/berth/volumes/v');
    await host.plugins.makeDir(`${RUN}\\plugins\\p1`);
    await assert.rejects(host.probe.pathExists('\\\\fileserver\\team'), notShared('\\\\fileserver\\team', /every drive/));
    await assert.rejects(host.runtime.sourceMount!('\\\\wsl$\\Ubuntu\\x'), NotShared);
    assert.deepEqual(calls.map((c) => c.target), ['runtime.start', 'files.writeEtcFiles', 'files.statPath', 'probe.pathExists', 'volumes.createVolumeDir', 'plugins.makeDir']);
    const sent = calls.flatMap((c) => strings(c.args));
    assert.deepEqual(sent.filter(isWindowsHostPath), []);
    assert.ok(sent.includes('/mnt/c/src'));
    assert.ok(sent.includes('/run/berth/plugins/p1'));
    assert.equal(strings(calls[0]!.args).filter((s) => s.endsWith('container.log'))[0], '/mnt/c/Users/me/AppData/Roaming/Berth/engine/data/containers/abc/container.log');
  } finally {
    await host.close();
    await server.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
