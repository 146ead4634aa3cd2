import assert from 'node:assert/strict';
import { createReadStream, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { buildBusyboxArchive } from '../../../test/fixtures/busybox.js';
import { LinuxLayerStore } from '../../host/linux/layers/store.js';
import { Conflict, NotFound } from '../errors.js';
import { EventBus } from '../events.js';
import { ImageService } from './service.js';

describe('image service: removal while containers use an image', () => {
  const root = mkdtempSync(path.join(os.tmpdir(), 'berth-images-'));
  const archive = path.join(root, 'busybox.tar');
  const using = new Map<string, string[]>();
  let images: ImageService;
  let id: string;

  before(async () => {
    await buildBusyboxArchive(archive);
    const imageRoot = path.join(root, 'image');
    images = new ImageService(imageRoot, new LinuxLayerStore(imageRoot), new EventBus());
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
    assert.match(dir, /\/image\/layers\/[0-9a-f]{64}\/diff$/);
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
