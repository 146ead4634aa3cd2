import assert from 'node:assert/strict';
import { test } from 'node:test';
import { InvalidParameter } from '../../errors.js';
import type { MountPoint } from './model.js';
import { checkPropagation } from './propagation.js';
import { checkStorageOptions } from './storageopt.js';

const bind = (Source: string, Propagation: string): MountPoint => ({ Type: 'bind', Source, Destination: '/m', Mode: '', RW: true, Propagation });

test('shared binds need a shared source, slave binds a shared or slave one; others are not looked at', async () => {
  const mounts: Record<string, { shared: boolean; slave: boolean }> = { '/priv': { shared: false, slave: false }, '/slave': { shared: false, slave: true }, '/shared': { shared: true, slave: false } };
  const asked: string[] = [];
  const host = {
    sourceMount: async (p: string) => {
      asked.push(p);
      return { mountPoint: p, ...mounts[p]! };
    },
  };
  await checkPropagation([bind('/priv', 'rprivate'), bind('/priv', ''), bind('/shared', 'rshared'), bind('/slave', 'rslave'), bind('/shared', 'slave')], host);
  assert.deepEqual(asked, ['/shared', '/slave', '/shared']);
  await assert.rejects(checkPropagation([bind('/slave', 'shared')], host), (err: unknown) => err instanceof InvalidParameter && (err as Error).message === 'path /slave is mounted on /slave but it is not a shared mount');
  await assert.rejects(checkPropagation([bind('/priv', 'rslave')], host), /path \/priv is mounted on \/priv but it is not a shared or slave mount$/);
  await checkPropagation([bind('/priv', 'rshared')], {});
});

test('StorageOpt: size and unknown keys are refused, nothing else is', () => {
  checkStorageOptions({});
  checkStorageOptions(null);
  assert.throws(() => checkStorageOptions({ size: '1G' }), /--storage-opt is supported only for overlay over xfs with 'pquota' mount option/);
  assert.throws(() => checkStorageOptions({ Size: '1G' }), /pquota/);
  assert.throws(() => checkStorageOptions({ Other: 'x' }), /Unknown option other$/);
});
