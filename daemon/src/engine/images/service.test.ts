import assert from 'node:assert/strict';
import { createReadStream, mkdtempSync, rmSync } from 'node:fs';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import tar from 'tar-stream';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { tarBuffer } from '../../../test/fixtures/archives.js';
import { buildBusyboxArchive } from '../../../test/fixtures/busybox.js';
import { createFakeHost } from '../../host/fake/index.js';
import { Conflict, NotFound } from '../../errors.js';
import { EventBus } from '../events.js';
import { ImageService } from './service.js';
import { FsStateStore } from '../../state/fs.js';

describe('image service: removal while containers use an image', () => {
  const root = mkdtempSync(path.join(os.tmpdir(), 'berth-images-'));
  const archive = path.join(root, 'busybox.tar');
  const using = new Map<string, string[]>();
  let images: ImageService;
  let id: string;

  before(async () => {
    await buildBusyboxArchive(archive);
    images = new ImageService(new FsStateStore(root), createFakeHost().layers, new EventBus());
    images.setUsers({ containersUsingImage: (imageId) => using.get(imageId) ?? [] });
    await images.init();
    [id] = await images.load(createReadStream(archive), () => undefined);
  });
  after(() => rmSync(root, { recursive: true, force: true }));

  it('resolves for the container engine with chain ids whose folders exist', async () => {
    const forContainer = await images.resolveForContainer('busybox');
    assert.equal(forContainer.id, id);
    assert.equal(forContainer.reference, 'busybox:latest');
    assert.deepEqual(forContainer.config.Cmd, ['sh']);
    const [dir] = images.lowerDirs(forContainer.chainIds);
    assert.match(dir, /\/layers\/[0-9a-f]{64}\/diff$/);
    await assert.rejects(images.resolveForContainer('nosuch'), NotFound);
    assert.throws(() => images.lowerDirs([`sha256:${'0'.repeat(64)}`]), NotFound);
  });

  it('answers 409 for the last tag and for the id while a container uses the image', async () => {
    using.set(id, ['c0ffee'.padEnd(64, '0')]);
    await assert.rejects(images.remove('busybox'), (err: Error) => err instanceof Conflict && /container c0ffee000000 is using its referenced image/.test(err.message));
    await assert.rejects(images.remove(id), Conflict);
    await images.tag('busybox', 'extra', 'one');
    // With another tag left, removing one tag only untags, in use or not.
    assert.deepEqual(await images.remove('extra:one'), [{ Untagged: 'extra:one' }]);
  });

  it('force untags but keeps an image that containers use; prune leaves it too', async () => {
    assert.deepEqual(await images.remove('busybox', { force: true }), [{ Untagged: 'busybox:latest' }]);
    assert.ok(images.store.has(id));
    const pruned = await images.prune(new Map([['dangling', ['true']]]));
    assert.deepEqual(pruned.ImagesDeleted, []);
    using.clear();
    const after = await images.prune(new Map());
    assert.deepEqual(after.ImagesDeleted?.[0], { Deleted: id });
    assert.ok(after.SpaceReclaimed > 1_000_000);
    assert.equal(images.store.has(id), false);
  });
});

describe('image service: images made from a parent and a diff', () => {
  const root = mkdtempSync(path.join(os.tmpdir(), 'berth-images-'));
  const layers = createFakeHost().layers;
  const archive = path.join(root, 'busybox.tar');
  let images: ImageService;

  before(async () => {
    await buildBusyboxArchive(archive);
    images = new ImageService(new FsStateStore(root), layers, new EventBus());
    await images.init();
    await images.load(createReadStream(archive), () => undefined);
  });
  after(() => rmSync(root, { recursive: true, force: true }));

  it('stacks a new layer on the parent, records the parent and history, and shares the parent layer', async () => {
    const diff = await tarBuffer([{ name: 'srv/', type: 'directory' }, { name: 'srv/app', content: 'app\n' }, { name: 'etc/.wh.group' }]);
    const id = await images.createImage({ parent: 'busybox', layer: Readable.from([diff]), config: { Cmd: ['/srv/app'] }, createdBy: 'test commit', tags: ['derived:1'] });
    const inspect = images.inspect('derived:1');
    assert.equal(inspect.Id, id);
    assert.equal(inspect.Parent, images.find('busybox').image.id);
    assert.equal((inspect.RootFS as { Layers: string[] }).Layers.length, 2);
    const history = images.history('derived:1');
    assert.equal(history.length, 3);
    assert.equal(history[0].CreatedBy, 'test commit');
    const forContainer = await images.resolveForContainer('derived:1');
    const dirs = images.lowerDirs(forContainer.chainIds);
    assert.equal(dirs.length, 2);
    assert.equal(await layerFile(layers.openTar(forContainer.chainIds[1]), 'srv/app'), 'app\n');

    const empty = await images.createImage({ parent: 'derived:1', config: { Cmd: ['x'] }, createdBy: 'metadata only' });
    assert.equal(images.find(empty).image.chainIds.length, 2);
    const grandchild = await images.createImage({ parent: empty, config: { Cmd: ['z'] }, tags: ['grandchild:1'] });
    // The untagged middle image is an intermediate: listed with all only, and not dangling.
    const ids = (opts: { all?: boolean; filters?: Map<string, string[]> }) => images.list({ all: opts.all, filters: opts.filters ?? new Map() }).map((i) => i.Id);
    assert.ok(!ids({}).includes(empty));
    assert.ok(ids({ all: true }).includes(empty));
    assert.ok(!ids({ all: true, filters: new Map([['dangling', ['true']]]) }).includes(empty));
    await images.remove(grandchild, { noprune: true });

    await assert.rejects(images.remove(images.find('derived:1').image.id, { force: true }), /image has dependent child images/);
    // An untagged parent goes with its last child, unless noprune.
    const child = await images.createImage({ parent: empty, config: { Cmd: ['y'] }, tags: ['child:1'] });
    assert.deepEqual((await images.remove('child:1', { noprune: true })).map((r) => Object.keys(r)[0]), ['Untagged', 'Deleted']);
    assert.ok(images.store.has(empty));
    const child2 = await images.createImage({ parent: empty, config: { Cmd: ['y'] }, tags: ['child:2'] });
    const records2 = await images.remove('child:2');
    assert.deepEqual(records2.filter((r) => r.Deleted).map((r) => r.Deleted), [child2, empty]);
    assert.notEqual(child, child2);
    assert.ok(images.store.has(images.find('derived:1').image.id), 'the tagged grandparent stays');
    const records = await images.remove('derived:1');
    // Its own layer goes; the busybox layer stays for busybox.
    assert.deepEqual(records.map((r) => Object.keys(r)[0]), ['Untagged', 'Deleted', 'Deleted']);
    assert.equal(images.lowerDirs((await images.resolveForContainer('busybox')).chainIds).length, 1);
  });
});

/** The content of one file of a layer tar. */
async function layerFile(tarStream: NodeJS.ReadableStream, name: string): Promise<string | undefined> {
  const extract = tar.extract();
  let found: string | undefined;
  extract.on('entry', (header, body, next) => {
    const chunks: Buffer[] = [];
    body.on('data', (c: unknown) => chunks.push(c as Buffer));
    body.on('end', () => {
      if (header.name.replace(/^\.?\//, '') === name) found = Buffer.concat(chunks).toString('utf8');
      next();
    });
  });
  await pipeline(tarStream, extract);
  return found;
}
