import assert from 'node:assert/strict';
import { mkdtempSync, mkdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { InvalidParameter, NotFound } from '../../../errors.js';
import { ContainerFilesystem } from './resolve.js';

let base: string;
let root: string;
let bind: string;

before(() => {
  base = mkdtempSync('/tmp/resolve-');
  root = path.join(base, 'root');
  bind = path.join(base, 'bind');
  mkdirSync(path.join(root, 'etc'), { recursive: true });
  mkdirSync(path.join(root, 'var'), { recursive: true });
  mkdirSync(path.join(root, 'mnt', 'data'), { recursive: true });
  mkdirSync(bind);
  writeFileSync(path.join(root, 'etc', 'passwd'), 'container');
  writeFileSync(path.join(base, 'secret'), 'host');
  writeFileSync(path.join(bind, 'in-bind'), 'bind');
  symlinkSync('/', path.join(root, 'abs-root'));
  symlinkSync('../../../../..', path.join(root, 'var', 'up'));
  symlinkSync('/etc/passwd', path.join(root, 'pw'));
  symlinkSync('/mnt/data', path.join(root, 'data-link'));
  symlinkSync('loop-b', path.join(root, 'loop-a'));
  symlinkSync('loop-a', path.join(root, 'loop-b'));
});

after(() => rmSync(base, { recursive: true, force: true }));

const open = () => ContainerFilesystem.open({ root, mounts: [{ destination: '/data-link', source: bind, readOnly: true }], readonlyRootfs: false });

test('.. and links never leave the root', async () => {
  const fsys = await open();
  assert.equal(await fsys.resolveContainerPath('../../../etc/passwd', true), '/etc/passwd');
  assert.equal(await fsys.resolveContainerPath('/abs-root/abs-root/etc', true), '/etc');
  assert.equal(await fsys.resolveContainerPath('/var/up/etc/passwd', true), '/etc/passwd');
  await assert.rejects(fsys.resolveContainerPath(`/var/up${base}/secret`, true), NotFound);
  await assert.rejects(fsys.resolveContainerPath(`/abs-root${base}/secret`, true), NotFound);
});

test('the last link is followed only when asked', async () => {
  const fsys = await open();
  assert.equal(await fsys.resolveContainerPath('/pw', false), '/pw');
  assert.equal(await fsys.resolveContainerPath('/pw', true), '/etc/passwd');
  await assert.rejects(fsys.resolveContainerPath('/loop-a', true), InvalidParameter);
  await assert.rejects(fsys.resolveContainerPath('/etc/passwd/x', true), NotFound);
  assert.equal(await fsys.resolveContainerPath('/etc/new', true, true), '/etc/new');
});

test('mount destinations are resolved in the root, and paths below them lead to the source', async () => {
  const fsys = await open();
  const loc = await fsys.resolve('/mnt/data/in-bind', true);
  assert.equal(loc.hostPath, path.join(bind, 'in-bind'));
  assert.equal(loc.readOnly, true);
  assert.equal(loc.boundary, bind);
  assert.equal((await fsys.resolve('/etc/passwd', true)).hostPath, path.join(root, 'etc', 'passwd'));
});
