import assert from 'node:assert/strict';
import { Readable } from 'node:stream';
import { describe, test } from 'node:test';
import { CommitService } from './commit.js';
import type { ContainerRecord } from './model.js';

function fakeRecord(): ContainerRecord {
  return {
    Id: 'c'.repeat(64),
    Image: 'sha256:' + 'a'.repeat(64),
    ImageChainIds: [],
    Config: { Cmd: ['sleep', '1'], Env: [], Labels: {} },
    State: { Running: true, Paused: false },
  } as unknown as ContainerRecord;
}

describe('commit', () => {
  test('a container that stops before it can be paused is committed as it is', async () => {
    const record = fakeRecord();
    const calls: string[] = [];
    const service = new CommitService({
      containers: {
        get: () => record,
        serialised: (_id, fn) => fn(),
        containerEvent: (_r, action) => calls.push(`event ${action}`),
        pause: async () => {
          calls.push('pause');
          record.State.Running = false;
          throw new Error('crun: container is not running');
        },
        unpause: async () => {
          calls.push('unpause');
        },
      },
      images: {
        lowerDirs: () => [],
        createImage: async (opts) => {
          calls.push('create');
          opts.layer?.resume();
          return 'sha256:' + 'b'.repeat(64);
        },
      },
      host: { diffTar: () => Readable.from([]) },
    });
    assert.equal(await service.commit(record.Id, { pause: true, changes: ['ENV A=1\nLABEL x=y'] }), 'sha256:' + 'b'.repeat(64));
    assert.deepEqual(calls, ['pause', 'create', 'event commit']);
  });
});
